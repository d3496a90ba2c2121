// `dolphin serve` over real sockets, against tiny fake vLLM workers written here with node:http: the local and
// remote (NixlConnector) paths, streaming, KV events, table swaps, worker registration, failures and admin.
import http, { type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { encodeEventBatch } from "../src/router/kv-events.js";
import { hashTokens, rootHash } from "../src/hashing/hashes.js";
import { parseConfig, type ServeConfigInput } from "../src/serve/config.js";
import { ConfigError } from "../src/serve/config-values.js";
import type { WorkerConfig } from "../src/serve/config-workers.js";
import { startProxy, type RunningProxy } from "../src/serve/proxy.js";
import { encodeTable } from "../src/table/codec.js";
import { ruleTable } from "../src/table/rule-table.js";
import { coreModule, sleep, waitFor as waitUntil } from "./helpers.js";

const MODEL = "test-model";
const TOKEN = "s3cret";
const ADMIN = { authorization: `Bearer ${TOKEN}` };

// ---- fake workers --------------------------------------------------------------------------------------------

interface Seen {
  method: string;
  path: string;
  body: Record<string, unknown>;
  headers: IncomingHttpHeaders;
}

interface Fake {
  name: string;
  url: string;
  port: number;
  seen: Seen[];
  /** Requests to the inference endpoints only. */
  inference(): Seen[];
  close(): Promise<void>;
}

type Handler = (req: IncomingMessage, body: Record<string, unknown>, res: ServerResponse) => void | Promise<void>;

const fakes: Fake[] = [];
const proxies: RunningProxy[] = [];

afterEach(async () => {
  await Promise.all(proxies.splice(0).map((p) => p.close()));
  await Promise.all(fakes.splice(0).map((f) => f.close()));
});

/** Byte-per-token tokenizer of the fakes' /tokenize (its own ids are all the router needs to agree with). */
function fakeTokens(body: Record<string, unknown>): number[] {
  const text = Array.isArray(body["messages"])
    ? (body["messages"] as Array<{ role: string; content: string }>).map((m) => `<${m.role}>${m.content}`).join("")
    : String(body["prompt"]);
  return Array.from(Buffer.from(text));
}

const json = (res: ServerResponse, status: number, body: unknown): void => {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
};

/** Answers as a vLLM worker with the NixlConnector would: prefill-only requests get kv_transfer_params back. */
function vllmLike(name: string, opts: { cached?: number; delayMs?: number } = {}): Handler {
  return async (req, body, res) => {
    if (req.url === "/health") return json(res, 200, {});
    if (req.url === "/tokenize") return json(res, 200, { tokens: fakeTokens(body), count: fakeTokens(body).length });
    if (opts.delayMs) await sleep(opts.delayMs);
    const kv = body["kv_transfer_params"] as Record<string, unknown> | undefined;
    const usage = {
      prompt_tokens: 10,
      completion_tokens: 3,
      prompt_tokens_details: { cached_tokens: opts.cached ?? 0 },
    };
    if (kv?.["do_remote_decode"] === true) {
      return json(res, 200, {
        id: "p",
        choices: [{ index: 0, text: "x" }],
        usage: { ...usage, completion_tokens: 1 },
        kv_transfer_params: {
          do_remote_prefill: true,
          do_remote_decode: false,
          remote_engine_id: `engine-${name}`,
          remote_block_ids: [1, 2, 3],
          remote_host: "10.0.0.9",
          remote_port: 5600,
          remote_request_id: "r-1",
        },
      });
    }
    if (body["stream"] === true) {
      res.writeHead(200, { "content-type": "text/event-stream" });
      for (const piece of ["Hel", "lo"]) {
        res.write(`data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: piece } }], worker: name })}\n\n`);
        await sleep(5);
      }
      res.write(`data: ${JSON.stringify({ choices: [], usage })}\n\n`);
      res.end("data: [DONE]\n\n");
      return;
    }
    return json(res, 200, {
      id: "c",
      object: "chat.completion",
      worker: name,
      choices: [{ index: 0, message: { role: "assistant", content: `hello from ${name}` } }],
      usage,
    });
  };
}

async function startFake(name: string, handler: Handler = vllmLike(name), port = 0): Promise<Fake> {
  const seen: Seen[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const text = Buffer.concat(chunks).toString("utf8");
      const body = text ? (JSON.parse(text) as Record<string, unknown>) : {};
      seen.push({ method: req.method ?? "", path: req.url ?? "", body, headers: req.headers });
      Promise.resolve(handler(req, body, res)).catch(() => res.destroy());
    });
  });
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  const actual = (server.address() as AddressInfo).port;
  const fake: Fake = {
    name,
    port: actual,
    url: `http://127.0.0.1:${actual}`,
    seen,
    inference: () => seen.filter((s) => s.path.startsWith("/v1/")),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  fakes.push(fake);
  return fake;
}

