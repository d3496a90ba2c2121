// The core takes a shorter log1p when all four features are integers (as they nearly always are: token counts):
// musl's reduction without the rounding correction c, which is exactly +0 when 1 + x is exact. Its answers must be
// the reference's log1p bit for bit: every integer up to 2^17, every power of two and its neighbours up to the
// largest feature (2^30 tokens), and random integers across that range; and a non-integer feature among them still
// takes the general path.
import { describe, expect, it } from "vitest";
import { createCore, instantiateCore } from "../src/core/core.js";
import { loadCoreModule } from "../src/core/core-file.js";
import { log1p } from "../src/reference/log1p.js";
import { stageTable } from "../src/table/staging.js";
import { validateTable } from "../src/table/validate.js";

const MAX_TOKENS = 2 ** 30;

function identityScalerEngine() {
  const table = validateTable({
    format: "dolphin-routing.table",
    version: 1,
    kind: "kmeans",
    features: ["isl", "eff_P", "eff_D", "osl_hat"],
    scaler: { mean: [0, 0, 0, 0], std: [1, 1, 1, 1] },
    centroids: [[0, 0, 0, 0]],
    bits: [0],
    provenance: { tool: "test", created: "2026-11-30T00:00:00Z", workload: "synthetic", seed: 1 },
    checksum: "xxh64:0000000000000000",
  });
  const e = createCore(instantiateCore(loadCoreModule()), { maxWorkers: 4, maxInputBytes: 4096, indexBlocks: 0 });
  const s = stageTable(table);
  e.setTable(s.kind, s.k, s.dims, s.staged, s.oslAt);
  return e;
}

/** The features of `values` (any order) as one decide's four, isl the largest so eff_P and eff_D ≤ isl. */
function mismatches(values: readonly number[]): string[] {
  const e = identityScalerEngine();
  const bad: string[] = [];
  for (let i = 0; i < values.length; i += 4) {
    const f = [values[i]!, values[i + 1] ?? 0, values[i + 2] ?? 0, values[i + 3] ?? 0];
    const isl = Math.max(f[0]!, f[1]!, f[2]!);
    const features = [isl, f[1]!, f[2]!, f[3]!];
    e.decideFeatures(features[0]!, features[1]!, features[2]!, features[3]!, 1, -1);
    const got = e.standardized(4);
    for (let j = 0; j < 4; j++)
      if (!Object.is(got[j], log1p(features[j]!)))
        bad.push(`log1p(${features[j]}) = ${got[j]}, not ${log1p(features[j]!)}`);
  }
  return bad;
}

describe("the core's log1p of integer features", () => {
  it("is the reference's for every integer up to 2^17", () => {
    const all = Array.from({ length: 2 ** 17 + 1 }, (_, i) => i);
    expect(mismatches(all)).toEqual([]);
  });

  it("is the reference's for every power of two and its neighbours up to 2^30", () => {
    const edges: number[] = [];
    for (let p = 0; p <= 30; p++) for (const d of [-2, -1, 0, 1, 2]) if (2 ** p + d >= 0) edges.push(2 ** p + d);
    expect(mismatches(edges.filter((x) => x <= MAX_TOKENS))).toEqual([]);
  });

  it("is the reference's for random integers up to 2^30", () => {
    let s = 99;
    const rnd = () => (s = (Math.imul(s, 1103515245) + 12345) & 0x7fffffff) / 0x7fffffff;
    // log-uniform, so every exponent gets its share
    const values = Array.from({ length: 200_000 }, () => Math.floor(2 ** (rnd() * 30)));
    expect(mismatches(values)).toEqual([]);
  });

  it("takes the general path when one feature is not an integer", () => {
    expect(mismatches([1000, 10, 20, 0.5, 7, 3, 2, 123.25, 2 ** 30, 0, 1, 1e-300])).toEqual([]);
  });
});
