// The Envoy filter in a real Envoy (from the project's .venv, `npm run setup`) in front of emulated vLLM workers
// (dolphin worker, 1P2D), with --concurrency 2: both paths, streaming, the exact bodies the workers receive (the
// same as the Node proxy's), the index shared across worker threads, decisions equal to a Node Router in
// approximate text mode, bad input, metrics, the prefill fallback and a table swap under load. One Envoy serves the
// whole file (tests run in order); each worker sits behind a recording tap so that the test sees its requests.
import http, { type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startEmulatedWorkers } from "../src/envoy/emulate.js";
import { startEnvoy, statValue, type RunningEnvoy } from "../src/envoy/launch.js";
import type { EnvoySetup } from "../src/envoy/config.js";
import { Router } from "../src/router/router.js";
import { startProxy, type RunningProxy } from "../src/serve/proxy.js";
import type { WorkerHandle } from "../src/serve/worker.js";
import { ruleTable } from "../src/table/rule-table.js";
import { coreModule } from "./helpers.js";

const MODEL = "dolphin-emulated";
const MAX_BODY_BYTES = 256 * 1024;
const PREFILL_KV_PARAMS = {
  do_remote_decode: true,
  do_remote_prefill: false,
  remote_engine_id: null,
  remote_block_ids: null,
  remote_host: null,
  remote_port: null,
};

// ---- recording taps in front of the workers --------------------------------------------------------------

interface Seen {
  path: string;
  body: string;
  answer: string;
}

interface Tap {
  url: string;
  seen: Seen[];
  close(): Promise<void>;
}

