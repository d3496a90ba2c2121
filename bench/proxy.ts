// `dolphin bench proxy`: the latency `dolphin serve` adds on loopback, next to what a bare pass-through adds, both
// measured in one run against the same constant-latency fake worker, plus the highest rate the proxy sustains.
//
// Processes (each its own event loop, so the load generator does not share one with what it measures):
//   upstream     a fake OpenAI worker (node:http, `node -e`): POST /v1/chat/completions answers a fixed small JSON
//                (usage included) or, with "stream":true, 8 SSE content chunks + a usage chunk + [DONE], all written
//                in the same tick. A prefill request (kv_transfer_params.do_remote_decode) gets kv_transfer_params
//                back. It listens on two ports: decode (every path) and prefill (the two-step detail).
//   passthrough  a bare pass-through (node:http, `node -e`): reads the body, JSON-parses it, forwards the raw bytes
//                to the upstream and pipes the answer back; no routing. Its client is a keep-alive node:http Agent,
//                the same client `dolphin serve` uses for workers (src/serve/proxy/upstream.ts), for a like-for-like
//                comparison (the issue says undici; the proxy does not use it, so neither does this).
//   proxy        `node bin/dolphin.js serve --config <tmp>` (via LAUNCH_SCRIPT): approximate mode (no /tokenize round trip), table
//                always-local, one decode worker: every request takes the one-hop local path.
//   proxy-remote the same with always-remote, one prefill + one decode worker: the two-step NixlConnector path
//                (non-streaming only, a detail).
// The load generator runs in this process: open loop (request i is sent at t0 + i/rate, whatever the answers do),
// node:http with a keep-alive Agent per target, process.hrtime.bigint() timing. A request's latency runs from just
// before http.request() to the response's `end` (the full body; for streams the last byte), and counts only when
// the status is 200 and the body has exactly the upstream's byte count.
//
// Fixed-rate measurement: per mode (non-streaming, streaming), a warm-up of every path, then `rounds` rounds (20 in a
// full run: 150 requests, 0.3 s per path and round); each round runs every path in turn for requests/rounds requests
// at `rate`, the order rotated by one each round, so drift and a burst of other work on the machine spread over all
// paths rather than landing on one. One path runs at a time, at the full rate.
// Added latency of a path at quantile q = q(path latencies) − q(direct latencies), q ∈ {p50, p99}: the difference of
// the quantiles (not the quantile of per-request differences, which do not exist in an open loop).
// Highest sustained rate: open-loop steps through the proxy (500, 1000, 1500, 2000, 2500, 3000, 4000, …), each
// `stepS` seconds; a step is good with no failed request, p99 ≤ 50 ms, and completions at ≥ 95 % of the rate; a bad
// step is run once more (one hiccup of a shared machine does not end the search); the answer is the last good step
// before the first step bad twice. Everything shares this machine's cores, the load generator included.

import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import os from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { quantile } from "../src/sim/metrics.js";

export interface Quantiles {
  p50: number;
  p99: number;
}

export interface RateStep {
  rate: number;
  requests: number;
  failed: number;
  p50_ms: number;
  p99_ms: number;
  /** Completions per second over the step (first send to last completion). */
  achieved_per_s: number;
  good: boolean;
}

export interface RateSearch {
  /** The highest good step (0 when even the first failed). */
  requests_per_s: number;
  /** Why the search stopped: the failing criterion of the step bad twice, or "last_step" when every step passed. */
  limited_by: "failures" | "p99" | "throughput" | "last_step";
  steps: RateStep[];
}

export interface PathCounts {
  direct: number;
  passthrough: number;
  proxy: number;
  proxy_remote?: number;
}

export interface ModeResult {
  /** Proxy latency − direct latency, per quantile, ms. */
  added_latency_ms: Quantiles;
  /** Pass-through latency − direct latency, per quantile, ms. */
  passthrough_added_latency_ms: Quantiles;
  /** The highest sustained open-loop rate through the proxy. */
  requests_per_s: number;
  /** The fixed rate of the latency measurement, requests/s. */
  rate: number;
  /** Measured requests per path (warm-up excluded). */
  requests: number;
  direct_latency_ms: Quantiles;
  passthrough_latency_ms: Quantiles;
  proxy_latency_ms: Quantiles;
  target: Target;
  /** How late the load generator sent, p99 over the fixed-rate runs (timer granularity; ms). */
  send_lag_p99_ms: number;
  /** Requests that failed (non-200, short body, connection error, 10 s timeout), per path, warm-up included. */
  failed: PathCounts;
  rate_search: RateSearch;
  /** The same search through the bare pass-through (full runs only), for scale. */
  passthrough_rate_search?: RateSearch;
}

export interface Target {
  /** proxy added p50 − pass-through added p50, ms; the target is ≤ p50_extra_limit_ms. */
  p50_extra_ms: number;
  p50_extra_limit_ms: number;
  /** proxy added p99 / pass-through added p99; the target is ≤ p99_ratio_limit (null when the divisor is ≤ 0). */
  p99_ratio: number | null;
  p99_ratio_limit: number;
  met: boolean;
}

