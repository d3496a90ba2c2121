// The learner's Gaussian mixture over standardized rows (src/learn/scaler.ts). Its parameters go into a table as
// docs/table-format.md describes (means, variances, weights); gmmAssign is the core's gmm rule (assembly/policy.ts,
// classify) in plain TypeScript, with the same arithmetic in the same order, so a row is put in the cluster the core
// would put it in.
//
// Gaussian mixture: EM with diagonal covariances in log space (log-sum-exp), written here because no npm package fits
// (checked 2026-11): `gaussian-mixture` 0.9.1 is one-dimensional; `gaussian-mixture-model` 1.1.5 fits full
// covariances (Cholesky) from parameters the caller supplies, in linear space, with no seeding, variance floor or
// diagonal mode. Each restart starts from one seeded k-means run (src/learn/kmeans.ts).

import { checkInteger, checkPositive, fail, flatten, toRows } from "./cluster-rows.js";
import { KMEANS_MAX_ITERATIONS, kmeansFlat } from "./kmeans.js";

const GMM_RESTARTS = 3;
const GMM_MAX_ITERATIONS = 200;
const GMM_TOLERANCE = 1e-6;
const GMM_VARIANCE_FLOOR = 1e-3;
/** A component whose total responsibility falls below this (in rows) has lost its data and is re-seeded. */
const EMPTY_RESPONSIBILITY = 1e-8;
const LOG_2PI = Math.log(2 * Math.PI);

export interface GmmModel {
  kind: "gmm";
  means: number[][];
  variances: number[][];
  weights: number[];
  /** Total log-likelihood Σ_rows log p(z) of the returned parameters (natural log). */
  logLikelihood: number;
  /** gmmAssign of the rows under the returned parameters. */
  assignments: number[];
  /** EM iterations (M-steps) of the kept restart. */
  iterations: number;
}

export interface GmmOptions {
  /** Seed of restart 0 (its k-means start); restart r uses seed + r. Default 0. */
  seed?: number;
  /** EM runs, each from its own seeded k-means; the highest log-likelihood is kept (ties: the earlier). Default 3. */
  restarts?: number;
  /** EM iterations per run. Default 200. */
  maxIterations?: number;
  /** Stop when |ΔlogL| ≤ tolerance · |logL|. Default 1e-6. */
  tolerance?: number;
  /** Smallest variance of any component in any dimension (standardized units). Default 1e-3. */
  varianceFloor?: number;
  /** Called with the log-likelihood of the parameters after each iteration (iteration 0: the k-means start) and how
   *  many components the M-step that made them re-seeded (the log-likelihood may fall only when that is > 0). */
  onIteration?: (logLikelihood: number, iteration: number, restart: number, reseeded: number) => void;
}

interface Mixture {
  means: Float64Array;
  variances: Float64Array;
  weights: Float64Array;
}

/** Per component: log w_k − ½ (Σ_j log σ²_kj + D·log 2π), computed as src/table/staging.ts stages it for the core. */
function logConstants(m: Mixture, k: number, d: number): Float64Array {
  const out = new Float64Array(k);
  for (let c = 0; c < k; c++) {
    let logDet = 0;
    for (let j = 0; j < d; j++) logDet += Math.log(m.variances[c * d + j]!);
    out[c] = Math.log(m.weights[c]!) - 0.5 * (logDet + d * LOG_2PI);
  }
  return out;
}

function inverses(v: Float64Array): Float64Array {
  const out = new Float64Array(v.length);
  for (let i = 0; i < v.length; i++) out[i] = 1 / v[i]!;
  return out;
}

/** log w_c + log N(x_i; μ_c, diag σ²_c) for every component into `scores`: the core's score, same operations. */
function componentScores(
  x: Float64Array,
  i: number,
  d: number,
  means: Float64Array,
  invVar: Float64Array,
  logConst: Float64Array,
  k: number,
  scores: Float64Array,
): void {
  for (let c = 0; c < k; c++) {
    let q = 0;
    for (let j = 0; j < d; j++) {
      const diff = x[i * d + j]! - means[c * d + j]!;
      q += diff * diff * invVar[c * d + j]!;
    }
    scores[c] = logConst[c]! - 0.5 * q;
  }
}

