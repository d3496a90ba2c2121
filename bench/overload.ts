// `dolphin bench overload`: what the proxy answers at twice the highest rate it sustains (issue 14's target: every
// request answered 200, 429 or 503 within its timeout, no reset, no hang, memory bounded).
//
// Processes, each with its own event loop, so the proxy's loop is its own:
//   workers    `--workers 1P2D` (the default; any nPmD or nR split): emulated vLLM workers, one `dolphin worker`
//              process each (their engine loops, /tokenize and answers cost several times the proxy's CPU a request;
//              under `dolphin serve --emulate` they would share the proxy's loop), `--time-scale` 1 unless given.
//              `--workers fake`: bench/proxy.ts's fake worker, which answers at once: the proxy's own CPU saturates
//              first, so what is measured is the event-loop-lag shedding.
//   proxy      `dolphin serve --config <tmp>`: with emulated workers as `--emulate` configures it (precise mode,
//              table dynamo-isl; no KV events), with the fake worker approximate mode, always-local.
//   generator  overload-load.ts: open-loop children with bounded keep-alive pools, their own lag reported apart.
//
// 1. Sustained rate (unless `--rate`): after a warm-up at the first step's rate (not counted), open-loop steps
//    through the proxy, `stepS` each; a step is good when every
//    request is a 200, none was sent late, the p99 is within the limit (50 ms, or for emulated workers twice the
//    unloaded p99 plus 50 ms: their latency is simulated model time) and ≥ 95 % of the rate completed; the answer is
//    the last good step before a step bad twice.
// 2. Overload: `factor` × that rate for `durationS` (default 60). Each request sent ends as a status, a reset, a
//    hang (no answer within `timeoutS`) or another error; requests the generator could not send on time are counted
//    apart. The proxy's resident memory is read from /proc every second (Linux; null elsewhere), its shed counts
//    from /metrics after.

import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import os from "node:os";
import { join } from "node:path";
import { parseSplit } from "../src/sim/split.js";
import { quantile } from "../src/sim/metrics.js";
import {
  DEFAULT_CONNECTIONS,
  DEFAULT_LATE_MS,
  defaultProcesses,
  generateLoad,
  type LoadResult,
} from "./overload-load.js";
import {
  Children,
  JSON_ANSWER,
  LAUNCH_SCRIPT,
  portsLine,
  PREFILL_ANSWER,
  proxyBanner,
  r3,
  repoRoot,
  SSE_EVENTS,
  UPSTREAM_SCRIPT,
} from "./proxy.js";

const MODEL = "bench-model";
const P99_LIMIT_MS = 50;
const FAKE_STEPS = [250, 500, 750, 1000, 1250, 1500, 2000, 2500, 3000, 4000, 5000];
const EMULATED_STEPS = [50, 100, 150, 200, 300, 400, 500, 600, 800, 1000, 1250, 1500, 2000];
/** How much the proxy's RSS may still rise in the overload's last third (see RssSampler). */
const RSS_PLATEAU_MB = 16;
/** USER_HZ of /proc/<pid>/stat: 100 on every Linux this runs on. */
const CLOCK_TICKS = 100;

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

export interface Latency {
  p50: number;
  p99: number;
  max: number;
}

/** The generator's counts, as the load run reported them (their meanings are documented on LoadResult). */
type LoadCounts = Pick<
  LoadResult,
  | "scheduled"
  | "sent"
  | "late"
  | "statuses"
  | "answers_by_code"
  | "resets"
  | "hangs"
  | "hangs_by_stage"
  | "errors"
  | "errors_by_code"
  | "first_error"
>;