async function freePort(): Promise<number> {
  const s = http.createServer();
  await new Promise<void>((resolve) => s.listen(0, "127.0.0.1", resolve));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

/** test/helpers.ts's poll, bounded at 3 s here as before. */
const waitFor = (what: string, check: () => boolean | Promise<boolean>): Promise<void> => waitUntil(what, check, 3000);

// ---- the proxy -----------------------------------------------------------------------------------------------

function worker(f: Fake, role: WorkerConfig["role"], id = f.name): WorkerConfig {
  return { id, url: f.url, role };
}

async function proxy(workers: WorkerConfig[], extra: Partial<ServeConfigInput> = {}): Promise<RunningProxy> {
  const p = await startProxy(
    {
      model: MODEL,
      listen: { host: "127.0.0.1", port: 0 },
      log_level: "silent",
      admin_token: TOKEN,
      capacity_blocks: 4096,
      max_workers: 16,
      table: "always-local",
      workers,
      ...extra,
    },
    { module: coreModule("release") },
  );
  proxies.push(p);
  return p;
}

const chatBody = (extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  model: MODEL,
  messages: [{ role: "user", content: "What is the capital of France? Answer in one word, please." }],
  max_tokens: 20,
  min_tokens: 2,
  temperature: 0,
  ...extra,
});

function post(p: RunningProxy, path: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${p.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : body instanceof Uint8Array ? new Uint8Array(body) : JSON.stringify(body),
  });
}

/** POSTs a body in chunks, without a content-length; resolves with the status. */
function chunkedStatus(p: RunningProxy, text: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      `${p.url}/v1/completions`,
      { method: "POST", headers: { "content-type": "application/json" } },
      (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      },
    );
    req.on("error", reject);
    for (let i = 0; i < text.length; i += 1000) req.write(text.slice(i, i + 1000));
    req.end();
  });
}

async function errorOf(r: Response): Promise<{ message: string; type: string; code: string }> {
  const j = (await r.json()) as { error: { message: string; type: string; code: string } };
  expect(Object.keys(j.error).sort()).toEqual(["code", "message", "type"]);
  return j.error;
}

async function decisions(p: RunningProxy): Promise<Array<Record<string, unknown>>> {
  const r = await fetch(`${p.url}/admin/decisions?n=1000`, { headers: ADMIN });
  return ((await r.json()) as { decisions: Array<Record<string, unknown>> }).decisions;
}

// ---- tests ---------------------------------------------------------------------------------------------------