/** Most likely component of each row (flat), ties to the lower index. */
function assignGmmFlat(x: Float64Array, n: number, d: number, m: Mixture, k: number): Int32Array {
  const logConst = logConstants(m, k, d);
  const invVar = inverses(m.variances);
  const scores = new Float64Array(k);
  const out = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    componentScores(x, i, d, m.means, invVar, logConst, k, scores);
    let best = 0;
    let bestScore = -Infinity;
    for (let c = 0; c < k; c++)
      if (scores[c]! > bestScore) {
        bestScore = scores[c]!;
        best = c;
      }
    out[i] = best;
  }
  return out;
}

/**
 * Most likely component per row: argmax_k log w_k − ½ Σ_j log(2π σ²_kj) − ½ Σ_j (z_j − μ_kj)² / σ²_kj, ties to the
 * lower k. The core's rule exactly (assembly/policy/classify.ts, with the constants src/table/staging.ts computes).
 */
export function gmmAssign(z: number[][], m: Pick<GmmModel, "means" | "variances" | "weights">): number[] {
  const fn = "gmmAssign";
  const { x, n, d } = flatten(fn, "z", z);
  const means = flatten(fn, "means", m.means);
  const variances = flatten(fn, "variances", m.variances);
  const k = means.n;
  if (means.d !== d) fail(fn, `means have ${means.d} columns but z has ${d}`);
  if (variances.n !== k || variances.d !== d)
    fail(fn, `variances are ${variances.n}×${variances.d}, expected ${k}×${d}`);
  if (!Array.isArray(m.weights) || m.weights.length !== k)
    fail(fn, `weights has ${m.weights?.length} entries, expected ${k}`);
  for (let i = 0; i < variances.x.length; i++)
    if (!(variances.x[i]! > 0)) fail(fn, `variances must be > 0, got ${variances.x[i]}`);
  for (const w of m.weights) if (!(w > 0) || !Number.isFinite(w)) fail(fn, `weights must be finite and > 0, got ${w}`);
  return Array.from(
    assignGmmFlat(x, n, d, { means: means.x, variances: variances.x, weights: Float64Array.from(m.weights) }, k),
  );
}

/** Responsibility-weighted sums of one E-step, measured from the current means: mass_c = Σ_i r_ic,
 *  s1 = Σ_i r_ic (x_i − μ_c), s2 = Σ_i r_ic (x_i − μ_c)². Centring on the current means keeps the variance
 *  s2/mass − (s1/mass)² precise for a tight component far from the origin. */
interface Moments {
  mass: Float64Array;
  s1: Float64Array;
  s2: Float64Array;
}

/** Responsibilities below machine epsilon times the largest one in a row are dropped: each would change the row's
 *  sum (≥ 1 after scaling by the largest) by less than one ulp, and skipping them saves their exp. */
const LOG_EPSILON = Math.log(Number.EPSILON);

/**
 * One EM pass over the rows: the E-step of mixture `m` (log space, log-sum-exp) and the moments its M-step needs,
 * fused so each iteration reads the data once and keeps no n×K responsibility matrix. Fills
 * `rowLogLik` with each row's log p(x_i) and returns Σ_i log p(x_i).
 */
