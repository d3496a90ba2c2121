// The learner's clustering (src/learn/scaler.ts, kmeans.ts, gmm.ts): scaling on known numbers; k-means and the
// Gaussian mixture on seeded blobs with a known partition and known parameters; EM's log-likelihood trace;
// determinism; the decision rules against the documented formulas computed here independently; equivalence of our
// Lloyd iterations with ml-kmeans'; degenerate inputs; fitted models as valid tables. `LEARN_CLUSTER_REPORT=1` prints
// the timings.

import fc from "fast-check";
import { kmeans as mlKMeans } from "ml-kmeans";
import { afterAll, describe, expect, it } from "vitest";
import { fitGmm, gmmAssign, type GmmModel } from "../src/learn/gmm.js";
import { fitKMeans, nearestCentroid, refineKMeans } from "../src/learn/kmeans.js";
import { STD_FLOOR, fitScaler, standardize } from "../src/learn/scaler.js";
import { Rng } from "../src/sim/rng.js";
import { validateTable } from "../src/table/validate.js";
import { PROVENANCE } from "./helpers.js";

// ---- helpers ----

const report: string[] = [];
afterAll(() => {
  if (process.env.LEARN_CLUSTER_REPORT) console.log(`\nlearn-cluster timings\n${report.join("\n")}`);
});

interface Blobs {
  z: number[][];
  labels: number[];
  means: number[][];
  sds: number[][];
  weights: number[];
}

/** Seeded Gaussian blobs, far apart (≥ 10 standard deviations between any two means in some dimension). */
function blobs(n: number, seed: number): Blobs {
  const means = [
    [-6, 0, 4],
    [0, 6, -4],
    [6, 0, 4],
    [0, -6, 0],
  ];
  const sds = [
    [0.5, 0.8, 0.6],
    [0.7, 0.4, 0.5],
    [0.6, 0.6, 0.9],
    [0.4, 0.7, 0.5],
  ];
  const weights = [0.1, 0.2, 0.3, 0.4];
  const rng = new Rng(seed);
  const z: number[][] = [];
  const labels: number[] = [];
  for (let i = 0; i < n; i++) {
    const u = rng.next();
    let c = 0;
    for (let acc = weights[0]!; u >= acc && c < weights.length - 1; acc += weights[++c]!);
    labels.push(c);
    z.push(means[c]!.map((m, j) => m + sds[c]![j]! * rng.normal()));
  }
  return { z, labels, means, sds, weights };
}

/** One overlapping cloud: no cluster structure, so EM and Lloyd take many iterations. */
function cloud(n: number, seed: number): number[][] {
  const rng = new Rng(seed);
  const z: number[][] = [];
  for (let i = 0; i < n; i++) {
    const a = rng.normal();
    z.push([a, 0.8 * a + 0.6 * rng.normal(), rng.normal(), Math.abs(rng.normal())]);
  }
  return z;
}

/** Request features shaped like the learner's (lognormal prompts, prefix hits on some, three output classes). */
function requestFeatures(n: number, seed: number): number[][] {
  const rng = new Rng(seed);
  const rows: number[][] = [];
  for (let i = 0; i < n; i++) {
    const isl = Math.max(1, Math.round(rng.lognormalWithMedian(1500, 1)));
    const hitD = rng.next() < 0.5 ? 0 : Math.floor((isl * rng.next()) / 16) * 16;
    const hitP = rng.next() < 0.7 ? 0 : Math.floor((isl * rng.next()) / 16) * 16;
    const u = rng.next();
    rows.push([isl, isl - hitP, isl - hitD, u < 0.5 ? 100 : u < 0.8 ? 400 : 1500]);
  }
  return rows;
}

const choose2 = (m: number): number => (m * (m - 1)) / 2;

