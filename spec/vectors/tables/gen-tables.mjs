// Writes the routing-table known-answer fixtures (spec/vectors/tables/*.msgpack) and manifest.json.
//
// Deliberately independent of src/table/: the objects are built by hand in plain JS, encoded with msgpackr under
// the canonical options (keys sorted by code point here, useRecords false, variableMapSize true; every integer in
// these fixtures is below 2^32, where msgpackr's integer choice is the canonical one) and checksummed with
// xxhash-wasm. The tests then decode them with src/table/codec.ts, so the two implementations check each other.
// Python and Go bindings read the same files. Run from the repository root:  node spec/vectors/tables/gen-tables.mjs

import { writeFileSync, mkdirSync, readdirSync, unlinkSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Packr } from "msgpackr";
import xxhash from "xxhash-wasm";

const here = dirname(fileURLToPath(import.meta.url));
const packr = new Packr({ useRecords: false, variableMapSize: true, useFloat32: 0 });
const { h64Raw } = await xxhash();

/** Keys sorted by code point at every level. Fine for these fixtures only: all keys are ASCII (so sort() is
 *  code-point order) and none is integer-like (a JS object would list "0", "1", … first whatever the insertion order). */
function canon(v) {
  if (Array.isArray(v)) return v.map(canon);
  if (v !== null && typeof v === "object") {
    const out = {};
    for (const k of Object.keys(v).sort()) out[k] = canon(v[k]);
    return out;
  }
  if (typeof v === "number" && Number.isInteger(v) && (v >= 2 ** 32 || v < -(2 ** 31))) {
    throw new Error(`fixture integer ${v} is outside the range where msgpackr writes integers`);
  }
  return v;
}

function withChecksum(table) {
  const { checksum: _drop, ...body } = table;
  const bytes = packr.pack(canon(body));
  const hex = h64Raw(bytes, 0n).toString(16).padStart(16, "0");
  return { ...body, checksum: `xxh64:${hex}` };
}

const provenance = (workload, seed, notes) => ({
  tool: "gen-tables.mjs",
  created: "2025-01-15T00:00:00Z",
  workload,
  seed,
  ...(notes ? { notes } : {}),
});
const features = ["isl", "eff_P", "eff_D", "osl_hat"];
const osl_classes = { names: ["short", "medium", "long"], thresholds: [128, 1024], representative: [64, 512, 2048] };
const slo = { ttft_ms: 2000, tpot_ms: 50 };

// Deterministic pseudo-random numbers (LCG) so the fixtures never change between runs.
let state = 12345;
const rand = () => (state = (Math.imul(state, 1103515245) + 12345) >>> 0) / 2 ** 32;
const round6 = (x) => Math.round(x * 1e6) / 1e6;
const matrix = (rows, cols, f) =>
  Array.from({ length: rows }, (_, i) => Array.from({ length: cols }, (_, j) => f(i, j)));

const kmeans = {
  format: "dolphin-routing.table",
  version: 1,
  kind: "kmeans",
  features,
  scaler: { mean: [7.412, 5.031, 6.887, 5.5], std: [1.25, 2.1, 1.75, 1] },
  centroids: matrix(8, 4, () => round6(rand() * 4 - 2)),
  bits: [0, 1, 1, 0, 1, 0, 0, 1],
  osl_classes,
  split: "3P1D",
  slo,
  provenance: provenance("hybrid-sim", 7, "fixture: K=8 D=4 k-means"),
};

const gmm = {
  format: "dolphin-routing.table",
  version: 1,
  kind: "gmm",
  features,
  scaler: { mean: [7.5, 5.25, 6.75, 5.125], std: [1.5, 2, 1.75, 0.875] },
  centroids: matrix(4, 4, () => round6(rand() * 4 - 2)),
  bits: [1, 0, 1, 0],
  weights: [0.4, 0.3, 0.2, 0.1],
  variances: matrix(4, 4, (i, j) => (i === j ? 1 : round6(0.05 + rand()))),
  osl_classes,
  split: "2P2D",
  slo: null,
  provenance: provenance("trace-replay", 4294967295, "fixture: K=4 D=4 diagonal GMM"),
};

