// The JSON of an evaluation: what `dolphin eval --json` and the main job write (src/learn/policies.ts
// evaluatePolicies) and what `dolphin report` reads (src/report/report.ts). One type for both sides and its one validator,
// so the writer and the reader cannot drift apart. Browser-safe.

import type { Percentiles } from "../sim/metrics.js";
import { isPlainObject } from "../contract/values.js";

export type { Percentiles };

/** One policy's outcome on the evaluation arrivals. */
export interface PolicyOutcome {
  slo_attainment: number;
  ttft_ms: Percentiles;
  tpot_ms: Percentiles;
  throughput_tokens_per_s: number;
  local_fraction: number;
  failed: number;
  // written by `dolphin eval`; a result from another tool may lack them, so the report does not need them
  slo_attainment_per_metric?: number;
  e2e_ms?: Percentiles;
  kv_bytes_transferred?: number;
  prefix_hit_rate?: { prefill: number; decode: number };
  [k: string]: unknown;
}

/** The load `dolphin eval` evaluated at: the spec given, the scale applied to the workload's rate, the rate. */
export interface EvalLoad {
  spec: string;
  scale: number;
  rps: number;
}

/**
 * One evaluation: every policy on the same arrivals. The writer (`dolphin eval`) fills `EvalOutput<EvalLoad>`; a
 * reader takes the load as unknown, since a result from elsewhere may give it as a string, a number or part of
 * {spec, scale, rps}.
 */
export interface EvalOutput<Load = unknown> {
  workload: string;
  cluster: string;
  split: string;
  slo: { ttft_ms: number; tpot_ms: number };
  load: Load;
  requests: number;
  simulated: true;
  policies: Record<string, PolicyOutcome>;
  [k: string]: unknown;
}

/** Bad evaluation output or report input; the message names the source and the field. */
export class ReportError extends Error {
  override readonly name = "ReportError";
}

type Obj = Record<string, unknown>;
const fail = (source: string, path: string, want: string): never => {
  throw new ReportError(`${source}: ${path}: expected ${want}`);
};

function field(o: Obj, key: string, path: string, source: string): unknown {
  if (!(key in o)) fail(source, path, "a value (field missing)");
  return o[key];
}
function str(o: Obj, key: string, path: string, source: string): string {
  const v = field(o, key, path, source);
  return typeof v === "string" && v !== "" ? v : fail(source, path, "a non-empty string");
}
function num(o: Obj, key: string, path: string, source: string, min = -Infinity, max = Infinity): number {
  const v = field(o, key, path, source);
  if (typeof v !== "number" || !Number.isFinite(v)) return fail(source, path, "a number");
  if (v < min || v > max) return fail(source, path, `a number in ${min}–${max}, got ${v}`);
  return v;
}
/** A latency percentile; null (how JSON writes NaN: no request completed) reads as NaN and renders as "n/a". */
function latency(o: Obj, key: string, path: string, source: string): number {
  const v = field(o, key, path, source);
  if (v === null) return NaN;
  if (typeof v !== "number" || !Number.isFinite(v) || v < 0) return fail(source, path, "a number");
  return v;
}
function percentilesField(o: Obj, key: string, path: string, source: string): Percentiles {
  const v = field(o, key, path, source);
  if (!isPlainObject(v)) return fail(source, path, "an object {p50, p90, p99}");
  return {
    p50: latency(v, "p50", `${path}.p50`, source),
    p90: latency(v, "p90", `${path}.p90`, source),
    p99: latency(v, "p99", `${path}.p99`, source),
  };
}

/**
 * Checks that `x` is an eval result and returns a normalized copy (extra fields kept; null latency percentiles
 * become NaN). Errors name the source and the field: "<source>: policies.dolphin.ttft_ms.p90: expected a number".
 */
export function validateEvalOutput(x: unknown, source: string): EvalOutput {
  if (!isPlainObject(x)) return fail(source, "(top level)", "an eval result object");
  const slo = field(x, "slo", "slo", source);
  if (!isPlainObject(slo)) return fail(source, "slo", "an object {ttft_ms, tpot_ms}");
  if (x["simulated"] !== true) fail(source, "simulated", "true (this report covers simulated results only)");
  const policies = field(x, "policies", "policies", source);
  if (!isPlainObject(policies) || Object.keys(policies).length === 0)
    return fail(source, "policies", "an object with at least one policy");
  const out: Record<string, PolicyOutcome> = {};
  for (const [name, p] of Object.entries(policies)) {
    const at = `policies.${name}`;
    if (!isPlainObject(p)) return fail(source, at, "an object");
    out[name] = {
      ...p,
      slo_attainment: num(p, "slo_attainment", `${at}.slo_attainment`, source, 0, 1),
      ttft_ms: percentilesField(p, "ttft_ms", `${at}.ttft_ms`, source),
      tpot_ms: percentilesField(p, "tpot_ms", `${at}.tpot_ms`, source),
      throughput_tokens_per_s: num(p, "throughput_tokens_per_s", `${at}.throughput_tokens_per_s`, source, 0),
      local_fraction: num(p, "local_fraction", `${at}.local_fraction`, source, 0, 1),
      failed: num(p, "failed", `${at}.failed`, source, 0),
    };
  }
  return {
    ...x,
    workload: str(x, "workload", "workload", source),
    cluster: str(x, "cluster", "cluster", source),
    split: str(x, "split", "split", source),
    slo: {
      ttft_ms: num(slo, "ttft_ms", "slo.ttft_ms", source, 0),
      tpot_ms: num(slo, "tpot_ms", "slo.tpot_ms", source, 0),
    },
    load: x["load"],
    requests: num(x, "requests", "requests", source, 0),
    simulated: true,
    policies: out,
  };
}
