// The proxy asking a decode worker for a stream's usage the client did not ask for (src/serve/proxy/stream-usage.ts):
// the body it sends, and the filter that takes the usage-only event out of the client's stream wherever the worker's
// bytes are cut.
import { mkdtempSync, writeFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { parseConfig, type ServeConfigInput } from "../src/serve/config.js";
import { startProxy, type RunningProxy } from "../src/serve/proxy.js";
import { askedOptions, askForUsage, UsageEventFilter } from "../src/serve/proxy/stream-usage.js";
import { startWorker, type WorkerHandle } from "../src/serve/worker.js";
import { encodeTable } from "../src/table/codec.js";
import { coreModule, kmeansTable } from "./helpers.js";

const bytes = (s: string): Buffer => Buffer.from(s, "utf8");
const event = (v: unknown): string => `data: ${JSON.stringify(v)}\n\n`;

const USAGE = {
  prompt_tokens: 12,
  completion_tokens: 3,
  total_tokens: 15,
  prompt_tokens_details: { cached_tokens: 8 },
};
const chunk = (content: string, finish: string | null = null): unknown => ({
  id: "chatcmpl-1",
  object: "chat.completion.chunk",
  created: 1,
  model: "m",
  choices: [{ index: 0, delta: { content }, logprobs: null, finish_reason: finish }],
});
/** vLLM's last event with include_usage: no choices, the usage. */
const USAGE_EVENT = event({
  id: "chatcmpl-1",
  object: "chat.completion.chunk",
  created: 1,
  model: "m",
  choices: [],
  usage: USAGE,
});
/** A chat stream as vLLM writes it without include_usage (a content chunk mentions "usage" in its text too). */
const WITHOUT_USAGE =
  event({ ...(chunk("") as object), choices: [{ index: 0, delta: { role: "assistant", content: "" } }] }) +
  event(chunk('the "usage" of')) +
  event(chunk(" words")) +
  event(chunk(" here", "length"));
const DONE = "data: [DONE]\n\n";
/** The same stream with include_usage: the usage event before [DONE]. */
const WORKER_STREAM = WITHOUT_USAGE + USAGE_EVENT + DONE;
const CLIENT_STREAM = WITHOUT_USAGE + DONE;

/** What the filter passes on for `pieces`, one output per piece as the relay writes it. */
function filtered(pieces: Buffer[]): { out: string; usage: UsageEventFilter["usage"]; writes: number } {
  const f = new UsageEventFilter();
  const outs = pieces.map((p, i) => f.push(p, i === pieces.length - 1));
  return { out: Buffer.concat(outs).toString("utf8"), usage: f.usage, writes: outs.length };
}

describe("askForUsage: the decode worker's body", () => {
  const body = { model: "m", messages: [{ role: "user", content: "hi" }], stream: true };

  it("splices stream_options after the opening brace when the client sent none, keeping the client's bytes", () => {
    const raw = bytes(`  \n{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`);
    const sent = askForUsage(raw, body) as Buffer;
    expect(Buffer.isBuffer(sent)).toBe(true);
    expect(sent.toString()).toBe(
      `  \n{"stream_options":{"include_usage":true},"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`,
    );
    expect(JSON.parse(sent.toString())).toEqual({ ...body, stream_options: { include_usage: true } });
  });

  it("re-serializes when the client sent stream_options without include_usage, keeping its other keys", () => {
    for (const given of [null, {}, { include_usage: false }, { include_usage: false, other: 1 }]) {
      const b = { ...body, stream_options: given };
      const sent = askForUsage(bytes(JSON.stringify(b)), b);
      expect(typeof sent).toBe("string");
      const want = { include_usage: true, ...(given && "other" in given ? { other: 1 } : {}) };
      expect(JSON.parse(sent as string)).toEqual({ ...body, stream_options: want });
    }
  });

  it("drops continuous_usage_stats, which with include_usage would put usage in every chunk", () => {
    const b = { ...body, stream_options: { continuous_usage_stats: true } };
    expect(askedOptions(b)).toEqual({ include_usage: true });
  });

  it("asks nothing of a request that is not a stream, already asked, or sent stream_options that is not an object", () => {
    const raw = bytes("{}");
    expect(askForUsage(raw, { ...body, stream: false })).toBeNull();
    expect(askForUsage(raw, { messages: body.messages })).toBeNull();
    expect(askForUsage(raw, { ...body, stream_options: { include_usage: true } })).toBeNull();
    expect(askForUsage(raw, { ...body, stream_options: 3 })).toBeNull();
    expect(askForUsage(raw, { ...body, stream_options: [] })).toBeNull();
  });

  it("re-serializes a body it cannot splice into (an empty object)", () => {
    const sent = askForUsage(bytes(" { } "), { stream: true });
    expect(JSON.parse(sent as string)).toEqual({ stream: true, stream_options: { include_usage: true } });
  });
});

describe("UsageEventFilter: the client's stream without the usage event", () => {
  it("takes the usage event out of a whole stream, reads its usage, and passes the rest byte for byte", () => {
    const r = filtered([bytes(WORKER_STREAM)]);
    expect(r.out).toBe(CLIENT_STREAM);
    expect(r.usage).toEqual({ cached: 8, completion: 3 });
  });

  it("gives the same output whatever position the stream is cut at (two pieces)", () => {
    const all = bytes(WORKER_STREAM);
    for (let i = 0; i <= all.length; i++) {
      const r = filtered([all.subarray(0, i), all.subarray(i)]);
      expect(r.out, `cut at ${i}`).toBe(CLIENT_STREAM);
      expect(r.usage, `cut at ${i}`).toEqual({ cached: 8, completion: 3 });
    }
  });

  it("gives the same output when the usage event is cut in three pieces at every pair of positions", () => {
    const all = bytes(WORKER_STREAM);
    const from = WITHOUT_USAGE.length - 1; // the blank line before it
    const to = from + USAGE_EVENT.length + 3; // into [DONE]
    for (let i = from; i <= to; i++) {
      for (let j = i; j <= to; j++) {
        const r = filtered([all.subarray(0, i), all.subarray(i, j), all.subarray(j)]);
        if (r.out !== CLIENT_STREAM) expect(r.out, `cut at ${i} and ${j}`).toBe(CLIENT_STREAM);
        if (r.usage?.completion !== 3) expect(r.usage, `cut at ${i} and ${j}`).toEqual({ cached: 8, completion: 3 });
      }
    }
  });

  it("gives the same output fed one byte at a time", () => {
    const all = bytes(WORKER_STREAM);
    const r = filtered(Array.from({ length: all.length }, (_, i) => all.subarray(i, i + 1)));
    expect(r.out).toBe(CLIENT_STREAM);
  });

  it("handles CRLF line ends", () => {
    const crlf = (s: string): string => s.replace(/\n/g, "\r\n");
    const all = bytes(crlf(WORKER_STREAM));
    for (let i = 0; i <= all.length; i++) {
      expect(filtered([all.subarray(0, i), all.subarray(i)]).out, `cut at ${i}`).toBe(crlf(CLIENT_STREAM));
    }
  });

  it("holds back only an incomplete last line: complete lines pass as they come, in one piece per push", () => {
    const f = new UsageEventFilter();
    const first = event(chunk("a"));
    const whole = f.push(bytes(first));
    expect(whole.toString()).toBe(first); // the piece itself, nothing held
    expect(f.push(bytes('data: {"choices":[{"delta":')).length).toBe(0);
    expect(f.push(bytes('{"content":"b"}}]}\n\ndata: [DO')).toString()).toBe(
      'data: {"choices":[{"delta":{"content":"b"}}]}\n\n',
    );
    expect(f.push(bytes("NE]\n\n"), true).toString()).toBe(DONE);
  });

  it("passes on an incomplete line at the stream's end", () => {
    expect(filtered([bytes(WITHOUT_USAGE + "data: {unfinished")]).out).toBe(WITHOUT_USAGE + "data: {unfinished");
  });

  it("leaves usage that is not an event of its own: a content chunk's, or one sharing its event with another line", () => {
    const withUsage = event({ ...(chunk("x") as object), usage: USAGE });
    const shared = `event: usage\n${USAGE_EVENT}`;
    const stream = WITHOUT_USAGE + withUsage + shared + DONE;
    const r = filtered([bytes(stream)]);
    expect(r.out).toBe(stream);
    expect(r.usage).toEqual({ cached: 8, completion: 3 });
  });

  it("passes a line too long to be the usage event as it arrives rather than holding it", () => {
    const f = new UsageEventFilter();
    const long = `data: ${JSON.stringify({ choices: [{ delta: { content: "x".repeat(70_000) } }] })}`;
    const head = bytes(long.slice(0, 66_000));
    expect(f.push(head).length).toBe(head.length);
    // the rest of the long line, unread, then the usage event, still taken out
    expect(f.push(bytes(`${long.slice(66_000)}\n\n${USAGE_EVENT}${DONE}`), true).toString()).toBe(
      `${long.slice(66_000)}\n\n${DONE}`,
    );
    expect(f.usage).toEqual({ cached: 8, completion: 3 });
  });

  it("reads no usage from a stream that has none, and changes nothing in it", () => {
    const r = filtered([bytes(CLIENT_STREAM)]);
    expect(r.out).toBe(CLIENT_STREAM);
    expect(r.usage).toBeNull();
  });
});

// ---- through `dolphin serve`, in front of emulated workers ------------------------------------------------------

const MODEL = "usage-model";
/** A budget no answer here misses: every judged request meets it. */
const SLO = { ttft_ms: 60_000, tpot_ms: 1_000 };

const workers: WorkerHandle[] = [];
const servers: http.Server[] = [];
const proxies: RunningProxy[] = [];
afterEach(async () => {
  await Promise.all(proxies.splice(0).map((p) => p.close()));
  await Promise.all(workers.splice(0).map((w) => w.close()));
  const closing = servers.splice(0);
  for (const s of closing) s.closeAllConnections();
  await Promise.all(closing.map((s) => new Promise((resolve) => s.close(resolve))));
});

/** A learned table of one cluster valued `value` whose rule says the same, so every request takes that path. */
function tableFile(value: "local" | "remote"): string {
  const t = kmeansTable([[0, 0, 0, 0]], [value === "remote" ? 1 : 0], {
    version: 2,
    fallback: { kind: value === "remote" ? "always-remote" : "always-local", params: {} },
    ood_bound: [1e9],
    slo: SLO,
  });
  const path = join(mkdtempSync(join(tmpdir(), "dolphin-usage-")), "table.msgpack");
  writeFileSync(path, encodeTable(t));
  return path;
}

/** An emulated prefill and decode worker behind the proxy, routing every request `value`. */
async function cluster(value: "local" | "remote", extra: Partial<ServeConfigInput> = {}) {
  const start = (role: "prefill" | "decode") => startWorker({ role, model: MODEL, timeScale: 50, log: () => {} });
  const [prefill, decode] = await Promise.all([start("prefill"), start("decode")]);
  workers.push(prefill, decode);
  return { proxy: await proxyFor(value, prefill.url, decode.url, extra), decode };
}

async function proxyFor(value: "local" | "remote", prefill: string, decode: string, extra: Partial<ServeConfigInput>) {
  const proxy = await startProxy(
    {
      model: MODEL,
      listen: { host: "127.0.0.1", port: 0 },
      log_level: "silent",
      table: tableFile(value),
      workers: [
        { id: "P0", url: prefill, role: "prefill" },
        { id: "D0", url: decode, role: "decode" },
      ],
      drift: { control_share: 0 },
      ask_stream_usage: true,
      ...extra,
    },
    { module: coreModule("release") },
  );
  proxies.push(proxy);
  return proxy;
}

/** A worker that streams its answer without usage whatever the request asks (one that ignores stream_options). */
async function usageBlindWorker(stream: string): Promise<{ url: string; bodies: Record<string, unknown>[] }> {
  const bodies: Record<string, unknown>[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      if (req.url === "/health") return void res.end("{}");
      bodies.push(JSON.parse(Buffer.concat(chunks).toString("utf8")) as Record<string, unknown>);
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.end(stream);
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, bodies };
}

const REQUESTS = {
  chat: { path: "/v1/chat/completions", body: { messages: [{ role: "user", content: "tell me about dolphins" }] } },
  completions: { path: "/v1/completions", body: { prompt: "Once upon a time, a dolphin" } },
};

/** A streamed request's SSE events, each parsed (id and creation time left out: they differ per answer). */
async function streamed(
  url: string,
  endpoint: keyof typeof REQUESTS,
  extra: Record<string, unknown> = {},
): Promise<{ status: number; route: string | null; events: unknown[]; raw: string }> {
  const { path, body } = REQUESTS[endpoint];
  const r = await fetch(`${url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: MODEL, ...body, max_tokens: 5, stream: true, ...extra }),
  });
  const raw = await r.text();
  const events = raw
    .split("\n\n")
    .filter(Boolean)
    .map((e) => {
      expect(e.startsWith("data: ")).toBe(true);
      const data = e.slice("data: ".length);
      if (data === "[DONE]") return data;
      const { id: _id, created: _created, ...rest } = JSON.parse(data) as Record<string, unknown>;
      return rest;
    });
  return { status: r.status, route: r.headers.get("x-dolphin-route"), events, raw };
}

async function metric(p: RunningProxy, line: RegExp): Promise<number> {
  const text = await (await fetch(`${p.url}/metrics`)).text();
  const m = new RegExp(`^${line.source} (\\S+)$`, "m").exec(text);
  return m ? Number(m[1]) : NaN;
}
const JUDGED = /dolphin_drift_judged_requests\{arm="learned",cluster="0"\}/;
const UNJUDGED = /dolphin_drift_unjudged_total/;
const compared = (path: string): RegExp => new RegExp(`dolphin_cache_compared_requests_total\\{path="${path}"\\}`);

describe("dolphin serve asks for a stream's usage the client did not ask for", () => {
  for (const value of ["local", "remote"] as const) {
    it(`${value} path: the client's stream is the worker's without usage, and the request is judged`, async () => {
      const { proxy, decode } = await cluster(value);
      for (const endpoint of ["chat", "completions"] as const) {
        const got = await streamed(proxy.url, endpoint);
        expect(got.status).toBe(200);
        expect(got.route).toBe(value);
        expect(got.raw).not.toContain('"usage"');
        // what the decode worker itself answers this request when nobody asks for usage (a local request)
        const direct = await streamed(decode.url, endpoint);
        expect(got.events).toEqual(direct.events);
        expect(got.events.at(-1)).toBe("[DONE]");
        expect(got.events.length).toBe(endpoint === "chat" ? 7 : 6); // (a role chunk,) 5 tokens, [DONE]
      }
      expect(await metric(proxy, JUDGED)).toBe(2);
      expect(await metric(proxy, UNJUDGED)).toBe(0);
      // the local path's cached tokens come from the stream's usage; the remote path's from the prefill answer
      expect(await metric(proxy, compared(value))).toBe(2);
    });
  }

  it("a client that asked for usage still gets its usage event, as the worker sent it", async () => {
    const { proxy } = await cluster("local");
    const got = await streamed(proxy.url, "chat", { stream_options: { include_usage: true } });
    expect(got.events.at(-1)).toBe("[DONE]");
    expect(got.events.at(-2)).toMatchObject({ choices: [], usage: { completion_tokens: 5 } });
    expect(await metric(proxy, JUDGED)).toBe(1);
  });

  it("a worker that ignores stream_options sends no usage: its stream passes whole and the request goes unjudged", async () => {
    const blind = await usageBlindWorker(CLIENT_STREAM);
    const proxy = await proxyFor("local", blind.url, blind.url, {});
    const got = await streamed(proxy.url, "chat");
    expect(got.raw).toBe(CLIENT_STREAM);
    expect(blind.bodies[0]!["stream_options"]).toEqual({ include_usage: true }); // asked all the same
    expect(await metric(proxy, UNJUDGED)).toBe(1);
    expect(await metric(proxy, JUDGED)).toBe(0);
  });

  it("reads ask_stream_usage, off by default, and names it when it is not a boolean", () => {
    expect(parseConfig({ model: MODEL }).ask_stream_usage).toBe(false);
    expect(parseConfig({ model: MODEL, ask_stream_usage: true }).ask_stream_usage).toBe(true);
    expect(parseConfig({ model: MODEL, ask_stream_usage: false }).ask_stream_usage).toBe(false);
    expect(() => parseConfig({ model: MODEL, ask_stream_usage: "no" as unknown as boolean })).toThrow(
      'config: ask_stream_usage: expected true or false, got "no"',
    );
  });

  it("with ask_stream_usage off, streams without usage go unjudged, as before", async () => {
    const { proxy } = await cluster("local", { ask_stream_usage: false });
    const got = await streamed(proxy.url, "chat");
    expect(got.raw).not.toContain('"usage"');
    expect(await metric(proxy, UNJUDGED)).toBe(1);
    expect(await metric(proxy, JUDGED)).toBe(0);
    expect(await metric(proxy, compared("local"))).toBeNaN(); // no series: never counted (the same line reads 2 above)
  });
});
