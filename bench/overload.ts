// `dolphin bench overload`: what the proxy answers at twice the highest rate it sustains (issue 14's target: every
// request answered 200, 429 or 503 within its timeout, no reset, no hang, memory bounded).
//
// Processes, each with its own event loop, so the proxy's loop is its own:
//   workers    `--workers 1P2D` (the default; any nPmD or nR split): emulated vLLM workers, one `dolphin worker`
//              process each (their engine loops, /tokenize and answers cost several times the proxy's CPU a request;
//              under `dolphin serve --emulate` they would share the proxy's loop), `--time-scale` 1 unless given.
//              `--workers fake`: fake-servers.ts's fake worker, which answers at once: the proxy's own CPU saturates
//              first, so what is measured is the event-loop-lag shedding.
//   proxy      `dolphin serve --config <tmp>`: with emulated workers as `--emulate` configures it (precise mode,
//              table dynamo-isl; no KV events), with the fake worker approximate mode, always-local.
//   generator  overload-load.ts: open-loop children with bounded keep-alive pools, their own lag reported apart.
//
// 1. Sustained rate (unless `--rate`; rate-steps.ts): after a warm-up at the first step's rate (not counted),
//    open-loop steps through the proxy, `stepS` each; a step is good when every request is a 200, none was sent
//    late, the p99 is within the limit (50 ms, or for emulated workers twice the unloaded p99 plus 50 ms: their
//    latency is simulated model time) and ≥ 95 % of the rate completed; the answer is the last good step before a
//    step bad twice.
// 2. Overload: `factor` × that rate for `durationS` (default 60). Each request sent ends as a status, a reset, a
//    hang (no answer within `timeoutS`) or another error; requests the generator could not send on time are counted
//    apart. The proxy's resident memory is read from /proc every second (Linux; null elsewhere), its shed counts
//    from /metrics after (overload-watch.ts). The result's shape and text: overload-result.ts.

import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import { join } from "node:path";
import { parseSplit } from "../src/sim/split.js";
import { startFakeWorker } from "./fake-servers.js";
import { Children, MODEL, proxyBanner, spawnDolphin, writeServeConfig } from "./harness.js";
import {
  DEFAULT_CONNECTIONS,
  DEFAULT_LATE_MS,
  defaultProcesses,
  generateLoad,
  type LoadResult,
} from "./overload-load.js";
import type { OverloadBenchResult } from "./overload-result.js";
import { cpuSeconds, GaugeWatch, listenCounters, proxyCounts, RssSampler } from "./overload-watch.js";
import { P99_LIMIT_MS, searchRate } from "./rate-steps.js";
import { latency } from "./stats.js";

const FAKE_STEPS = [250, 500, 750, 1000, 1250, 1500, 2000, 2500, 3000, 4000, 5000];
const EMULATED_STEPS = [50, 100, 150, 200, 300, 400, 500, 600, 800, 1000, 1250, 1500, 2000];

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
  /** admission.max_event_loop_utilization for the proxy (default: the proxy's default; 0 turns it off). */
  maxEventLoopUtilization?: number;
  /** "fake" (a worker that answers at once) or a split of emulated workers, e.g. "1P2D" (the default). */
  workers?: string;
  /** --time-scale of the emulated workers (default 1: real time). */
  timeScale?: number;
  /** Load generator processes (default: one per 1,500 requests/s, at most 4) and their pooled connections in all. */
  generators?: number;
  connections?: number;
  /** Short: search steps of 1 s, two of them, 5 s of overload. Not for figures. */
  quick?: boolean;
  progress?: (line: string) => void;
}