function emPass(
  x: Float64Array,
  n: number,
  d: number,
  m: Mixture,
  k: number,
  out: Moments,
  rowLogLik: Float64Array,
): number {
  const logConst = logConstants(m, k, d);
  const invVar = inverses(m.variances);
  const means = m.means;
  const score = new Float64Array(k);
  const diffs = new Float64Array(k * d);
  const { mass, s1, s2 } = out;
  mass.fill(0);
  s1.fill(0);
  s2.fill(0);
  let total = 0;
  for (let i = 0; i < n; i++) {
    const at = i * d;
    let max = -Infinity;
    for (let c = 0; c < k; c++) {
      const cd = c * d;
      let q = 0;
      for (let j = 0; j < d; j++) {
        const diff = x[at + j]! - means[cd + j]!; // bounded by n·d and k·d
        diffs[cd + j] = diff;
        q += diff * diff * invVar[cd + j]!;
      }
      const sc = logConst[c]! - 0.5 * q; // the core's score (componentScores), same order of operations
      score[c] = sc;
      if (sc > max) max = sc;
    }
    let sum = 0;
    for (let c = 0; c < k; c++) {
      const e = score[c]! - max;
      const w = e > LOG_EPSILON ? Math.exp(e) : 0;
      score[c] = w;
      sum += w;
    }
    const ll = max + Math.log(sum); // log-sum-exp
    rowLogLik[i] = ll;
    total += ll;
    const inverseSum = 1 / sum;
    for (let c = 0; c < k; c++) {
      const r = score[c]! * inverseSum;
      if (r === 0) continue;
      mass[c]! += r;
      const cd = c * d;
      for (let j = 0; j < d; j++) {
        const diff = diffs[cd + j]!;
        const rd = r * diff;
        s1[cd + j]! += rd;
        s2[cd + j]! += rd * diff;
      }
    }
  }
  return total;
}

/**
 * M-step: the next mixture into `m` from the moments of an E-step of `m`. A component whose responsibility sums to
 * < EMPTY_RESPONSIBILITY rows is re-seeded: its mean moves to the row the mixture explains worst (lowest
 * log-likelihood; distinct rows for several such components), its variances to the data's (floored) and its weight
 * to one row's worth. Weights are renormalized to sum to 1. Returns how many components were re-seeded.
 */
function maximization(
  x: Float64Array,
  n: number,
  d: number,
  k: number,
  mo: Moments,
  rowLogLik: Float64Array,
  globalVar: Float64Array,
  floor: number,
  m: Mixture,
): number {
  const mass = Float64Array.from(mo.mass);
  let reseeded = 0;
  const used = new Set<number>();
  for (let c = 0; c < k; c++) {
    const mc = mass[c]!;
    if (mc >= EMPTY_RESPONSIBILITY) {
      for (let j = 0; j < d; j++) {
        const shift = mo.s1[c * d + j]! / mc;
        m.means[c * d + j]! += shift;
        m.variances[c * d + j] = Math.max(mo.s2[c * d + j]! / mc - shift * shift, floor);
      }
      continue;
    }
    let worst = -1;
    for (let i = 0; i < n; i++) if (!used.has(i) && (worst < 0 || rowLogLik[i]! < rowLogLik[worst]!)) worst = i;
    if (worst < 0) worst = 0; // more empty components than rows: share a row
    used.add(worst);
    m.means.set(x.subarray(worst * d, worst * d + d), c * d);
    m.variances.set(globalVar, c * d);
    mass[c] = 1;
    reseeded++;
  }
  normalizeWeights(mass, m.weights);
  return reseeded;
}

function normalizeWeights(mass: Float64Array, out: Float64Array): void {
  let total = 0;
  for (let c = 0; c < mass.length; c++) total += mass[c]!;
  for (let c = 0; c < mass.length; c++) out[c] = mass[c]! / total;
}

/** Starting mixture from a hard partition: each cluster's mean, variance (the data's when it has < 2 rows) and share
 *  (one row's worth when empty), variances floored. */
function mixtureFromPartition(
  x: Float64Array,
  n: number,
  d: number,
  k: number,
  centers: Float64Array,
  assign: Int32Array,
  globalVar: Float64Array,
  floor: number,
): Mixture {
  const counts = new Float64Array(k);
  const sums = new Float64Array(k * d);
  for (let i = 0; i < n; i++) {
    const c = assign[i]!;
    counts[c]!++;
    for (let j = 0; j < d; j++) {
      const e = x[i * d + j]! - centers[c * d + j]!;
      sums[c * d + j]! += e * e;
    }
  }
  const variances = new Float64Array(k * d);
  for (let c = 0; c < k; c++) {
    for (let j = 0; j < d; j++)
      variances[c * d + j] = counts[c]! >= 2 ? Math.max(sums[c * d + j]! / counts[c]!, floor) : globalVar[j]!;
    if (counts[c] === 0) counts[c] = 1;
  }
  const weights = new Float64Array(k);
  normalizeWeights(counts, weights);
  return { means: Float64Array.from(centers), variances, weights };
}