describe("dolphin serve: the two paths", () => {
  it("local path: the client's body goes unchanged to the decode worker and its answer comes back", async () => {
    const pf = await startFake("p0");
    const d = await startFake("d0");
    const p = await proxy([worker(pf, "prefill"), worker(d, "decode")]);
    const body = chatBody();
    const r = await post(p, "/v1/chat/completions", body);
    expect(r.status).toBe(200);
    expect(r.headers.get("x-dolphin-route")).toBe("local");
    expect(((await r.json()) as { worker: string }).worker).toBe("d0");
    expect(pf.inference()).toHaveLength(0);
    expect(d.inference()).toHaveLength(1);
    expect(d.inference()[0]!.body).toEqual(body);
    expect(d.inference()[0]!.headers["x-request-id"]).toBe(r.headers.get("x-request-id"));
  });

  it("refuses max_tokens beyond max_model_len with vLLM's message before any worker call", async () => {
    const pf = await startFake("p0");
    const d = await startFake("d0");
    const p = await proxy([worker(pf, "prefill"), worker(d, "decode")], { table: "always-remote", max_model_len: 64 });
    const r = await post(p, "/v1/chat/completions", chatBody({ max_tokens: 65 }));
    expect(r.status).toBe(400);
    expect(((await r.json()) as { error: { message: string } }).error.message).toBe(
      "max_tokens=65 cannot be greater than max_model_len=64. Please request fewer output tokens.",
    );
    expect([pf.inference().length, d.inference().length]).toEqual([0, 0]);
    expect((await post(p, "/v1/chat/completions", chatBody({ max_tokens: 64 }))).status).toBe(200);
  });

  it("remote path: prefill gets vLLM's NixlConnector marks, decode gets the prefill's kv_transfer_params", async () => {
    const pf = await startFake("p0");
    const d = await startFake("d0");
    const p = await proxy([worker(pf, "prefill"), worker(d, "decode")], { table: "always-remote" });
    const body = chatBody({ stream_options: { include_usage: true }, user: "u1" });
    const r = await post(p, "/v1/chat/completions", body);
    expect(r.status).toBe(200);
    expect(r.headers.get("x-dolphin-route")).toBe("remote");
    expect(r.headers.get("x-dolphin-prefill-worker")).toBe("p0");
    expect(pf.inference()).toHaveLength(1);
    const sent = pf.inference()[0]!.body;
    expect(sent["kv_transfer_params"]).toEqual({
      do_remote_decode: true,
      do_remote_prefill: false,
      remote_engine_id: null,
      remote_block_ids: null,
      remote_host: null,
      remote_port: null,
    });
    expect(sent["stream"]).toBe(false);
    expect(sent["max_tokens"]).toBe(1);
    expect("min_tokens" in sent).toBe(false);
    expect("stream_options" in sent).toBe(false);
    expect(sent["messages"]).toEqual(body["messages"]);
    expect(sent["temperature"]).toBe(0);
    expect(sent["user"]).toBe("u1");
    const decoded = d.inference()[0]!.body;
    expect(decoded).toEqual({
      ...body,
      kv_transfer_params: {
        do_remote_prefill: true,
        do_remote_decode: false,
        remote_engine_id: "engine-p0",
        remote_block_ids: [1, 2, 3],
        remote_host: "10.0.0.9",
        remote_port: 5600,
        remote_request_id: "r-1",
      },
    });
    // the same request id on both legs, as vLLM's proxy sends it
    expect(pf.inference()[0]!.headers["x-request-id"]).toBe(d.inference()[0]!.headers["x-request-id"]);
  });

  it("remote path, streaming (ask_stream_usage on): the decode stream is passed on as it arrives, not buffered", async () => {
    const pf = await startFake("p0");
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const d = await startFake("d0", async (req, body, res) => {
      if (req.url === "/health") return json(res, 200, {});
      expect(body["stream"]).toBe(true);
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write('data: {"choices":[{"delta":{"content":"first"}}]}\n\n');
      await gate; // the rest only once the client has seen the first event
      res.write(
        'data: {"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":0}}}\n\n',
      );
      res.end("data: [DONE]\n\n");
    });
    const p = await proxy([worker(pf, "prefill"), worker(d, "decode")], {
      table: "always-remote",
      ask_stream_usage: true,
    });
    const r = await post(p, "/v1/completions", {
      model: MODEL,
      prompt: "Once upon a time",
      max_tokens: 5,
      stream: true,
      min_tokens: 1,
    });
    expect(r.status).toBe(200);
    expect(r.headers.get("content-type")).toContain("text/event-stream");
    const reader = r.body!.getReader();
    const first = new TextDecoder().decode((await reader.read()).value);
    expect(first).toContain("first");
    release();
    let rest = "";
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      rest += new TextDecoder().decode(value);
    }
    // the client did not ask for usage: the proxy asked the decode worker, and took the usage event out
    expect(first + rest).toBe('data: {"choices":[{"delta":{"content":"first"}}]}\n\ndata: [DONE]\n\n');
    expect(d.inference()[0]!.body["stream_options"]).toEqual({ include_usage: true });
    const prefillBody = pf.inference()[0]!.body;
    expect(prefillBody["stream"]).toBe(false);
    expect(prefillBody["max_tokens"]).toBe(1);
    expect("min_tokens" in prefillBody).toBe(false);
    expect(d.inference()[0]!.body["min_tokens"]).toBe(1);
    expect((d.inference()[0]!.body["kv_transfer_params"] as Record<string, unknown>)["remote_engine_id"]).toBe(
      "engine-p0",
    );
  });

  it("local path, streaming: SSE passes through and the worker's cached_tokens reach the metrics", async () => {
    const d = await startFake("d0", vllmLike("d0", { cached: 7 }));
    const p = await proxy([worker(d, "decode")]);
    const r = await post(
      p,
      "/v1/chat/completions",
      chatBody({ stream: true, stream_options: { include_usage: true } }),
    );
    const text = await r.text();
    expect(text.match(/^data: /gm)?.length).toBe(4);
    expect(text.endsWith("data: [DONE]\n\n")).toBe(true);
    const metrics = await (await fetch(`${p.url}/metrics`)).text();
    expect(metrics).toContain('dolphin_cache_reported_tokens_total{path="local"} 7');
    expect(metrics).toContain('dolphin_cache_compared_requests_total{path="local"} 1');
  });

  it("local path, streaming without include_usage, ask_stream_usage on: the worker is asked for usage, the client gets none", async () => {
    const d = await startFake("d0", vllmLike("d0", { cached: 7 }));
    const p = await proxy([worker(d, "decode")], { ask_stream_usage: true });
    const body = chatBody({ stream: true });
    const text = await (await post(p, "/v1/chat/completions", body)).text();
    expect(text.match(/^data: /gm)?.length).toBe(3); // two content chunks and [DONE]
    expect(text).not.toContain('"usage"');
    expect(text.endsWith("data: [DONE]\n\n")).toBe(true);
    // the client's bytes with stream_options put in front: the same body otherwise
    const sent = d.inference()[0]!;
    expect(sent.body).toEqual({ ...body, stream_options: { include_usage: true } });
    expect(JSON.stringify(sent.body).startsWith('{"stream_options":{"include_usage":true},')).toBe(true);
    const metrics = await (await fetch(`${p.url}/metrics`)).text();
    expect(metrics).toContain('dolphin_cache_reported_tokens_total{path="local"} 7');
    expect(metrics).toContain('dolphin_cache_compared_requests_total{path="local"} 1');
  });
});