export async function runOverloadBench(opts: OverloadBenchOptions = {}): Promise<OverloadBenchResult> {
  const quick = opts.quick ?? false;
  const factor = opts.factor ?? 2;
  const durationS = opts.durationS ?? (quick ? 5 : 60);
  const timeoutS = opts.timeoutS ?? 30;
  const workers = opts.workers ?? "1P2D";
  const timeScale = opts.timeScale ?? 1;
  for (const [name, v] of [
    ["factor", factor],
    ["duration", durationS],
    ["timeout", timeoutS],
    ["time-scale", timeScale],
    ...(opts.rate !== undefined ? [["rate", opts.rate] as const] : []),
    ...(opts.generators !== undefined ? [["generators", opts.generators] as const] : []),
    ...(opts.connections !== undefined ? [["connections", opts.connections] as const] : []),
  ] as const)
    if (!(typeof v === "number" && v > 0 && Number.isFinite(v)))
      throw new Error(`bench overload: ${name} must be a number > 0`);
  const split = workers === "fake" ? null : parseSplit(workers); // throws naming the split when malformed
  const progress = opts.progress ?? (() => undefined);
  const tmp = mkdtempSync(join(os.tmpdir(), "dolphin-bench-overload-"));
  const children = new Children();
  let url = ""; // the proxy's, once it listens
  const load = (rate: number, seconds: number, timeoutMs: number): Promise<LoadResult> =>
    generateLoad({
      url,
      rate,
      seconds,
      timeoutMs,
      model: MODEL,
      ...(opts.generators !== undefined ? { processes: opts.generators } : {}),
      ...(opts.connections !== undefined ? { connections: opts.connections } : {}),
      progress,
    });
  try {
    const workerList = split ? await startEmulatedWorkers(children, split, timeScale) : await startFake(children);
    const workerPids = workerList.map((w) => w.pid);
    const config = writeServeConfig(join(tmp, "serve.json"), {
      ...(split ? { table: "dynamo-isl", mode: "precise" } : { table: "always-local", mode: "approximate" }),
      workers: workerList.map(({ id, url, role }) => ({ id, url, role })),
      admission: {
        ...(opts.maxEventLoopLagMs !== undefined ? { max_event_loop_lag_ms: opts.maxEventLoopLagMs } : {}),
        ...(opts.maxEventLoopUtilization !== undefined
          ? { max_event_loop_utilization: opts.maxEventLoopUtilization }
          : {}),
      },
    });
    const proxy = spawnDolphin(children, "proxy", ["serve", "--config", config]);
    url = await children.ready(proxy, proxyBanner);

    const steps = split ? EMULATED_STEPS : FAKE_STEPS;
    // a warm-up at the first step's rate, not counted: the processes' first seconds (JIT, pools) are not their rate
    if (opts.rate === undefined) await load(steps[0]!, quick ? 1 : 2, 10_000);
    // the p99 a step may have: emulated workers answer in simulated model time, so twice their unloaded p99 + 50 ms
    let p99LimitMs = P99_LIMIT_MS;
    if (split && opts.rate === undefined) {
      const base = await load(10, 2, 10_000);
      p99LimitMs = Math.round(2 * (latency(base.okMs)?.p99 ?? 0) + P99_LIMIT_MS);
      progress(`unloaded: p99 ${latency(base.okMs)?.p99} ms at 10/s; a step's p99 limit ${p99LimitMs} ms`);
    }
    const search: OverloadBenchResult["search"] = [];
    let sustained = opts.rate ?? 0;
    let sustainedFrom: OverloadBenchResult["sustained_from"] = opts.rate === undefined ? "search" : "given";
    if (opts.rate === undefined) {
      const stepS = quick ? 1 : 2;
      const found = await searchRate(quick ? steps.slice(0, 2) : steps, async (rate) => {
        const s = await load(rate, stepS, 10_000);
        const ok = s.statuses["200"] ?? 0;
        const failed = s.sent - ok;
        const p = latency(s.okMs) ?? { p50: 0, p99: 0, max: 0 };
        // completions over the schedule's span; the last answers come one latency after the last send
        const achieved = Math.round(ok / Math.max(stepS, (s.span_ms - p.p50) / 1000));
        const good = failed === 0 && s.late === 0 && p.p99 <= p99LimitMs && achieved >= 0.95 * rate;
        search.push({ rate, p50_ms: p.p50, p99_ms: p.p99, achieved_per_s: achieved, failed, late: s.late, good });
        progress(
          `sustained? ${rate}/s: p99 ${p.p99} ms, ${achieved}/s, ${failed} failed, ${s.late} late: ${good ? "yes" : "no"}`,
        );
        return good ? null : "not sustained";
      });
      sustained = found.best;
      if (sustained === 0) {
        sustained = steps[0]!; // not even the first step: overload from there, and say so
        sustainedFrom = "first_step_failed";
      }
    }
    const rate = Math.round(sustained * factor);
    progress(`overload: ${rate} req/s (${factor}× ${sustained}) for ${durationS} s`);
    const rss = new RssSampler(proxy.proc.pid);
    const gauges = new GaugeWatch(url, progress);
    const listenBefore = listenCounters();
    const pids = { proxy: proxy.proc.pid, workers: workerPids };
    const before = await proxyCounts(url);
    const cpuBefore = { proxy: cpuSeconds(pids.proxy), workers: pids.workers.map(cpuSeconds) };
    const t0 = performance.now();
    const run = await load(rate, durationS, timeoutS * 1000);
    const wallS = (performance.now() - t0) / 1000;
    const cpuShare = (pid: number | undefined, before: number | null): number | null => {
      const after = cpuSeconds(pid);
      return after === null || before === null ? null : Math.round(((after - before) / wallS) * 100) / 100;
    };
    const cpu = {
      proxy: cpuShare(pids.proxy, cpuBefore.proxy),
      workers: pids.workers.map((pid, i) => cpuShare(pid, cpuBefore.workers[i]!)),
      generator: Math.round((run.cpu_s / wallS) * 100) / 100,
    };
    const rssMb = rss.stop();
    const peaks = gauges.stop();
    const listenAfter = listenCounters();
    const listenDiff = (k: "overflows" | "drops"): number | null =>
      listenBefore && listenAfter ? listenAfter[k] - listenBefore[k] : null;
    const { shed, byStatus, durationLe, ejections } = await proxyCounts(url);
    const statuses = run.statuses;
    const answeredOk = (statuses["200"] ?? 0) + (statuses["429"] ?? 0) + (statuses["503"] ?? 0);
    const allAnswered = answeredOk === run.sent;
    const proxyCounted = (status: (s: string) => boolean): number =>
      Object.entries(byStatus)
        .filter(([k]) => status(k))
        .reduce((a, [k, n]) => a + n - (before.byStatus[k] ?? 0), 0);
    const read = proxyCounted(() => true);
    const clientGone = proxyCounted((k) => k === "499");
    const received = Object.values(statuses).reduce((a, b) => a + b, 0);
    const generators = opts.generators ?? defaultProcesses(rate);
    return {
      sustained_per_s: sustained,
      sustained_from: sustainedFrom,
      rate,
      duration_s: durationS,
      timeout_s: timeoutS,
      scheduled: run.scheduled,
      sent: run.sent,
      late: run.late,
      offered_per_s: Math.round(run.sent / durationS),
      statuses,
      answers_by_code: run.answers_by_code,
      resets: run.resets,
      hangs: run.hangs,
      hangs_by_stage: run.hangs_by_stage,
      errors: run.errors,
      errors_by_code: run.errors_by_code,
      first_error: run.first_error,
      all_answered: allAnswered,
      target_met: allAnswered && rssMb.bounded !== false,
      latency_ms: { ok: latency(run.okMs), shed: latency(run.shedMs) },
      proxy_rss_mb: rssMb,
      shed_by_reason: shed,
      ejections_by_cause: Object.fromEntries(
        Object.entries(ejections).map(([k, n]) => [k, n - (before.ejections[k] ?? 0)]),
      ),
      proxy_answers_by_status: byStatus,
      proxy_view: {
        read,
        never_read: Math.max(0, run.sent - read),
        client_gone: clientGone,
        answered_not_received: Math.max(0, read - clientGone - received),
      },
      proxy_duration_le_s: durationLe,
      proxy_peaks: peaks,
      kernel: {
        accept_queue_peak: gauges.acceptQueuePeak,
        listen_overflows: listenDiff("overflows"),
        listen_drops: listenDiff("drops"),
      },
      cpu_cores: cpu,
      generator: {
        processes: generators,
        connections: opts.connections ?? DEFAULT_CONNECTIONS,
        late_ms: DEFAULT_LATE_MS,
        send_lag_ms: latency(run.lagMs),
        pool_wait_ms: latency(run.poolWaitMs),
        loop_lag_ms: run.loop_lag_ms,
        loop_utilization: run.loop_utilization,
        connections_opened: run.connections,
        max_open_per_process: run.max_open_sockets,
        fd_limit: run.fd_limit,
        on_schedule: run.late <= run.scheduled * 0.001,
      },
      search,
      runtime: {
        node: process.version,
        cpus: os.cpus().length,
        loadavg: os.loadavg().map((x) => Math.round(x * 100) / 100),
        workers: split ? `${workers} (dolphin worker processes)` : "fake (answers at once)",
        time_scale: split ? timeScale : null,
        max_event_loop_lag_ms: opts.maxEventLoopLagMs ?? "default",
        max_event_loop_utilization: opts.maxEventLoopUtilization ?? "default",
        p99_limit_ms: p99LimitMs,
        method:
          "loopback; workers, dolphin serve and the open-loop generator each in their own node processes; the " +
          "generator's keep-alive pools are bounded and a request more than late_ms behind schedule is not sent " +
          "(counted as late); statuses, resets and hangs counted per request sent",
      },
    };
  } finally {
    await children.closeAll();
    rmSync(tmp, { recursive: true, force: true });
  }
}