/** Forwards to `target`, recording each request body and (non-streaming) answer. */
async function tap(target: string): Promise<Tap> {
  const seen: Seen[] = [];
  const agent = new http.Agent({ keepAlive: true });
  const server = http.createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      const record: Seen = { path: req.url ?? "", body: body.toString("utf8"), answer: "" };
      seen.push(record);
      const headers = { ...req.headers, "content-length": String(body.length) };
      delete headers["transfer-encoding"];
      const up = http.request(`${target}${req.url}`, { method: req.method, headers, agent }, (upRes) => {
        res.writeHead(upRes.statusCode ?? 502, upRes.headers);
        const answer: Buffer[] = [];
        upRes.on("data", (c: Buffer) => {
          answer.push(c);
          res.write(c);
        });
        upRes.on("end", () => {
          record.answer = Buffer.concat(answer).toString("utf8");
          res.end();
        });
      });
      up.on("error", () => {
        res.destroy();
      });
      up.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    close: () =>
      new Promise<void>((resolve) => {
        agent.destroy();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

// ---- the setup ---------------------------------------------------------------------------------------------

let workers: WorkerHandle[] = [];
let taps: Tap[] = [];
let envoy: RunningEnvoy;
let setup: EnvoySetup;
let node: RunningProxy | null = null;

beforeAll(async () => {
  workers = await startEmulatedWorkers("1P2D", { timeScale: 200, log: () => undefined });
  taps = await Promise.all(workers.map((w) => tap(w.url)));
  setup = {
    model: MODEL,
    table: "dynamo-isl",
    listen: { port: 0 },
    admin: { port: 0 },
    concurrency: 2,
    max_body_bytes: MAX_BODY_BYTES,
    prefill_timeout_ms: 5000,
    approximate_ttl_s: 0,
    workers: workers.map((w, i) => ({ id: w.workerId, role: w.role, url: taps[i]!.url })),
  };
  envoy = await startEnvoy(setup);
}, 60_000);

afterAll(async () => {
  await envoy?.close();
  await node?.close();
  await Promise.all(taps.map((t) => t.close()));
  await Promise.all(workers.map((w) => w.close()));
});

interface Answer {
  status: number;
  route: string | null;
  decode: string | null;
  prefill: string | null;
  matched: number;
  contentType: string;
  text: string;
}

/** One request on a new connection (Envoy hands connections to its worker threads, so both threads serve). */
function post(
  base: string,
  path: string,
  body: string | object,
  headers: Record<string, string> = {},
): Promise<Answer> {
  const payload = typeof body === "string" ? body : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = http.request(
      `${base}${path}`,
      {
        method: "POST",
        agent: false,
        headers: {
          "content-type": "application/json",
          "content-length": String(Buffer.byteLength(payload)),
          ...headers,
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () =>
          resolve({
            status: res.statusCode ?? 0,
            route: (res.headers["x-dolphin-route"] as string | undefined) ?? null,
            decode: (res.headers["x-dolphin-decode-worker"] as string | undefined) ?? null,
            prefill: (res.headers["x-dolphin-prefill-worker"] as string | undefined) ?? null,
            matched: Number(res.headers["x-dolphin-matched-blocks"] ?? -1),
            contentType: String(res.headers["content-type"] ?? ""),
            text: Buffer.concat(chunks).toString("utf8"),
          }),
        );
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(payload);
  });
}

const chat = (content: string, extra: object = {}): object => ({
  model: MODEL,
  messages: [{ role: "user", content }],
  max_tokens: 4,
  ...extra,
});
/** The canonical text `dolphin serve` hashes for these messages (docs/serving.md, approximate mode). */
const chatText = (messages: Array<{ role: string; content: string }>): string =>
  messages.map((m) => `${m.role}\n${m.content}\n`).join("");
/** A prompt of about `bytes` bytes that no other test uses. */
const words = (seed: string, bytes: number): string => {
  let s = "";
  for (let i = 0; s.length < bytes; i++) s += `${seed}-${i} `;
  return s;
};
const seenSince = (t: Tap, n: number): Seen[] => t.seen.slice(n);
const prometheus = async (): Promise<string> => (await fetch(`${envoy.adminUrl}/stats/prometheus`)).text();
const metric = (text: string, name: string): number =>
  Number(new RegExp(`^${name}\\{\\} (\\d+)`, "m").exec(text)?.[1] ?? NaN);

// ---- tests ---------------------------------------------------------------------------------------------------

describe("dolphin filter in Envoy", () => {
  it("decides as a Node Router in approximate text mode fed the same prompts, whichever thread serves", async () => {
    const router = Router.create(ruleTable("dynamo-isl"), {
      module: coreModule(),
      workers: workers.map((w) => ({ id: w.workerId, role: w.role })),
      blockSize: 16,
      model: MODEL,
      recordDecisions: true,
      maxWorkers: 32,
      capacityBlocks: 31_250,
      indexBlocks: 31_250 * 32,
      maxPromptTokens: Math.max(1 << 20, Math.ceil(MAX_BODY_BYTES / 4) + 4096),
    });
    const shared = words("eq-system", 6000);
    const prompts: Array<Array<{ role: string; content: string }>> = [];
    for (let i = 0; i < 6; i++)
      prompts.push([
        { role: "system", content: shared },
        { role: "user", content: words(`eq-q${i % 3}`, 300 * (1 + (i % 2))) },
      ]);
    prompts.push(
      [{ role: "user", content: "hi" }],
      [{ role: "user", content: words("eq-long", 20_000) }],
      [{ role: "user", content: words("eq-long", 20_000) }],
    );
    for (const messages of prompts) {
      const a = await post(envoy.url, "/v1/chat/completions", { model: MODEL, messages, max_tokens: 4 });
      const d = router.route({
        text: chatText(messages),
        turn: messages.filter((m) => m.role === "user").length,
        maxTokens: 4,
      });
      expect(a.status).toBe(200);
      expect({ route: a.route, decode: a.decode, prefill: a.prefill, matched: a.matched }).toEqual({
        route: d.path,
        decode: d.decodeWorker,
        prefill: d.path === "remote" ? d.prefillWorker : null,
        matched: d.path === "remote" ? d.matchedBlocks.prefill : d.matchedBlocks.decode,
      });
    }
    // both worker threads took connections (each request came on a new one)
    const perThread = await (
      await fetch(
        `${envoy.adminUrl}/stats?filter=${encodeURIComponent("^listener\\..*\\.worker_\\d+\\.downstream_cx_total$")}`,
      )
    ).text();
    const counts = [...perThread.matchAll(/: (\d+)/g)].map((m) => Number(m[1]));
    expect(counts).toHaveLength(2);
    expect(Math.min(...counts)).toBeGreaterThan(0);
  }, 30_000);

  it("sends a first long prompt remote with the NixlConnector bodies, and the same prompt again local with its blocks matched", async () => {
    const body = chat(words("two-step", 8000));
    const before = taps.map((t) => t.seen.length);
    const first = await post(envoy.url, "/v1/chat/completions", body);
    expect(first).toMatchObject({ status: 200, route: "remote", prefill: "P0" });
    const prefill = seenSince(taps[0]!, before[0]!);
    expect(prefill).toHaveLength(1);
    expect(prefill[0]!.body).toBe(
      JSON.stringify({ ...body, kv_transfer_params: PREFILL_KV_PARAMS, stream: false, max_tokens: 1 }),
    );
    const decodeTap = taps[workers.findIndex((w) => w.workerId === first.decode)]!;
    const decodeSeen = seenSince(decodeTap, before[taps.indexOf(decodeTap)]!);
    const kv = (JSON.parse(prefill[0]!.answer) as { kv_transfer_params: unknown }).kv_transfer_params;
    expect(decodeSeen.map((s) => s.body)).toEqual([JSON.stringify({ ...body, kv_transfer_params: kv })]);

    const again = await post(envoy.url, "/v1/chat/completions", body);
    expect(again).toMatchObject({ status: 200, route: "local", decode: first.decode, prefill: null });
    expect(again.matched).toBeGreaterThanOrEqual(
      Math.floor(chatText((body as { messages: [] }).messages).length / 64) - 1,
    );
    expect(decodeTap.seen.at(-1)!.body).toBe(JSON.stringify(body)); // the local path passes the body unchanged
  });

  it("gives the workers the same bodies as the Node proxy in approximate mode", async () => {
    node = await startProxy(
      {
        model: MODEL,
        mode: "approximate",
        table: "dynamo-isl",
        listen: { port: 0 },
        log_level: "silent",
        workers: workers.map((w, i) => ({ id: w.workerId, role: w.role, url: taps[i]!.url })),
      },
      { module: coreModule() },
    );
    const body = {
      model: MODEL,
      messages: [
        { role: "system", content: "be brief" },
        { role: "user", content: words("same-bodies", 3000) },
      ],
      max_tokens: 3,
      temperature: 0.5,
      stream_options: { include_usage: true },
      min_tokens: 1,
    };
    const bodies = async (base: string): Promise<{ prefill: string; decode: string; kv: unknown }> => {
      const before = taps.map((t) => t.seen.length);
      const a = await post(base, "/v1/chat/completions", body);
      expect(a).toMatchObject({ status: 200, route: "remote" });
      const p = seenSince(taps[0]!, before[0]!)[0]!;
      const i = workers.findIndex((w) => w.workerId === a.decode);
      return {
        prefill: p.body,
        decode: seenSince(taps[i]!, before[i]!)[0]!.body,
        kv: (JSON.parse(p.answer) as { kv_transfer_params: unknown }).kv_transfer_params,
      };
    };
    const viaEnvoy = await bodies(envoy.url);
    const viaNode = await bodies(node.url);
    expect(viaEnvoy.prefill).toBe(viaNode.prefill);
    expect(viaEnvoy.decode).toBe(JSON.stringify({ ...body, kv_transfer_params: viaEnvoy.kv }));
    expect(viaNode.decode).toBe(JSON.stringify({ ...body, kv_transfer_params: viaNode.kv }));
    await node.close();
    node = null;
  });

  it("passes streams (SSE) through on both paths", async () => {
    const body = chat(words("stream", 5000), { stream: true, max_tokens: 6 });
    const remote = await post(envoy.url, "/v1/chat/completions", body);
    expect(remote).toMatchObject({ status: 200, route: "remote" });
    expect(remote.contentType).toContain("text/event-stream");
    expect(remote.text.trimEnd().endsWith("data: [DONE]")).toBe(true);
    expect(remote.text.match(/^data: \{/gm)?.length).toBeGreaterThanOrEqual(2);
    const local = await post(envoy.url, "/v1/chat/completions", body);
    expect(local).toMatchObject({ status: 200, route: "local" });
    expect(local.text.trimEnd().endsWith("data: [DONE]")).toBe(true);
  });

  it("routes /v1/completions prompts (text and token ids)", async () => {
    const text = await post(envoy.url, "/v1/completions", {
      model: MODEL,
      prompt: words("completion", 4000),
      max_tokens: 2,
    });
    expect(text).toMatchObject({ status: 200, route: "remote" });
    const ids = await post(envoy.url, "/v1/completions", {
      model: MODEL,
      prompt: Array.from({ length: 3000 }, (_, i) => i % 5000),
      max_tokens: 2,
    });
    expect(ids.status).toBe(200);
    expect(["local", "remote"]).toContain(ids.route);
  });

  it("answers bad input with OpenAI-style errors from the filter, and keeps serving", async () => {
    const errorOf = (a: Answer): { code: string; message: string } =>
      (JSON.parse(a.text) as { error: { code: string; message: string } }).error;
    const notJson = await post(envoy.url, "/v1/chat/completions", "{not json");
    expect(notJson.status).toBe(400);
    expect(errorOf(notJson)).toMatchObject({ code: "invalid_json", message: "request body is not a JSON object" });
    const noPrompt = await post(envoy.url, "/v1/completions", { model: MODEL, max_tokens: 2 });
    expect(noPrompt.status).toBe(400);
    expect(errorOf(noPrompt).message).toBe("prompt must be a string, an array of strings, or token ids");
    const noMessages = await post(envoy.url, "/v1/chat/completions", { model: MODEL, messages: [] });
    expect(errorOf(noMessages).message).toBe("messages must be a non-empty array of message objects");
    const wrongModel = await post(envoy.url, "/v1/chat/completions", {
      model: "other",
      messages: [{ role: "user", content: "x" }],
    });
    expect(wrongModel.status).toBe(404);
    expect(errorOf(wrongModel).code).toBe("model_not_found");
    const tooLarge = await post(envoy.url, "/v1/chat/completions", chat("x".repeat(MAX_BODY_BYTES + 10)));
    expect(tooLarge.status).toBe(413);
    expect(errorOf(tooLarge)).toMatchObject({
      code: "body_too_large",
      message: `request body larger than max_body_bytes (${MAX_BODY_BYTES} bytes)`,
    });
    const badStream = await post(envoy.url, "/v1/chat/completions", {
      model: MODEL,
      messages: [{ role: "user", content: "x" }],
      stream: "yes",
    });
    expect(errorOf(badStream).message).toBe("stream must be true or false");
    const deep = await post(envoy.url, "/v1/chat/completions", `${"[".repeat(5000)}${"]".repeat(5000)}`);
    expect(deep.status).toBe(400);
    const get = await fetch(`${envoy.url}/v1/chat/completions`);
    expect(get.status).toBe(405);
    // nothing trapped: the VMs were never reloaded and requests still route
    const ok = await post(envoy.url, "/v1/chat/completions", chat("still fine"));
    expect(ok.status).toBe(200);
    expect(envoy.log()).not.toMatch(/wasm.*(trap|unreachable|failed)/i);
    expect(await statValue(envoy.adminUrl, "wasm.envoy.wasm.runtime.v8.dolphin_vm.vm_reload_success")).toBe(0);
  });

  it("shows its metrics on /stats/prometheus with the dolphin prefix", async () => {
    await new Promise((r) => setTimeout(r, 1500)); // histograms reach the admin page at Envoy's stats flush
    const text = await prometheus();
    expect(metric(text, "dolphin_requests_remote_total")).toBeGreaterThanOrEqual(6);
    expect(metric(text, "dolphin_requests_local_total")).toBeGreaterThanOrEqual(3);
    expect(metric(text, "dolphin_bad_requests_total")).toBeGreaterThanOrEqual(7);
    expect(metric(text, "dolphin_matched_blocks_total")).toBeGreaterThan(100);
    expect(metric(text, "dolphin_prompt_blocks_total")).toBeGreaterThan(metric(text, "dolphin_matched_blocks_total"));
    expect(metric(text, "dolphin_route_time_us_count")).toBeGreaterThanOrEqual(9);
    expect(text).toMatch(/^dolphin_fallbacks_total\{\} 0$/m);
  });

  it("falls back to local prefill when the prefill worker is stopped, and counts it", async () => {
    const p0 = taps[0]!;
    await p0.close();
    const a = await post(envoy.url, "/v1/chat/completions", chat(words("fallback", 5000)));
    expect(a).toMatchObject({ status: 200, route: "fallback", prefill: null });
    const s = await post(envoy.url, "/v1/chat/completions", chat(words("fallback-stream", 5000), { stream: true }));
    expect(s).toMatchObject({ status: 200, route: "fallback" });
    expect(s.text.trimEnd().endsWith("data: [DONE]")).toBe(true);
    const text = await prometheus();
    expect(metric(text, "dolphin_fallbacks_total")).toBe(2);
    expect(metric(text, "dolphin_requests_fallback_total")).toBe(2);
    taps[0] = await tap(workers[0]!.url); // (a new port: P0 stays unreachable for Envoy, as intended)
  });

  it("swaps the table by rewriting the listener, without restarting Envoy or failing a request", async () => {
    const pid = envoy.process.pid;
    let stop = false;
    const statuses: number[] = [];
    const clients = Array.from({ length: 4 }, async (_, c) => {
      for (let i = 0; !stop; i++)
        statuses.push(
          (await post(envoy.url, "/v1/chat/completions", chat(`swap ${c} ${i} ${words("x", 200)}`))).status,
        );
    });
    await new Promise((r) => setTimeout(r, 300));
    await envoy.reconfigure({ ...setup, table: "always-local" });
    await new Promise((r) => setTimeout(r, 300));
    stop = true;
    await Promise.all(clients);
    expect(statuses.length).toBeGreaterThan(8);
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
    expect(envoy.process.pid).toBe(pid);
    expect(envoy.process.exitCode).toBeNull();
    expect(envoy.log()).not.toMatch(/Function: proxy_on_\w+ failed/); // retiring the old plugin trapped nothing
    // a fresh long prompt, which dynamo-isl would send remote, now goes local on every thread
    for (let i = 0; i < 4; i++) {
      const a = await post(envoy.url, "/v1/chat/completions", chat(words(`after-swap-${i}`, 5000)));
      expect(a).toMatchObject({ status: 200, route: "local" });
    }
  }, 30_000);
});

describe("dolphin filter configuration", () => {
  it("fails the plugin's start with a log line naming the bad field", async () => {
    const bad = startEnvoy(
      { ...setup, listen: { port: 0 }, admin: { port: 0 } },
      {
        logLevel: "info",
        plugin: (p) => ({ ...p, workers: p.workers.map((w, i) => (i === 1 ? { ...w, role: "decoder" } : w)) }),
      },
    );
    await expect(bad).rejects.toThrow(
      /dolphin: plugin configuration: workers\[1\]\.role: expected "prefill", "decode" or "both", got "decoder"/,
    );
    const badTable = startEnvoy(
      { ...setup, listen: { port: 0 }, admin: { port: 0 } },
      {
        logLevel: "info",
        plugin: (p) => ({ ...p, table: Buffer.from("not a table").toString("base64") }),
      },
    );
    await expect(badTable).rejects.toThrow(/dolphin: plugin configuration: table: /);
    const salted = startEnvoy(
      { ...setup, listen: { port: 0 }, admin: { port: 0 } },
      { logLevel: "info", plugin: (p) => ({ ...p, hash_scheme: "llm-d-cbor-fnv", salt: "s" }) },
    );
    await expect(salted).rejects.toThrow(/dolphin: plugin configuration: salt: the llm-d-cbor-fnv hash scheme has no/);
  }, 60_000);

  it("hashes token prompts with llm-d's cbor-fnv scheme when hash_scheme says so", async () => {
    const llmd = await startEnvoy({
      ...setup,
      hash_scheme: "llm-d-cbor-fnv",
      hash_seed: "42",
      listen: { port: 0 },
      admin: { port: 0 },
    });
    try {
      const prompt = Array.from({ length: 3000 }, (_, i) => (i * 7919) % 50_000);
      const body = { model: MODEL, prompt, max_tokens: 2 };
      expect((await post(llmd.url, "/v1/completions", body)).status).toBe(200);
      const again = await post(llmd.url, "/v1/completions", body);
      expect(again.status).toBe(200);
      // the first routing recorded the prompt's blocks (approximate mode): the second finds them
      expect(again.matched).toBe(Math.floor(3000 / 16));
    } finally {
      await llmd.close();
    }
  }, 60_000);
});
