// Per-request records of a simulated run, SLO presets, and the summary every report and the learner read.

export interface Slo {
  ttftMs: number;
  tpotMs: number;
}

/**
 * SLO presets. `taichi-a` and `taichi-b` are the two SLO pairs of the TaiChi study quoted in seeds 000/001
 * (aggregation meets one, disaggregation the other). `default` is a moderate interactive SLO for 70B-class models
 * on the default cluster: first token within 10 s, then 100 ms per token.
 */
export const SLO_PRESETS: Record<string, Slo> = {
  "taichi-a": { ttftMs: 5000, tpotMs: 250 },
  "taichi-b": { ttftMs: 16000, tpotMs: 60 },
  default: { ttftMs: 10000, tpotMs: 100 },
};

/** A preset name or "ttft_ms,tpot_ms". */
export function parseSlo(s: string): Slo {
  const preset = SLO_PRESETS[s];
  if (preset) return preset;
  const m = /^\s*([0-9.]+)\s*,\s*([0-9.]+)\s*$/.exec(s);
  const ttft = m ? Number(m[1]) : NaN;
  const tpot = m ? Number(m[2]) : NaN;
  if (!(ttft > 0 && tpot > 0 && Number.isFinite(ttft) && Number.isFinite(tpot))) {
    throw new Error(
      `expected a preset (${Object.keys(SLO_PRESETS).join(", ")}) or "ttft_ms,tpot_ms" with both > 0, got ${JSON.stringify(s)}`,
    );
  }
  return { ttftMs: ttft, tpotMs: tpot };
}

export interface RequestRecord {
  id: number;
  arrivalMs: number;
  promptTokens: number;
  outputTokens: number;
  turn: number;
  type?: string;
  path: "local" | "remote";
  decodeWorker: string;
  prefillWorker: string | null;
  /** the routing table's cluster (or PPD cell), -1 for rules */
  cluster: number;
  /** the router's features at admission */
  features: { isl: number; effP: number; effD: number; oslHat: number };
  /** the load the router decided it at (the Decision's `load`): the chosen prefill worker's active prefill tokens
   *  (null when no prefill worker was chosen; the local path has one too, where eff_P was measured) and the chosen
   *  decode worker's active prefill + decode tokens. Absent: not routed */
  load?: { prefill: number | null; decode: number };
  /** the output-length class the table's model predicted (−1 when osl_hat was given) */
  oslClass: number;
  /** the longest cached prefix on any worker at admission / the prompt's blocks */
  prefixReuse: number;
  /** prompt tokens found in the prefix cache where the prefill ran (decode side for local, prefill side for remote) */
  prefixHitTokens: number;
  /** prompt tokens found on the decode side (local: same as prefixHitTokens; remote: reduces the transfer) */
  decodeHitTokens: number;
  ttftMs: number;
  /** mean time between output tokens after the first; 0 for one-token outputs */
  tpotMs: number;
  e2eMs: number;
  finishMs: number;
  kvBytes: number;
  failed: boolean;
}

export interface Percentiles {
  p50: number;
  p90: number;
  p99: number;
}

export interface Summary {
  requests: number;
  completed: number;
  failed: number;
  slo_attainment: number;
  slo_attainment_per_metric: number;
  ttft_ms: Percentiles;
  tpot_ms: Percentiles;
  e2e_ms: Percentiles;
  throughput_tokens_per_s: number;
  local_fraction: number;
  kv_bytes_transferred: number;
  prefix_hit_rate: { prefill: number; decode: number };
  makespan_s: number;
}

/**
 * The project's one quantile: the value at quantile q (0–1) of an ascending array, NaN when empty. Always a member
 * of the array, never an interpolation. `rank` picks which member:
 * - "nearest" (default): the nearest-rank definition, index ceil(q·n) − 1. Every latency percentile the simulator,
 *   the reports and the benchmarks print.
 * - "lower": index floor(q·(n − 1)) (numpy's method="lower"). The output-length classes' tertiles and medians were
 *   learned with it; it stays so learned tables stay the same (it differs from "nearest" at q = 2/3 when n ≡ 2 mod 3).
 */
