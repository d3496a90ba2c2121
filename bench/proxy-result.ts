// What `dolphin bench proxy` reports (proxy.ts measures it): the result's shape (the JSON of --json), the target
// (the proxy's added latency against a bare pass-through's), several runs as one result of medians, and the text.

import { median, r3, type Quantiles } from "./stats.js";

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

const P50_EXTRA_LIMIT_MS = 0.3;
const P99_RATIO_LIMIT = 1.5;

/** A mode's target from the proxy's and the pass-through's added latencies. */
export function target(proxy: Quantiles, pass: Quantiles): Target {
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

// ---- several runs ------------------------------------------------------------------------------------------------

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
