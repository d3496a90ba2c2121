// `dolphin bench overload`: what the proxy answers at twice the highest rate it sustains (issue 14's target: every
// request answered 200, 429 or 503 within its timeout, no reset, no hang, memory bounded).
//
// Processes, as in bench/proxy.ts (whose children and load generator this reuses): the fake OpenAI worker (answers
// at once) and `dolphin serve` (approximate, always-local, one decode worker), each its own node process; the load
// generator in this process. With a worker that answers at once, the proxy's own CPU is what saturates, so the
// in-flight and queue limits do not trip and the event-loop-lag shedding (admission.ts) is what is measured.
//
// 1. Sustained rate (unless given): open-loop steps through the proxy, `stepS` each, good with no failure, p99 ≤
//    50 ms and ≥ 95 % of the rate completed (bench proxy's criteria); the last good step before a step bad twice.
// 2. Overload: open loop at `factor` × that rate for `durationS`, over a keep-alive pool with no socket limit (a new
//    connection whenever every open one is busy). Each request ends as a status (200, 429, 503, other), a reset
//    (ECONNRESET, EPIPE, "socket hang up"), a hang (no answer within `timeoutS`) or another error. The proxy's
//    resident memory is read from /proc every second (Linux; null elsewhere); its shed counts from /metrics after.

import { readFileSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import os from "node:os";
import { join } from "node:path";
import { quantile } from "../src/sim/metrics.js";
import {
  Children,
  endpoint,
  JSON_ANSWER,
  LAUNCH_SCRIPT,
  openLoop,
  portsLine,
  PREFILL_ANSWER,
  proxyBanner,
  quantiles,
  r3,
  repoRoot,
  SSE_EVENTS,
  UPSTREAM_SCRIPT,
  type Endpoint,
} from "./proxy.js";

const MODEL = "bench-model";
const P99_LIMIT_MS = 50;
const STEPS = [250, 500, 750, 1000, 1250, 1500, 2000, 2500, 3000, 4000, 5000];

export interface OverloadBenchOptions {
  /** The sustained rate to double (default: found by a search). */
  rate?: number;
  /** Overload factor (default 2). */
  factor?: number;
  /** Seconds of overload (default 60; quick 5). */
  durationS?: number;
  /** A request not answered within this long is a hang (default 30 s). */
  timeoutS?: number;
  /** admission.max_event_loop_lag_ms for the proxy (default: the proxy's default; 0 turns lag shedding off). */
  maxEventLoopLagMs?: number;
  /** Short: search steps of 1 s up to 500 req/s, 5 s of overload. Not for figures. */
  quick?: boolean;
  progress?: (line: string) => void;
}

export interface Latency {
  p50: number;
  p99: number;
  max: number;
}

export interface OverloadBenchResult {
  sustained_per_s: number;
  sustained_from: "search" | "given";
  /** The overload rate, requests/s. */
  rate: number;
  duration_s: number;
  timeout_s: number;
  sent: number;
  /** Answers by status: "200", "429", "503", and any other status under its own key. */
  statuses: Record<string, number>;
  /** Connection reset (ECONNRESET, EPIPE, socket hang up) before a whole answer. */
  resets: number;
  /** No whole answer within timeout_s. */
  hangs: number;
  /** Any other client error (first one in first_error). */
  errors: number;
  first_error: string | null;
  /** Every request answered 200, 429 or 503 within its timeout: the target. */
  all_answered: boolean;
  latency_ms: { ok: Latency | null; shed: Latency | null };
  /** The proxy's resident memory during the overload, MB (null where /proc is missing). */
  proxy_rss_mb: { before: number | null; max: number | null; after: number | null };
  /** dolphin_shed_total by reason, read after the overload. */
  shed_by_reason: Record<string, number>;
  /** How late the generator sent, p99, ms (its own CPU share on this machine). */
  send_lag_p99_ms: number;
  search: Array<{
    rate: number;
    p50_ms: number;
    p99_ms: number;
    achieved_per_s: number;
    failed: number;
    good: boolean;
  }>;
  runtime: { node: string; cpus: number; max_event_loop_lag_ms: number | "default"; method: string };
}

export async function runOverloadBench(opts: OverloadBenchOptions = {}): Promise<OverloadBenchResult> {
  const quick = opts.quick ?? false;
  const factor = opts.factor ?? 2;
  const durationS = opts.durationS ?? (quick ? 5 : 60);
  const timeoutS = opts.timeoutS ?? 30;
  for (const [name, v] of [
    ["factor", factor],
    ["duration", durationS],
    ["timeout", timeoutS],
    ...(opts.rate !== undefined ? [["rate", opts.rate] as const] : []),
  ] as const)
    if (!(typeof v === "number" && v > 0 && Number.isFinite(v)))
      throw new Error(`bench overload: ${name} must be a number > 0`);
  const progress = opts.progress ?? (() => undefined);
  const tmp = mkdtempSync(join(os.tmpdir(), "dolphin-bench-overload-"));
  const children = new Children();
  let ep: Endpoint | null = null;
  try {
    const upstream = children.spawn("upstream", ["-e", UPSTREAM_SCRIPT], {
      DOLPHIN_BENCH_CHILD: JSON.stringify({ json: JSON_ANSWER, sse: SSE_EVENTS, prefill: PREFILL_ANSWER }),
    });
    const [decodePort] = await children.ready(upstream, portsLine);
    const config = join(tmp, "serve.json");
    writeFileSync(
      config,
      JSON.stringify({
        listen: { host: "127.0.0.1", port: 0 },
        model: MODEL,
        table: "always-local",
        mode: "approximate",
        workers: [{ id: "decode-0", url: `http://127.0.0.1:${decodePort}`, role: "decode" }],
        log_level: "warn",
        ...(opts.maxEventLoopLagMs !== undefined
          ? { admission: { max_event_loop_lag_ms: opts.maxEventLoopLagMs } }
          : {}),
      }),
    );
    const proxy = children.spawn("proxy", ["-e", LAUNCH_SCRIPT], {
      DOLPHIN_BENCH_ARGV: JSON.stringify([join(repoRoot(), "bin/dolphin.js"), "serve", "--config", config]),
    });
    const url = await children.ready(proxy, proxyBanner);
    ep = endpoint("proxy", url);

    const search: OverloadBenchResult["search"] = [];
    let sustained = opts.rate ?? 0;
    if (opts.rate === undefined) {
      const stepS = quick ? 1 : 2;
      steps: for (const rate of quick ? STEPS.slice(0, 2) : STEPS) {
        for (let attempt = 0; attempt < 2; attempt++) {
          const n = Math.max(50, Math.round(rate * stepS));
          const s = await openLoop(ep, n, rate, false);
          const q = quantiles(s.latencies);
          const achieved = Math.round((n - s.failed) / (s.spanMs / 1000));
          const good = s.failed === 0 && q.p99 <= P99_LIMIT_MS && achieved >= 0.95 * rate;
          search.push({ rate, p50_ms: q.p50, p99_ms: q.p99, achieved_per_s: achieved, failed: s.failed, good });
          progress(`sustained? ${rate}/s: p99 ${q.p99} ms, ${achieved}/s, ${s.failed} failed: ${good ? "yes" : "no"}`);
          await new Promise((r) => setTimeout(r, 300));
          if (good) {
            sustained = rate;
            continue steps;
          }
        }
        break;
      }
      if (sustained === 0) sustained = STEPS[0]!; // not even the first step: overload from there
    }
    const rate = Math.round(sustained * factor);
    progress(`overload: ${rate} req/s (${factor}× ${sustained}) for ${durationS} s`);
    const rss = new RssSampler(proxy.proc.pid);
    const run = await overload(url, rate, durationS, timeoutS * 1000, progress);
    const rssMb = rss.stop();
    const shed = await shedCounts(url);
    const statuses = run.statuses;
    const answeredOk = (statuses["200"] ?? 0) + (statuses["429"] ?? 0) + (statuses["503"] ?? 0);
    return {
      sustained_per_s: sustained,
      sustained_from: opts.rate === undefined ? "search" : "given",
      rate,
      duration_s: durationS,
      timeout_s: timeoutS,
      sent: run.sent,
      statuses,
      resets: run.resets,
      hangs: run.hangs,
      errors: run.errors,
      first_error: run.firstError,
      all_answered: answeredOk === run.sent,
      latency_ms: { ok: latency(run.okMs), shed: latency(run.shedMs) },
      proxy_rss_mb: rssMb,
      shed_by_reason: shed,
      send_lag_p99_ms: latency(run.lagMs)?.p99 ?? 0,
      search,
      runtime: {
        node: process.version,
        cpus: os.cpus().length,
        max_event_loop_lag_ms: opts.maxEventLoopLagMs ?? "default",
        method:
          "loopback; fake worker and dolphin serve in their own node processes, open-loop generator in the bench process " +
          "(node:http keep-alive, no socket limit); statuses, resets and hangs counted per request",
      },
    };
  } finally {
    ep?.agent.destroy();
    await children.closeAll();
    rmSync(tmp, { recursive: true, force: true });
  }
}

function latency(ms: number[]): Latency | null {
  if (ms.length === 0) return null;
  const s = [...ms].sort((a, b) => a - b);
  return { p50: r3(quantile(s, 0.5)), p99: r3(quantile(s, 0.99)), max: r3(s[s.length - 1]!) };
}

interface OverloadRun {
  sent: number;
  statuses: Record<string, number>;
  resets: number;
  hangs: number;
  errors: number;
  firstError: string | null;
  okMs: number[];
  shedMs: number[];
  lagMs: number[];
}

const RESET_CODES = new Set(["ECONNRESET", "EPIPE", "ECONNREFUSED"]);

/** `rate` requests/s for `seconds`, open loop; resolves when every request has ended (answered, failed or hung). */
function overload(
  url: string,
  rate: number,
  seconds: number,
  timeoutMs: number,
  progress: (l: string) => void,
): Promise<OverloadRun> {
  const u = new URL(url);
  const agent = new http.Agent({ keepAlive: true, timeout: 4000 });
  const run: OverloadRun = {
    sent: 0,
    statuses: {},
    resets: 0,
    hangs: 0,
    errors: 0,
    firstError: null,
    okMs: [],
    shedMs: [],
    lagMs: [],
  };
  const total = Math.round(rate * seconds);
  const periodMs = 1000 / rate;
  let ended = 0;
  return new Promise((resolve) => {
    const t0 = performance.now();
    let lastReport = t0;
    const end = (): void => {
      if (++ended === total) {
        agent.destroy();
        resolve(run);
      }
    };
    const one = (i: number): void => {
      const start = performance.now();
      let done = false;
      const finish = (what: () => void): void => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        what();
        end();
      };
      const body = `{"model":"${MODEL}","messages":[{"role":"user","content":"Request ${i}: say hello in a few words."}],"max_tokens":16}`;
      const req = http.request({
        host: u.hostname,
        port: u.port,
        path: "/v1/chat/completions",
        method: "POST",
        agent,
        headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) },
      });
      const timer = setTimeout(() => {
        finish(() => run.hangs++);
        req.destroy();
      }, timeoutMs);
      req.on("response", (res) => {
        res.resume();
        res.on("end", () =>
          finish(() => {
            const status = String(res.statusCode);
            run.statuses[status] = (run.statuses[status] ?? 0) + 1;
            const ms = performance.now() - start;
            if (status === "200") run.okMs.push(ms);
            else if (status === "503" || status === "429") run.shedMs.push(ms);
          }),
        );
        res.on("error", (e) => finish(() => failure(e)));
      });
      req.on("error", (e) => finish(() => failure(e)));
      req.end(body);
    };
    const failure = (e: NodeJS.ErrnoException): void => {
      if (RESET_CODES.has(e.code ?? "") || e.message === "socket hang up") run.resets++;
      else {
        run.errors++;
        run.firstError ??= `${e.code ?? ""} ${e.message}`.trim();
      }
    };
    const tick = (): void => {
      const now = performance.now();
      while (run.sent < total && run.sent * periodMs <= now - t0) {
        run.lagMs.push(now - t0 - run.sent * periodMs);
        one(run.sent++);
      }
      if (now - lastReport >= 5000) {
        lastReport = now;
        progress(
          `  ${Math.round((now - t0) / 1000)} s: sent ${run.sent}, ended ${ended}, ${JSON.stringify(run.statuses)}, resets ${run.resets}, hangs ${run.hangs}`,
        );
      }
      if (run.sent < total) setTimeout(tick, 1);
    };
    tick();
  });
}