export interface OverloadBenchResult extends LoadCounts {
  sustained_per_s: number;
  /** "first_step_failed": the search's first step was not sustained, so the overload starts from it anyway. */
  sustained_from: "search" | "given" | "first_step_failed";
  /** The overload rate, requests/s (scheduled). */
  rate: number;
  duration_s: number;
  timeout_s: number;
  /** Requests sent per second of the overload: the rate the proxy was offered. */
  offered_per_s: number;
  /** Every request sent answered 200, 429 or 503 within its timeout. */
  all_answered: boolean;
  /** The target: all_answered (so 0 resets, 0 hangs) and memory bounded. */
  target_met: boolean;
  latency_ms: { ok: Latency | null; shed: Latency | null };
  /** The proxy's resident memory, MB (null where /proc is missing): bounded when it levelled off (RssSampler). */
  proxy_rss_mb: {
    start: number | null;
    peak: number | null;
    end: number | null;
    /** Peak − start. */
    growth: number | null;
    /** The last third's peak − the first two thirds' peak. */
    last_third_rise: number | null;
    bounded: boolean | null;
  };
  /** dolphin_shed_total by reason, read after the overload. */
  shed_by_reason: Record<string, number>;
  /**
   * dolphin_ejections_total by cause over the overload: workers taken out of rotation (a proxy whose loop is too busy
   * to read a worker's /health answer within health.check_timeout_ms ejects a healthy worker, and its calls fail).
   */
  ejections_by_cause: Record<string, number>;
  /** dolphin_requests_total by status after the overload (499: the client left first, e.g. a hang cut by the generator). */
  proxy_answers_by_status: Record<string, number>;
  /**
   * The overload's requests as the proxy counted them (dolphin_requests_total, after less before), to tell where the
   * hangs were: `read`, requests its handler took (any status, 499 included); `never_read`, sent less read (they
   * waited in the generator's pool, the kernel's accept queue or a socket buffer until the client gave up); `client_gone`
   * (499), read but the client left before the answer; `answered_not_received`, answers the proxy finished beyond what
   * the generator received (sent, but read too late by a starved generator, or cut by its timeout).
   */
  proxy_view: { read: number; never_read: number; client_gone: number; answered_not_received: number };
  /**
   * The proxy's own view of its inference answers' time (dolphin_request_duration_seconds, from the handler's start):
   * the bucket bounds under which 50 % and 99 % fall, whole run. Next to latency_ms, it tells how long requests waited
   * before the proxy read them (accept queue, socket buffers) or after it answered (the generator's own loop).
   */
  proxy_duration_le_s: { p50: number | null; p99: number | null };
  /** CPU used over the overload, in cores (CPU seconds / wall seconds): the proxy, each worker, and the generator's processes together. */
  cpu_cores: { proxy: number | null; workers: Array<number | null>; generator: number };
  /** The highest of the proxy's gauges, scraped from /metrics every 2 s during the overload. */
  proxy_peaks: Peaks;
  /**
   * What the kernel held for the proxy (Linux; null elsewhere): its listen socket's accept queue at its longest (read
   * from /proc/net/tcp every 2 s: connections the kernel completed and the proxy had not accepted), and the
   * machine's listen-queue overflows and drops over the overload (/proc/net/netstat; on this loopback bench, the
   * proxy's). A connection dropped so waits for the client's retransmission, seconds later: the proxy cannot see it.
   */
  kernel: { accept_queue_peak: number | null; listen_overflows: number | null; listen_drops: number | null };
  /** The generator itself: send lag and pool wait (ms), connections opened, most open at once, fd limit. */
  generator: {
    processes: number;
    /** The pools' bound, all processes together. */
    connections: number;
    late_ms: number;
    send_lag_ms: Latency | null;
    pool_wait_ms: Latency | null;
    /** Its own event loops: timer delay p99 and worst (ms, the worst child's), share of time busy (the busiest). */
    loop_lag_ms: { p99: number; max: number };
    loop_utilization: number;
    connections_opened: number;
    max_open_per_process: number;
    fd_limit: number | null;
    on_schedule: boolean;
  };
  search: Array<{
    rate: number;
    p50_ms: number;
    p99_ms: number;
    achieved_per_s: number;
    failed: number;
    late: number;
    good: boolean;
  }>;
  runtime: {
    node: string;
    cpus: number;
    loadavg: number[];
    workers: string;
    time_scale: number | null;
    max_event_loop_lag_ms: number | "default";
    max_event_loop_utilization: number | "default";
    p99_limit_ms: number;
    method: string;
  };
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
    const config = join(tmp, "serve.json");
    writeFileSync(
      config,
      JSON.stringify({
        listen: { host: "127.0.0.1", port: 0 },
        model: MODEL,
        ...(split ? { table: "dynamo-isl", mode: "precise" } : { table: "always-local", mode: "approximate" }),
        workers: workerList.map(({ id, url, role }) => ({ id, url, role })),
        log_level: "warn",
        admission: {
          ...(opts.maxEventLoopLagMs !== undefined ? { max_event_loop_lag_ms: opts.maxEventLoopLagMs } : {}),
          ...(opts.maxEventLoopUtilization !== undefined
            ? { max_event_loop_utilization: opts.maxEventLoopUtilization }
            : {}),
        },
      }),
    );
    const proxy = children.spawn("proxy", ["-e", LAUNCH_SCRIPT], {
      DOLPHIN_BENCH_ARGV: JSON.stringify([join(repoRoot(), "bin/dolphin.js"), "serve", "--config", config]),
    });
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
      steps: for (const rate of quick ? steps.slice(0, 2) : steps) {
        for (let attempt = 0; attempt < 2; attempt++) {
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
          await new Promise((r) => setTimeout(r, 300));
          if (good) {
            sustained = rate;
            continue steps;
          }
        }
        break;
      }
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

/** bench/proxy.ts's fake worker: one decode worker that answers at once. */
async function startFake(children: Children): Promise<WorkerEntry[]> {
  const upstream = children.spawn("upstream", ["-e", UPSTREAM_SCRIPT], {
    DOLPHIN_BENCH_CHILD: JSON.stringify({ json: JSON_ANSWER, sse: SSE_EVENTS, prefill: PREFILL_ANSWER }),
  });
  const [decodePort] = await children.ready(upstream, portsLine);
  return [{ id: "decode-0", url: `http://127.0.0.1:${decodePort}`, role: "decode", pid: upstream.proc.pid }];
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
  const bin = join(repoRoot(), "bin/dolphin.js");
  return Promise.all(
    roles.map(async (role) => {
      const id = `${role === "both" ? "R" : role === "prefill" ? "P" : "D"}${counts[role]++}`;
      const argv = [bin, "worker", "--role", role, "--port", "0", "--time-scale", String(timeScale)];
      const child = children.spawn(`worker ${id}`, ["-e", LAUNCH_SCRIPT], {
        DOLPHIN_BENCH_ARGV: JSON.stringify([...argv, "--worker-id", id, "--model", MODEL]),
      });
      const url = await children.ready(child, (_out, err) => /serving \S+ at (http:\/\/[^\s,]+)/.exec(err)?.[1]);
      return { id, url, role, pid: child.proc.pid };
    }),
  );
}

function latency(ms: number[]): Latency | null {
  if (ms.length === 0) return null;
  const s = [...ms].sort((a, b) => a - b);
  return { p50: r3(quantile(s, 0.5)), p99: r3(quantile(s, 0.99)), max: r3(s[s.length - 1]!) };
}

/**
 * The proxy's VmRSS from /proc once a second (Linux); MB. Bounded means it levelled off: the peak of the overload's
 * last third is at most RSS_PLATEAU_MB above the peak of the first two thirds (memory that grew with time, not with
 * the limits, would keep climbing; a fixed slack would only restate the machine's allocator).
 */
class RssSampler {
  private readonly samples: number[] = [];
  private readonly timer: NodeJS.Timeout;
  private readonly start: number | null;

