// The learner's clustering: requests' features (isl, eff_P, eff_D, osl_hat or a subset) are log1p'd and standardized
// (fitScaler, standardize), then grouped by k-means (fitKMeans) or a diagonal Gaussian mixture (fitGmm). The models'
// parameters go into a table as docs/table-format.md describes (scaler, centroids, variances, weights); nearestCentroid
// and gmmAssign are the core's decision rules (assembly/policy.ts, classify) in plain TypeScript, with the same
// arithmetic in the same order, so a row is put in the cluster the core would put it in.
//
// k-means: greedy k-means++ seeding (Arthur & Vassilvitskii 2007, with 2 + ⌊ln K⌋ candidates per centre as in
// scikit-learn's _kmeans_plusplus and ml-kmeans) with our seeded generator, so restarts are reproducible, then Lloyd
// iterations by ml-kmeans (an empty cluster keeps its centre; stop when every centre moved ≤ 1e-6 in squared
// distance, or after 100 iterations). Measured here: 8 restarts on 20,000 × 4 rows, K = 8, take ~2 s; the learner's
// training sets are 1,000–4,000 rows.
//
// Gaussian mixture: EM with diagonal covariances in log space (log-sum-exp), written here because no npm package fits
// (checked 2026-11): `gaussian-mixture` 0.9.1 is one-dimensional; `gaussian-mixture-model` 1.1.5 fits full
// covariances (Cholesky) from parameters the caller supplies, in linear space, with no seeding, variance floor or
// diagonal mode. Each restart starts from one seeded k-means run.

import { kmeans as mlKMeans } from "ml-kmeans";
import { Rng } from "../sim/rng.js";

export type { FeatureName } from "../table/table.js";

/** Smallest standard deviation fitScaler returns, so a constant column does not divide by zero (its z is then ~0). */
export const STD_FLOOR = 1e-6;
const KMEANS_RESTARTS = 8;
const KMEANS_MAX_ITERATIONS = 100; // ml-kmeans' default
const KMEANS_TOLERANCE = 1e-6; // ml-kmeans' default: squared distance a centre may still move at convergence
const GMM_RESTARTS = 3;
const GMM_MAX_ITERATIONS = 200;
const GMM_TOLERANCE = 1e-6;
const GMM_VARIANCE_FLOOR = 1e-3;
/** A component whose total responsibility falls below this (in rows) has lost its data and is re-seeded. */
const EMPTY_RESPONSIBILITY = 1e-8;
const LOG_2PI = Math.log(2 * Math.PI);

export interface Scaler {
  mean: number[];
  std: number[];
}
export interface KMeansModel {
  kind: "kmeans";
  centroids: number[][];
  inertia: number;
  assignments: number[];
}
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

