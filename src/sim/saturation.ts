// The saturated load (the highest arrival rate at which the reference policy still meets the SLO) and the
// arrival-rate scale a `--load` asks for; browser-safe, shared by `dolphin simulate` (run.ts) and the learner's jobs.

import { ruleTable } from "../table.js";
import { simulate, type SimConfig, type SimResult } from "./simulator.js";
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
  /** (scale, SLO attainment) probes, in the order tried */
  probes: [number, number][];
}

/** The SLO attainment the reference policy must keep at the saturated load. */
export const SATURATION_ATTAINMENT = 0.9;

/**
 * The saturated load: the highest arrival rate at which the cluster, routed by Dynamo's isl_bounding rule (the
 * reference every policy is compared against), still meets the SLO end to end for 90% of requests — DistServe's
 * goodput rate for that SLO. Above it queues build and attainment collapses; below it routing hardly matters.
 * Found by doubling or halving the workload's rate until the 90% line is bracketed, then 6 bisection steps (to
 * within ~1.1%). The probes use at most the first 1,500 requests to keep the search quick.
 */
export function findSaturatedScale(w: Workload, config: Omit<SimConfig, "table">): Saturation {
  const probeWorkload: Workload = { ...w, requests: w.requests.slice(0, 1500) };
  const probeConfig: SimConfig = { ...config, table: ruleTable("dynamo-isl") };
  const probes: [number, number][] = [];
  const ok = (s: number): boolean => {
    const r: SimResult = simulate(withLoad(probeWorkload, { kind: "scale", factor: s }), probeConfig);
    probes.push([s, r.summary.slo_attainment]);
    return r.summary.slo_attainment >= SATURATION_ATTAINMENT;
  };
  let lo: number;
  let hi: number;
  if (ok(1)) {
    lo = 1;
    hi = 2;
    while (hi < 1024 && ok(hi)) [lo, hi] = [hi, hi * 2];
  } else {
    hi = 1;
    lo = 0.5;
    while (lo > 1 / 1024 && !ok(lo)) [lo, hi] = [lo / 2, lo];
  }
  for (let i = 0; i < 6; i++) {
    const mid = Math.sqrt(lo * hi);
    if (ok(mid)) lo = mid;
    else hi = mid;
  }
  return { scale: lo, rps: w.rate * lo, probes };
}
