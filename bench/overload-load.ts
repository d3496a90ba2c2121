// The load generator of `dolphin bench overload` (overload.ts): open-loop POSTs at a fixed rate from their own
// processes, so the generator neither shares an event loop with what it measures nor limits it unseen.
//
// Each of `processes` children (`node -e`, CommonJS like harness.ts's children) sends every n-th request of one
// schedule: request i at start + i / rate, on the wall clock all children share. A child's connections are a
// keep-alive pool of at most `connections / processes` (node:http Agent): a request finding every connection busy waits in the
// pool, and that wait counts in its latency and its timeout, as it would for a real client. The pool's bound keeps
// every child far below its file-descriptor limit (checked at start), so the generator never fails with EMFILE.
//
// What the generator could not do is reported apart from what the proxy answered:
//   send lag   how late after its scheduled time a request was handed to node:http (the child's own event loop);
//   late       requests more than `lateMs` behind schedule when their turn came: not sent at all (sending them late
//              would be a burst the schedule never asked for), counted and reported, never the proxy's failure;
//   pool wait  from handing the request over to getting a connection (the proxy holding every pooled connection).
// Every request sent ends exactly once: a status, a reset (ECONNRESET, EPIPE, ECONNREFUSED, "socket hang up"), a
// hang (no whole answer within `timeoutMs` of being sent) or another error (by code).

import { Children } from "./harness.js";

export interface LoadOptions {
  url: string;
  /** Requests/s over all processes. */
  rate: number;
  seconds: number;
  timeoutMs: number;
  /** Generator processes (default: one per 1,500 requests/s, at most 4). */
  processes?: number;
  /** Pooled connections over all processes (default 4,096: see DEFAULT_CONNECTIONS). */
  connections?: number;
  /** A request this far behind schedule is not sent (default 200 ms). */
  lateMs?: number;
  /** The POST body of request i; default: a short chat request. */
  model: string;
  progress?: (line: string) => void;
}

export interface LoadResult {
  /** Requests on the schedule. */
  scheduled: number;
  sent: number;
  /** Not sent: more than late_ms behind schedule when their turn came (the generator's shortfall). */
  late: number;
  /** Answers by status: "200", "429", "503", and any other status under its own key. */
  statuses: Record<string, number>;
  /** Answers other than 200 by "status error.code" ("503 overloaded", "502 decode_failed", …). */
  answers_by_code: Record<string, number>;
  /** Connection reset (ECONNRESET, EPIPE, ECONNREFUSED, socket hang up) before a whole answer. */
  resets: number;
  /** No whole answer within the timeout. */
  hangs: number;
  /**
   * Where each hang was when its time ran out: waiting in the client's own pool for a connection (in_pool), on a new
   * connection the proxy had not accepted (connecting), sent whole with no answer begun (awaiting_answer), or with
   * the answer begun but not ended (reading_answer). The first two never reached the proxy's handler.
   */
  hangs_by_stage: Record<HangStage, number>;
  /** Any other client error, by code (first one in first_error). */
  errors: number;
  errors_by_code: Record<string, number>;
  first_error: string | null;
  /** Latency of 200s and of 429/503s, from sending to the answer's end, ms. */
  okMs: number[];
  shedMs: number[];
  /** Send lag and pool wait of every request sent, ms. */
  lagMs: number[];
  poolWaitMs: number[];
  /** Connections the children opened, in all (a keep-alive pool reuses them). */
  connections: number;
  /** The children's soft file-descriptor limit, and the most connections one child held at once. */
  fd_limit: number | null;
  max_open_sockets: number;
  /** From the schedule's start to the last request's end, ms. */
  span_ms: number;
  /** CPU seconds (user + system) the children used in all, start-up included: is the generator itself starved? */
  cpu_s: number;
  /**
   * The children's own event loops over their run: the worst and 99th-percentile delay of a 10 ms timer (ms, the
   * worst child's), and the share of time busy (the busiest child's). A starved generator reads answers late, and
   * that shows here, apart from what the proxy did.
   */
  loop_lag_ms: { p99: number; max: number };
  loop_utilization: number;
}