export function quantile(sorted: readonly number[], q: number, rank: "nearest" | "lower" = "nearest"): number {
  const n = sorted.length;
  if (n === 0) return NaN;
  const i = rank === "nearest" ? Math.ceil(q * n) - 1 : Math.floor(q * (n - 1));
  return sorted[Math.min(n - 1, Math.max(0, i))]!;
}

function percentiles(values: number[]): Percentiles {
  const s = [...values].sort((a, b) => a - b);
  return { p50: quantile(s, 0.5), p90: quantile(s, 0.9), p99: quantile(s, 0.99) };
}

/** End to end, DolphinRouting's reward: E2E ≤ ttft_slo + (osl − 1) × tpot_slo. */
export function meetsE2e(r: RequestRecord, slo: Slo): boolean {
  return !r.failed && r.e2eMs <= slo.ttftMs + (r.outputTokens - 1) * slo.tpotMs;
}

/** Per metric, TaiChi's and DistServe's: TTFT ≤ ttft_slo and TPOT ≤ tpot_slo. */
export function meetsPerMetric(r: RequestRecord, slo: Slo): boolean {
  return !r.failed && r.ttftMs <= slo.ttftMs && r.tpotMs <= slo.tpotMs;
}

export function summarize(records: RequestRecord[], slo: Slo): Summary {
  const done = records.filter((r) => !r.failed);
  let e2eOk = 0;
  let metricOk = 0;
  let local = 0;
  let kv = 0;
  let outTokens = 0;
  let firstArrival = Infinity;
  let lastFinish = 0;
  let hitP = 0,
    promptP = 0,
    hitD = 0,
    promptD = 0;
  for (const r of records) {
    if (meetsE2e(r, slo)) e2eOk++;
    if (meetsPerMetric(r, slo)) metricOk++;
    firstArrival = Math.min(firstArrival, r.arrivalMs);
    if (r.failed) continue;
    if (r.path === "local") {
      local++;
      hitD += r.prefixHitTokens;
      promptD += r.promptTokens;
    } else {
      hitP += r.prefixHitTokens;
      promptP += r.promptTokens;
    }
    kv += r.kvBytes;
    outTokens += r.outputTokens;
    lastFinish = Math.max(lastFinish, r.finishMs);
  }
  const makespan = done.length > 0 ? (lastFinish - firstArrival) / 1000 : 0;
  const n = records.length;
  return {
    requests: n,
    completed: done.length,
    failed: n - done.length,
    slo_attainment: n ? e2eOk / n : 0,
    slo_attainment_per_metric: n ? metricOk / n : 0,
    ttft_ms: percentiles(done.map((r) => r.ttftMs)),
    tpot_ms: percentiles(done.filter((r) => r.outputTokens > 1).map((r) => r.tpotMs)),
    e2e_ms: percentiles(done.map((r) => r.e2eMs)),
    throughput_tokens_per_s: makespan > 0 ? outTokens / makespan : 0,
    local_fraction: done.length ? local / done.length : 0,
    kv_bytes_transferred: kv,
    prefix_hit_rate: { prefill: promptP ? hitP / promptP : 0, decode: promptD ? hitD / promptD : 0 },
    makespan_s: makespan,
  };
}

/** SLO attainment (end to end) of each routing cluster: the learner's per-cluster reward. */
export function attainmentByCluster(
  records: RequestRecord[],
  slo: Slo,
): Map<number, { requests: number; met: number }> {
  const out = new Map<number, { requests: number; met: number }>();
  for (const r of records) {
    let c = out.get(r.cluster);
    if (!c) out.set(r.cluster, (c = { requests: 0, met: 0 }));
    c.requests++;
    if (meetsE2e(r, slo)) c.met++;
  }
  return out;
}