describe("dolphin serve: the cache view", () => {
  it("KV events POSTed to /admin/kv-events move later decisions to the worker that caches the prompt", async () => {
    const d0 = await startFake("d0");
    const d1 = await startFake("d1");
    const p = await proxy([worker(d0, "decode"), worker(d1, "decode")], { mode: "precise", block_size: 16 });
    const body = chatBody({
      messages: [{ role: "user", content: "A long shared system prompt that many requests reuse. ".repeat(6) }],
    });
    const tokens = fakeTokens(body);
    const route = async (): Promise<string> =>
      (await post(p, "/v1/chat/completions", body)).headers.get("x-dolphin-decode-worker")!;
    const first = await route();
    const other = first === "d0" ? "d1" : "d0";
    // the other worker reports the prompt's blocks in vLLM's form (its own hashes, with the token ids)
    const engineHashes = Array.from({ length: Math.floor(tokens.length / 16) }, (_, i) => BigInt(1_000_000 + i));
    const stored = encodeEventBatch({
      ts: 1,
      dataParallelRank: null,
      events: [
        {
          kind: "stored",
          hashes: pairsOf(engineHashes),
          parent: null,
          tokenIds: tokens.slice(0, engineHashes.length * 16),
          blockSize: 16,
          medium: "GPU",
        },
      ],
    });
    const r = await post(p, "/admin/kv-events", stored, {
      ...ADMIN,
      "content-type": "application/msgpack",
      "x-dolphin-worker": other,
    });
    expect(r.status).toBe(200);
    expect(((await r.json()) as { stored_blocks: number }).stored_blocks).toBe(engineHashes.length);
    expect(await route()).toBe(other);
    const last = (await decisions(p)).at(-1)!;
    expect((last["matched_blocks"] as { decode: number }).decode).toBe(engineHashes.length);
    expect(last["predicted_cached_tokens"]).toBe(engineHashes.length * 16);
    expect((last["features"] as { isl: number }).isl).toBe(tokens.length); // routed on /tokenize's ids
    // the worker evicts them again (by its own hashes): the decision no longer sees a hit there
    const removed = encodeEventBatch({
      ts: 2,
      dataParallelRank: null,
      events: [{ kind: "removed", hashes: pairsOf(engineHashes), medium: "GPU" }],
    });
    await post(p, "/admin/kv-events", removed, { ...ADMIN, "x-dolphin-worker": other });
    await route();
    expect(((await decisions(p)).at(-1)!["matched_blocks"] as { decode: number }).decode).toBe(0);
    // hashes in the router's own scheme (no token ids) are taken as they are
    const ours = hashTokens(tokens, 16, rootHash(MODEL));
    const direct = encodeEventBatch({
      ts: 3,
      dataParallelRank: null,
      events: [{ kind: "stored", hashes: ours, parent: null, tokenIds: [], blockSize: 16, medium: null }],
    });
    await post(p, "/admin/kv-events", direct, { ...ADMIN, "x-dolphin-worker": first });
    expect(await route()).toBe(first);
  });

  it("rejects KV events without the token, for unknown workers, and that do not decode", async () => {
    const d0 = await startFake("d0");
    const p = await proxy([worker(d0, "decode")], { mode: "precise" });
    const batch = encodeEventBatch({ ts: 1, dataParallelRank: null, events: [{ kind: "cleared" }] });
    expect((await post(p, "/admin/kv-events", batch, { "x-dolphin-worker": "d0" })).status).toBe(401);
    expect((await post(p, "/admin/kv-events", batch, { ...ADMIN, "x-dolphin-worker": "nope" })).status).toBe(404);
    const bad = await post(p, "/admin/kv-events", new Uint8Array([0xc1]), { ...ADMIN, "x-dolphin-worker": "d0" });
    expect(bad.status).toBe(400);
    expect((await errorOf(bad)).code).toBe("invalid_kv_events");
  });

  it("subscribes to a worker's ZMQ KV events (vLLM's topic, sequence, payload frames)", async () => {
    let zmq: typeof import("zeromq");
    try {
      zmq = await import("zeromq");
    } catch {
      return; // optional dependency absent: POST /admin/kv-events covers ingestion
    }
    const pub = new zmq.Publisher();
    await pub.bind("tcp://127.0.0.1:*");
    const endpoint = pub.lastEndpoint!;
    try {
      const d0 = await startFake("d0");
      const p = await proxy([{ ...worker(d0, "decode"), kv_events_endpoint: endpoint }], { mode: "precise" });
      const hashes = hashTokens(
        Array.from({ length: 64 }, (_, i) => i),
        16,
        rootHash(MODEL),
      );
      const payload = encodeEventBatch({
        ts: 1,
        dataParallelRank: null,
        events: [{ kind: "stored", hashes, parent: null, tokenIds: [], blockSize: 16, medium: "GPU" }],
      });
      let seq = 0n;
      await waitFor("the subscription to deliver", async () => {
        const frame = Buffer.alloc(8);
        frame.writeBigUInt64BE(seq++);
        await pub.send(["kv-events", frame, payload]);
        return p.router.index.count("d0") === 4;
      });
      const metrics = await (await fetch(`${p.url}/metrics`)).text();
      expect(metrics).toContain('dolphin_kv_events_total{kind="stored_blocks",source="zmq",worker="d0"}');
    } finally {
      pub.close();
    }
  });

  it("approximate mode remembers its own decisions, then forgets them after approximate_ttl_s", async () => {
    const d0 = await startFake("d0");
    const d1 = await startFake("d1");
    const p = await proxy([worker(d0, "decode"), worker(d1, "decode")], { approximate_ttl_s: 0.3 });
    const body = chatBody({ messages: [{ role: "user", content: "x".repeat(400) }] });
    const first = (await post(p, "/v1/chat/completions", body)).headers.get("x-dolphin-decode-worker")!;
    await post(p, "/v1/chat/completions", body);
    const second = (await decisions(p)).at(-1)!;
    expect(second["decode_worker"]).toBe(first);
    expect((second["matched_blocks"] as { decode: number }).decode).toBeGreaterThan(0);
    await waitFor("the index to be cleared", () => p.router.index.count("d0") + p.router.index.count("d1") === 0);
  });
});