export type HangStage = "in_pool" | "connecting" | "awaiting_answer" | "reading_answer";
export const HANG_STAGES: readonly HangStage[] = ["in_pool", "connecting", "awaiting_answer", "reading_answer"];

/**
 * More connections than the proxy admits requests (max_inflight + max_queued: 1,024 + 2,048 by default), so at any
 * overload the excess waits in the proxy, where admission control can answer it, and not in the generator's pool,
 * where no server could. Far below the usual open-file limits (checked in each child).
 */
export const DEFAULT_CONNECTIONS = 4096;
/** A request more behind schedule than this is not sent (late). */
export const DEFAULT_LATE_MS = 200;

/** Generator processes for a rate: one per 1,500 requests/s (what one sustains beside the proxy), at most 4. */
export function defaultProcesses(rate: number): number {
  return Math.min(4, Math.max(1, Math.ceil(rate / 1500)));
}

/** Per-child counts and samples, as one JSON line on stdout when its share of the schedule has ended. */
const GENERATOR_SCRIPT = `
const http = require("node:http");
const fs = require("node:fs");
const cfg = JSON.parse(process.env.DOLPHIN_BENCH_CHILD);
process.stdin.on("end", () => process.exit(0)); process.stdin.resume();
const u = new URL(cfg.url);
// Linux: the soft limit on open files; the pool must stay well under it (connections, plus the process's own fds)
let fdLimit = null;
try { const m = /Max open files\\s+(\\d+)/.exec(fs.readFileSync("/proc/self/limits", "utf8")); if (m) fdLimit = Number(m[1]); } catch {}
if (fdLimit !== null && cfg.maxSockets + 64 > fdLimit) {
  process.stdout.write(JSON.stringify({ fatal: "maxSockets " + cfg.maxSockets + " does not fit the open-file limit " + fdLimit }) + "\\n");
  process.exit(1);
}
// free connections close after 4 s idle: under the 5 s keep-alive timeout of a Node server, so the pool never reuses one the server is closing
const agent = new http.Agent({ keepAlive: true, maxSockets: cfg.maxSockets, maxFreeSockets: cfg.maxSockets, timeout: 4000, scheduling: "lifo" });
const RESET = new Set(["ECONNRESET", "EPIPE", "ECONNREFUSED"]);
const r = { scheduled: 0, sent: 0, late: 0, statuses: {}, resets: 0, hangs: 0, errors: 0, errors_by_code: {}, first_error: null,
  hangs_by_stage: { in_pool: 0, connecting: 0, awaiting_answer: 0, reading_answer: 0 },
  answers_by_code: {}, okMs: [], shedMs: [], lagMs: [], poolWaitMs: [], connections: 0, fd_limit: fdLimit, max_open_sockets: 0, span_ms: 0, cpu_s: 0,
  loop_lag_ms: { p99: 0, max: 0 }, loop_utilization: 0 };
// this child's own loop, reported so that a starved generator is told apart from a slow proxy
const { monitorEventLoopDelay } = require("node:perf_hooks");
const loopDelay = monitorEventLoopDelay({ resolution: 10 }); loopDelay.enable();
let loopStart = null;
let open = 0, ended = 0;
const periodMs = 1000 / cfg.rate;
const total = Math.round(cfg.rate * cfg.seconds);
const mine = []; for (let i = cfg.index; i < total; i += cfg.processes) mine.push(i);
r.scheduled = mine.length;
const now = () => performance.timeOrigin + performance.now();
const finishIfDone = () => {
  if (next === mine.length && ended === r.sent) {
    agent.destroy();
    const cpu = process.cpuUsage();
    r.cpu_s = (cpu.user + cpu.system) / 1e6;
    loopDelay.disable();
    const beyond = (ns) => Math.max(0, Math.round((ns / 1e6 - 10) * 100) / 100);
    r.loop_lag_ms = { p99: beyond(loopDelay.percentile(99)), max: beyond(loopDelay.max) };
    if (loopStart) r.loop_utilization = Math.round(performance.eventLoopUtilization(loopStart).utilization * 1000) / 1000;
    process.stdout.write(JSON.stringify(r) + "\\n", () => process.exit(0));
  }
};
const send = (i, lag) => {
  const t = performance.now();
  let done = false, gotSocket = false, connected = false, answering = false;
  const finish = (what) => { if (done) return; done = true; clearTimeout(timer); what(); ended++; r.span_ms = Math.max(r.span_ms, now() - cfg.startMs); finishIfDone(); };
  const failure = (e) => {
    if (RESET.has(e.code || "") || e.message === "socket hang up") r.resets++;
    else { r.errors++; const k = e.code || e.message; r.errors_by_code[k] = (r.errors_by_code[k] || 0) + 1; if (r.first_error === null) r.first_error = ((e.code || "") + " " + e.message).trim(); }
  };
  const body = '{"model":' + JSON.stringify(cfg.model) + ',"messages":[{"role":"user","content":"Request ' + i + ': say hello in a few words."}],"max_tokens":' + cfg.maxTokens + '}';
  const req = http.request({ host: u.hostname, port: u.port, path: "/v1/chat/completions", method: "POST", agent,
    headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) } });
  r.sent++; r.lagMs.push(Math.round(lag * 100) / 100);
  const timer = setTimeout(() => {
    const stage = !gotSocket ? "in_pool" : !connected ? "connecting" : !answering ? "awaiting_answer" : "reading_answer";
    finish(() => { r.hangs++; r.hangs_by_stage[stage]++; }); req.destroy();
  }, cfg.timeoutMs);
  req.on("socket", (s) => {
    if (gotSocket) return; gotSocket = true;
    if (s.connecting) s.once("connect", () => { connected = true; }); else connected = true;
    r.poolWaitMs.push(Math.round((performance.now() - t) * 100) / 100);
    if (!s.__counted) { s.__counted = true; r.connections++; open++; if (open > r.max_open_sockets) r.max_open_sockets = open; s.once("close", () => open--); }
  });
  req.on("response", (res) => {
    answering = true;
    // a 200's body is dropped; any other's is read for its error code (a few hundred bytes)
    let text = "";
    if (res.statusCode === 200) res.resume(); else res.setEncoding("utf8").on("data", (c) => { if (text.length < 4096) text += c; });
    res.on("end", () => finish(() => {
      const status = String(res.statusCode);
      r.statuses[status] = (r.statuses[status] || 0) + 1;
      if (status !== "200") {
        let code = "?"; try { code = String(JSON.parse(text).error.code); } catch {}
        const k = status + " " + code; r.answers_by_code[k] = (r.answers_by_code[k] || 0) + 1;
      }
      const ms = Math.round((performance.now() - t) * 100) / 100;
      if (status === "200") r.okMs.push(ms); else if (status === "503" || status === "429") r.shedMs.push(ms);
    }));
    res.on("error", (e) => finish(() => failure(e)));
  });
  req.on("error", (e) => finish(() => failure(e)));
  req.end(body);
};
let next = 0;
const tick = () => {
  const t = now();
  while (next < mine.length) {
    const due = cfg.startMs + mine[next] * periodMs;
    if (due > t) break;
    next++;
    const lag = t - due;
    if (lag > cfg.lateMs) r.late++; else send(mine[next - 1], lag);
  }
  if (next < mine.length) setTimeout(tick, Math.max(0, Math.min(1, cfg.startMs + mine[next] * periodMs - now())));
  else finishIfDone();
};
setInterval(() => process.stderr.write(JSON.stringify({ sent: r.sent, ended, late: r.late, statuses: r.statuses, resets: r.resets, hangs: r.hangs, errors: r.errors, open }) + "\\n"), 5000).unref();
setTimeout(() => { loopDelay.reset(); loopStart = performance.eventLoopUtilization(); tick(); }, Math.max(0, cfg.startMs - now()));
`;