export interface ProxyBenchResult extends ModeResult {
  streaming: ModeResult;
  /** With `runs` > 1: each run's result; every figure above is then the median of the runs' (counts of failed
   *  requests are summed, the target is judged on the medians of its two figures). */
  runs?: ProxyBenchResult[];
  /** always-remote: one prefill call then one decode call through the proxy, non-streaming, same rounds. */
  remote_path: { latency_ms: Quantiles; added_latency_ms: Quantiles; requests: number; failed: number };
  /** Every failed request of the run, all paths and modes (0 in a healthy run). */
  failed_requests: number;
  first_failure: string | null;
  runtime: {
    node: string;
    platform: string;
    cpus: number;
    cpu_model: string;
    quick: boolean;
    /** Whole measurements, each with fresh processes; the figures are their medians. */
    runs: number;
    rounds: number;
    warmup_per_path: number;
    step_s: number;
    p99_limit_ms: number;
    method: string;
  };
}

export interface ProxyBenchOptions {
  /** Measured requests per path and mode (default 3000; quick 300). */
  requests?: number;
  /** Fixed open-loop rate of the latency measurement (default 500 requests/s). */
  rate?: number;
  /** A short run: small warm-up, two rounds, a two-step rate search, no pass-through search. Not for figures. */
  quick?: boolean;
  /** Whole measurements to run one after another (default 1); the result holds their medians (see `runs`). */
  runs?: number;
  /** Extra node flags for the proxy children (e.g. ["--cpu-prof", "--cpu-prof-dir", dir] to profile). */
  proxyNodeArgs?: string[];
  /** Progress lines (default: none). */
  progress?: (line: string) => void;
}

const MODEL = "bench-model";
const P99_LIMIT_MS = 50;
const REQUEST_TIMEOUT_MS = 10_000;
const P50_EXTRA_LIMIT_MS = 0.3;
const P99_RATIO_LIMIT = 1.5;
const FULL_STEPS = [500, 1000, 1500, 2000, 2500, 3000, 4000, 5000, 6000, 7000, 8000, 10_000, 12_000, 16_000];

// ---- the fake worker's answers (built here, handed to the child, so the expected byte counts are known) --------

const USAGE = {
  prompt_tokens: 14,
  completion_tokens: 8,
  total_tokens: 22,
  prompt_tokens_details: { cached_tokens: 0 },
};
export const JSON_ANSWER = JSON.stringify({
  id: "chatcmpl-bench",
  object: "chat.completion",
  created: 0,
  model: MODEL,
  choices: [
    { index: 0, message: { role: "assistant", content: "Hello! How can I help you today?" }, finish_reason: "stop" },
  ],
  usage: USAGE,
});
export const SSE_EVENTS = [
  ...["Hello", "!", " How", " can", " I", " help", " you", " today?"].map(
    (piece, i) =>
      `data: ${JSON.stringify({ id: "chatcmpl-bench", object: "chat.completion.chunk", created: 0, model: MODEL, choices: [{ index: 0, delta: { content: piece }, finish_reason: i === 7 ? "stop" : null }] })}\n\n`,
  ),
  `data: ${JSON.stringify({ id: "chatcmpl-bench", object: "chat.completion.chunk", created: 0, model: MODEL, choices: [], usage: USAGE })}\n\n`,
  "data: [DONE]\n\n",
];
export const PREFILL_ANSWER = JSON.stringify({
  id: "chatcmpl-bench-prefill",
  object: "chat.completion",
  created: 0,
  model: MODEL,
  choices: [{ index: 0, message: { role: "assistant", content: "Hello" }, finish_reason: "length" }],
  usage: { ...USAGE, completion_tokens: 1, total_tokens: 15 },
  kv_transfer_params: {
    do_remote_prefill: true,
    do_remote_decode: false,
    remote_engine_id: "bench-prefill",
    remote_block_ids: [1, 2],
    remote_host: "127.0.0.1",
    remote_port: 5600,
    remote_request_id: "bench",
  },
});
export const EXPECTED_BYTES = { json: Buffer.byteLength(JSON_ANSWER), sse: Buffer.byteLength(SSE_EVENTS.join("")) };

// Children are CommonJS `node -e` scripts: no build step, and the same from src (vitest) and dist. Each prints one
// JSON line with its ports on stdout when listening, and exits when its stdin closes (the bench went away).
const CHILD_PRELUDE = `
const http = require("node:http");
const cfg = JSON.parse(process.env.DOLPHIN_BENCH_CHILD);
process.stdin.on("end", () => process.exit(0)); process.stdin.resume();
function listenAll(n, handler) {
  const servers = Array.from({ length: n }, () => { const s = http.createServer(handler); s.keepAliveTimeout = 60000; return s; });
  let left = n; const ports = [];
  servers.forEach((s, i) => s.listen(0, "127.0.0.1", () => { ports[i] = s.address().port; if (--left === 0) process.stdout.write(JSON.stringify({ ports }) + "\\n"); }));
}`;