/** Adjusted Rand index (Hubert & Arabie 1985) of two labelings. */
function adjustedRandIndex(a: number[], b: number[]): number {
  const table = new Map<string, number>();
  const rowsA = new Map<number, number>();
  const colsB = new Map<number, number>();
  a.forEach((x, i) => {
    const y = b[i]!;
    table.set(`${x},${y}`, (table.get(`${x},${y}`) ?? 0) + 1);
    rowsA.set(x, (rowsA.get(x) ?? 0) + 1);
    colsB.set(y, (colsB.get(y) ?? 0) + 1);
  });
  let index = 0;
  for (const v of table.values()) index += choose2(v);
  let sa = 0;
  for (const v of rowsA.values()) sa += choose2(v);
  let sb = 0;
  for (const v of colsB.values()) sb += choose2(v);
  const expected = (sa * sb) / choose2(a.length);
  return (index - expected) / ((sa + sb) / 2 - expected);
}

/** The fitted component nearest each true mean (so parameters can be compared up to a permutation). */
function matchComponents(fitted: number[][], truth: number[][]): number[] {
  return truth.map((t) => nearestCentroid([t], fitted)[0]!);
}

/** The documented GMM score, written independently: log w − ½ Σ log(2π σ²) − ½ Σ (z − μ)² / σ². */
function gmmScore(z: number[], m: Pick<GmmModel, "means" | "variances" | "weights">, k: number): number {
  let s = Math.log(m.weights[k]!);
  z.forEach((zj, j) => {
    const v = m.variances[k]![j]!;
    s -= 0.5 * Math.log(2 * Math.PI * v) + (0.5 * (zj - m.means[k]![j]!) ** 2) / v;
  });
  return s;
}

function logSumExp(xs: number[]): number {
  const max = Math.max(...xs);
  return max + Math.log(xs.reduce((s, x) => s + Math.exp(x - max), 0));
}

function inertiaOf(z: number[][], centroids: number[][]): number {
  return z.reduce(
    (s, row) => s + Math.min(...centroids.map((c) => row.reduce((t, v, j) => t + (v - c[j]!) ** 2, 0))),
    0,
  );
}

const sum = (xs: number[]): number => xs.reduce((s, x) => s + x, 0);

// ---- scaling ----

describe("fitScaler and standardize", () => {
  it("log1p then the population mean and std of each column", () => {
    const rows = [
      [0, 3],
      [Math.E - 1, 3],
      [Math.E ** 2 - 1, 3],
    ]; // log1p: 0, 1, 2 and ln 4 three times
    const s = fitScaler(rows);
    expect(s.mean[0]).toBeCloseTo(1, 12);
    expect(s.std[0]).toBeCloseTo(Math.sqrt(2 / 3), 12);
    expect(s.mean[1]).toBeCloseTo(Math.log(4), 12);
    const z = standardize(rows, s);
    expect(z.map((r) => r[0])).toEqual([
      expect.closeTo(-Math.sqrt(1.5), 12),
      expect.closeTo(0, 12),
      expect.closeTo(Math.sqrt(1.5), 12),
    ]);
  });

  it("a constant column gets std = STD_FLOOR (1e-6) and z ≈ 0, never a division by zero", () => {
    const s = fitScaler([[5], [5], [5]]);
    expect(STD_FLOOR).toBe(1e-6);
    expect(s.std).toEqual([STD_FLOOR]);
    for (const [z] of standardize([[5], [5]], s)) expect(Math.abs(z!)).toBeLessThan(1e-6);
  });

  it("one row: mean = log1p(x), std floored", () => {
    const s = fitScaler([[10, 0]]);
    expect(s.mean).toEqual([Math.log1p(10), 0]);
    expect(s.std).toEqual([STD_FLOOR, STD_FLOOR]);
  });

  it("rejects empty, ragged and non-finite input, naming the argument", () => {
    expect(() => fitScaler([])).toThrow(/fitScaler: rows is empty/);
    expect(() => fitScaler([[]])).toThrow(/fitScaler: rows\[0\] has no columns/);
    expect(() => fitScaler([[1, 2], [3]])).toThrow(/fitScaler: rows\[1\] has 1 columns, expected 2/);
    expect(() => fitScaler([[1], [NaN]])).toThrow(/fitScaler: rows\[1\]\[0\] must be a finite number > −1/);
    expect(() => fitScaler([[-2]])).toThrow(/rows\[0\]\[0\]/);
    expect(() => standardize([[1, 2]], { mean: [0], std: [1] })).toThrow(/standardize: scaler has 1 means/);
  });
});

