// The decode-side sidecar (dolphin serve --sidecar) between a picker and stand-in engines that record what they get:
// the NixlConnector two-step's exact bodies (llm-d's sidecar convention), 502/503/504 from the prefill retried per
// the setting then local prefill, a prefill's 4xx answered as it came, and requests without the header untouched.
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { PREFILL_KV_PARAMS } from "../src/serve/proxy/remote-path.js";
import { startSidecar, type RunningSidecar } from "../src/serve/sidecar.js";

interface Seen {
  path: string;
  headers: http.IncomingHttpHeaders;
  body: Record<string, unknown>;
}

/** An engine stand-in answering each request with the next of `answers` (the last one repeats). */
async function engine(
  answers: Array<{ status: number; body: unknown }>,
): Promise<{ url: string; seen: Seen[]; close(): Promise<void> }> {
  const seen: Seen[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const text = Buffer.concat(chunks).toString("utf8");
      seen.push({
        path: req.url ?? "",
        headers: req.headers,
        body: text ? (JSON.parse(text) as Record<string, unknown>) : {},
      });
      const a = answers[Math.min(seen.length - 1, answers.length - 1)]!;
      res.writeHead(a.status, { "content-type": "application/json" });
      res.end(JSON.stringify(a.body));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, seen, close: () => new Promise((r) => server.close(() => r())) };
}

const KV = {
  do_remote_prefill: true,
  do_remote_decode: false,
  remote_engine_id: "p0",
  remote_block_ids: [1, 2],
  remote_host: "h",
  remote_port: 1,
};
const ok = { status: 200, body: { choices: [{ text: "x" }], kv_transfer_params: KV } };
const decodeAnswer = { status: 200, body: { choices: [{ text: "decoded" }] } };
const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of closers.splice(0)) await c();
});

async function setup(prefillAnswers: Array<{ status: number; body: unknown }>, retries = 0) {
  const prefill = await engine(prefillAnswers);
  const decode = await engine([decodeAnswer]);
  const sidecar: RunningSidecar = await startSidecar({ decodeUrl: decode.url, prefillRetries: retries });
  closers.push(
    () => sidecar.close(),
    () => prefill.close(),
    () => decode.close(),
  );
  const send = async (
    body: unknown,
    headers: Record<string, string> = { "x-prefiller-host-port": new URL(prefill.url).host },
  ) => {
    const r = await fetch(`${sidecar.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-request-id": "client-1", ...headers },
      body: JSON.stringify(body),
    });
    return { status: r.status, route: r.headers.get("x-dolphin-route"), text: await r.text() };
  };
  return { prefill, decode, sidecar, send };
}

const client = {
  model: "m",
  messages: [{ role: "user", content: "hi" }],
  stream: true,
  stream_options: { include_usage: true },
  max_tokens: 50,
  max_completion_tokens: 50,
  min_tokens: 5,
};

describe("dolphin serve --sidecar", () => {
  it("sends the prefill leg and the decode leg as llm-d's sidecar does", async () => {
    const { prefill, decode, send } = await setup([ok]);
    const a = await send(client);
    expect({ status: a.status, route: a.route }).toEqual({ status: 200, route: "remote" });
    expect(prefill.seen).toHaveLength(1);
    const { stream_options: _dropped, ...rest } = client;
    expect(prefill.seen[0]!.body).toEqual({
      ...rest,
      stream: false,
      max_tokens: 1,
      max_completion_tokens: 1,
      min_tokens: 1,
      kv_transfer_params: PREFILL_KV_PARAMS,
    });
    expect(prefill.seen[0]!.headers["x-request-id"]).not.toBe("client-1");
    expect(decode.seen[0]!.body).toEqual({ ...client, kv_transfer_params: KV });
    expect(decode.seen[0]!.headers["x-prefiller-host-port"]).toBeUndefined();
  });

  it("retries a 503 from the prefill as configured, then prefills locally", async () => {
    const busy = { status: 503, body: { error: "busy" } };
    const once = await setup([busy, ok], 1);
    expect((await once.send(client)).route).toBe("remote");
    expect(once.prefill.seen).toHaveLength(2);
    expect(once.sidecar.stats.prefillRetries).toBe(1);
    const never = await setup([busy], 0);
    const a = await never.send(client);
    expect({ status: a.status, route: a.route }).toEqual({ status: 200, route: "fallback" });
    expect(never.prefill.seen).toHaveLength(1);
    expect(never.decode.seen[0]!.body).toEqual(client); // local prefill: the client's body as it came
  });

  it("prefills locally when the prefill endpoint refuses connections", async () => {
    const { decode, sidecar } = await setup([ok]);
    const r = await fetch(`${sidecar.url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-prefiller-host-port": "127.0.0.1:1" },
      body: JSON.stringify({ model: "m", prompt: "hi", max_tokens: 3 }),
    });
    expect({ status: r.status, route: r.headers.get("x-dolphin-route") }).toEqual({ status: 200, route: "fallback" });
    expect(decode.seen[0]!.body).toEqual({ model: "m", prompt: "hi", max_tokens: 3 });
  });

  it("answers a prefill's 4xx as it came, without a decode leg", async () => {
    const { decode, send } = await setup([{ status: 400, body: { error: { message: "bad prompt" } } }], 3);
    const a = await send(client);
    expect(a.status).toBe(400);
    expect(a.text).toContain("bad prompt");
    expect(decode.seen).toHaveLength(0);
  });

  it("passes a request without x-prefiller-host-port to the decode engine unchanged", async () => {
    const { prefill, decode, send } = await setup([ok]);
    const a = await send(client, {});
    expect({ status: a.status, route: a.route }).toEqual({ status: 200, route: "local" });
    expect(prefill.seen).toHaveLength(0);
    expect(decode.seen[0]!.body).toEqual(client);
  });
});
