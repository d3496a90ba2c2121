// A workload whose arrival rate changes within the run (issue 24): the learner's arrivals span loads, so a table's
// values are tested at low, saturated and overloaded levels, and the load-sweep study has a ramp to evaluate on.
//
// The same requests in the same order: each inter-arrival gap is divided by the rate multiplier at its place in the
// run (i / n), so the request count (and so a search's cost per evaluation) stays the same and only the timing
// changes. `flat` is the workload itself.

import type { Workload } from "./types.js";

export const LOAD_PROFILES = ["flat", "ramp", "steps"] as const;
export type LoadProfile = (typeof LOAD_PROFILES)[number];

/** The lowest and highest rate multiplier of `ramp` and `steps` (times the workload's own rate). */
export const PROFILE_RANGE = { low: 0.5, high: 2 } as const;

/**
 * The rate multiplier at fraction u ∈ [0, 1) of the requests: `ramp` rises geometrically from 0.5× to 2× (as
 * much of the run below 1× as above it), `steps` holds 0.5×, 1×, 1.5× and 2× for a quarter of the requests each.
 */
export function rateMultiplier(profile: LoadProfile, u: number): number {
  const { low, high } = PROFILE_RANGE;
  switch (profile) {
    case "flat":
      return 1;
    case "ramp":
      return low * Math.pow(high / low, Math.min(Math.max(u, 0), 1));
    case "steps":
      return [0.5, 1, 1.5, 2][Math.min(3, Math.max(0, Math.floor(4 * u)))]!;
  }
}

/** The workload with its rate following `profile` (the same object for `flat`; new request objects otherwise). */
export function withRateProfile(w: Workload, profile: LoadProfile): Workload {
  if (profile === "flat" || w.requests.length < 2) return w;
  const n = w.requests.length;
  let t = w.requests[0]!.arrivalMs;
  const requests = w.requests.map((r, i) => {
    if (i > 0) t += (r.arrivalMs - w.requests[i - 1]!.arrivalMs) / rateMultiplier(profile, i / n);
    return { ...r, arrivalMs: t };
  });
  const span = (t - requests[0]!.arrivalMs) / 1000;
  return {
    name: `${w.name} (${profile} ${PROFILE_RANGE.low}–${PROFILE_RANGE.high}×)`,
    requests,
    rate: span > 0 ? (n - 1) / span : w.rate,
  };
}

/** Parses a `--load-profile` value. */
export function parseLoadProfile(s: string): LoadProfile {
  if ((LOAD_PROFILES as readonly string[]).includes(s)) return s as LoadProfile;
  throw new Error(`--load-profile must be ${LOAD_PROFILES.join(", ")}; got ${JSON.stringify(s)}`);
}
