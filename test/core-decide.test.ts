// The core's k-means decide keeps four running minima (two f64x2 accumulators over alternating centroid pairs) and
// merges them at the end: every placement of an exact tie for the nearest centroid, across lanes, accumulators and
// an odd K's padding, must still give the lowest index, with the score and every cluster's distance unchanged, as
// the TypeScript reference (one scalar scan) does.
import { describe, expect, it } from "vitest";
import { createCore, instantiateCore } from "../src/core/core.js";
import { ReferenceEngine } from "../src/reference/engine.js";
import { stageTable } from "../src/table/staging.js";
import type { Table } from "../src/table/table.js";
import { validateTable } from "../src/table/validate.js";
import { coreModule } from "./helpers.js";

const FEATURES = ["isl", "eff_P", "eff_D", "osl_hat"];
const CONFIG = { maxWorkers: 4, maxInputBytes: 4096, indexBlocks: 0 };
const INPUT = [5000, 1000, 2500, 300] as const;
const SCALER = { mean: [7.5, 6.5, 6.5, 5.5], std: [1.5, 2, 2, 1] };

function kmeans(centroids: number[][]): Table {
  return validateTable({
    format: "dolphin-routing.table",
    version: 1,
    kind: "kmeans",
    features: FEATURES,
    scaler: SCALER,
    centroids,
    bits: centroids.map((_, i) => i % 2),
    provenance: { tool: "test", created: "2026-11-30T00:00:00Z", workload: "synthetic", seed: 1 },
    checksum: "xxh64:0000000000000000",
  });
}

/** Clusters 0..k−1 far away, except rows `near` (all equal): a tie for the nearest among them. */
function tied(k: number, near: readonly number[]): number[][] {
  const z = INPUT.map((x, j) => (Math.log1p(x) - SCALER.mean[j]!) / SCALER.std[j]!);
  return Array.from({ length: k }, (_, i) =>
    near.includes(i) ? z.map((v) => v + 0.25) : z.map((v, j) => v + 3 + ((i * 7 + j) % 5)),
  );
}

function decideBoth(t: Table, k: number) {
  const s = stageTable(t);
  return [createCore(instantiateCore(coreModule("release")), CONFIG), new ReferenceEngine(CONFIG)].map((e) => {
    e.setTable(s.kind, s.k, s.dims, s.staged, s.oslAt);
    const record = Array.from(e.decideFeatures(INPUT[0], INPUT[1], INPUT[2], INPUT[3], 1, -1));
    return { record, scores: Array.from(e.scores(k)) };
  });
}

describe("k-means decide: an exact tie for the nearest goes to the lowest index", () => {
  for (const k of [2, 3, 4, 5, 6, 7, 8, 9, 12, 13]) {
    it(`K = ${k}: every pair of tied clusters, and all of them tied`, () => {
      const placements = [Array.from({ length: k }, (_, i) => i)];
      for (let a = 0; a < k; a++) for (let b = a + 1; b < k; b++) placements.push([a, b]);
      for (const near of placements) {
        const [wasm, ref] = decideBoth(kmeans(tied(k, near)), k);
        expect(wasm, `tied ${near.join(",")}`).toEqual(ref);
        expect(wasm!.record[5], `tied ${near.join(",")}`).toBe(near[0]); // D_CLUSTER
      }
    });
  }

  it("K = 64 and K = 255: ties between the last clusters, across both accumulators", () => {
    for (const k of [64, 255])
      for (const near of [
        [k - 2, k - 1],
        [k - 4, k - 1],
        [k - 3, k - 2],
        [1, k - 1],
        [2, 3, k - 1],
      ]) {
        const [wasm, ref] = decideBoth(kmeans(tied(k, near)), k);
        expect(wasm).toEqual(ref);
        expect(wasm!.record[5]).toBe(near[0]);
      }
  });
});