// ---- nearest centroid ----

describe("nearestCentroid", () => {
  it("squared Euclidean distance, ties to the lower index", () => {
    expect(
      nearestCentroid(
        [
          [0, 0],
          [2, 0],
          [1, 0],
          [5, 5],
        ],
        [
          [0, 0],
          [2, 0],
          [2, 0],
        ],
      ),
    ).toEqual([0, 1, 0, 1]);
  });

  it("rejects centroids of another dimension", () => {
    expect(() => nearestCentroid([[0, 0]], [[0]])).toThrow(/centroids have 1 columns but z has 2/);
  });
});

// ---- k-means ----

describe("fitKMeans", () => {
  const data = blobs(4000, 1);

  it("recovers the partition of separated blobs (adjusted Rand index ≥ 0.95)", () => {
    const m = fitKMeans(data.z, 4, { seed: 3 });
    expect(m.kind).toBe("kmeans");
    expect(m.centroids).toHaveLength(4);
    expect(adjustedRandIndex(m.assignments, data.labels)).toBeGreaterThanOrEqual(0.95);
  });

  it("assignments and inertia are those of nearestCentroid on the returned centroids", () => {
    const m = fitKMeans(data.z, 4, { seed: 3 });
    expect(m.assignments).toEqual(nearestCentroid(data.z, m.centroids));
    expect(m.inertia).toBeCloseTo(inertiaOf(data.z, m.centroids), 6);
  });

  it("is deterministic for a seed", () => {
    const z = cloud(2000, 5);
    expect(fitKMeans(z, 6, { seed: 9 })).toEqual(fitKMeans(z, 6, { seed: 9 }));
  });

  it("keeps the lowest inertia of the restarts seed, seed + 1, …", () => {
    const z = cloud(1500, 6);
    const singles = [0, 1, 2, 3].map((r) => fitKMeans(z, 7, { seed: 20 + r, restarts: 1 }).inertia);
    expect(fitKMeans(z, 7, { seed: 20, restarts: 4 }).inertia).toBe(Math.min(...singles));
  });

  it("our Lloyd iterations give ml-kmeans' centroids from the same start (bounds never change an assignment)", () => {
    const z = cloud(3000, 7);
    for (const k of [1, 3, 8]) {
      const start = z.slice(0, k).map((r) => [...r]);
      const ours = refineKMeans(z, start, { maxIterations: 100 });
      const theirs = mlKMeans(z, k, { initialization: start.map((r) => [...r]), maxIterations: 100 });
      expect(ours.centroids).toEqual(theirs.centroids);
    }
  });
});

// ---- Gaussian mixture ----