describe("dolphin serve: tables and workers", () => {
  it("swaps the table under concurrent load without losing a request", async () => {
    const pf = await startFake("p0", vllmLike("p0", { delayMs: 10 }));
    const d = await startFake("d0", vllmLike("d0", { delayMs: 30 }));
    const p = await proxy([worker(pf, "prefill"), worker(d, "decode")]);
    const requests = Array.from({ length: 40 }, (_, i) =>
      sleep(i * 3).then(() => post(p, "/v1/chat/completions", chatBody({ user: `u${i}` }))),
    );
    await sleep(45);
    const remoteTable = encodeTable(ruleTable("always-remote"));
    const swap = await fetch(`${p.url}/admin/table`, {
      method: "PUT",
      headers: ADMIN,
      body: new Uint8Array(remoteTable),
    });
    expect(swap.status).toBe(200);
    expect(((await swap.json()) as { kind: string }).kind).toBe("always-remote");
    const answers = await Promise.all(requests);
    expect(answers.map((r) => r.status)).toEqual(answers.map(() => 200));
    const routes = answers.map((r) => r.headers.get("x-dolphin-route"));
    expect(routes).toContain("local");
    expect(routes).toContain("remote");
    expect(d.inference()).toHaveLength(40);
    // every request's load was given back
    const listed = (await (await fetch(`${p.url}/admin/workers`, { headers: ADMIN })).json()) as {
      workers: Array<Record<string, number>>;
    };
    expect(listed.workers.map((w) => [w["active_prefill_tokens"], w["active_decode_tokens"]])).toEqual([
      [0, 0],
      [0, 0],
    ]);
    const got = await fetch(`${p.url}/admin/table`, { headers: ADMIN });
    expect(new Uint8Array(await got.arrayBuffer())).toEqual(remoteTable);
    // a table that does not validate leaves the current one in place
    const bad = await fetch(`${p.url}/admin/table`, {
      method: "PUT",
      headers: ADMIN,
      body: new Uint8Array(remoteTable.slice(0, 20)),
    });
    expect(bad.status).toBe(400);
    expect((await errorOf(bad)).code).toBe("invalid_table");
    expect(p.router.table.kind).toBe("always-remote");
  });

  it("registers workers by heartbeat and removes them when the heartbeats stop", async () => {
    const d = await startFake("d9");
    const p = await proxy([], { heartbeat: { interval_s: 0.05, expiry_s: 0.25 } });
    const noWorker = await post(p, "/v1/chat/completions", chatBody());
    expect(noWorker.status).toBe(503);
    expect((await errorOf(noWorker)).code).toBe("no_decode_worker");
    const spec = { id: "d9", url: d.url, role: "decode" };
    const reg = await post(p, "/admin/workers", spec, ADMIN);
    expect(reg.status).toBe(201);
    expect(await reg.json()).toMatchObject({ status: "registered", heartbeat_interval_s: 0.05, expiry_s: 0.25 });
    for (let i = 0; i < 8; i++) {
      await sleep(50);
      expect((await post(p, "/admin/workers", spec, ADMIN)).status).toBe(200);
    }
    expect(p.router.workerIds).toEqual(["d9"]);
    expect((await post(p, "/v1/chat/completions", chatBody())).status).toBe(200);
    await waitFor("the worker to expire", () => p.router.workerIds.length === 0);
    const listed = await (await fetch(`${p.url}/admin/workers`, { headers: ADMIN })).json();
    expect(listed).toEqual({ workers: [] });
    expect((await post(p, "/v1/chat/completions", chatBody())).status).toBe(503);
    const invalid = await post(p, "/admin/workers", { id: "x", url: "ftp://nowhere", role: "decode" }, ADMIN);
    expect(invalid.status).toBe(400);
    expect((await errorOf(invalid)).message).toContain("body.url");
  });

  it("pins a conversation's later turns to its decode worker under a PPD table", async () => {
    const d0 = await startFake("d0");
    const d1 = await startFake("d1");
    const bits = Array.from({ length: 3 }, () => Array.from({ length: 9 }, () => Array(10).fill(0)));
    const ppd = encodeTable(ruleTable("ppd", { bits }));
    const p = await proxy([worker(d0, "decode"), worker(d1, "decode")]);
    expect(
      (await fetch(`${p.url}/admin/table`, { method: "PUT", headers: ADMIN, body: new Uint8Array(ppd) })).status,
    ).toBe(200);
    const messages = [{ role: "user", content: "Tell me about Paris." }];
    const first = (await post(p, "/v1/chat/completions", chatBody({ messages }))).headers.get(
      "x-dolphin-decode-worker",
    )!;
    const other = first === "d0" ? "d1" : "d0";
    for (let turn = 2; turn <= 4; turn++) {
      messages.push({ role: "assistant", content: "It is a city." }, { role: "user", content: `Question ${turn}?` });
      // load the first worker so that, unpinned, the router would prefer the other
      p.router.setLoad(first, { activePrefillTokens: 1e9, activeDecodeTokens: 1e9 });
      const r = await post(p, "/v1/chat/completions", chatBody({ messages }));
      expect(r.headers.get("x-dolphin-decode-worker")).toBe(first);
    }
    expect((await decisions(p)).map((d) => d["turn"])).toEqual([1, 2, 3, 4]);
    // a new conversation is not pinned
    p.router.setLoad(first, { activePrefillTokens: 1e9, activeDecodeTokens: 1e9 });
    const fresh = await post(
      p,
      "/v1/chat/completions",
      chatBody({ messages: [{ role: "user", content: "Something else entirely." }] }),
    );
    expect(fresh.headers.get("x-dolphin-decode-worker")).toBe(other);
  });
});