/** Runs the schedule from `processes` children and merges what they saw. */
export async function generateLoad(o: LoadOptions): Promise<LoadResult> {
  const processes = o.processes ?? defaultProcesses(o.rate);
  const maxSockets = Math.ceil((o.connections ?? DEFAULT_CONNECTIONS) / processes);
  const lateMs = o.lateMs ?? DEFAULT_LATE_MS;
  const children = new Children();
  try {
    // everyone starts together, far enough ahead for the children to load
    const startMs = Date.now() + 1000 + 100 * processes;
    const runs = Array.from({ length: processes }, (_, index) => {
      const c = children.spawn(`generator ${index}`, ["-e", GENERATOR_SCRIPT], {
        DOLPHIN_BENCH_CHILD: JSON.stringify({
          url: o.url,
          rate: o.rate,
          seconds: o.seconds,
          timeoutMs: o.timeoutMs,
          processes,
          index,
          maxSockets,
          lateMs,
          startMs,
          model: o.model,
          maxTokens: 16,
        }),
      });
      let lastProgress = "";
      c.proc.stderr!.on("data", (s: string) => {
        const line = s.trim().split("\n").at(-1) ?? "";
        if (line.startsWith("{") && line !== lastProgress && index === 0 && o.progress) {
          lastProgress = line;
          o.progress(`  generator ${index}: ${line}`);
        }
      });
      return new Promise<LoadResult>((resolve, reject) => {
        let out = "";
        c.proc.stdout!.setEncoding("utf8").on("data", (s: string) => (out += s));
        c.proc.once("exit", (code) => {
          const line = out.trim().split("\n").at(-1) ?? "";
          let parsed: (LoadResult & { fatal?: string }) | null = null;
          try {
            parsed = JSON.parse(line) as LoadResult & { fatal?: string };
          } catch {
            parsed = null;
          }
          if (parsed && !parsed.fatal && code === 0) resolve(parsed);
          else
            reject(
              new Error(
                `bench overload: generator ${index} failed (exit ${code}): ${parsed?.fatal ?? c.stderrTail() ?? "(no output)"}`,
              ),
            );
        });
      });
    });
    return merge(await Promise.all(runs));
  } finally {
    await children.closeAll();
  }
}