/** The proxy's VmRSS from /proc once a second (Linux); MB. */
class RssSampler {
  private readonly samples: number[] = [];
  private readonly timer: NodeJS.Timeout;
  private readonly before: number | null;

  constructor(private readonly pid: number | undefined) {
    this.before = this.read();
    this.timer = setInterval(() => {
      const v = this.read();
      if (v !== null) this.samples.push(v);
    }, 1000);
  }

  private read(): number | null {
    if (this.pid === undefined) return null;
    try {
      const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${this.pid}/status`, "utf8"));
      return m ? Math.round(Number(m[1]) / 1024) : null;
    } catch {
      return null;
    }
  }

  stop(): { before: number | null; max: number | null; after: number | null } {
    clearInterval(this.timer);
    const after = this.read();
    const all = [...this.samples, ...(after !== null ? [after] : [])];
    return { before: this.before, max: all.length ? Math.max(...all) : null, after };
  }
}

/** dolphin_shed_total by reason from the proxy's /metrics. */
async function shedCounts(url: string): Promise<Record<string, number>> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const out: Record<string, number> = {};
  for (const m of text.matchAll(/^dolphin_shed_total\{reason="([^"]+)"\} (\S+)$/gm)) out[m[1]!] = Number(m[2]);
  return out;
}

export function formatOverloadBench(r: OverloadBenchResult): string {
  const l = (x: Latency | null): string => (x ? `p50 ${x.p50} / p99 ${x.p99} / max ${x.max} ms` : "none");
  return [
    `overload: ${r.rate} req/s (${r.rate / r.sustained_per_s}× the sustained ${r.sustained_per_s} req/s, ${r.sustained_from}) for ${r.duration_s} s, timeout ${r.timeout_s} s`,
    `sent ${r.sent}: ${Object.entries(r.statuses)
      .map(([k, v]) => `${v} × ${k}`)
      .join(
        ", ",
      )}; resets ${r.resets}, hangs ${r.hangs}, other errors ${r.errors}${r.first_error ? ` (${r.first_error})` : ""}`,
    `every request answered 200/429/503 in time: ${r.all_answered ? "yes" : "NO"}`,
    `latency 200: ${l(r.latency_ms.ok)}; 503/429: ${l(r.latency_ms.shed)}`,
    `shed by reason: ${JSON.stringify(r.shed_by_reason)}; proxy RSS ${r.proxy_rss_mb.before} → max ${r.proxy_rss_mb.max} → ${r.proxy_rss_mb.after} MB`,
    `generator send lag p99 ${r.send_lag_p99_ms} ms; ${r.runtime.node}, ${r.runtime.cpus} CPUs shared by generator, proxy and worker`,
  ].join("\n");
}