describe("dolphin serve: failures", () => {
  it("falls back to local prefill when the prefill worker is down, and puts it back when /health answers", async () => {
    const port = await freePort();
    const d = await startFake("d0");
    const p = await proxy([{ id: "p0", url: `http://127.0.0.1:${port}`, role: "prefill" }, worker(d, "decode")], {
      table: "always-remote",
      health: { probe_interval_s: 0.05 },
      timeouts: { connect_ms: 500 },
    });
    const r = await post(p, "/v1/chat/completions", chatBody());
    expect(r.status).toBe(200);
    expect(r.headers.get("x-dolphin-route")).toBe("fallback");
    expect(d.inference()[0]!.body).toEqual(chatBody());
    expect(p.router.workerIds).toEqual(["d0"]);
    // out of rotation: the next request has no prefill worker to go to
    const next = await post(p, "/v1/chat/completions", chatBody());
    expect(next.headers.get("x-dolphin-route")).toBe("local");
    expect((await decisions(p)).at(-1)!["reason"]).toBe("no-prefill-worker");
    const pf = await startFake("p0", vllmLike("p0"), port);
    await waitFor("the prefill worker to come back", () => p.router.workerIds.includes("p0"));
    const back = await post(p, "/v1/chat/completions", chatBody());
    expect(back.headers.get("x-dolphin-route")).toBe("remote");
    expect(pf.inference()).toHaveLength(1);
    const metrics = await (await fetch(`${p.url}/metrics`)).text();
    expect(metrics).toContain("dolphin_fallbacks_total 1");
    expect(metrics).toMatch(/dolphin_prefill_failures_total\{kind="connect"\} 1/);
  });

  it("answers 502 when the prefill worker fails and fallback_local is off", async () => {
    const pf = await startFake("p0", (req, _body, res) => json(res, 500, { error: "boom" }));
    const d = await startFake("d0");
    const p = await proxy([worker(pf, "prefill"), worker(d, "decode")], {
      table: "always-remote",
      fallback_local: false,
    });
    const r = await post(p, "/v1/chat/completions", chatBody());
    expect(r.status).toBe(502);
    const e = await errorOf(r);
    expect(e.code).toBe("prefill_failed");
    expect(e.message).toContain("500");
    expect(d.inference()).toHaveLength(0);
  });

  it("ends the client's stream with an SSE error event when the decode worker dies mid-stream", async () => {
    const d = await startFake("d0", async (req, _body, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write('data: {"choices":[{"delta":{"content":"par"}}]}\n\n');
      await sleep(20);
      res.socket!.destroy();
    });
    // one failure ejects here (the default is 5 in a row, Envoy's consecutive_5xx)
    const p = await proxy([worker(d, "decode")], {
      health: { probe_interval_s: 60 },
      outlier: { consecutive_failures: 1 },
    });
    const r = await post(p, "/v1/chat/completions", chatBody({ stream: true }));
    expect(r.status).toBe(200);
    const text = await r.text(); // resolves: the stream is closed
    const events = text.split("\n\n").filter(Boolean);
    expect(events[0]).toContain("par");
    const error = JSON.parse(events[1]!.slice("data: ".length)) as {
      error: { type: string; code: string; message: string };
    };
    expect(error.error.code).toBe("decode_failed");
    expect(error.error.message).toContain("mid-stream");
    expect(events.at(-1)).toBe("data: [DONE]");
    expect(p.router.workerIds).toEqual([]); // out of rotation
  });

  it("cancels the worker's request when the client goes away mid-stream", async () => {
    let upstreamClosed = false;
    const d = await startFake("d0", async (req, _body, res) => {
      res.on("close", () => {
        upstreamClosed = true;
      });
      res.writeHead(200, { "content-type": "text/event-stream" });
      for (let i = 0; i < 200 && !upstreamClosed; i++) {
        res.write(`data: {"choices":[{"delta":{"content":"${i}"}}]}\n\n`);
        await sleep(10);
      }
      res.end();
    });
    const p = await proxy([worker(d, "decode")]);
    const abort = new AbortController();
    const r = await fetch(`${p.url}/v1/chat/completions`, {
      method: "POST",
      body: JSON.stringify(chatBody({ stream: true })),
      signal: abort.signal,
    });
    await r.body!.getReader().read();
    abort.abort();
    await waitFor("the upstream request to be cancelled", () => upstreamClosed);
    await waitFor("the request to be logged as gone", async () => (await decisions(p)).at(-1)!["status"] === 499);
    expect(p.router.workerIds).toEqual(["d0"]); // a client leaving is not the worker's failure
  });

  it("falls back to local prefill when the prefill worker times out", async () => {
    const pf = await startFake("p0", () => undefined);
    const d = await startFake("d0");
    const p = await proxy([worker(pf, "prefill"), worker(d, "decode")], {
      table: "always-remote",
      timeouts: { request_ms: 150 },
    });
    const r = await post(p, "/v1/chat/completions", chatBody());
    expect(r.status).toBe(200);
    expect(r.headers.get("x-dolphin-route")).toBe("fallback");
    expect(p.router.workerIds).toContain("p0"); // slow is not down
  });

  it("answers 504 when the decode worker does not answer within request_ms", async () => {
    const d = await startFake("d0", () => undefined);
    const p = await proxy([worker(d, "decode")], { timeouts: { request_ms: 200 } });
    const r = await post(p, "/v1/completions", { model: MODEL, prompt: "hi" });
    expect(r.status).toBe(504);
    expect((await errorOf(r)).code).toBe("upstream_timeout");
  });

  it("answers malformed, oversized and unknown-model requests with OpenAI-style errors", async () => {
    const d = await startFake("d0");
    const p = await proxy([worker(d, "decode")], { max_body_bytes: 2048 });
    const malformed = await post(p, "/v1/chat/completions", "{not json");
    expect(malformed.status).toBe(400);
    expect(await errorOf(malformed)).toMatchObject({ type: "invalid_request_error", code: "invalid_json" });
    const noMessages = await post(p, "/v1/chat/completions", { model: MODEL });
    expect(noMessages.status).toBe(400);
    const big = await post(p, "/v1/completions", { model: MODEL, prompt: "y".repeat(5000) });
    expect(big.status).toBe(413);
    expect((await errorOf(big)).code).toBe("body_too_large");
    expect(await chunkedStatus(p, "z".repeat(6000))).toBe(413); // no content-length: counted as it arrives
    const unknown = await post(p, "/v1/chat/completions", chatBody({ model: "gpt-17" }));
    expect(unknown.status).toBe(404);
    expect((await errorOf(unknown)).code).toBe("model_not_found");
    const nowhere = await fetch(`${p.url}/v2/whatever`);
    expect(nowhere.status).toBe(404);
    const wrongMethod = await fetch(`${p.url}/v1/chat/completions`);
    expect(wrongMethod.status).toBe(405);
    expect(d.inference()).toHaveLength(0);
    // the proxy still serves after all that
    expect((await post(p, "/v1/chat/completions", chatBody())).status).toBe(200);
  });

  it("guards the admin endpoints: 401 without or with a wrong token, 403 when no token is configured", async () => {
    const d = await startFake("d0");
    const p = await proxy([worker(d, "decode")]);
    expect((await fetch(`${p.url}/admin/decisions`)).status).toBe(401);
    expect((await fetch(`${p.url}/admin/table`, { headers: { authorization: "Bearer wrong" } })).status).toBe(401);
    const unauthorized = await fetch(`${p.url}/admin/table`, {
      method: "PUT",
      body: new Uint8Array(encodeTable(ruleTable("always-remote"))),
    });
    expect((await errorOf(unauthorized)).type).toBe("authentication_error");
    expect(p.router.table.kind).toBe("always-local");
    const closed = await proxy([worker(d, "decode")], { admin_token: null });
    const forbidden = await fetch(`${closed.url}/admin/decisions`, { headers: ADMIN });
    expect(forbidden.status).toBe(403);
    expect((await errorOf(forbidden)).code).toBe("admin_disabled");
  });
});