  constructor(private readonly pid: number | undefined) {
    this.start = this.read();
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

  stop(): OverloadBenchResult["proxy_rss_mb"] {
    clearInterval(this.timer);
    const end = this.read();
    const all = [...this.samples, ...(end !== null ? [end] : [])];
    const peak = all.length ? Math.max(...all) : null;
    const cut = Math.ceil((all.length * 2) / 3);
    const early = all.slice(0, cut);
    const late = all.slice(cut);
    const levelled = early.length > 0 && late.length > 0 ? Math.max(...late) - Math.max(...early) : null;
    return {
      start: this.start,
      peak,
      end,
      growth: this.start !== null && peak !== null ? peak - this.start : null,
      last_third_rise: levelled,
      bounded: levelled === null ? null : levelled <= RSS_PLATEAU_MB,
    };
  }
}

/** A GET's body over `agent`; rejects on any failure or after `timeoutMs`. */
function getText(url: string, agent: http.Agent, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { agent, timeout: timeoutMs }, (res) => {
      let text = "";
      res.setEncoding("utf8").on("data", (c: string) => (text += c));
      res.on("end", () => resolve(text));
      res.on("error", reject);
    });
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.on("error", reject);
  });
}

interface Peaks {
  inflight: number;
  queued: number;
  event_loop_lag_ms: number;
  /** Smoothed event-loop utilization and the share shed for it (admission.max_event_loop_utilization). */
  event_loop_utilization: number;
  shed_share: number;
  scrapes: number;
}

/**
 * The proxy's in-flight, queued and event-loop-lag gauges every 2 s, over one keep-alive connection opened before the
 * overload (a new one would wait behind the generator's in the accept queue); a scrape that takes over 1.5 s is skipped.
 */
class GaugeWatch {
  private readonly peaks: Peaks = {
    inflight: 0,
    queued: 0,
    event_loop_lag_ms: 0,
    event_loop_utilization: 0,
    shed_share: 0,
    scrapes: 0,
  };
  private readonly timer: NodeJS.Timeout;
  private readonly agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  private n = 0;
  /** The proxy's accept queue at its longest (null where /proc/net/tcp cannot be read). */
  acceptQueuePeak: number | null = null;