describe("fitGmm", () => {
  const data = blobs(40_000, 2);
  const model = fitGmm(data.z, 4, { seed: 1 });
  const match = matchComponents(model.means, data.means);

  it("recovers the partition of separated blobs (adjusted Rand index ≥ 0.95)", () => {
    expect(adjustedRandIndex(model.assignments, data.labels)).toBeGreaterThanOrEqual(0.95);
    expect(new Set(match).size).toBe(4);
  });

  it("recovers the true means (within 5% of a standard deviation), variances and weights (within 5%)", () => {
    data.means.forEach((mu, c) => {
      const k = match[c]!;
      mu.forEach((m, j) => expect(Math.abs(model.means[k]![j]! - m)).toBeLessThan(0.05 * data.sds[c]![j]!));
      data.sds[c]!.forEach((sd, j) => expect(model.variances[k]![j]! / sd ** 2).toBeGreaterThan(0.95));
      data.sds[c]!.forEach((sd, j) => expect(model.variances[k]![j]! / sd ** 2).toBeLessThan(1.05));
      expect(Math.abs(model.weights[k]! / data.weights[c]! - 1)).toBeLessThan(0.05);
    });
  });

  it("weights sum to 1 within 1e-9 and every variance is > 0", () => {
    expect(Math.abs(sum(model.weights) - 1)).toBeLessThan(1e-9);
    for (const row of model.variances) for (const v of row) expect(v).toBeGreaterThan(0);
  });

  it("logLikelihood is Σ log p(z) of the returned parameters, computed independently", () => {
    const ll = sum(data.z.map((row) => logSumExp([0, 1, 2, 3].map((k) => gmmScore(row, model, k)))));
    expect(model.logLikelihood).toBeCloseTo(ll, 6);
  });

  it("the log-likelihood never decreases across EM iterations (one overlapping cloud, many iterations)", () => {
    const traces: number[][] = [];
    const m = fitGmm(cloud(3000, 8), 5, {
      seed: 4,
      restarts: 2,
      onIteration: (ll, t, r) => {
        (traces[r] ??= []).push(ll);
        expect(traces[r]).toHaveLength(t + 1);
      },
    });
    expect(traces).toHaveLength(2);
    for (const trace of traces) {
      expect(trace.length).toBeGreaterThan(10);
      for (let t = 1; t < trace.length; t++)
        expect(trace[t]!).toBeGreaterThanOrEqual(trace[t - 1]! - 1e-9 * Math.abs(trace[t - 1]!));
    }
    const kept = traces.find((trace) => trace[trace.length - 1] === m.logLikelihood);
    expect(kept).toBeDefined();
    expect(m.iterations).toBe(kept!.length - 1);
    expect(m.logLikelihood).toBe(Math.max(...traces.map((trace) => trace[trace.length - 1]!)));
  });

  it("re-seeds a component that lost all responsibility; the log-likelihood falls only at that iteration", () => {
    // Five rows, four distinct, six components: component 4 loses its rows at iteration 6 (found by a seeded search).
    const z = [
      [-1, -1],
      [-1, -1],
      [-0.13183510670642923, 0.6410810567195873],
      [1, 1],
      [-2.8857859890754067, -1.142344131417353],
    ];
    const trace: { ll: number; reseeded: number }[] = [];
    const m = fitGmm(z, 6, {
      seed: 231,
      restarts: 1,
      onIteration: (ll, _t, _r, reseeded) => trace.push({ ll, reseeded }),
    });
    expect(trace.some((e) => e.reseeded > 0)).toBe(true);
    for (let t = 1; t < trace.length; t++) {
      if (trace[t]!.reseeded === 0)
        expect(trace[t]!.ll).toBeGreaterThanOrEqual(trace[t - 1]!.ll - 1e-9 * Math.abs(trace[t - 1]!.ll));
    }
    expect(trace[trace.length - 1]!.reseeded).toBe(0); // never stops right after a re-seed
    expect(Math.abs(sum(m.weights) - 1)).toBeLessThan(1e-9);
    for (const w of m.weights) expect(w).toBeGreaterThan(0);
  });

  it("stops at maxIterations", () => {
    let last = -1;
    const m = fitGmm(cloud(1000, 9), 4, {
      restarts: 1,
      maxIterations: 3,
      tolerance: 0,
      onIteration: (_ll, t) => {
        last = t;
      },
    });
    expect(m.iterations).toBe(3);
    expect(last).toBe(3);
  });

  it("is deterministic for a seed", () => {
    const z = cloud(2000, 10);
    expect(fitGmm(z, 4, { seed: 2 })).toEqual(fitGmm(z, 4, { seed: 2 }));
  });

  it("keeps variances at or above varianceFloor", () => {
    const z = cloud(500, 11).map((r) => [r[0]!, 0]); // a constant column: its variance collapses to the floor
    const m = fitGmm(z, 3, { varianceFloor: 0.01 });
    for (const row of m.variances) {
      expect(row[1]).toBe(0.01);
      expect(row[0]!).toBeGreaterThanOrEqual(0.01);
    }
  });

  it("assignments are gmmAssign of the returned parameters", () => {
    expect(model.assignments).toEqual(gmmAssign(data.z, model));
  });
});

