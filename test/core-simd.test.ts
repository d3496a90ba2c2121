// The core computes log1p of the features and the k-means distances two lanes at a time (wasm SIMD). Its answers
// must be exactly the scalar ones: log1p as Math.log1p on every branch of musl's algorithm (x < 2^-53, x < 0.4142…,
// and the reduction of 1 + x), distances summed in the scalar order, ties to the lower
// cluster, an odd K's padding lane never chosen, and features in any order or fewer than four.
import { describe, expect, it } from "vitest";
import { createCore, instantiateCore } from "../src/core/core.js";
import { loadCoreModule } from "../src/core/core-file.js";
import { stageTable } from "../src/table/staging.js";
import type { Table } from "../src/table/table.js";
import { validateTable } from "../src/table/validate.js";

const FEATURES = ["isl", "eff_P", "eff_D", "osl_hat"] as const;

function kmeans(features: readonly string[], centroids: number[][], scaler?: { mean: number[]; std: number[] }): Table {
  return validateTable({
    format: "dolphin-routing.table",
    version: 1,
    kind: "kmeans",
    features: [...features],
    scaler: scaler ?? { mean: features.map(() => 0), std: features.map(() => 1) },
    centroids,
    bits: centroids.map((_, i) => i % 2),
    provenance: { tool: "test", created: "2026-11-30T00:00:00Z", workload: "synthetic", seed: 1 },
    checksum: "xxh64:0000000000000000",
  });
}

function engineWith(t: Table) {
  const e = createCore(instantiateCore(loadCoreModule()), { maxWorkers: 4, maxInputBytes: 4096, indexBlocks: 0 });
  const s = stageTable(t);
  e.setTable(s.kind, s.k, s.dims, s.staged, s.oslAt);
  return e;
}

// every branch of log1p for x >= 0, with the boundaries between them
const EDGES = [
  0,
  5e-324,
  1e-300,
  2 ** -60,
  2 ** -53 * 0.999,
  2 ** -53,
  2 ** -53 * 1.001,
  1e-10,
  0.1,
  0.25,
  0.41421,
  0.4142135,
  0.41421357,
  0.4142136,
  Math.SQRT2 - 1,
  0.5,
  0.75,
  1,
  1.5,
  2,
  3,
  7,
  15,
  16,
  17,
  255,
  1000,
  4095,
  4096,
  65535,
  1e6,
  123456.789,
  2 ** 20,
  2 ** 30 - 1,
  2 ** 30,
];

describe("the core's SIMD decide", () => {
  it("standardizes with log1p exactly as Math.log1p, on every branch of its algorithm", () => {
    const e = engineWith(kmeans(FEATURES, [[0, 0, 0, 0]]));
    for (const a of EDGES)
      for (const b of EDGES) {
        const isl = Math.max(a, b);
        const f = [isl, Math.min(a, b), isl === a ? b : a, b];
        e.decideFeatures(f[0]!, f[1]!, f[2]!, f[3]!, 1, -1);
        expect(Array.from(e.standardized(4))).toEqual(f.map((x) => Math.log1p(x)));
      }
  });

  it("gives each cluster the scalar distance and picks the first nearest, for any K, order and feature count", () => {
    let s = 7;
    const rnd = () => (s = (Math.imul(s, 1103515245) + 12345) & 0x7fffffff) / 0x7fffffff;
    for (const k of [1, 2, 3, 8, 9, 64, 255])
      for (const features of [FEATURES, ["osl_hat", "isl", "eff_D"], ["eff_P", "eff_D"], ["isl"]] as const) {
        const d = features.length;
        // a duplicated row makes an exact tie: the lower index must win
        const centroids = Array.from({ length: k }, () => Array.from({ length: d }, () => rnd() * 4 - 2));
        if (k > 2) centroids[k - 1] = [...centroids[1]!];
        const scaler = { mean: features.map(() => rnd() * 8), std: features.map(() => 0.5 + rnd()) };
        const e = engineWith(kmeans(features, centroids, scaler));
        for (let i = 0; i < 50; i++) {
          const isl = Math.floor(rnd() * 100000);
          const values: Record<string, number> = {
            isl,
            eff_P: Math.floor(rnd() * isl),
            eff_D: Math.floor(rnd() * isl),
            osl_hat: Math.floor(rnd() * 4000),
          };
          const out = e.decideFeatures(values["isl"]!, values["eff_P"]!, values["eff_D"]!, values["osl_hat"]!, 1, -1);
          const z = features.map((name, j) => (Math.log1p(values[name]!) - scaler.mean[j]!) / scaler.std[j]!);
          const distances = centroids.map((c) => z.reduce((sum, x, j) => sum + (x - c[j]!) * (x - c[j]!), 0));
          expect(Array.from(e.standardized(d))).toEqual(z);
          expect(Array.from(e.scores(k))).toEqual(distances);
          const nearest = distances.indexOf(Math.min(...distances));
          expect(out[5]).toBe(nearest); // D_CLUSTER
        }
      }
  });
});