  constructor(url: string, progress: (l: string) => void) {
    const port = Number(new URL(url).port);
    const scrape = (): void => {
      const queued = acceptQueue(port);
      if (queued !== null) this.acceptQueuePeak = Math.max(this.acceptQueuePeak ?? 0, queued);
      getText(`${url}/metrics`, this.agent, 1500)
        .then((text) => {
          const g = (name: string): number => Number(new RegExp(`^${name} (\\S+)$`, "m").exec(text)?.[1] ?? 0);
          const now = {
            inflight: g("dolphin_inflight_requests"),
            queued: g("dolphin_queued_requests"),
            lag: Math.round(g("dolphin_event_loop_lag_seconds") * 1000),
            utilization: g("dolphin_event_loop_utilization"),
            shedShare: g("dolphin_shed_share"),
          };
          const p = this.peaks;
          p.scrapes++;
          p.inflight = Math.max(p.inflight, now.inflight);
          p.queued = Math.max(p.queued, now.queued);
          p.event_loop_lag_ms = Math.max(p.event_loop_lag_ms, now.lag);
          p.event_loop_utilization = Math.max(p.event_loop_utilization, now.utilization);
          p.shed_share = Math.max(p.shed_share, now.shedShare);
          if (++this.n % 3 === 0)
            progress(
              `  proxy: ${now.inflight} in flight, ${now.queued} queued, lag ${now.lag} ms, ` +
                `loop busy ${now.utilization}, shedding ${now.shedShare}`,
            );
        })
        .catch(() => undefined);
    };
    scrape(); // opens the connection before the generator starts (a second later)
    this.timer = setInterval(scrape, 2000);
  }

  stop(): Peaks {
    clearInterval(this.timer);
    this.agent.destroy();
    return { ...this.peaks };
  }
}

/**
 * The accept queue of the loopback listener on `port`: for a socket in LISTEN (st 0A), /proc/net/tcp's rx_queue is
 * the connections completed and not yet accepted. Linux only; null elsewhere or when not found.
 */
function acceptQueue(port: number): number | null {
  try {
    const hexPort = port.toString(16).toUpperCase().padStart(4, "0");
    for (const line of readFileSync("/proc/net/tcp", "utf8").split("\n")) {
      const f = line.trim().split(/\s+/);
      if (f[3] === "0A" && f[1]?.endsWith(`:${hexPort}`)) return parseInt(f[4]!.split(":")[1]!, 16);
    }
  } catch {
    // not Linux
  }
  return null;
}

/** The machine's listen-queue overflows and drops so far (/proc/net/netstat, TcpExt); null where unreadable. */
function listenCounters(): { overflows: number; drops: number } | null {
  try {
    const lines = readFileSync("/proc/net/netstat", "utf8").split("\n");
    const i = lines.findIndex((l) => l.startsWith("TcpExt:"));
    const names = lines[i]!.split(/\s+/);
    const values = lines[i + 1]!.split(/\s+/).map(Number);
    const of = (name: string): number => values[names.indexOf(name)] ?? NaN;
    const r = { overflows: of("ListenOverflows"), drops: of("ListenDrops") };
    return Number.isFinite(r.overflows) && Number.isFinite(r.drops) ? r : null;
  } catch {
    return null;
  }
}

/** dolphin_shed_total by reason, and dolphin_requests_total by status, from the proxy's /metrics. */
async function proxyCounts(url: string): Promise<{
  shed: Record<string, number>;
  byStatus: Record<string, number>;
  ejections: Record<string, number>;
  durationLe: { p50: number | null; p99: number | null };
}> {
  const text = await (await fetch(`${url}/metrics`)).text();
  // dolphin_request_duration_seconds: the bucket bound under which 50 % and 99 % of the answers took
  const buckets = new Map<number, number>();
  for (const m of text.matchAll(/^dolphin_request_duration_seconds_bucket\{[^}]*le="([^"]+)"[^}]*\} (\S+)$/gm)) {
    const le = m[1] === "+Inf" ? Infinity : Number(m[1]);
    buckets.set(le, (buckets.get(le) ?? 0) + Number(m[2]));
  }
  const sorted = [...buckets].sort((a, b) => a[0] - b[0]);
  const total = sorted.at(-1)?.[1] ?? 0;
  const le = (q: number): number | null => (total === 0 ? null : (sorted.find(([, n]) => n >= q * total)?.[0] ?? null));
  const shed: Record<string, number> = {};
  for (const m of text.matchAll(/^dolphin_shed_total\{reason="([^"]+)"\} (\S+)$/gm)) shed[m[1]!] = Number(m[2]);
  const ejections: Record<string, number> = {};
  for (const m of text.matchAll(/^dolphin_ejections_total\{cause="([^"]+)"\} (\S+)$/gm))
    ejections[m[1]!] = Number(m[2]);
  const byStatus: Record<string, number> = {};
  for (const m of text.matchAll(/^dolphin_requests_total\{[^}]*status="(\d+)"[^}]*\} (\S+)$/gm))
    byStatus[m[1]!] = (byStatus[m[1]!] ?? 0) + Number(m[2]);
  return { shed, byStatus, ejections, durationLe: { p50: le(0.5), p99: le(0.99) } };
}