function columnVariances(x: Float64Array, n: number, d: number, floor: number): Float64Array {
  const out = new Float64Array(d);
  for (let j = 0; j < d; j++) {
    let s = 0;
    for (let i = 0; i < n; i++) s += x[i * d + j]!;
    const mean = s / n;
    let ss = 0;
    for (let i = 0; i < n; i++) {
      const e = x[i * d + j]! - mean;
      ss += e * e;
    }
    out[j] = Math.max(ss / n, floor);
  }
  return out;
}

/**
 * Diagonal Gaussian mixture by EM. Each of `restarts` runs starts from one k-means run (seed + r, see fitKMeans), then
 * alternates E-steps (log space, log-sum-exp) and M-steps (variances floored at varianceFloor; weights renormalized to
 * sum to 1; a component that loses all responsibility re-seeded at the worst-explained row) until the relative change
 * of the log-likelihood is ≤ tolerance (never right after a re-seed) or maxIterations. The run with the highest
 * log-likelihood is kept. The log-likelihood never falls between iterations except right after a re-seed: the floored
 * variance is the constrained maximizer of the M-step's objective, so flooring keeps EM's ascent.
 */
export function fitGmm(z: number[][], k: number, opts: GmmOptions = {}): GmmModel {
  const fn = "fitGmm";
  const { x, n, d } = flatten(fn, "z", z);
  checkInteger(fn, "k", k, 1);
  const seed = opts.seed ?? 0;
  const restarts = opts.restarts ?? GMM_RESTARTS;
  const maxIterations = opts.maxIterations ?? GMM_MAX_ITERATIONS;
  const tolerance = opts.tolerance ?? GMM_TOLERANCE;
  const floor = opts.varianceFloor ?? GMM_VARIANCE_FLOOR;
  checkInteger(fn, "opts.seed", seed, -Number.MAX_SAFE_INTEGER);
  checkInteger(fn, "opts.restarts", restarts, 1);
  checkInteger(fn, "opts.maxIterations", maxIterations, 0);
  checkPositive(fn, "opts.tolerance", tolerance, true);
  checkPositive(fn, "opts.varianceFloor", floor, false);

  const globalVar = columnVariances(x, n, d, floor);
  const moments: Moments = { mass: new Float64Array(k), s1: new Float64Array(k * d), s2: new Float64Array(k * d) };
  const rowLogLik = new Float64Array(n);
  let best: { m: Mixture; logLikelihood: number; iterations: number } | undefined;
  for (let r = 0; r < restarts; r++) {
    const start = kmeansFlat(x, n, d, k, seed + r, 1, KMEANS_MAX_ITERATIONS);
    const m = mixtureFromPartition(x, n, d, k, start.centers, start.assign, globalVar, floor);
    // Iteration t: the log-likelihood of θ_t (t M-steps from the k-means start). The run stops at θ_t, whose
    // log-likelihood is known, rather than at θ_(t+1), which would need one more pass to score.
    let previous = NaN;
    let reseeded = 0;
    let t = 0;
    for (; ; t++) {
      const ll = emPass(x, n, d, m, k, moments, rowLogLik);
      opts.onIteration?.(ll, t, r, reseeded);
      const converged = t > 0 && reseeded === 0 && Math.abs(ll - previous) <= tolerance * Math.abs(previous);
      previous = ll;
      if (converged || t === maxIterations) break;
      reseeded = maximization(x, n, d, k, moments, rowLogLik, globalVar, floor, m);
    }
    if (!best || previous > best.logLikelihood) best = { m, logLikelihood: previous, iterations: t };
  }
  const { m, logLikelihood, iterations } = best!;
  return {
    kind: "gmm",
    means: toRows(m.means, k, d),
    variances: toRows(m.variances, k, d),
    weights: Array.from(m.weights),
    logLikelihood,
    assignments: Array.from(assignGmmFlat(x, n, d, m, k)),
    iterations,
  };
}
