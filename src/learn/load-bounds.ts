// The learned table's load bounds and cluster shares (table format version 3, issue 24), and the load-reactive
// fallback rules the guarded search tries.
//
// `load_bound`: per cluster, the highest load its requests were decided at in the guarded search's final runs: the
// final table on the search's arrivals and on the held-out ones, the runs in which its value was last tested. The
// core sends a request of a learned (0/1) cluster to the fallback rule when its chosen prefill worker's active
// prefill tokens exceed `prefill[k]` (whenever a prefill worker was chosen, local requests too) or its chosen decode worker's active prefill + decode tokens exceed `decode[k]`
// (reason `load-out-of-range`), so a value is never used at a load the search did not test it at. The maximum (the
// default quantile 1) and not a high quantile: with it the bounded table decides every request of the search's own
// runs exactly as the table the search tested, so the guard's statistics hold for the table written; a quantile
// below 1 would hand the busiest tested requests to the rule, a table the search never ran.
//
// `cluster_share`: each cluster's share of the requests the core assigned on the search's arrivals under the final
// table (the mix-shift guard's reference, src/router/mix-guard.ts: it compares the clusters the core assigns in
// serving, so the reference is the clusters the core assigned, not the clustering's sizes, which come from the
// feature log's routing and true previous outputs).

import type { RequestRecord } from "../sim/metrics.js";
import type { ModelPreset } from "../sim/model-presets.js";
import { ruleTableFor } from "../sim/rule-table.js";
import { quantile } from "../sim/metrics.js";
import { DEFAULT_FALLBACK, type Fallback, type Table } from "../table/table.js";
import { versionNeeded } from "../table/codec.js";
import { validateTable } from "../table/validate.js";

export interface LoadBound {
  prefill: number[];
  decode: number[];
}

/**
 * Per cluster, the `q` quantile (default 1: the maximum) of the loads its requests were decided at over `runs`. A
 * cluster none of whose requests chose a prefill worker (all local) gets prefill bound 0 (the core checks it only
 * where a prefill worker is chosen); a cluster with no requests gets 0 for both, so its value is never used under
 * load (an idle decode worker, load 0, is still within it).
 */
export function loadBounds(runs: RequestRecord[][], k: number, q = 1): LoadBound {
  if (!(q > 0 && q <= 1)) throw new RangeError(`loadBounds: the quantile must be in (0, 1], got ${q}`);
  const prefill: number[][] = Array.from({ length: k }, () => []);
  const decode: number[][] = Array.from({ length: k }, () => []);
  for (const run of runs)
    for (const r of run) {
      if (r.cluster < 0 || r.cluster >= k || !r.load) continue;
      decode[r.cluster]!.push(r.load.decode);
      if (r.load.prefill !== null) prefill[r.cluster]!.push(r.load.prefill);
    }
  const at = (xs: number[]): number =>
    xs.length === 0
      ? 0
      : quantile(
          xs.sort((a, b) => a - b),
          q,
        );
  return { prefill: prefill.map(at), decode: decode.map(at) };
}

/** How many of a run's requests the core assigned to each of k clusters. */
export function routedSizes(records: RequestRecord[], k: number): number[] {
  const n = new Array<number>(k).fill(0);
  for (const r of records) if (r.cluster >= 0 && r.cluster < k) n[r.cluster]!++;
  return n;
}

/** The share per cluster (sums to 1), from the clusters' sizes. */
export function clusterShare(sizes: number[]): number[] {
  const n = sizes.reduce((s, x) => s + x, 0);
  if (n === 0) return sizes.map(() => 1 / sizes.length);
  const share = sizes.map((x) => x / n);
  // the last share takes the rounding, so the sum is 1 to the last bit the format checks (1e-6)
  share[share.length - 1] = 1 - share.slice(0, -1).reduce((s, x) => s + x, 0);
  return share.map((x) => Math.max(0, x));
}

/** The table with its load bounds and cluster shares (version 3), validated. */
export function withLoadBounds(t: Table, bound: LoadBound, share: number[]): Table {
  const { version: _v, ...rest } = t;
  const out = { ...rest, load_bound: bound, cluster_share: share };
  return validateTable({ ...out, version: versionNeeded(out) });
}

/** A rule of the preset as a fallback (its parameters as `dolphin simulate` and the baselines set them). */
function fallbackOf(kind: "dynamo-isl-or-load" | "dynamo-legacy" | "dynamo-load", preset: ModelPreset): Fallback {
  return { kind, params: { ...((ruleTableFor(kind, preset).params ?? {}) as Record<string, number>) } };
}

/**
 * The load-reactive fallback rules (issue 24): Dynamo's isl_or_load with its decode-busy gate, its legacy rule and its
 * load rule, with the preset's token budget and KV capacity (src/sim/rule-table.ts).
 */
export function loadReactiveFallbacks(preset: ModelPreset): Fallback[] {
  return (["dynamo-isl-or-load", "dynamo-legacy", "dynamo-load"] as const).map((kind) => fallbackOf(kind, preset));
}

/**
 * The guarded search's rules by default: it starts from Dynamo's isl_or_load (the load sweep's strongest rule on its
 * own: 44 of 54 cells against isl_bounding's 29, docs/results.md), and tries isl_bounding, the legacy rule and the
 * load rule as fallbacks in its place.
 */
export function guardRules(preset: ModelPreset): { start: Fallback; fallbacks: Fallback[] } {
  const [start, ...others] = loadReactiveFallbacks(preset);
  return { start: start!, fallbacks: [DEFAULT_FALLBACK, ...others] };
}