// Version 2: learned tables with a guard. Clusters valued 2 are decided by the fallback rule, and a request beyond its
// cluster's bound (kmeans: squared standardized distance above it; gmm: log-likelihood below it) is out of distribution.
const kmeansGuarded = {
  ...kmeans,
  version: 2,
  bits: [0, 2, 1, 2, 1, 0, 2, 1],
  fallback: { kind: "trtllm", params: { max_local_prefill_length: 512 } },
  ood_bound: [9.5, 12, 6.75, 16, 10.25, 4.5, 20, 8],
  provenance: provenance("hybrid-sim", 7, "fixture: K=8 D=4 k-means, guarded"),
};
const gmmGuarded = {
  ...gmm,
  version: 2,
  bits: [2, 0, 1, 2],
  ood_bound: [-16.5, -22, -14.25, -30],
  provenance: provenance("trace-replay", 4294967295, "fixture: K=4 D=4 diagonal GMM, guarded by the default fallback"),
};

// Version 3: a learned table with load bounds (per cluster, the highest prefill and decode load its value was tested
// at; above either the fallback rule decides) and the training share of each cluster. Cluster 6 is valued `rule`
// and has bounds of 0 (its bounds are never read); the ood bounds stay, so an out-of-distribution request keeps its
// reason.
const kmeansLoad = {
  ...kmeansGuarded,
  version: 3,
  bits: [0, 1, 1, 0, 1, 0, 2, 1],
  load_bound: {
    prefill: [4096, 8192, 2048, 16384, 4096, 1024, 0, 30000],
    decode: [30000, 20000, 50000, 10000, 40000, 25000, 0, 60000.5],
  },
  cluster_share: [0.2, 0.1, 0.15, 0.05, 0.2, 0.1, 0.05, 0.15],
  provenance: provenance("hybrid-sim", 7, "fixture: K=8 D=4 k-means, guarded, with load bounds"),
};
// The same, guarded by a four-parameter fallback (dynamo-isl-or-load: every rule slot in use).
const kmeansLoadIslOrLoad = {
  ...kmeansLoad,
  fallback: {
    kind: "dynamo-isl-or-load",
    params: {
      max_local_prefill_tokens: 1024,
      max_local_prefill_ratio: 0.5,
      prefill_busy_tokens: 6000,
      decode_busy_tokens: 20000,
    },
  },
  provenance: provenance("hybrid-sim", 7, "fixture: K=8 D=4 k-means, load bounds, Dynamo's isl_or_load as fallback"),
};

const rule = (kind, params, extra = {}) => ({
  format: "dolphin-routing.table",
  version: 1,
  kind,
  ...(params === undefined ? {} : { params }),
  provenance: provenance("(rule)", 0),
  ...extra,
});

const ppdBits = Array.from({ length: 3 }, (_, c) =>
  Array.from({ length: 9 }, (_, r) => Array.from({ length: 10 }, (_, q) => (r + q >= 8 + c ? 1 : 0))),
);

const valid = {
  kmeans: kmeans,
  gmm: gmm,
  "kmeans-guarded": kmeansGuarded,
  "gmm-guarded": gmmGuarded,
  "kmeans-load": kmeansLoad,
  "kmeans-load-isl-or-load": kmeansLoadIslOrLoad,
  "dynamo-isl": rule("dynamo-isl", { max_local_prefill_tokens: 2048, max_local_prefill_ratio: 0.7 }, { split: "1P1D" }),
  "dynamo-load": rule("dynamo-load", { prefill_busy_threshold: 0.8, max_num_batched_tokens: 8192 }),
  "dynamo-legacy": rule("dynamo-legacy", { max_local_prefill_length: 1000, max_prefill_queue_size: 2 }),
  "dynamo-isl-or-load": rule("dynamo-isl-or-load", {
    max_local_prefill_tokens: 2048,
    max_local_prefill_ratio: 0.7,
    prefill_busy_tokens: 6000,
    decode_busy_tokens: 20000,
  }),
  trtllm: rule("trtllm", { max_local_prefill_length: 0 }),
  "llm-d": rule("llm-d", { non_cached_tokens: 0, prompt_tokens: 0 }),
  "llm-d-active": rule("llm-d", { non_cached_tokens: 256, prompt_tokens: 512 }),
  "trtllm-512": rule("trtllm", { max_local_prefill_length: 512 }),
  "always-local": rule("always-local", {}),
  "always-remote": rule("always-remote", {}),
  ppd: rule(
    "ppd",
    {
      context_edges: [512, 4096],
      ratio_edges: [0.125, 0.25, 0.5, 1, 2, 4, 8, 16],
      qps_levels: [0.5, 1, 2, 4, 6, 8, 10, 12, 16, 20],
      w_ttft: 1,
      w_tpot: 1,
      bits: ppdBits,
    },
    { slo: { ttft_ms: 1500.5, tpot_ms: 40 } },
  ),
  // Stored without params or optional fields: readers fill the defaults; the checksum covers the map as stored.
  "dynamo-isl-minimal": rule("dynamo-isl", undefined),
};

