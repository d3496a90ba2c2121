// Several evaluation arrival sets per study cell (issue 24). At and above the saturated load one run's attainment
// moves by points for reasons that have little to do with the policy: one request's path changes the queues every
// later request meets, so the rules themselves swing by 5–15 points between neighbouring parameter values (a grid of
// isl_or_load's two lines on the load sweep's cells, docs/results.md). A cell's "best rule" on one set is then partly
// the luckiest of ten rules on that set. Averaged over independent sets, each policy's figures, and the best rule with
// them, are what the policy does at that load rather than on one draw.
//
// The sets: the family's own evaluation part first; then, for a generator, the parts drawn with seeds seed + 3,
// seed + 4, … (seed is training, seed + 1 evaluation, seed + 2 the guarded search's held-out arrivals, so every
// extra set is disjoint from all three); for a file whose arrivals are drawn (a lengths file's Poisson arrivals, a
// trace quantised into buckets, Mooncake's 3 s, whose arrivals are spread within each bucket), the same evaluation
// half with its arrivals drawn from seed + 3, …; a trace timed to the millisecond (Azure's) has its own arrivals
// only, so one set.

import type { Percentiles } from "../sim/metrics.js";
import type { PolicyOutcome } from "../report/eval-output.js";
import type { Workload } from "../sim/types.js";
import { isGenerated, workloadParts, type JobOptions } from "./job.js";

/** The first seed offset an extra evaluation set is drawn with (after training, evaluation and held-out). */
export const EXTRA_SET_SEED_OFFSET = 3;

/**
 * Up to `n` evaluation sets of the job's workload: its own evaluation part, then others with other draws (header
 * comment); fewer when the workload's arrivals do not depend on the seed (a trace).
 */
export function evaluationSets(job: JobOptions, first: Workload, n: number): Workload[] {
  if (!(Number.isInteger(n) && n >= 1)) throw new RangeError(`evaluation sets: need an integer ≥ 1, got ${n}`);
  const sets = [first];
  const seed = job.seed ?? 1;
  // each pass adds a set or stops, so the count bounds the loop
  for (let i = 0; sets.length < n; i++) {
    const drawSeed = seed + EXTRA_SET_SEED_OFFSET + i;
    // workloadParts(seed s).eval is the draw with s + 1 for a generator, and the second half under seed s for a file
    const w = workloadParts({ ...job, seed: isGenerated(job) ? drawSeed - 1 : drawSeed }).eval;
    if (sameArrivals(w, first)) break; // a trace: the seed draws nothing
    sets.push(w);
  }
  return sets;
}

function sameArrivals(a: Workload, b: Workload): boolean {
  if (a.requests.length !== b.requests.length) return false;
  return a.requests.every((r, i) => r.arrivalMs === b.requests[i]!.arrivalMs);
}

const meanOf = (xs: number[]): number => xs.reduce((s, x) => s + x, 0) / xs.length;
const meanPercentiles = (ps: Percentiles[]): Percentiles => ({
  p50: meanOf(ps.map((p) => p.p50)),
  p90: meanOf(ps.map((p) => p.p90)),
  p99: meanOf(ps.map((p) => p.p99)),
});

/** A policy's figures averaged over the sets it ran on: attainment, each percentile, shares and counts. */
export function meanOutcome(runs: PolicyOutcome[]): PolicyOutcome {
  if (runs.length === 0) throw new RangeError("meanOutcome: no runs");
  if (runs.length === 1) return runs[0]!;
  return {
    slo_attainment: meanOf(runs.map((r) => r.slo_attainment)),
    ttft_ms: meanPercentiles(runs.map((r) => r.ttft_ms)),
    tpot_ms: meanPercentiles(runs.map((r) => r.tpot_ms)),
    throughput_tokens_per_s: meanOf(runs.map((r) => r.throughput_tokens_per_s)),
    local_fraction: meanOf(runs.map((r) => r.local_fraction)),
    failed: runs.reduce((s, r) => s + r.failed, 0),
  };
}
