// A learned table's cluster map: requests' features (standardized as the core standardizes them) and the table's
// centroids, projected to 2-D by principal component analysis, so a person can see which clusters sit near each
// other, which value each took (local, remote, or the fallback rule), and how the requests near them fared.
// Tables carry no training points, so the points are requests routed by the table in a simulation: the training
// requests after training in the page, the evaluation requests of a Run. Browser-safe and dependency-free: the top
// two eigenvectors of the covariance by power iteration with deflation (a handful of dimensions: 3 or 4 features).

import { standardize } from "../../../src/learn/scaler.js";
import { guardCounts } from "../../../src/learn/guard.js";
import { attainmentByCluster, type RequestRecord, type Slo } from "../../../src/sim/metrics.js";
import { CLUSTER_REMOTE, DEFAULT_FALLBACK, type Table } from "../../../src/table/table.js";

type Point = readonly number[];

/** The first two principal axes of `points` (zero vectors where there is no spread), and their mean. */
function principalAxes(points: readonly Point[]): { mean: number[]; axes: number[][] } {
  const n = points.length;
  const d = points[0]?.length ?? 0;
  const mean = Array.from({ length: d }, (_, j) => points.reduce((s, p) => s + p[j]!, 0) / n);
  const centred = points.map((p) => p.map((x, j) => x - mean[j]!));
  const cov = Array.from({ length: d }, (_, a) =>
    Array.from({ length: d }, (_, b) => centred.reduce((s, p) => s + p[a]! * p[b]!, 0) / n),
  );
  const axes: number[][] = [];
  for (let c = 0; c < Math.min(2, d); c++) {
    let v: number[] = Array.from({ length: d }, (_, j) => (j === c ? 1 : 0.5)); // a start not orthogonal to the leading axis
    let lambda = 0;
    for (let it = 0; it < 200; it++) {
      const w = cov.map((row) => row.reduce((s, x, j) => s + x * v[j]!, 0));
      const norm = Math.hypot(...w);
      if (norm < 1e-12) break;
      v = w.map((x) => x / norm);
      lambda = norm;
    }
    axes.push(lambda > 1e-12 ? v : v.map(() => 0));
    // deflate: remove this component so the next iteration finds the second
    for (let a = 0; a < d; a++) for (let b = 0; b < d; b++) cov[a]![b]! -= lambda * v[a]! * v[b]!;
  }
  return { mean, axes };
}

/** A projection onto the first two principal components of `fit`, applicable to other points of the same space. */
export function pca2(fit: readonly Point[]): (p: Point) => [number, number] {
  if (fit.length === 0 || (fit[0]?.length ?? 0) === 0) return () => [0, 0];
  const { mean, axes } = principalAxes(fit);
  const dot = (p: Point, v: number[] | undefined) => (v ? p.reduce((s, x, j) => s + (x - mean[j]!) * v[j]!, 0) + 0 : 0); // + 0: no -0
  return (p) => [dot(p, axes[0]), dot(p, axes[1])];
}

/** 2-D coordinates of each point along the first two principal components (zeros where there is no spread). */
export function project2d(points: readonly Point[]): [number, number][] {
  return points.map(pca2(points));
}

/** How the table decided a request: by its cluster's bit, by the fallback rule for a rule cluster, or by the
 *  fallback rule because it lay beyond its cluster's out-of-distribution bound or load bound (version 3). */
export type RoutedBy = "local" | "remote" | "rule-cluster" | "out-of-distribution" | "load-out-of-range";

export interface ClusterRow {
  cluster: number;
  /** 0 local, 1 remote, 2 the fallback rule */
  value: number;
  /** requests whose nearest centroid this is, and how many met the SLO (end to end) */
  requests: number;
  met: number;
  /** the out-of-distribution bound (v2), null when the table has none */
  bound: number | null;
  /** of those requests: decided by the fallback rule as a rule cluster, as out of distribution, beyond its load bound */
  ruleCluster: number;
  outOfDistribution: number;
  loadBound: number;
}

export interface ClusterMapView {
  kind: string;
  version: number;
  features: string[];
  /** what the points are; null when there are none (a table opened before any Run) */
  source: string | null;
  centroids: { xy: [number, number]; value: number }[];
  /** at most MAX_MAP_POINTS requests, thinned evenly */
  points: { xy: [number, number][]; routedBy: RoutedBy[] };
  clusters: ClusterRow[];
  /** version 2 tables: the fallback rule and the share of requests each part of the table decided */
  guards: {
    fallback: string;
    oodBounds: boolean;
    cluster: number;
    ruleCluster: number;
    outOfDistribution: number;
    loadBound: number;
  } | null;
}

const MAX_MAP_POINTS = 1500;

/** A request's routing part, recomputed from its admission features as the core scores them (guardCounts). */
function routedBy(t: Table, r: RequestRecord): RoutedBy {
  const g = guardCounts(t, [r]);
  if (g.outOfDistribution) return "out-of-distribution";
  if (g.ruleCluster) return "rule-cluster";
  if (g.loadBound) return "load-out-of-range";
  return t.bits![r.cluster] === CLUSTER_REMOTE ? "remote" : "local";
}

/** The cluster map of a learned table, with `records` (requests it routed) as points; null for rule tables. */
export function clusterMap(
  t: Table,
  records: RequestRecord[] | null,
  slo: Slo,
  source: string | null,
): ClusterMapView | null {
  if ((t.kind !== "kmeans" && t.kind !== "gmm") || !t.features || !t.scaler || !t.centroids || !t.bits) return null;
  const routed = (records ?? []).filter((r) => !r.failed && r.cluster >= 0);
  const step = Math.max(1, routed.length / MAX_MAP_POINTS);
  const shown = Array.from(
    { length: Math.min(routed.length, MAX_MAP_POINTS) },
    (_, i) => routed[Math.floor(i * step)]!,
  );
  const names = t.features;
  const raw = (r: RequestRecord): number[] =>
    names.map(
      (f) => ({ isl: r.features.isl, eff_P: r.features.effP, eff_D: r.features.effD, osl_hat: r.features.oslHat })[f],
    );
  const z = shown.length ? standardize(shown.map(raw), t.scaler) : [];
  const project = pca2(z.length ? z : t.centroids);
  const byCluster = attainmentByCluster(records ?? [], slo);
  const clusters: ClusterRow[] = t.bits.map((value, c) => {
    const mine = routed.filter((r) => r.cluster === c);
    const g = guardCounts(t, mine);
    return {
      cluster: c,
      value,
      requests: byCluster.get(c)?.requests ?? 0,
      met: byCluster.get(c)?.met ?? 0,
      bound: t.ood_bound?.[c] ?? null,
      ruleCluster: g.ruleCluster,
      outOfDistribution: g.outOfDistribution,
      loadBound: g.loadBound,
    };
  });
  const f = t.fallback ?? DEFAULT_FALLBACK;
  const total = guardCounts(t, routed);
  return {
    kind: t.kind,
    version: t.version,
    features: [...names],
    source: records ? source : null,
    centroids: t.centroids.map((c, i) => ({ xy: project(c), value: t.bits![i]! })),
    points: { xy: z.map(project), routedBy: shown.map((r) => routedBy(t, r)) },
    clusters,
    guards:
      t.version >= 2
        ? {
            fallback: `${f.kind} ${JSON.stringify(f.params)}`,
            oodBounds: t.ood_bound !== undefined,
            ...total,
          }
        : null,
  };
}