describe("dolphin serve: observability", () => {
  it("serves /health, /v1/models, /metrics and recent decisions", async () => {
    const pf = await startFake("p0");
    const d = await startFake("d0");
    const logs: string[] = [];
    const p = await startProxy(
      {
        model: MODEL,
        listen: { port: 0 },
        log_level: "info",
        admin_token: TOKEN,
        capacity_blocks: 1024,
        max_workers: 4,
        table: "always-remote",
        workers: [worker(pf, "prefill"), worker(d, "decode")],
      },
      { module: coreModule("release"), log: (line) => logs.push(line) },
    );
    proxies.push(p);
    const health = await fetch(`${p.url}/health`);
    expect(health.status).toBe(200);
    expect(await health.json()).toMatchObject({ status: "ok", workers: { total: 2, healthy: 2, healthy_decode: 1 } });
    expect(await (await fetch(`${p.url}/v1/models`)).json()).toMatchObject({ object: "list", data: [{ id: MODEL }] });
    await post(p, "/v1/chat/completions", chatBody());
    const metrics = await (await fetch(`${p.url}/metrics`)).text();
    expect(metrics).toContain('dolphin_requests_total{endpoint="/v1/chat/completions",route="remote",status="200"} 1');
    expect(metrics).toContain('dolphin_decisions_total{path="remote",reason="rule"} 1');
    expect(metrics).toContain("# TYPE dolphin_request_duration_seconds histogram");
    expect(metrics).toContain('dolphin_workers{role="decode",state="healthy"} 1');
    expect(metrics).toContain('dolphin_table_info{checksum="');
    const [decision] = await decisions(p);
    expect(decision).toMatchObject({
      route: "remote",
      decode_worker: "d0",
      prefill_worker: "p0",
      status: 200,
      reported_cached_tokens: 0,
      turn: 1,
    });
    expect(Object.keys(decision!["features"] as object).sort()).toEqual(["effD", "effP", "isl", "oslHat"]);
    const line = logs.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l["msg"] === "request")!;
    expect(line).toMatchObject({
      level: "info",
      path: "/v1/chat/completions",
      status: 200,
      route: "remote",
      workers: { decode: "d0", prefill: "p0" },
    });
    expect(typeof line["id"]).toBe("string");
    expect(typeof line["latency_ms"]).toBe("number");
    expect(line).toHaveProperty("features");
    expect(line).toHaveProperty("cluster");
  });
});

