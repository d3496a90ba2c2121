// The load generator of `dolphin bench routers`: open loop (request i is sent at t0 + i/rate whatever the answers
// do), node:http with a keep-alive Agent per path, hrtime from just before the first byte is sent to the end of the
// answer's body. A path is a router (one call; the router makes the prefill and decode legs) or `direct`: this
// process making the two legs itself as vLLM's NixlConnector proxy does (the prefill worker with kv_transfer_params
// asking for a remote decode, then a decode worker with the kv_transfer_params the prefill answered), so a router's
// added latency is what it costs beyond the two calls any P/D request makes. A request counts when every call
// answers 200 with a whole answer: a JSON body with choices, or a stream ending in `data: [DONE]`.

import http from "node:http";
import { prefillBody } from "../src/serve/proxy/remote-path.js";
import { MODEL } from "./harness.js";

const REQUEST_TIMEOUT_MS = 10_000;

interface Target {
  host: string;
  port: number;
  agent: http.Agent;
}

const target = (url: string): Target => {
  const u = new URL(url);
  return {
    host: u.hostname,
    port: Number(u.port),
    agent: new http.Agent({ keepAlive: true, maxSockets: 1024, timeout: 4000 }),
  };
};

/** A path under test: a router's URL, or the direct two-leg client over the workers. */
export interface LoadPath {
  name: string;
  send(body: Record<string, unknown>): Promise<string | null>;
  close(): void;
}

/** One POST; resolves with status and body. Retries once when a reused keep-alive socket was closed under it. */
function post(t: Target, path: string, body: Buffer, retried = false): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: t.host,
      port: t.port,
      path,
      method: "POST",
      agent: t.agent,
      headers: { "content-type": "application/json", "content-length": body.length },
    });
    const timer = setTimeout(
      () => req.destroy(new Error(`no answer within ${REQUEST_TIMEOUT_MS} ms`)),
      REQUEST_TIMEOUT_MS,
    );
    req.on("response", (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => {
        clearTimeout(timer);
        resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8") });
      });
      res.on("error", (e) => {
        clearTimeout(timer);
        reject(e);
      });
      // closed without its end (destroyed by the timeout, or the peer went away): a failure, never a hang
      res.on("close", () => {
        clearTimeout(timer);
        if (!res.complete) reject(new Error("connection closed mid-answer"));
      });
    });
    req.on("error", (e) => {
      clearTimeout(timer);
      if (!retried && req.reusedSocket && (e as NodeJS.ErrnoException).code === "ECONNRESET")
        post(t, path, body, true).then(resolve, reject);
      else reject(e);
    });
    req.end(body);
  });
}

/** null when `r` is a whole answer to a request with `stream`, else what is wrong with it. */
function checkAnswer(r: { status: number; body: string }, stream: boolean): string | null {
  if (r.status !== 200) return `status ${r.status}: ${r.body.slice(0, 200)}`;
  if (stream) return r.body.trimEnd().endsWith("data: [DONE]") ? null : "stream without data: [DONE]";
  try {
    const j = JSON.parse(r.body) as { choices?: unknown[] };
    return Array.isArray(j.choices) && j.choices.length > 0 ? null : "answer without choices";
  } catch {
    return `answer not JSON: ${r.body.slice(0, 200)}`;
  }
}

const CHAT = "/v1/chat/completions";

/** A router at `url`: one call. */
export function routerPath(name: string, url: string): LoadPath {
  const t = target(url);
  return {
    name,
    async send(body) {
      const r = await post(t, CHAT, Buffer.from(JSON.stringify(body)));
      return checkAnswer(r, body["stream"] === true);
    },
    close: () => t.agent.destroy(),
  };
}

/** The two legs made here: prefill on `prefillUrl`, decode on the decode workers in turn. */
export function directPath(prefillUrl: string, decodeUrls: string[]): LoadPath {
  const p = target(prefillUrl);
  const ds = decodeUrls.map(target);
  let next = 0;
  return {
    name: "direct",
    async send(body) {
      const first = await post(p, CHAT, Buffer.from(JSON.stringify(prefillBody(body))));
      const bad = checkAnswer(first, false);
      if (bad) return `prefill: ${bad}`;
      const params = (JSON.parse(first.body) as { kv_transfer_params?: unknown }).kv_transfer_params;
      if (params === undefined) return "prefill: answer without kv_transfer_params";
      const d = ds[next++ % ds.length]!;
      const second = await post(d, CHAT, Buffer.from(JSON.stringify({ ...body, kv_transfer_params: params })));
      const wrong = checkAnswer(second, body["stream"] === true);
      return wrong ? `decode: ${wrong}` : null;
    },
    close: () => [p, ...ds].forEach((t) => t.agent.destroy()),
  };
}

let counter = 0;

/** The client's body of request i: a short chat prompt of its own (no shared prefix), 16 output tokens. */
export function chatBody(stream: boolean): Record<string, unknown> {
  const i = counter++;
  return {
    model: MODEL,
    messages: [{ role: "user", content: `Request ${i}: say hello in a few words.` }],
    max_tokens: 16,
    ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
  };
}

export interface LoadRun {
  latencies: number[];
  failed: number;
  firstFailure: string | null;
}

/** n requests on `path`, open loop at `rate`; resolves when every one has finished. */
export function openLoop(path: LoadPath, n: number, rate: number, stream: boolean): Promise<LoadRun> {
  const run: LoadRun = { latencies: [], failed: 0, firstFailure: null };
  if (n <= 0) return Promise.resolve(run);
  const periodNs = 1e9 / rate;
  return new Promise((resolve) => {
    const t0 = process.hrtime.bigint() + 1_000_000n;
    let sent = 0;
    let finished = 0;
    const done = (failure: string | null, ms: number): void => {
      if (failure === null) run.latencies.push(ms);
      else {
        run.failed++;
        run.firstFailure ??= `${path.name}: ${failure}`;
      }
      if (++finished === n) resolve(run);
    };
    const one = (): void => {
      const body = chatBody(stream);
      const start = process.hrtime.bigint();
      const ms = (): number => Number(process.hrtime.bigint() - start) / 1e6;
      path.send(body).then(
        (failure) => done(failure, ms()),
        (e: Error) => done(e.message, ms()),
      );
    };
    const tick = (): void => {
      const elapsed = Number(process.hrtime.bigint() - t0);
      while (sent < n && sent * periodNs <= elapsed) {
        one();
        sent++;
      }
      if (sent < n) {
        const waitMs = (sent * periodNs - Number(process.hrtime.bigint() - t0)) / 1e6;
        setTimeout(tick, Math.max(1, Math.floor(waitMs)));
      }
    };
    setTimeout(tick, 1);
  });
}