// ---- the GMM decision rule ----

describe("gmmAssign", () => {
  const mixture = fc.integer({ min: 1, max: 4 }).chain((d) =>
    fc.integer({ min: 1, max: 6 }).chain((k) =>
      fc.record({
        means: fc.array(fc.array(fc.double({ min: -5, max: 5, noNaN: true }), { minLength: d, maxLength: d }), {
          minLength: k,
          maxLength: k,
        }),
        variances: fc.array(fc.array(fc.double({ min: 1e-3, max: 10, noNaN: true }), { minLength: d, maxLength: d }), {
          minLength: k,
          maxLength: k,
        }),
        weights: fc.array(fc.double({ min: 1e-3, max: 1, noNaN: true }), { minLength: k, maxLength: k }),
        z: fc.array(fc.array(fc.double({ min: -8, max: 8, noNaN: true }), { minLength: d, maxLength: d }), {
          minLength: 1,
          maxLength: 20,
        }),
      }),
    ),
  );

  it("is the argmax of log w − ½ Σ log(2π σ²) − ½ Σ (z − μ)²/σ² (computed independently)", () => {
    fc.assert(
      fc.property(mixture, ({ z, ...m }) => {
        const total = sum(m.weights);
        const mix = { ...m, weights: m.weights.map((w) => w / total) };
        const got = gmmAssign(z, mix);
        z.forEach((row, i) => {
          const scores = mix.means.map((_, k) => gmmScore(row, mix, k));
          const best = Math.max(...scores);
          const expected = scores.indexOf(best);
          // The core groups the arithmetic differently; only a near-tie (within rounding) may resolve either way.
          if (got[i] !== expected) expect(best - scores[got[i]!]!).toBeLessThan(1e-9 * (1 + Math.abs(best)));
        });
      }),
      { numRuns: 300, seed: 42 },
    );
  });

  it("ties go to the lower component", () => {
    const m = { means: [[1], [1], [-1]], variances: [[1], [1], [1]], weights: [0.25, 0.25, 0.5] };
    expect(gmmAssign([[1], [0], [-1]], m)).toEqual([0, 2, 2]);
    expect(gmmAssign([[0]], { means: [[1], [-1]], variances: [[1], [1]], weights: [0.5, 0.5] })).toEqual([0]);
  });

  it("a wider, heavier component wins between two means when its density is higher", () => {
    const m = { means: [[0], [3]], variances: [[0.01], [4]], weights: [0.5, 0.5] };
    expect(gmmAssign([[0], [0.5], [3]], m)).toEqual([0, 1, 1]);
  });

  it("rejects inconsistent shapes and non-positive variances", () => {
    expect(() => gmmAssign([[0]], { means: [[0]], variances: [[0]], weights: [1] })).toThrow(
      /gmmAssign: variances must be > 0/,
    );
    expect(() => gmmAssign([[0]], { means: [[0]], variances: [[1]], weights: [1, 1] })).toThrow(
      /gmmAssign: weights has 2 entries, expected 1/,
    );
    expect(() => gmmAssign([[0, 1]], { means: [[0]], variances: [[1]], weights: [1] })).toThrow(
      /means have 1 columns but z has 2/,
    );
  });
});

// ---- degenerate inputs ----