export const UPSTREAM_SCRIPT = `${CHILD_PRELUDE}
const json = Buffer.from(cfg.json), prefill = Buffer.from(cfg.prefill), sse = cfg.sse.map((s) => Buffer.from(s));
listenAll(2, (req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    if (req.url === "/health") { res.writeHead(200, { "content-type": "application/json", "content-length": 2 }); res.end("{}"); return; }
    if (req.method !== "POST" || (req.url !== "/v1/chat/completions" && req.url !== "/v1/completions")) { res.writeHead(404, { "content-length": 0 }); res.end(); return; }
    const body = Buffer.concat(chunks).toString("utf8");
    if (body.includes('"do_remote_decode":true')) {
      res.writeHead(200, { "content-type": "application/json", "content-length": prefill.length }); res.end(prefill);
    } else if (body.includes('"stream":true')) {
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
      for (let i = 0; i < sse.length - 1; i++) res.write(sse[i]);
      res.end(sse[sse.length - 1]);
    } else {
      res.writeHead(200, { "content-type": "application/json", "content-length": json.length }); res.end(json);
    }
  });
});`;

export const PASSTHROUGH_SCRIPT = `${CHILD_PRELUDE}
const target = new URL(cfg.upstream);
const agent = new http.Agent({ keepAlive: true });
listenAll(1, (req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const raw = Buffer.concat(chunks);
    let body;
    try { body = JSON.parse(raw.toString("utf8")); } catch { body = undefined; }
    if (body === null || typeof body !== "object") { res.writeHead(400, { "content-length": 0 }); res.end(); return; }
    const up = http.request({ hostname: target.hostname, port: target.port, path: req.url, method: "POST", agent,
      headers: { "content-type": "application/json", "content-length": raw.length } }, (ur) => {
      const headers = { "content-type": ur.headers["content-type"] || "application/json" };
      if (ur.headers["content-length"] !== undefined) headers["content-length"] = ur.headers["content-length"];
      res.writeHead(ur.statusCode || 502, headers);
      ur.pipe(res);
      ur.on("error", () => res.destroy());
    });
    up.on("error", () => { if (!res.headersSent) res.writeHead(502, { "content-length": 0 }); res.end(); });
    res.on("close", () => { if (!res.writableFinished) up.destroy(); });
    up.end(raw);
  });
});`;

// `node bin/dolphin.js serve --config <file>`, run through a launcher that also exits when its stdin closes, so a
// proxy never outlives a bench killed outright (SIGKILL, or SIGTERM to the bench alone).
export const LAUNCH_SCRIPT = `
process.stdin.on("end", () => process.exit(0)); process.stdin.resume();
process.argv = [process.argv[0], ...JSON.parse(process.env.DOLPHIN_BENCH_ARGV)];
import(require("node:url").pathToFileURL(process.argv[1]).href).catch((e) => { console.error(e); process.exit(1); });`;

// ---- child processes (bench/envoy.ts uses these too) ---------------------------------------------------------------------------------------------

interface Child {
  name: string;
  proc: ChildProcess;
  stderrTail: () => string;
}

export class Children {
  private readonly list: Child[] = [];
  private readonly onExit = (): void => {
    for (const c of this.list) if (c.proc.exitCode === null && c.proc.signalCode === null) c.proc.kill("SIGKILL");
  };
  constructor() {
    process.once("exit", this.onExit);
  }

  spawn(name: string, args: string[], env: Record<string, string> = {}): Child {
    const proc = spawn(process.execPath, args, { stdio: ["pipe", "pipe", "pipe"], env: { ...process.env, ...env } });
    let tail = "";
    proc.stderr!.setEncoding("utf8").on("data", (s: string) => {
      tail = (tail + s).slice(-4000);
    });
    proc.stdin!.on("error", () => undefined);
    const child = { name, proc, stderrTail: () => tail.trim() };
    this.list.push(child);
    return child;
  }

  /** Resolves with the first stdout line (a node -e child's ports) or the proxy's URL from its stderr banner. */
  ready<T>(c: Child, parse: (stdout: string, stderr: string) => T | undefined, timeoutMs = 20_000): Promise<T> {
    return new Promise((resolve, reject) => {
      let out = "";
      let err = "";
      const check = (): void => {
        const v = parse(out, err);
        if (v !== undefined) finish(() => resolve(v));
      };
      const onOut = (s: string): void => {
        out += s;
        check();
      };
      const onErr = (s: string): void => {
        err += s;
        check();
      };
      const onExit = (code: number | null, signal: string | null): void =>
        finish(() =>
          reject(
            new Error(
              `bench proxy: ${c.name} exited (${signal ?? code}) before it was ready: ${c.stderrTail() || "(no stderr)"}`,
            ),
          ),
        );
      const timer = setTimeout(
        () =>
          finish(() => reject(new Error(`bench proxy: ${c.name} not ready within ${timeoutMs} ms: ${c.stderrTail()}`))),
        timeoutMs,
      );
      const finish = (then: () => void): void => {
        clearTimeout(timer);
        c.proc.stdout!.off("data", onOut);
        c.proc.stderr!.off("data", onErr);
        c.proc.off("exit", onExit);
        then();
      };
      c.proc.stdout!.setEncoding("utf8").on("data", onOut);
      c.proc.stderr!.on("data", onErr);
      c.proc.once("exit", onExit);
    });
  }