interface WorkerEntry {
  id: string;
  url: string;
  role: "prefill" | "decode" | "both";
  pid: number | undefined;
}

/** The fake worker of fake-servers.ts: one decode worker that answers at once. */
async function startFake(children: Children): Promise<WorkerEntry[]> {
  const { decodeUrl, pid } = await startFakeWorker(children);
  return [{ id: "decode-0", url: decodeUrl, role: "decode", pid }];
}

/** One `dolphin worker` process per worker of the split (named as --emulate names them: R0, P0, D0, …). */
async function startEmulatedWorkers(
  children: Children,
  split: { replicas: number; prefill: number; decode: number },
  timeScale: number,
): Promise<WorkerEntry[]> {
  const roles: WorkerEntry["role"][] = [
    ...Array<"both">(split.replicas).fill("both"),
    ...Array<"prefill">(split.prefill).fill("prefill"),
    ...Array<"decode">(split.decode).fill("decode"),
  ];
  const counts = { both: 0, prefill: 0, decode: 0 };
  return Promise.all(
    roles.map(async (role) => {
      const id = `${role === "both" ? "R" : role === "prefill" ? "P" : "D"}${counts[role]++}`;
      const argv = ["worker", "--role", role, "--port", "0", "--time-scale", String(timeScale)];
      const child = spawnDolphin(children, `worker ${id}`, [...argv, "--worker-id", id, "--model", MODEL]);
      const url = await children.ready(child, (_out, err) => /serving \S+ at (http:\/\/[^\s,]+)/.exec(err)?.[1]);
      return { id, url, role, pid: child.proc.pid };
    }),
  );
}