describe("degenerate inputs", () => {
  const twoPoints = [...Array(30)].map((_, i) => (i % 3 === 0 ? [1, 2] : [-1, 0]));

  it("fewer distinct points than k: k centroids, every distinct point among them, inertia 0", () => {
    const m = fitKMeans(twoPoints, 4, { seed: 5 });
    expect(m.centroids).toHaveLength(4);
    expect(m.centroids).toContainEqual([1, 2]);
    expect(m.centroids).toContainEqual([-1, 0]);
    expect(m.inertia).toBe(0);
    m.assignments.forEach((a, i) => expect(m.centroids[a]).toEqual(twoPoints[i]));
  });

  it("fewer rows than k (all distinct): each row is a centroid", () => {
    const z = [
      [0, 0],
      [1, 0],
      [0, 1],
    ];
    const m = fitKMeans(z, 5);
    for (const row of z) expect(m.centroids).toContainEqual(row);
    expect(m.inertia).toBe(0);
  });

  it("fewer distinct points than k: the mixture still has k components, valid weights and variances", () => {
    const m = fitGmm(twoPoints, 4, { seed: 5 });
    expect(m.means).toHaveLength(4);
    expect(Math.abs(sum(m.weights) - 1)).toBeLessThan(1e-9);
    for (const w of m.weights) expect(w).toBeGreaterThan(0);
    for (const row of m.variances) for (const v of row) expect(v).toBeGreaterThanOrEqual(1e-3);
    expect(Number.isFinite(m.logLikelihood)).toBe(true);
    // identical rows land in one component, and the two points in different ones
    expect(new Set(m.assignments.filter((_, i) => i % 3 === 0)).size).toBe(1);
    expect(m.assignments[0]).not.toBe(m.assignments[1]);
  });

  it("k = 1: the centroid is the mean; the mixture is the mean, the population variance and weight 1", () => {
    const z = [
      [0, 1],
      [2, 1],
      [4, 4],
    ];
    expect(fitKMeans(z, 1).centroids[0]).toEqual([2, 2]);
    const g = fitGmm(z, 1);
    expect(g.means[0]).toEqual([expect.closeTo(2, 12), expect.closeTo(2, 12)]);
    expect(g.variances[0]).toEqual([expect.closeTo(8 / 3, 12), expect.closeTo(2, 12)]);
    expect(g.weights).toEqual([1]);
    expect(g.assignments).toEqual([0, 0, 0]);
  });

  it("n = 1: k copies of the row; the mixture's variances are the floor", () => {
    const m = fitKMeans([[3, -1]], 3);
    expect(m.centroids).toEqual([
      [3, -1],
      [3, -1],
      [3, -1],
    ]);
    expect(m.assignments).toEqual([0]);
    const g = fitGmm([[3, -1]], 2);
    expect(g.means).toEqual([
      [3, -1],
      [3, -1],
    ]);
    expect(g.variances).toEqual([
      [1e-3, 1e-3],
      [1e-3, 1e-3],
    ]);
    expect(Math.abs(sum(g.weights) - 1)).toBeLessThan(1e-9);
  });

  it("a constant column clusters on the other columns", () => {
    const z = blobs(600, 3).z.map((r) => [r[0]!, 0]);
    const labels = blobs(600, 3).labels;
    const m = fitKMeans(z, 4, { seed: 1 });
    for (const c of m.centroids) expect(c[1]).toBe(0);
    const g = fitGmm(z, 4, { seed: 1 });
    for (const v of g.variances) expect(v[1]).toBe(1e-3);
    // blobs 1 and 3 share their first coordinate, so only three groups are distinguishable on it
    const merged = labels.map((l) => (l === 3 ? 1 : l));
    expect(
      adjustedRandIndex(
        m.assignments.map(
          (a) =>
            nearestCentroid(
              [[m.centroids[a]![0]!, 0]],
              [
                [-6, 0],
                [0, 0],
                [6, 0],
              ],
            )[0]!,
        ),
        merged,
      ),
    ).toBeGreaterThan(0.95);
  });

  it("empty input and bad arguments throw errors naming the argument", () => {
    expect(() => fitKMeans([], 2)).toThrow(/fitKMeans: z is empty/);
    expect(() => fitGmm([], 2)).toThrow(/fitGmm: z is empty/);
    expect(() => fitKMeans([[0]], 0)).toThrow(/fitKMeans: k must be an integer ≥ 1, got 0/);
    expect(() => fitGmm([[0]], 1.5)).toThrow(/fitGmm: k must be an integer ≥ 1, got 1.5/);
    expect(() => fitKMeans([[0], [1, 2]], 1)).toThrow(/fitKMeans: z\[1\] has 2 columns, expected 1/);
    expect(() => fitKMeans([[0], [Infinity]], 1)).toThrow(/fitKMeans: z\[1\]\[0\] is not a finite number/);
    expect(() => fitKMeans([[0]], 1, { restarts: 0 })).toThrow(/opts.restarts must be an integer ≥ 1/);
    expect(() => fitGmm([[0]], 1, { varianceFloor: 0 })).toThrow(/opts.varianceFloor must be a finite number > 0/);
    expect(() => fitGmm([[0]], 1, { tolerance: -1 })).toThrow(/opts.tolerance must be a finite number ≥ 0/);
  });
});

