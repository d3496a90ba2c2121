// The simulator's calibrated step-time model: the time of one forward pass ("step") of an instance under continuous
// batching with chunked prefill, and of a run of pure-decode steps in closed form. A preset holds the coefficients
// (model-presets.ts); the time to ship KV between instances is kv-transfer.ts.
//
// Model and coefficients: shared/docs/perf-model.md. Calibration against measured profiles, and the error to expect
// (about ±25% against current vLLM): docs/simulator-calibration.md, test/sim-perf.test.ts. Every routing result of
// the simulator inherits that error. Pure functions, no I/O, no Node built-ins (the browser explorer loads this).

import type { ModelPreset } from "./model-presets.js";

/**
 * Time of one step: t_fix + max(T_w, k_lin·T) + (tp > 1 ? c_ar + k_ar·T : 0) + k_kv·decodeContextTokens
 * + c_attn·prefillAttnPairs, with T = decodeSeqs + prefillTokens. An empty step (T = 0) takes no time.
 * `decodeContextTokens` sums the context of every decode sequence; `prefillAttnPairs` sums attnPairs() over chunks.
 */
export function stepTimeMs(
  p: ModelPreset,
  decodeSeqs: number,
  decodeContextTokens: number,
  prefillTokens: number,
  prefillAttnPairs: number,
): number {
  const t = decodeSeqs + prefillTokens;
  if (t <= 0) return 0;
  const linear = Math.max(p.weightStreamMs, p.kLinMs * t);
  const allReduce = p.tp > 1 ? p.cArMs + p.kArMs * t : 0;
  return p.tFixMs + linear + allReduce + p.kKvMs * decodeContextTokens + p.cAttnMs * prefillAttnPairs;
}

/** (query, key) pairs of causal prefill attention for `newTokens` on `cachedTokens` already in the KV cache. */
export function attnPairs(newTokens: number, cachedTokens: number): number {
  return newTokens * cachedTokens + (newTokens * newTokens) / 2;
}

// ---- decode runs: many pure-decode steps at once ----

/** The part of a pure-decode step that does not depend on context: t_fix + max(T_w, k_lin·s) + all-reduce. */
function decodeStepBaseMs(p: ModelPreset, seqs: number): number {
  return stepTimeMs(p, seqs, 0, 0, 0);
}

/**
 * Time of `steps` consecutive pure-decode steps with `seqs` sequences whose total context starts at `ctx0` and grows
 * by `seqs` per step (closed form, no loop). Step i (0-based) has context ctx0 + i·seqs, so the sum is
 * steps·base + k_kv·(steps·ctx0 + seqs·steps·(steps − 1)/2). T = seqs is fixed, so the max(T_w, k_lin·T) branch
 * never flips inside a run.
 */
export function decodeRunMs(p: ModelPreset, seqs: number, ctx0: number, steps: number): number {
  if (seqs <= 0 || steps <= 0) return 0;
  return steps * decodeStepBaseMs(p, seqs) + p.kKvMs * (steps * ctx0 + (seqs * steps * (steps - 1)) / 2);
}

/**
 * The largest number of such steps (0 … maxSteps) that fit within `budgetMs`: decodeRunMs(result) ≤ budgetMs, and
 * budgetMs < decodeRunMs(result + 1) when result < maxSteps. Solves a·n + b·n(n − 1)/2 = budget for n (the stable
 * root of a quadratic), then a guard corrects the last unit of float error. Empty steps (seqs 0) are free: maxSteps.
 * A negative or NaN budget gives 0.
 */
export function decodeStepsWithin(
  p: ModelPreset,
  seqs: number,
  ctx0: number,
  budgetMs: number,
  maxSteps: number,
): number {
  const max = Math.max(0, Math.floor(maxSteps));
  if (seqs <= 0) return max;
  if (!(budgetMs >= 0) || max === 0) return 0;
  const a = decodeStepBaseMs(p, seqs) + p.kKvMs * ctx0; // first step
  const b = p.kKvMs * seqs; // growth per step
  // (b/2)·n² + (a − b/2)·n − budget = 0. Positive root in the form that does not cancel when b ≪ a.
  const qa = b / 2;
  const qb = a - b / 2;
  const disc = Math.sqrt(qb * qb + 4 * qa * budgetMs);
  let n: number;
  if (qb > 0) n = (2 * budgetMs) / (qb + disc);
  else if (qa > 0) n = (-qb + disc) / (2 * qa);
  else n = Infinity; // steps cost nothing
  n = Number.isFinite(n) ? Math.min(max, Math.max(0, Math.floor(n))) : max;
  // Guard: the root is within a few ulps, so each loop runs at most a step or two.
  while (n > 0 && decodeRunMs(p, seqs, ctx0, n) > budgetMs) n--;
  while (n < max && decodeRunMs(p, seqs, ctx0, n + 1) <= budgetMs) n++;
  return n;
}