/** CPU seconds (user + system) a process has used, from /proc/<pid>/stat (Linux; null elsewhere). */
function cpuSeconds(pid: number | undefined): number | null {
  if (pid === undefined) return null;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(f[11]) + Number(f[12])) / CLOCK_TICKS;
  } catch {
    return null;
  }
}

export function formatOverloadBench(r: OverloadBenchResult): string {
  const l = (x: Latency | null): string => (x ? `p50 ${x.p50} / p99 ${x.p99} / max ${x.max} ms` : "none");
  const g = r.generator;
  const m = r.proxy_rss_mb;
  const v = r.proxy_view;
  return [
    `sustained: ${r.sustained_per_s} req/s (${r.sustained_from}); workers: ${r.runtime.workers}`,
    `overload: ${r.rate} req/s (${r.rate / r.sustained_per_s}× the sustained rate) for ${r.duration_s} s, timeout ${r.timeout_s} s`,
    `scheduled ${r.scheduled}, sent ${r.sent} (${r.offered_per_s}/s), not sent (generator > ${g.late_ms} ms late) ${r.late}`,
    `answers: ${Object.entries(r.statuses)
      .map(([k, v]) => `${v} × ${k}`)
      .join(
        ", ",
      )} ${JSON.stringify(r.answers_by_code)}; resets ${r.resets}, hangs ${r.hangs}, other errors ${r.errors}${r.first_error ? ` (${r.first_error})` : ""}`,
    `latency 200: ${l(r.latency_ms.ok)}; 503/429: ${l(r.latency_ms.shed)}; the proxy's own: p50 ≤ ${r.proxy_duration_le_s.p50} s, p99 ≤ ${r.proxy_duration_le_s.p99} s`,
    `shed by reason: ${JSON.stringify(r.shed_by_reason)}; ejections ${JSON.stringify(r.ejections_by_cause)}; the proxy's answers by status ${JSON.stringify(r.proxy_answers_by_status)}`,
    `hangs by stage: ${JSON.stringify(r.hangs_by_stage)}; the proxy read ${v.read} of the overload's requests (${v.never_read} never read), ` +
      `${v.client_gone} × 499 (client gone), ${v.answered_not_received} answered but not received`,
    `proxy peaks: ${r.proxy_peaks.inflight} in flight, ${r.proxy_peaks.queued} queued, lag ${r.proxy_peaks.event_loop_lag_ms} ms, ` +
      `loop busy ${r.proxy_peaks.event_loop_utilization}, shed share ${r.proxy_peaks.shed_share} (${r.proxy_peaks.scrapes} scrapes); ` +
      `CPU cores: proxy ${r.cpu_cores.proxy}, workers ${r.cpu_cores.workers.join(", ")}, generator ${r.cpu_cores.generator}`,
    `kernel: the proxy's accept queue at most ${r.kernel.accept_queue_peak}; listen overflows ${r.kernel.listen_overflows}, drops ${r.kernel.listen_drops}`,
    `proxy RSS ${m.start} → peak ${m.peak} → end ${m.end} MB (growth ${m.growth} MB; the last third rose ${m.last_third_rise} MB: ${m.bounded ? "levelled off" : "NOT levelled off"})`,
    `generator: ${g.processes} process(es), ≤ ${g.connections} connections in all (opened ${g.connections_opened}, ` +
      `most open ${g.max_open_per_process}, fd limit ${g.fd_limit}); send lag ${l(g.send_lag_ms)}; pool wait ${l(g.pool_wait_ms)}; ` +
      `its loop: lag p99 ${g.loop_lag_ms.p99} / max ${g.loop_lag_ms.max} ms, busy ${g.loop_utilization}; ` +
      `${g.on_schedule ? "on schedule" : "NOT on schedule"}`,
    `target (every request sent answered 200/429/503 in time, 0 resets, 0 hangs, memory bounded): ${r.target_met ? "met" : "NOT met"}`,
    `${r.runtime.node}, ${r.runtime.cpus} CPUs (load average ${r.runtime.loadavg.join(", ")}) shared by generator, proxy and workers`,
  ].join("\n");
}