export interface KMeansOptions {
  /** Seed of restart 0; restart r uses seed + r. Default 0. */
  seed?: number;
  /** Seeded runs; the one with the lowest inertia is kept (ties: the earlier). Default 8. */
  restarts?: number;
  /** Lloyd iterations per run. Default 100. */
  maxIterations?: number;
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

// ------------------------------------------------------------------------------------------------------------------
// Argument checks. Every message names the function and the argument.

function fail(fn: string, message: string): never {
  throw new Error(`${fn}: ${message}`);
}

/** Rows as one row-major Float64Array; rejects empty input, ragged rows and non-finite values. */
function flatten(
  fn: string,
  arg: string,
  rows: number[][],
  transform?: (x: number) => number,
): { x: Float64Array; n: number; d: number } {
  if (!Array.isArray(rows) || rows.length === 0) fail(fn, `${arg} is empty (need at least one row)`);
  const d = Array.isArray(rows[0]) ? rows[0].length : 0;
  if (d === 0) fail(fn, `${arg}[0] has no columns (need at least one)`);
  const n = rows.length;
  const x = new Float64Array(n * d);
  for (let i = 0; i < n; i++) {
    const row = rows[i];
    if (!Array.isArray(row) || row.length !== d)
      fail(fn, `${arg}[${i}] has ${Array.isArray(row) ? row.length : "no"} columns, expected ${d}`);
    for (let j = 0; j < d; j++) {
      const raw = row[j] as number;
      const v = transform ? transform(raw) : raw;
      if (typeof raw !== "number" || !Number.isFinite(v)) {
        fail(
          fn,
          transform
            ? `${arg}[${i}][${j}] must be a finite number > −1 (it is log1p'd), got ${String(raw)}`
            : `${arg}[${i}][${j}] is not a finite number: ${String(raw)}`,
        );
      }
      x[i * d + j] = v;
    }
  }
  return { x, n, d };
}

function checkInteger(fn: string, arg: string, v: number, min: number): void {
  if (!Number.isSafeInteger(v) || v < min) fail(fn, `${arg} must be an integer ≥ ${min}, got ${String(v)}`);
}

function checkPositive(fn: string, arg: string, v: number, allowZero: boolean): void {
  if (typeof v !== "number" || !Number.isFinite(v) || v < 0 || (!allowZero && v === 0)) {
    fail(fn, `${arg} must be a finite number ${allowZero ? "≥" : ">"} 0, got ${String(v)}`);
  }
}

function toRows(a: Float64Array, rows: number, d: number): number[][] {
  const out: number[][] = [];
  for (let r = 0; r < rows; r++) out.push(Array.from(a.subarray(r * d, (r + 1) * d)));
  return out;
}

// ------------------------------------------------------------------------------------------------------------------
// Scaling.

/** log1p, then the mean and population standard deviation of each column (std floored at STD_FLOOR = 1e-6, so a
 *  constant column does not divide by zero). Values must be finite and > −1. */
export function fitScaler(rows: number[][]): Scaler {
  const { x, n, d } = flatten("fitScaler", "rows", rows, Math.log1p);
  const mean = new Array<number>(d).fill(0);
  const std = new Array<number>(d).fill(0);
  for (let j = 0; j < d; j++) {
    let s = 0;
    for (let i = 0; i < n; i++) s += x[i * d + j]!; // bounded by n·d = x.length
    const m = s / n;
    let ss = 0;
    for (let i = 0; i < n; i++) {
      const e = x[i * d + j]! - m;
      ss += e * e;
    }
    mean[j] = m;
    std[j] = Math.max(Math.sqrt(ss / n), STD_FLOOR);
  }
  return { mean, std };
}

/** z = (log1p(x) − mean) / std per column, as the core computes it. */
export function standardize(rows: number[][], s: Scaler): number[][] {
  const { x, n, d } = flatten("standardize", "rows", rows, Math.log1p);
  if (s.mean.length !== d || s.std.length !== d) {
    fail("standardize", `scaler has ${s.mean.length} means and ${s.std.length} stds but rows have ${d} columns`);
  }
  const out: number[][] = [];
  for (let i = 0; i < n; i++) {
    const row = new Array<number>(d);
    for (let j = 0; j < d; j++) row[j] = (x[i * d + j]! - s.mean[j]!) / s.std[j]!;
    out.push(row);
  }
  return out;
}

// ------------------------------------------------------------------------------------------------------------------
// Nearest centroid (the core's kmeans rule).

/** Nearest centre of each row by squared Euclidean distance, ties to the lower index; fills `assign`, returns the
 *  sum of the squared distances (the inertia). */
function assignNearest(
  x: Float64Array,
  n: number,
  d: number,
  centers: Float64Array,
  k: number,
  assign: Int32Array,
): number {
  let inertia = 0;
  for (let i = 0; i < n; i++) {
    const at = i * d;
    let best = 0;
    let bestDist = Infinity;
    for (let c = 0; c < k; c++) {
      let dist = 0;
      const ct = c * d;
      for (let j = 0; j < d; j++) {
        const diff = x[at + j]! - centers[ct + j]!; // bounded by n·d and k·d
        dist += diff * diff;
      }
      if (dist < bestDist) {
        bestDist = dist;
        best = c;
      }
    }
    assign[i] = best;
    inertia += bestDist;
  }
  return inertia;
}

/** Index of the nearest centroid of each row (squared Euclidean distance, ties to the lower index). */
export function nearestCentroid(z: number[][], centroids: number[][]): number[] {
  const { x, n, d } = flatten("nearestCentroid", "z", z);
  const c = flatten("nearestCentroid", "centroids", centroids);
  if (c.d !== d) fail("nearestCentroid", `centroids have ${c.d} columns but z has ${d}`);
  const assign = new Int32Array(n);
  assignNearest(x, n, d, c.x, c.n, assign);
  return Array.from(assign);
}

// ------------------------------------------------------------------------------------------------------------------
// k-means.

function squaredDistance(x: Float64Array, a: number, y: Float64Array, b: number, d: number): number {
  let s = 0;
  for (let j = 0; j < d; j++) {
    const diff = x[a + j]! - y[b + j]!;
    s += diff * diff;
  }
  return s;
}

/** Greedy k-means++ starting centres, k·d row-major. Returns how many are distinct data points: fewer than k when
 *  the data have fewer distinct points than k, and the rest are then copies of those (cycling from the first). */
function seedKMeansPlusPlus(
  x: Float64Array,
  n: number,
  d: number,
  k: number,
  seed: number,
): { centers: Float64Array; distinct: number } {
  const rng = new Rng(seed);
  const centers = new Float64Array(k * d);
  const trials = 2 + Math.floor(Math.log(k));
  let closest = new Float64Array(n); // squared distance of each row to its nearest chosen centre
  let candidate = new Float64Array(n);
  let bestCandidate = new Float64Array(n);
  const cumulative = new Float64Array(n);
  const first = rng.int(n);
  centers.set(x.subarray(first * d, first * d + d), 0);
  for (let i = 0; i < n; i++) closest[i] = squaredDistance(x, i * d, x, first * d, d);
  let chosen = 1;
  for (; chosen < k; chosen++) {
    let potential = 0;
    for (let i = 0; i < n; i++) cumulative[i] = potential += closest[i]!;
    if (!(potential > 0)) break; // every row coincides with a chosen centre: fewer distinct points than k
    let best = -1;
    let bestPotential = Infinity;
    for (let t = 0; t < trials; t++) {
      const idx = sampleCumulative(cumulative, rng.next() * potential, closest);
      let p = 0;
      for (let i = 0; i < n; i++) p += candidate[i] = Math.min(closest[i]!, squaredDistance(x, i * d, x, idx * d, d));
      if (p < bestPotential) {
        bestPotential = p;
        best = idx;
        [bestCandidate, candidate] = [candidate, bestCandidate];
      }
    }
    centers.set(x.subarray(best * d, best * d + d), chosen * d);
    [closest, bestCandidate] = [bestCandidate, closest];
  }
  for (let c = chosen; c < k; c++) centers.copyWithin(c * d, (c % chosen) * d, (c % chosen) * d + d);
  return { centers, distinct: chosen };
}

/** First row whose cumulative weight exceeds r: a row drawn with probability ∝ its weight (never a weight-0 row). */
function sampleCumulative(cumulative: Float64Array, r: number, weight: Float64Array): number {
  let lo = 0;
  let hi = cumulative.length - 1;
  if (!(r < cumulative[hi]!)) {
    // r rounded up to the total: take the last row with weight
    while (hi > 0 && !(weight[hi]! > 0)) hi--;
    return hi;
  }
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (cumulative[mid]! > r) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/** Lloyd iterations from `start` by ml-kmeans (its assignment and mean rules; an empty cluster keeps its centre). */
function lloydIterations(
  x: Float64Array,
  n: number,
  d: number,
  start: Float64Array,
  k: number,
  maxIterations: number,
): Float64Array {
  const r = mlKMeans(toRows(x, n, d), k, {
    initialization: toRows(start, k, d),
    maxIterations,
    tolerance: KMEANS_TOLERANCE,
  });
  return Float64Array.from(r.centroids.flat());
}

function kmeansFlat(
  x: Float64Array,
  n: number,
  d: number,
  k: number,
  seed: number,
  restarts: number,
  maxIterations: number,
): { centers: Float64Array; assign: Int32Array; inertia: number } {
  let best: { centers: Float64Array; assign: Int32Array; inertia: number } | undefined;
  for (let r = 0; r < restarts; r++) {
    // k-means++ seeding (greedy, seeded) and Lloyd iterations by ml-kmeans
    const { centers: start, distinct } = seedKMeansPlusPlus(x, n, d, k, seed + r);
    const centers = distinct < k ? start : lloydIterations(x, n, d, start, k, maxIterations);
    const assign = new Int32Array(n);
    const inertia = assignNearest(x, n, d, centers, k, assign);
    if (!best || inertia < best.inertia) best = { centers, assign, inertia };
    // Fewer distinct points than k: the seeding already put a centre on each point (inertia 0), as every restart would.
    if (distinct < k) break;
  }
  return best!;
}

/**
 * k-means with greedy k-means++ seeding and `restarts` seeded runs (seeds seed, seed + 1, …), keeping the lowest
 * inertia. Always returns k centroids: when the rows have fewer than k distinct points, each distinct point is a
 * centroid and the rest repeat them (duplicates then get no rows, ties going to the lower index). `assignments` and
 * `inertia` are those of nearestCentroid on the returned centroids.
 */
export function fitKMeans(z: number[][], k: number, opts: KMeansOptions = {}): KMeansModel {
  const fn = "fitKMeans";
  const { x, n, d } = flatten(fn, "z", z);
  checkInteger(fn, "k", k, 1);
  const seed = opts.seed ?? 0;
  const restarts = opts.restarts ?? KMEANS_RESTARTS;
  const maxIterations = opts.maxIterations ?? KMEANS_MAX_ITERATIONS;
  checkInteger(fn, "opts.seed", seed, -Number.MAX_SAFE_INTEGER);
  checkInteger(fn, "opts.restarts", restarts, 1);
  checkInteger(fn, "opts.maxIterations", maxIterations, 1);
  const best = kmeansFlat(x, n, d, k, seed, restarts, maxIterations);
  return {
    kind: "kmeans",
    centroids: toRows(best.centers, k, d),
    inertia: best.inertia,
    assignments: Array.from(best.assign),
  };
}

/** Lloyd iterations from given centroids (no seeding, no restarts): refines a model's centroids on new rows. With
 *  fewer than k distinct start centroids, duplicates stay duplicates (their rows go to the lower index). */
export function refineKMeans(
  z: number[][],
  start: number[][],
  opts: Pick<KMeansOptions, "maxIterations"> = {},
): KMeansModel {
  const fn = "refineKMeans";
  const { x, n, d } = flatten(fn, "z", z);
  const s = flatten(fn, "start", start);
  if (s.d !== d) fail(fn, `start has ${s.d} columns but z has ${d}`);
  const maxIterations = opts.maxIterations ?? KMEANS_MAX_ITERATIONS;
  checkInteger(fn, "opts.maxIterations", maxIterations, 1);
  const centers = lloydIterations(x, n, d, s.x, s.n, maxIterations);
  const assign = new Int32Array(n);
  const inertia = assignNearest(x, n, d, centers, s.n, assign);
  return { kind: "kmeans", centroids: toRows(centers, s.n, d), inertia, assignments: Array.from(assign) };
}

// ------------------------------------------------------------------------------------------------------------------
// Gaussian mixture.

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
 * lower k. The core's rule exactly (assembly/policy.ts classify, with the constants src/table/staging.ts computes).
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
