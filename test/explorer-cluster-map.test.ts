// The explorer's cluster map (bindings/browser/explorer/cluster-map.ts): PCA of a table's centroids to 2-D.
import { describe, expect, it } from "vitest";
import { project2d } from "../bindings/browser/explorer/cluster-map.js";

const dist = (a: number[], b: number[]) => Math.hypot(...a.map((x, i) => x - b[i]!));

describe("project2d", () => {
  it("keeps the distances of points that already lie in a plane of a 4-D space", () => {
    const points = [
      [0, 0, 1, 1],
      [3, 0, 1, 1],
      [0, 2, 1, 1],
      [3, 2, 1, 1],
      [1, 1, 1, 1],
    ];
    const xy = project2d(points);
    for (let i = 0; i < points.length; i++) {
      for (let j = 0; j < points.length; j++) expect(dist(xy[i]!, xy[j]!)).toBeCloseTo(dist(points[i]!, points[j]!), 6);
    }
  });

  it("puts the widest spread on the first component", () => {
    const xy = project2d([
      [-10, 0.1, 0],
      [10, -0.1, 0],
      [0, 1, 0],
      [0, -1, 0],
    ]);
    const spread = (k: 0 | 1) => Math.max(...xy.map((p) => p[k])) - Math.min(...xy.map((p) => p[k]));
    expect(spread(0)).toBeGreaterThan(spread(1));
  });

  it("maps degenerate input to the origin: no points, no features, one point, identical points", () => {
    expect(project2d([])).toEqual([]);
    expect(project2d([[]])).toEqual([[0, 0]]);
    expect(project2d([[1, 2, 3]])).toEqual([[0, 0]]);
    expect(
      project2d([
        [1, 2],
        [1, 2],
      ]),
    ).toEqual([
      [0, 0],
      [0, 0],
    ]);
  });
});
