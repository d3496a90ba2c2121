// What `dolphin bench overload` reports (overload.ts measures it): the result's shape (the JSON of --json) and the
// text. Counts the load generator took come as overload-load.ts's LoadResult names them.

import type { LoadResult } from "./overload-load.js";
import type { Latency } from "./stats.js";

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

/** The highest of the proxy's gauges over the overload (overload-watch.ts's GaugeWatch). */
export interface Peaks {
  inflight: number;
  queued: number;
  event_loop_lag_ms: number;
  /** Smoothed event-loop utilization and the share shed for it (admission.max_event_loop_utilization). */
  event_loop_utilization: number;
  shed_share: number;
  scrapes: number;
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
