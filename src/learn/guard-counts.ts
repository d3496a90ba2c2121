// How many requests each part of a guarded table decided (src/learn/guard.ts writes the table): its learned
// clusters, its rule clusters, its out-of-distribution bound, its load bounds. Its own file so the search stays within its size;
// guard.ts re-exports it.

import type { RequestRecord } from "../sim/metrics.js";
import { beyondLoadBound } from "../table/load-bound.js";
import { CLUSTER_RULE, type Table } from "../table/table.js";

/** How many requests each part of a guarded table decided: its clusters, its rule clusters, its out-of-distribution
 *  bound (recomputed from each record's admission features exactly as the core scores them) and its load bounds (from
 *  the load each record was decided at, in the core's order: out of distribution first, then a rule cluster). */
export function guardCounts(
  t: Table,
  records: RequestRecord[],
): { cluster: number; ruleCluster: number; outOfDistribution: number; loadBound: number } {
  const out = { cluster: 0, ruleCluster: 0, outOfDistribution: 0, loadBound: 0 };
  if ((t.kind !== "kmeans" && t.kind !== "gmm") || !t.features || !t.scaler || !t.centroids || !t.bits) return out;
  const gmm = t.kind === "gmm";
  const d = t.features.length;
  const logConst = gmm
    ? t.variances!.map(
        (v, c) => Math.log(t.weights![c]!) - 0.5 * (v.reduce((s, x) => s + Math.log(x), 0) + d * Math.log(2 * Math.PI)),
      )
    : [];
  for (const r of records) {
    if (r.failed || r.cluster < 0) continue;
    const f = { isl: r.features.isl, eff_P: r.features.effP, eff_D: r.features.effD, osl_hat: r.features.oslHat };
    const c = r.cluster;
    let q = 0;
    for (let j = 0; j < d; j++) {
      const zj = (Math.log1p(f[t.features[j]!]) - t.scaler.mean[j]!) / t.scaler.std[j]!;
      const diff = zj - t.centroids[c]![j]!;
      q += gmm ? (diff * diff) / t.variances![c]![j]! : diff * diff;
    }
    const score = gmm ? logConst[c]! - 0.5 * q : q;
    const bound = t.ood_bound?.[c];
    if (bound !== undefined && (gmm ? score < bound : score > bound)) out.outOfDistribution++;
    else if (t.bits[c] === CLUSTER_RULE) out.ruleCluster++;
    else if (beyondLoadBound(t, c, r.load)) out.loadBound++;
    else out.cluster++;
  }
  return out;
}