const tables = Object.fromEntries(Object.entries(valid).map(([name, t]) => [name, withChecksum(t)]));

// Invalid tables a reader must reject, with the field its error must name.
const flipHexDigit = (cs) => cs.slice(0, -1) + (cs.endsWith("0") ? "1" : "0");
const invalid = {
  "invalid-checksum-mismatch": [{ ...tables.kmeans, checksum: flipHexDigit(tables.kmeans.checksum) }, "checksum"],
  "invalid-version-4": [withChecksum({ ...valid["always-local"], version: 4 }), "version"],
  "invalid-load-bound-in-v2": [withChecksum({ ...kmeansGuarded, load_bound: kmeansLoad.load_bound }), "load_bound"],
  "invalid-load-bound-count": [
    withChecksum({
      ...kmeansLoad,
      load_bound: { ...kmeansLoad.load_bound, decode: kmeansLoad.load_bound.decode.slice(1) },
    }),
    "load_bound.decode",
  ],
  "invalid-load-bound-negative": [
    withChecksum({
      ...kmeansLoad,
      load_bound: { ...kmeansLoad.load_bound, prefill: [4096, 8192, -1, 16384, 4096, 1024, 0, 30000] },
    }),
    "load_bound.prefill[2]",
  ],
  "invalid-load-bound-key": [
    withChecksum({ ...kmeansLoad, load_bound: { ...kmeansLoad.load_bound, queue: [1, 1, 1, 1, 1, 1, 1, 1] } }),
    "load_bound.queue",
  ],
  "invalid-cluster-share-sum": [
    withChecksum({ ...kmeansLoad, cluster_share: [0.2, 0.1, 0.15, 0.05, 0.2, 0.1, 0.05, 0.05] }),
    "cluster_share",
  ],
  "invalid-v1-fallback": [withChecksum({ ...kmeans, fallback: { kind: "dynamo-isl" } }), "fallback"],
  "invalid-fallback-ppd": [withChecksum({ ...kmeansGuarded, fallback: { kind: "ppd" } }), "fallback.kind"],
  "invalid-ood-bound-count": [
    withChecksum({ ...kmeansGuarded, ood_bound: kmeansGuarded.ood_bound.slice(1) }),
    "ood_bound",
  ],
  "invalid-rule-bit-in-v1": [
    withChecksum({ ...kmeans, bits: [0, 1, 2, 0, 1, 0, 0, 1], x_note: "2 needs version 2" }),
    "bits[2]",
  ],
  "invalid-kind": [withChecksum({ ...valid["always-local"], kind: "round-robin" }), "kind"],
  "invalid-bits-not-0-1": [withChecksum({ ...kmeans, bits: [0, 1, 2, 0, 1, 0, 0, 1] }), "bits[2]"],
  "invalid-ragged-centroids": [
    withChecksum({ ...kmeans, centroids: [...kmeans.centroids.slice(0, 7), [1, 2, 3]] }),
    "centroids[7]",
  ],
  "invalid-gmm-weights-sum": [withChecksum({ ...gmm, weights: [0.4, 0.3, 0.2, 0.2] }), "weights"],
  "invalid-unknown-key": [withChecksum({ ...valid["always-remote"], policy: "x" }), "policy"],
  "invalid-ppd-bits-shape": [
    withChecksum({ ...valid.ppd, params: { ...valid.ppd.params, bits: ppdBits.slice(0, 2) } }),
    "params.bits",
  ],
};

mkdirSync(here, { recursive: true });
for (const f of readdirSync(here)) if (f.endsWith(".msgpack")) unlinkSync(join(here, f));
const manifest = { valid: [], invalid: [] };
for (const [name, t] of Object.entries(tables)) {
  writeFileSync(join(here, `${name}.msgpack`), packr.pack(canon(t)));
  manifest.valid.push({
    file: `${name}.msgpack`,
    kind: t.kind,
    clusters: t.bits && !t.params ? t.bits.length : null,
    dims: t.features ? t.features.length : null,
    checksum: t.checksum,
  });
}
for (const [name, [t, field]] of Object.entries(invalid)) {
  writeFileSync(join(here, `${name}.msgpack`), packr.pack(canon(t)));
  manifest.invalid.push({ file: `${name}.msgpack`, field });
}
writeFileSync(join(here, "manifest.json"), `${JSON.stringify(manifest, null, 2)}\n`);
console.log(`wrote ${manifest.valid.length} valid and ${manifest.invalid.length} invalid tables to ${here}`);
