// A table's cluster map: its centroids (in the table's standardized feature space) projected to 2-D by principal
// component analysis, so a person can see which clusters sit near each other and which bit each one took.
// Browser-safe and dependency-free: the top two eigenvectors of the centroids' covariance by power iteration with
// deflation (a handful of dimensions: 3 or 4 features).

/** 2-D coordinates of each point along the first two principal components (zeros where there is no spread). */
export function project2d(points: readonly (readonly number[])[]): [number, number][] {
  const n = points.length;
  const d = points[0]?.length ?? 0;
  if (n === 0 || d === 0) return points.map(() => [0, 0]);
  const mean = Array.from({ length: d }, (_, j) => points.reduce((s, p) => s + p[j]!, 0) / n);
  const centred = points.map((p) => p.map((x, j) => x - mean[j]!));
  const cov = Array.from({ length: d }, (_, a) =>
    Array.from({ length: d }, (_, b) => centred.reduce((s, p) => s + p[a]! * p[b]!, 0) / n),
  );
  const components: number[][] = [];
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
    components.push(lambda > 1e-12 ? v : v.map(() => 0));
    // deflate: remove this component so the next iteration finds the second
    for (let a = 0; a < d; a++) for (let b = 0; b < d; b++) cov[a]![b]! -= lambda * v[a]! * v[b]!;
  }
  const dot = (p: number[], v: number[] | undefined) => (v ? p.reduce((s, x, j) => s + x * v[j]!, 0) + 0 : 0); // + 0: no -0
  return centred.map((p) => [dot(p, components[0]), dot(p, components[1])]);
}