  /** Closes stdin and sends SIGTERM (a --cpu-prof profile still gets written), SIGKILL after 5 s. */
  async closeAll(): Promise<void> {
    await Promise.all(
      this.list.map(
        (c) =>
          new Promise<void>((resolve) => {
            const p = c.proc;
            if (p.exitCode !== null || p.signalCode !== null) return resolve();
            const kill = setTimeout(() => p.kill("SIGKILL"), 5000);
            p.once("exit", () => {
              clearTimeout(kill);
              resolve();
            });
            p.stdin!.end();
            p.kill("SIGTERM");
          }),
      ),
    );
    process.off("exit", this.onExit);
  }
}

export function repoRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const pkg = join(dir, "package.json");
    if (existsSync(pkg) && (JSON.parse(readFileSync(pkg, "utf8")) as { name?: string }).name === "dolphin-routing")
      return dir;
    const up = dirname(dir);
    if (up === dir) throw new Error("bench proxy: cannot find the dolphin-routing package root");
    dir = up;
  }
}

export const portsLine = (out: string): number[] | undefined => {
  const nl = out.indexOf("\n");
  return nl < 0 ? undefined : (JSON.parse(out.slice(0, nl)) as { ports: number[] }).ports;
};
export const proxyBanner = (_out: string, err: string): string | undefined =>
  /proxy at (http:\/\/[^\s,]+)/.exec(err)?.[1];

// ---- load generator ----------------------------------------------------------------------------------------------

export interface Endpoint {
  name: string;
  host: string;
  port: number;
  agent: http.Agent;
}

export function endpoint(name: string, url: string): Endpoint {
  const u = new URL(url);
  // timeout < the servers' 5 s keep-alive: an idle pooled socket is dropped by us first, not reset under a request
  return {
    name,
    host: u.hostname,
    port: Number(u.port),
    agent: new http.Agent({ keepAlive: true, maxSockets: 1024, timeout: 4000 }),
  };
}

function requestBody(i: number, stream: boolean): Buffer {
  const tail = stream ? `,"stream":true,"stream_options":{"include_usage":true}` : "";
  return Buffer.from(
    `{"model":"${MODEL}","messages":[{"role":"user","content":"Request ${i}: say hello in a few words."}],"max_tokens":16${tail}}`,
  );
}

export interface RunStats {
  /** Latencies of the successful requests, ms. */
  latencies: number[];
  failed: number;
  firstFailure: string | null;
  /** How late each request was sent against its schedule, ms. */
  lags: number[];
  /** First send to last completion, ms. */
  spanMs: number;
}

/** One request; `done(null, ms)` on a 200 with the full body, `done(reason)` otherwise. Retries once when a reused
 *  keep-alive socket turns out closed (Node's documented advice), as the proxy does. */
function sendOne(
  ep: Endpoint,
  body: Buffer,
  expectBytes: number,
  done: (failure: string | null, ms: number) => void,
  retried = false,
): void {
  const t0 = process.hrtime.bigint();
  let settled = false;
  const settle = (failure: string | null): void => {
    if (settled) return;
    settled = true;
    clearTimeout(timer);
    done(failure, Number(process.hrtime.bigint() - t0) / 1e6);
  };
  const req = http.request({
    host: ep.host,
    port: ep.port,
    path: "/v1/chat/completions",
    method: "POST",
    agent: ep.agent,
    headers: { "content-type": "application/json", "content-length": body.length },
  });
  const timer = setTimeout(
    () => req.destroy(new Error(`no answer within ${REQUEST_TIMEOUT_MS} ms`)),
    REQUEST_TIMEOUT_MS,
  );
  req.on("response", (res) => {
    let bytes = 0;
    res.on("data", (c: Buffer) => {
      bytes += c.length;
    });
    res.on("end", () => {
      if (res.statusCode !== 200) settle(`${ep.name}: status ${res.statusCode}`);
      else if (bytes !== expectBytes) settle(`${ep.name}: body of ${bytes} bytes, expected ${expectBytes}`);
      else settle(null);
    });
    res.on("error", (e) => settle(`${ep.name}: ${e.message}`));
    res.on("close", () => settle(`${ep.name}: connection closed mid-answer`));
  });
  req.on("error", (e) => {
    if (settled) return;
    if (!retried && req.reusedSocket && (e as NodeJS.ErrnoException).code === "ECONNRESET") {
      settled = true;
      clearTimeout(timer);
      sendOne(ep, body, expectBytes, done, true);
      return;
    }
    settle(`${ep.name}: ${e.message}`);
  });
  req.end(body);
}

let requestCounter = 0;

