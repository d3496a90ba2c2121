// The numbers a report shows and how it writes them: the deltas of a policy against the baseline, signed
// percentages, milliseconds, a load in words, and the policy order (best SLO attainment first) of tables and charts.

import { ReportError, type EvalOutput, type PolicyOutcome } from "./eval-output.js";
import { isPlainObject } from "../contract/values.js";

export interface Deltas {
  /** dolphin P90 TTFT / baseline P90 TTFT − 1 (negative = better). */
  ttftP90: number;
  tpotP90: number;
  /** SLO attainment difference in percentage points (positive = better). */
  attainment: number;
}

/** Relative P90 deltas (x / base − 1) and the attainment difference in points of `policy` against `baseline`. */
export function deltasVsBaseline(r: EvalOutput, policy = "dolphin", baseline = "dynamo-isl"): Deltas {
  const p = r.policies[policy],
    b = r.policies[baseline];
  if (!p) throw new ReportError(`no "${policy}" policy in the ${r.workload} ${r.split} result`);
  if (!b) throw new ReportError(`no "${baseline}" policy in the ${r.workload} ${r.split} result`);
  const rel = (x: number, base: number): number => (base > 0 ? x / base - 1 : NaN);
  return {
    ttftP90: rel(p.ttft_ms.p90, b.ttft_ms.p90),
    tpotP90: rel(p.tpot_ms.p90, b.tpot_ms.p90),
    attainment: 100 * (p.slo_attainment - b.slo_attainment),
  };
}

export const MINUS = "\u2212";
export const signed = (x: number, digits: number): string =>
  !Number.isFinite(x) ? "n/a" : (x < 0 ? MINUS : x > 0 ? "+" : "±") + Math.abs(x).toFixed(digits);
export const pct = (fraction: number): string => `${signed(100 * fraction, 1)}%`;

export function describeLoad(load: unknown): string {
  if (typeof load === "string") return load;
  if (typeof load === "number") return `${load}`;
  if (isPlainObject(load)) {
    const parts: string[] = [];
    if (typeof load["scale"] === "number") parts.push(`×${fmt(load["scale"], 2)}`);
    if (typeof load["rps"] === "number") parts.push(`${fmt(load["rps"], 2)} req/s`);
    const spec = typeof load["spec"] === "string" ? load["spec"] : "";
    if (spec && parts.length) return `${spec} (${parts.join(", ")})`;
    return spec || parts.join(", ") || JSON.stringify(load);
  }
  return load === undefined ? "unspecified" : JSON.stringify(load);
}

export function fmt(x: number, digits: number): string {
  return Number.isFinite(x) ? x.toFixed(digits) : "n/a";
}
export const ms = (x: number): string => (!Number.isFinite(x) ? "n/a" : x >= 100 ? x.toFixed(0) : x.toFixed(1));

/** Policies by SLO attainment, best first (ties by name), the order of the table and the bar chart. */
export function byAttainment(r: EvalOutput): [string, PolicyOutcome][] {
  return Object.entries(r.policies).sort((a, b) => b[1].slo_attainment - a[1].slo_attainment || (a[0] < b[0] ? -1 : 1));
}
