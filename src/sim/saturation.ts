// The saturated load (the highest arrival rate at which the reference policy still meets the SLO) and the
// arrival-rate scale a `--load` asks for; browser-safe, shared by `dolphin simulate` (run.ts) and the learner's jobs.

import { ruleTable } from "../table/rule-table.js";
import { simulate } from "./simulator.js";
import type { SimConfig } from "./sim-config.js";
import type { Workload } from "./types.js";
import { withLoad, type Load } from "./workload.js";

/** The arrival-rate scale a load asks for, relative to the workload's own rate (the saturated one is searched for). */
export function scaleForLoad(load: Load, w: Workload, config: Omit<SimConfig, "table">): number {
  switch (load.kind) {
    case "saturated":
      return findSaturatedScale(w, config).scale;
    case "scale":
      return load.factor;
    case "rate":
      return load.rps / w.rate;
    case "trace":
      return 1;
  }
}

/** The workload with its arrival rate scaled. */
export const atScale = (w: Workload, scale: number): Workload =>
  scale === 1 ? w : withLoad(w, { kind: "scale", factor: scale });

export interface Saturation {
  /** arrival-rate scale factor relative to the workload's own rate */
  scale: number;
  /** requests per second at that scale */
  rps: number;
  /** (scale, SLO attainment) probes the search used, in its order (look-ahead probes it did not use are left out) */
  probes: [number, number][];
}

/** The SLO attainment the reference policy must keep at the saturated load. */
export const SATURATION_ATTAINMENT = 0.9;

/** The probes use at most this many requests (the first ones), to keep the search quick. */
export const SATURATION_PROBE_REQUESTS = 1500;

/** The workload the probes run: the first SATURATION_PROBE_REQUESTS requests at the workload's own rate. */
export const probeWorkload = (w: Workload): Workload => ({
  ...w,
  requests: w.requests.slice(0, SATURATION_PROBE_REQUESTS),
});

/** One probe: the reference policy's SLO attainment on the probe workload at this arrival-rate scale. */
export function probeAttainment(probe: Workload, config: Omit<SimConfig, "table">, scale: number): number {
  const r = simulate(withLoad(probe, { kind: "scale", factor: scale }), { ...config, table: ruleTable("dynamo-isl") });
  return r.summary.slo_attainment;
}

/**
 * One step of the search: the scale it needs the attainment of now, and the scale it will most likely need next
 * (its guess, for a runner that can probe two loads at once; the search's path never depends on it).
 */
export interface SaturationStep {
  need: number;
  next?: number;
}

/**
 * The saturated load: the highest arrival rate at which the cluster, routed by Dynamo's isl_bounding rule (the
 * reference every policy is compared against), still meets the SLO end to end for 90% of requests — DistServe's
 * goodput rate for that SLO. Above it queues build and attainment collapses; below it routing hardly matters.
 * Found by doubling or halving the workload's rate until the 90% line is bracketed, then 6 bisection steps (to
 * within ~1.1%). The probes use at most the first 1,500 requests to keep the search quick.
 *
 * Written as a generator of steps, each answered with the needed scale's attainment, so one search serves a runner
 * that probes in turn (findSaturatedScale) and one that probes the guessed next scale beside the needed one on
 * another thread (src/learn/pool.ts): the same probes are used in the same order, so the same scale either way.
 */
export function* saturationSearch(): Generator<SaturationStep, number, number> {
  const seen = new Map<number, number>();
  const ok = (scale: number, attainment: number): boolean => {
    seen.set(scale, attainment);
    return attainment >= SATURATION_ATTAINMENT;
  };
  let lo: number;
  let hi: number;
  // the first probe's outcome sets the direction; the guess is the usual one (a workload's own rate overloads)
  if (ok(1, yield { need: 1, next: 0.5 })) {
    lo = 1;
    hi = 2;
    while (hi < 1024 && ok(hi, yield { need: hi, next: hi * 2 })) [lo, hi] = [hi, hi * 2];
  } else {
    hi = 1;
    lo = 0.5;
    while (lo > 1 / 1024 && !ok(lo, yield { need: lo, next: lo / 2 })) [lo, hi] = [lo / 2, lo];
  }
  // bisection in log scale; the guess for the step after: the side of the middle where the line through the
  // bracket's two attainments (in log scale) crosses 90%
  for (let i = 0; i < 6; i++) {
    const mid = Math.sqrt(lo * hi);
    const crossing = crossingEstimate(lo, seen.get(lo), hi, seen.get(hi));
    const next = i === 5 ? undefined : crossing < mid ? Math.sqrt(lo * mid) : Math.sqrt(mid * hi);
    if (ok(mid, yield next === undefined ? { need: mid } : { need: mid, next })) lo = mid;
    else hi = mid;
  }
  return lo;
}

/** Where the 90% line is crossed between two probes, interpolated in log scale; the middle when one is unknown. */
function crossingEstimate(lo: number, attLo: number | undefined, hi: number, attHi: number | undefined): number {
  if (attLo === undefined || attHi === undefined || attLo <= attHi) return Math.sqrt(lo * hi);
  const f = (attLo - SATURATION_ATTAINMENT) / (attLo - attHi);
  return Math.exp(Math.log(lo) + f * (Math.log(hi) - Math.log(lo)));
}

/** The saturated load (saturationSearch), its probes run one after another in this thread. */
export function findSaturatedScale(w: Workload, config: Omit<SimConfig, "table">): Saturation {
  const probe = probeWorkload(w);
  const probes: [number, number][] = [];
  const search = saturationSearch();
  let step = search.next();
  while (!step.done) {
    const a = probeAttainment(probe, config, step.value.need);
    probes.push([step.value.need, a]);
    step = search.next(a);
  }
  return { scale: step.value, rps: w.rate * step.value, probes };
}

/**
 * The saturated load (saturationSearch) with probes run elsewhere: `probe` starts one (on a pool: src/learn/pool.ts),
 * and each step's guessed next scale is started beside the needed one, so two probes are in flight while the guesses
 * are right. The same probes decide the same steps as in findSaturatedScale, so the scale is the same.
 */
export async function findSaturatedScaleWith(
  w: Workload,
  probe: (scale: number) => Promise<number>,
): Promise<Saturation> {
  const started = new Map<number, Promise<number>>();
  const run = (scale: number): Promise<number> => {
    let p = started.get(scale);
    if (!p) {
      started.set(scale, (p = probe(scale)));
      p.catch(() => undefined); // a guess nobody awaits must not fail the process; a needed one is awaited below
    }
    return p;
  };
  const probes: [number, number][] = [];
  const search = saturationSearch();
  let step = search.next();
  while (!step.done) {
    const { need, next } = step.value;
    const a = run(need);
    if (next !== undefined) run(next);
    const attainment = await a;
    probes.push([need, attainment]);
    step = search.next(attainment);
  }
  return { scale: step.value, rps: w.rate * step.value, probes };
}