describe("dolphin serve: config", () => {
  it("fills defaults and names the field of every error", () => {
    const c = parseConfig({ model: "m" });
    expect(c).toMatchObject({
      listen: { host: "127.0.0.1", port: 8000 },
      mode: "approximate",
      fallback_local: true,
      admin_token: null,
      max_body_bytes: 8 << 20,
    });
    expect(parseConfig(c)).toEqual(c);
    const error = (raw: unknown): string => {
      try {
        parseConfig(raw);
      } catch (e) {
        expect(e).toBeInstanceOf(ConfigError);
        return (e as ConfigError).field;
      }
      throw new Error("accepted");
    };
    expect(error({})).toBe("model");
    expect(error({ model: "m", mode: "exact" })).toBe("mode");
    expect(error({ model: "m", timeouts: { connect_ms: -1 } })).toBe("timeouts.connect_ms");
    expect(error({ model: "m", timeouts: { conect_ms: 5 } })).toBe("timeouts.conect_ms");
    expect(
      error({
        model: "m",
        workers: [
          { id: "a", url: "http://x", role: "decode" },
          { id: "a", url: "http://y", role: "decode" },
        ],
      }),
    ).toBe("workers[1].id");
    expect(error({ model: "m", workers: [{ id: "a", url: "http://x", role: "router" }] })).toBe("workers[0].role");
    expect(
      error({ model: "m", workers: [{ id: "a", url: "http://x", role: "decode", kv_events_endpoint: "http://x" }] }),
    ).toBe("workers[0].kv_events_endpoint");
    expect(
      error({
        model: "m",
        workers: [{ id: "a", url: "http://x", role: "decode", kv_events_replay_endpoint: "tcp://x:1" }],
      }),
    ).toBe("workers[0].kv_events_replay_endpoint");
    expect(
      error({
        model: "m",
        workers: [
          { id: "a", url: "http://x", role: "decode", kv_events_endpoint: "tcp://x:1", kv_events_replay_endpoint: "x" },
        ],
      }),
    ).toBe("workers[0].kv_events_replay_endpoint");
    expect(error({ model: "m", cache_evidence: "yes" })).toBe("cache_evidence");
    expect(error({ model: "m", heartbeat: { interval_s: 10, expiry_s: 5 } })).toBe("heartbeat.expiry_s");
    expect(error({ model: "m", lsiten: {} })).toBe("lsiten");
    expect(error({ model: "m", log_level: "loud" })).toBe("log_level");
  });
});

function pairsOf(hashes: bigint[]): Uint32Array {
  const out = new Uint32Array(hashes.length * 2);
  hashes.forEach((h, i) => {
    out[2 * i] = Number(h & 0xffffffffn);
    out[2 * i + 1] = Number(h >> 32n);
  });
  return out;
}
