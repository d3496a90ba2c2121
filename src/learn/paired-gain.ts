// McNemar's paired test, the guarded search's (guard.ts) statistic: every table runs on the same arrivals (the
// simulator is deterministic), so request i's SLO outcome under two tables forms a pair, and B (met only under the
// candidate) against W (met only under the current table) says whether the candidate gains beyond noise.

import { meetsE2e, type RequestRecord, type Slo } from "../sim/metrics.js";

/** Φ⁻¹(1 − 0.05 / 16): one-sided, 5% family-wise over the 2 × 8 moves of a pass at the default K = 8. */
export const BONFERRONI_Z = 2.74;
/** Φ⁻¹(0.95): the held-out replication's one-sided 5% test (one test per move that already passed the search's). */
export const REPLICATION_Z = 1.645;
/** Φ⁻¹(1 − 0.05 / 3): one-sided, 5% family-wise over the three load-reactive fallback candidates (load-bounds.ts). */
export const FALLBACK_Z = 2.13;

/** McNemar's statistic over two sets of pairs (disjoint requests: their counts add). */
export function pooledGain(
  a: { improved: number; worsened: number },
  b: { improved: number; worsened: number },
): { improved: number; worsened: number; statistic: number } {
  const improved = a.improved + b.improved;
  const worsened = a.worsened + b.worsened;
  return {
    improved,
    worsened,
    statistic: improved + worsened === 0 ? 0 : (improved - worsened) / Math.sqrt(improved + worsened),
  };
}

/** McNemar's paired comparison of two runs on the same arrivals: B, W and (B − W) / √(B + W). */
export function pairedGain(
  candidate: RequestRecord[],
  current: RequestRecord[],
  slo: Slo,
): { improved: number; worsened: number; statistic: number } {
  const before = new Map<number, boolean>();
  for (const r of current) before.set(r.id, meetsE2e(r, slo));
  let improved = 0;
  let worsened = 0;
  for (const r of candidate) {
    const was = before.get(r.id);
    if (was === undefined) continue;
    const now = meetsE2e(r, slo);
    if (now && !was) improved++;
    else if (!now && was) worsened++;
  }
  const n = improved + worsened;
  return { improved, worsened, statistic: n === 0 ? 0 : (improved - worsened) / Math.sqrt(n) };
}