function merge(parts: LoadResult[]): LoadResult {
  const sum = (k: "scheduled" | "sent" | "late" | "resets" | "hangs" | "errors" | "connections" | "cpu_s"): number =>
    parts.reduce((a, p) => a + p[k], 0);
  const counts = (k: "statuses" | "answers_by_code" | "errors_by_code"): Record<string, number> => {
    const out: Record<string, number> = {};
    for (const p of parts) for (const [s, n] of Object.entries(p[k])) out[s] = (out[s] ?? 0) + n;
    return out;
  };
  return {
    scheduled: sum("scheduled"),
    sent: sum("sent"),
    late: sum("late"),
    statuses: counts("statuses"),
    answers_by_code: counts("answers_by_code"),
    resets: sum("resets"),
    hangs: sum("hangs"),
    errors: sum("errors"),
    errors_by_code: counts("errors_by_code"),
    first_error: parts.find((p) => p.first_error !== null)?.first_error ?? null,
    okMs: parts.flatMap((p) => p.okMs),
    shedMs: parts.flatMap((p) => p.shedMs),
    lagMs: parts.flatMap((p) => p.lagMs),
    poolWaitMs: parts.flatMap((p) => p.poolWaitMs),
    connections: sum("connections"),
    fd_limit: parts[0]?.fd_limit ?? null,
    max_open_sockets: Math.max(0, ...parts.map((p) => p.max_open_sockets)),
    span_ms: Math.max(0, ...parts.map((p) => p.span_ms)),
    cpu_s: sum("cpu_s"),
    hangs_by_stage: Object.fromEntries(
      HANG_STAGES.map((k) => [k, parts.reduce((a, p) => a + p.hangs_by_stage[k], 0)]),
    ) as Record<HangStage, number>,
    loop_lag_ms: {
      p99: Math.max(0, ...parts.map((p) => p.loop_lag_ms.p99)),
      max: Math.max(0, ...parts.map((p) => p.loop_lag_ms.max)),
    },
    loop_utilization: Math.max(0, ...parts.map((p) => p.loop_utilization)),
  };
}