// ---- models as tables, and speed ----

describe("fitted models", () => {
  const rows = requestFeatures(20_000, 12);
  const scaler = fitScaler(rows);
  const z = standardize(rows, scaler);

  it("make valid kmeans and gmm tables (weights sum to 1, variances > 0)", () => {
    const km = fitKMeans(z, 8, { seed: 1 });
    const g = fitGmm(z, 8, { seed: 1 });
    const base = {
      format: "dolphin-routing.table",
      version: 1,
      features: ["isl", "eff_P", "eff_D", "osl_hat"],
      scaler,
      bits: [0, 1, 0, 1, 0, 1, 0, 1],
      provenance: PROVENANCE,
      checksum: "xxh64:0000000000000000",
    };
    expect(() => validateTable({ ...base, kind: "kmeans", centroids: km.centroids })).not.toThrow();
    expect(() =>
      validateTable({ ...base, kind: "gmm", centroids: g.means, variances: g.variances, weights: g.weights }),
    ).not.toThrow();
  });

  it("n = 20,000, D = 4, K = 8: k-means (8 restarts) and the mixture (3 restarts) finish (times reported, not asserted)", () => {
    const fitted: { k: number }[] = [];
    const time = (f: () => { centroids?: number[][]; means?: number[][] }): number => {
      const t0 = performance.now();
      const r = f();
      fitted.push({ k: (r.centroids ?? r.means ?? []).length });
      return performance.now() - t0;
    };
    const kmMs = time(() => fitKMeans(z, 8, { seed: 2 }));
    const gmmMs = time(() => fitGmm(z, 8, { seed: 2 }));
    report.push(`request features: k-means ${kmMs.toFixed(0)} ms, GMM ${gmmMs.toFixed(0)} ms`);
    if (process.env.LEARN_CLUSTER_REPORT) {
      // ~5 s more: only when asked for the report
      const hard = cloud(20_000, 13);
      const kmHardMs = time(() => fitKMeans(hard, 8, { seed: 2 }));
      const gmmHardMs = time(() => fitGmm(hard, 8, { seed: 2 }));
      report.push(
        `one structureless cloud (worst case): k-means ${kmHardMs.toFixed(0)} ms, GMM ${gmmHardMs.toFixed(0)} ms`,
      );
    }
    // Targets are 1 s and 2 s on request features: a benchmark's matter (tests check correctness, never wall time)
    expect(fitted.slice(0, 2)).toEqual([{ k: 8 }, { k: 8 }]);
  });
});