/** n requests to one endpoint, open loop at `rate`; resolves when every one has finished. */
export function openLoop(ep: Endpoint, n: number, rate: number, stream: boolean): Promise<RunStats> {
  const stats: RunStats = { latencies: [], failed: 0, firstFailure: null, lags: [], spanMs: 0 };
  if (n <= 0) return Promise.resolve(stats);
  const expect = stream ? EXPECTED_BYTES.sse : EXPECTED_BYTES.json;
  const periodNs = 1e9 / rate;
  return new Promise((resolve) => {
    const t0 = process.hrtime.bigint() + 1_000_000n;
    let sent = 0;
    let finished = 0;
    const onDone = (failure: string | null, ms: number): void => {
      if (failure === null) stats.latencies.push(ms);
      else {
        stats.failed++;
        stats.firstFailure ??= failure;
      }
      if (++finished === n) {
        stats.spanMs = Number(process.hrtime.bigint() - t0) / 1e6;
        resolve(stats);
      }
    };
    const tick = (): void => {
      const now = process.hrtime.bigint();
      const elapsed = Number(now - t0);
      while (sent < n && sent * periodNs <= elapsed) {
        stats.lags.push((elapsed - sent * periodNs) / 1e6);
        sendOne(ep, requestBody(requestCounter++, stream), expect, onDone);
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

// ---- statistics --------------------------------------------------------------------------------------------------

export const r3 = (x: number): number => Math.round(x * 1000) / 1000;

export function quantiles(values: number[]): Quantiles {
  const s = [...values].sort((a, b) => a - b);
  return { p50: r3(quantile(s, 0.5)), p99: r3(quantile(s, 0.99)) };
}

export const minus = (a: Quantiles, b: Quantiles): Quantiles => ({ p50: r3(a.p50 - b.p50), p99: r3(a.p99 - b.p99) });

function target(proxy: Quantiles, pass: Quantiles): Target {
  const extra = r3(proxy.p50 - pass.p50);
  const ratio = pass.p99 > 0 ? Math.round((proxy.p99 / pass.p99) * 100) / 100 : null;
  const p99ok = ratio === null ? proxy.p99 <= 0 : ratio <= P99_RATIO_LIMIT;
  return {
    p50_extra_ms: extra,
    p50_extra_limit_ms: P50_EXTRA_LIMIT_MS,
    p99_ratio: ratio,
    p99_ratio_limit: P99_RATIO_LIMIT,
    met: extra <= P50_EXTRA_LIMIT_MS && p99ok,
  };
}

// ---- the measurements --------------------------------------------------------------------------------------------

interface Plan {
  requests: number;
  rate: number;
  warmup: number;
  rounds: number;
  steps: number[];
  stepS: number;
  passthroughSearch: boolean;
}

class Tally {
  failed = 0;
  first: string | null = null;
  add(s: RunStats): void {
    this.failed += s.failed;
    if (s.failed) this.first ??= s.firstFailure;
  }
}

/** Warm-up, then `rounds` rounds of every path at the fixed rate, the order rotated each round. */
async function fixedRate(paths: Endpoint[], stream: boolean, plan: Plan, tally: Tally, progress: (l: string) => void) {
  const latencies = new Map<string, number[]>(paths.map((p) => [p.name, []]));
  const failed = new Map<string, number>(paths.map((p) => [p.name, 0]));
  const lags: number[] = [];
  const record = (p: Endpoint, s: RunStats, measured: boolean): void => {
    tally.add(s);
    failed.set(p.name, failed.get(p.name)! + s.failed);
    if (measured) {
      latencies.get(p.name)!.push(...s.latencies);
      lags.push(...s.lags);
    }
  };
  for (const p of paths) record(p, await openLoop(p, plan.warmup, plan.rate, stream), false);
  for (let r = 0; r < plan.rounds; r++) {
    const n = Math.floor(plan.requests / plan.rounds) + (r < plan.requests % plan.rounds ? 1 : 0);
    for (let k = 0; k < paths.length; k++) {
      const p = paths[(k + r) % paths.length]!;
      record(p, await openLoop(p, n, plan.rate, stream), true);
    }
    progress(`${stream ? "streaming" : "non-streaming"}: round ${r + 1}/${plan.rounds} done`);
  }
  return {
    latencies,
    failed,
    lagP99: r3(
      quantile(
        [...lags].sort((a, b) => a - b),
        0.99,
      ),
    ),
  };
}

async function rateSearch(
  ep: Endpoint,
  stream: boolean,
  plan: Plan,
  tally: Tally,
  progress: (l: string) => void,
): Promise<RateSearch> {
  const steps: RateStep[] = [];
  let best = 0;
  let limitedBy: RateSearch["limited_by"] = "last_step";
  const settle = (): Promise<void> => new Promise((r) => setTimeout(r, 300)); // let a backlog (GC, sockets) clear
  search: for (const rate of plan.steps) {
    for (let attempt = 0; attempt < 2; attempt++) {
      const n = Math.max(50, Math.round(rate * plan.stepS));
      const s = await openLoop(ep, n, rate, stream);
      tally.add(s);
      const q = quantiles(s.latencies);
      const achieved = Math.round((n - s.failed) / (s.spanMs / 1000));
      const why: RateSearch["limited_by"] | null =
        s.failed > 0 ? "failures" : !(q.p99 <= P99_LIMIT_MS) ? "p99" : achieved < 0.95 * rate ? "throughput" : null;
      steps.push({
        rate,
        requests: n,
        failed: s.failed,
        p50_ms: q.p50,
        p99_ms: q.p99,
        achieved_per_s: achieved,
        good: why === null,
      });
      progress(
        `${ep.name} ${stream ? "streaming" : "non-streaming"} at ${rate}/s: p50 ${q.p50} ms, p99 ${q.p99} ms, ${achieved}/s, ${s.failed} failed`,
      );
      await settle();
      if (why === null) {
        best = rate;
        limitedBy = "last_step";
        continue search;
      }
      limitedBy = why;
    }
    break;
  }
  return { requests_per_s: best, limited_by: limitedBy, steps };
}

async function measureMode(
  eps: { direct: Endpoint; passthrough: Endpoint; proxy: Endpoint; remote: Endpoint },
  stream: boolean,
  plan: Plan,
  tally: Tally,
  progress: (l: string) => void,
) {
  const paths = stream
    ? [eps.direct, eps.passthrough, eps.proxy]
    : [eps.direct, eps.passthrough, eps.proxy, eps.remote];
  const fixed = await fixedRate(paths, stream, plan, tally, progress);
  const q = (name: string): Quantiles => quantiles(fixed.latencies.get(name)!);
  const direct = q("direct");
  const passthrough = q("passthrough");
  const proxy = q("proxy");
  const search = await rateSearch(eps.proxy, stream, plan, tally, progress);
  const passSearch = plan.passthroughSearch
    ? await rateSearch(eps.passthrough, stream, plan, tally, progress)
    : undefined;
  const added = minus(proxy, direct);
  const passAdded = minus(passthrough, direct);
  const failed: PathCounts = {
    direct: fixed.failed.get("direct")!,
    passthrough: fixed.failed.get("passthrough")!,
    proxy: fixed.failed.get("proxy")!,
  };
  const mode: ModeResult = {
    added_latency_ms: added,
    passthrough_added_latency_ms: passAdded,
    requests_per_s: search.requests_per_s,
    rate: plan.rate,
    requests: plan.requests,
    direct_latency_ms: direct,
    passthrough_latency_ms: passthrough,
    proxy_latency_ms: proxy,
    target: target(added, passAdded),
    send_lag_p99_ms: fixed.lagP99,
    failed,
    rate_search: search,
    ...(passSearch ? { passthrough_rate_search: passSearch } : {}),
  };
  const remote = stream ? null : { latencies: q("proxy_remote"), failed: fixed.failed.get("proxy_remote")! };
  return { mode, remote, direct };
}

async function runOnce(opts: ProxyBenchOptions): Promise<ProxyBenchResult> {
  const quick = opts.quick ?? false;
  const plan: Plan = {
    requests: opts.requests ?? (quick ? 300 : 3000),
    rate: opts.rate ?? 500,
    warmup: quick ? 50 : 500,
    rounds: quick ? 2 : 20,
    steps: quick ? [500, 1000] : FULL_STEPS,
    stepS: quick ? 0.3 : 1.5,
    passthroughSearch: !quick,
  };
  if (!(Number.isInteger(plan.requests) && plan.requests >= 1))
    throw new Error("bench proxy: requests must be an integer ≥ 1");
  plan.rounds = Math.min(plan.rounds, plan.requests);
  if (!(plan.rate > 0 && Number.isFinite(plan.rate))) throw new Error("bench proxy: rate must be a number > 0");
  const progress = opts.progress ?? (() => undefined);
  const root = repoRoot();
  const bin = join(root, "bin/dolphin.js");
  const tmp = mkdtempSync(join(os.tmpdir(), "dolphin-bench-proxy-"));
  const children = new Children();
  const eps: Endpoint[] = [];
  try {
    const upstream = children.spawn("upstream", ["-e", UPSTREAM_SCRIPT], {
      DOLPHIN_BENCH_CHILD: JSON.stringify({ json: JSON_ANSWER, sse: SSE_EVENTS, prefill: PREFILL_ANSWER }),
    });
    const [decodePort, prefillPort] = await children.ready(upstream, portsLine);
    const decodeUrl = `http://127.0.0.1:${decodePort}`;
    const prefillUrl = `http://127.0.0.1:${prefillPort}`;
    const passthrough = children.spawn("passthrough", ["-e", PASSTHROUGH_SCRIPT], {
      DOLPHIN_BENCH_CHILD: JSON.stringify({ upstream: decodeUrl }),
    });
    const proxyConfig = (table: string, workers: unknown[]): string => {
      const file = join(tmp, `${table}.json`);
      writeFileSync(
        file,
        JSON.stringify({
          listen: { host: "127.0.0.1", port: 0 },
          model: MODEL,
          table,
          mode: "approximate",
          workers,
          log_level: "warn",
        }),
      );
      return file;
    };
    const decodeWorker = { id: "decode-0", url: decodeUrl, role: "decode" };
    const serve = (name: string, config: string): Child =>
      children.spawn(name, [...(opts.proxyNodeArgs ?? []), "-e", LAUNCH_SCRIPT], {
        DOLPHIN_BENCH_ARGV: JSON.stringify([bin, "serve", "--config", config]),
      });
    const local = serve("proxy", proxyConfig("always-local", [decodeWorker]));
    const remote = serve(
      "proxy-remote",
      proxyConfig("always-remote", [{ id: "prefill-0", url: prefillUrl, role: "prefill" }, decodeWorker]),
    );
    const [passPorts, localUrl, remoteUrl] = await Promise.all([
      children.ready(passthrough, portsLine),
      children.ready(local, proxyBanner),
      children.ready(remote, proxyBanner),
    ]);
    const targets = {
      direct: endpoint("direct", decodeUrl),
      passthrough: endpoint("passthrough", `http://127.0.0.1:${passPorts[0]}`),
      proxy: endpoint("proxy", localUrl),
      remote: endpoint("proxy_remote", remoteUrl),
    };
    eps.push(...Object.values(targets));
    progress(
      `upstream ${decodeUrl} (prefill ${prefillUrl}), passthrough ${passPorts[0]}, proxy ${localUrl}, proxy-remote ${remoteUrl}`,
    );

    const tally = new Tally();
    const plain = await measureMode(targets, false, plan, tally, progress);
    const streaming = await measureMode(targets, true, plan, tally, progress);
    const remoteQ = plain.remote!.latencies;
    plain.mode.failed.proxy_remote = plain.remote!.failed;
    const cpus = os.cpus();
    return {
      ...plain.mode,
      streaming: streaming.mode,
      remote_path: {
        latency_ms: remoteQ,
        added_latency_ms: minus(remoteQ, plain.direct),
        requests: plan.requests,
        failed: plain.remote!.failed,
      },
      failed_requests: tally.failed,
      first_failure: tally.first,
      runtime: {
        node: process.version,
        platform: `${process.platform}-${process.arch}`,
        cpus: cpus.length,
        cpu_model: cpus[0]?.model.trim() ?? "unknown",
        quick,
        runs: 1,
        rounds: plan.rounds,
        warmup_per_path: plan.warmup,
        step_s: plan.stepS,
        p99_limit_ms: P99_LIMIT_MS,
        method:
          "loopback; fake upstream, pass-through, proxies each in their own node process; open-loop load generator in the bench " +
          "process (node:http keep-alive, hrtime); paths run one at a time in rotated rounds; added = quantile(path) − quantile(direct)",
      },
    };
  } finally {
    for (const ep of eps) ep.agent.destroy();
    await children.closeAll();
    rmSync(tmp, { recursive: true, force: true });
  }
}

/** The proxy bench, `runs` times over (default once): one run's result, or the medians of several (see `runs`). */
export async function runProxyBench(opts: ProxyBenchOptions = {}): Promise<ProxyBenchResult> {
  const runs = opts.runs ?? 1;
  if (!(Number.isInteger(runs) && runs >= 1)) throw new Error("bench proxy: runs must be an integer ≥ 1");
  const progress = opts.progress ?? (() => undefined);
  const results: ProxyBenchResult[] = [];
  for (let i = 0; i < runs; i++) {
    if (runs > 1) progress(`run ${i + 1}/${runs}`);
    results.push(await runOnce(opts));
  }
  return runs === 1 ? results[0]! : medianOfRuns(results);
}

// ---- several runs ------------------------------------------------------------------------------------------------

/** The median of an odd count, the mean of the two middle values of an even one. */
function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return r3(s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2);
}

const medianQ = (qs: Quantiles[]): Quantiles => ({
  p50: median(qs.map((q) => q.p50)),
  p99: median(qs.map((q) => q.p99)),
});

function medianMode(ms: ModeResult[]): ModeResult {
  const extra = median(ms.map((m) => m.target.p50_extra_ms));
  const ratios = ms.map((m) => m.target.p99_ratio).filter((x): x is number => x !== null);
  const ratio = ratios.length === ms.length ? Math.round(median(ratios) * 100) / 100 : null;
  const sum = (k: keyof PathCounts): number => ms.reduce((a, m) => a + (m.failed[k] ?? 0), 0);
  // the rate search shown is the one of the run whose highest rate is the median (the lower middle one)
  const bySearch = [...ms].sort((a, b) => a.requests_per_s - b.requests_per_s);
  const middle = bySearch[(bySearch.length - 1) >> 1]!;
  const first = ms[0]!;
  return {
    added_latency_ms: medianQ(ms.map((m) => m.added_latency_ms)),
    passthrough_added_latency_ms: medianQ(ms.map((m) => m.passthrough_added_latency_ms)),
    requests_per_s: median(ms.map((m) => m.requests_per_s)),
    rate: first.rate,
    requests: first.requests,
    direct_latency_ms: medianQ(ms.map((m) => m.direct_latency_ms)),
    passthrough_latency_ms: medianQ(ms.map((m) => m.passthrough_latency_ms)),
    proxy_latency_ms: medianQ(ms.map((m) => m.proxy_latency_ms)),
    target: {
      p50_extra_ms: extra,
      p50_extra_limit_ms: P50_EXTRA_LIMIT_MS,
      p99_ratio: ratio,
      p99_ratio_limit: P99_RATIO_LIMIT,
      met: extra <= P50_EXTRA_LIMIT_MS && ratio !== null && ratio <= P99_RATIO_LIMIT,
    },
    send_lag_p99_ms: median(ms.map((m) => m.send_lag_p99_ms)),
    failed: {
      direct: sum("direct"),
      passthrough: sum("passthrough"),
      proxy: sum("proxy"),
      ...(first.failed.proxy_remote !== undefined ? { proxy_remote: sum("proxy_remote") } : {}),
    },
    rate_search: middle.rate_search,
    ...(middle.passthrough_rate_search ? { passthrough_rate_search: middle.passthrough_rate_search } : {}),
  };
}

/** Several runs as one result: each figure the median of the runs', failures summed, each run kept under `runs`. */
export function medianOfRuns(rs: ProxyBenchResult[]): ProxyBenchResult {
  const first = rs[0]!;
  return {
    ...medianMode(rs),
    streaming: medianMode(rs.map((r) => r.streaming)),
    remote_path: {
      latency_ms: medianQ(rs.map((r) => r.remote_path.latency_ms)),
      added_latency_ms: medianQ(rs.map((r) => r.remote_path.added_latency_ms)),
      requests: first.remote_path.requests,
      failed: rs.reduce((a, r) => a + r.remote_path.failed, 0),
    },
    failed_requests: rs.reduce((a, r) => a + r.failed_requests, 0),
    first_failure: rs.find((r) => r.first_failure !== null)?.first_failure ?? null,
    runtime: { ...first.runtime, runs: rs.length },
    runs: rs,
  };
}

export function formatProxyBench(r: ProxyBenchResult): string {
  const f = (x: number): string => x.toFixed(3).padStart(8);
  const q = (x: Quantiles): string => `${f(x.p50)} ${f(x.p99)}`;
  const mode = (name: string, m: ModeResult): string[] => [
    `${name.padEnd(15)} ${q(m.direct_latency_ms)}   ${q(m.passthrough_latency_ms)}   ${q(m.proxy_latency_ms)}   ${q(m.passthrough_added_latency_ms)}   ${q(m.added_latency_ms)}`,
  ];
  const tgt = (name: string, t: Target): string =>
    `${name}: proxy − pass-through at p50 ${t.p50_extra_ms >= 0 ? "+" : ""}${t.p50_extra_ms} ms (≤ ${t.p50_extra_limit_ms}), ` +
    `added p99 ratio ${t.p99_ratio ?? "n/a"}× (≤ ${t.p99_ratio_limit}×): ${t.met ? "met" : "MISSED"}`;
  const rate = (name: string, m: ModeResult): string =>
    `${name}: ${m.requests_per_s} req/s through the proxy (stopped by ${m.rate_search.limited_by})` +
    (m.passthrough_rate_search
      ? `, ${m.passthrough_rate_search.requests_per_s} req/s through the pass-through (${m.passthrough_rate_search.limited_by})`
      : "");
  const h = (s: string, w = 17): string => s.padStart(w);
  return [
    `latency, ms, open loop at ${r.rate} req/s, ${r.requests} requests per path in ${r.runtime.rounds} rotated rounds (loopback)` +
      (r.runtime.runs > 1 ? `; medians of ${r.runtime.runs} runs` : ""),
    `${"".padEnd(15)} ${h("direct p50/p99")}   ${h("pass-through")}   ${h("proxy")}   ${h("pass-thr. added")}   ${h("proxy added")}`,
    ...mode("non-streaming", r),
    ...mode("streaming", r.streaming),
    `remote path (always-remote, prefill + decode calls): ${f(r.remote_path.latency_ms.p50).trim()} / ${f(r.remote_path.latency_ms.p99).trim()} ms, ` +
      `${r.remote_path.added_latency_ms.p50} / ${r.remote_path.added_latency_ms.p99} ms over direct`,
    tgt("target, non-streaming", r.target),
    tgt("target, streaming", r.streaming.target),
    `highest sustained rate (p99 ≤ ${r.runtime.p99_limit_ms} ms, no failures, ≥ 95 % completed), steps of ${r.runtime.step_s} s:`,
    `  ${rate("non-streaming", r)}`,
    `  ${rate("streaming", r.streaming)}`,
    `failed requests: ${r.failed_requests}${r.first_failure ? ` (first: ${r.first_failure})` : ""}; send lag p99 ${r.send_lag_p99_ms} ms`,
    `${r.runtime.node} ${r.runtime.platform}, ${r.runtime.cpus} CPUs (${r.runtime.cpu_model}); load generator, proxy and workers share them`,
  ].join("\n");
}
