// Routing tables: the versioned file format of a routing policy (docs/table-format.md): its types, constants and the
// error every check throws.
//
// A table is a plain msgpack map with string keys that Python's `msgpack` and Go's msgpack libraries read as is: no
// msgpackr records, no extension types, no typed arrays. It holds either a learned clustering (k-means centroids or a
// diagonal Gaussian mixture over standardized log1p features, one bit per cluster: 0 = local prefill on the decode
// worker, 1 = remote prefill) or a rule baseline's parameters (shared/docs/reference-systems.md).
//
// The rest of the folder works on these: validate.ts (with fields.ts, params.ts, osl-fields.ts) checks a table field
// by field, canonical.ts encodes and checksums it, codec.ts turns it into bytes and back, rule-table.ts builds rule
// tables, describe-table.ts says what one holds. No Node-only imports (but table-file.ts): the browser explorer loads
// tables too.

import { FEATURES, KINDS, OSL_FEATURES, type Kind } from "../generated/abi.js";

export const TABLE_FORMAT = "dolphin-routing.table";
/** The newest version this build reads and writes. Versions 1 and 2 still load; a learned table is written as
 *  version 2 only when it uses what version 1 lacks (a `rule` cluster, a fallback rule, out-of-distribution bounds),
 *  as version 3 only when it uses what version 2 lacks (load bounds, cluster shares). */
export const TABLE_VERSION = 3;
export type TableVersion = 1 | 2 | 3;

/** A cluster's value in a learned table: 0 local, 1 remote, 2 the table's fallback rule decides (version 2). */
export const CLUSTER_LOCAL = 0;
export const CLUSTER_REMOTE = 1;
export const CLUSTER_RULE = 2;

export type FeatureName = (typeof FEATURES)[number];
export const FEATURE_NAMES: readonly FeatureName[] = FEATURES;

/** Every policy kind (spec/abi.json "kinds": one descriptor per kind, read here, by the core and by the docs). */
export type PolicyKind = keyof typeof Kind;
export const POLICY_KINDS: readonly PolicyKind[] = KINDS.map((k) => k.name as PolicyKind);

/** Output-length classes: a request's predicted class `names[i]` stands for `representative[i]` tokens (osl_hat). */
export interface OslClasses {
  names: string[];
  thresholds: number[];
  representative: number[];
}

/**
 * A multinomial logistic regression over admission-time features (names from OSL_MODEL_FEATURES): the predicted
 * class is argmax_c bias[c] + Σ_f weights[c][f] · (x_f − mean[f]) / std[f]; its osl_classes representative is osl_hat.
 */
export interface OslModel {
  kind: "logistic";
  features: OslModelFeature[];
  mean: number[];
  std: number[];
  weights: number[][];
  bias: number[];
}
export type OslModelFeature = (typeof OSL_FEATURES)[number];
export const OSL_MODEL_FEATURES: readonly OslModelFeature[] = OSL_FEATURES;

/** Who made a table, when, from what. Extra keys with string or number values are allowed here only. */
export interface Provenance {
  tool: string;
  created: string;
  workload: string;
  seed: number;
  notes?: string;
  [k: string]: unknown;
}

/** A decoded, validated table. Optional fields are absent when the file lacks them; `params` has defaults filled in. */
export interface Table {
  format: typeof TABLE_FORMAT;
  version: TableVersion;
  kind: PolicyKind;
  features?: FeatureName[];
  scaler?: { mean: number[]; std: number[] };
  centroids?: number[][];
  bits?: number[];
  weights?: number[];
  variances?: number[][];
  /** Version 2, learned kinds: the rule that decides `rule` clusters and out-of-distribution requests
   *  (absent: DEFAULT_FALLBACK). Any rule kind but ppd; params with defaults filled in. */
  fallback?: Fallback;
  /** Version 2, learned kinds: per cluster, how far its training requests lay from it. kmeans: the largest
   *  in-distribution squared standardized distance; gmm: the lowest in-distribution log-likelihood. A request
   *  beyond its cluster's bound is routed by the fallback rule. Absent: no request is out of distribution. */
  ood_bound?: number[];
  /** Version 3, learned kinds: per cluster, the highest load its value was tested at (the learner writes it). A
   *  request whose chosen prefill worker's active prefill tokens exceed `prefill[k]` (when a prefill worker was
   *  chosen), or whose chosen decode worker's active prefill + decode tokens exceed `decode[k]`, is routed by the
   *  fallback rule (reason load-out-of-range). Absent: no load is out of range. */
  load_bound?: LoadBound;
  /** Version 3, learned kinds: each cluster's share of the training requests (sums to 1). Read by a host-side
   *  mix-shift guard; the core validates it and otherwise ignores it. */
  cluster_share?: number[];
  params?: Record<string, number | number[] | number[][][]>;
  osl_classes?: OslClasses;
  /** The output-length classifier the core evaluates (needs osl_classes: one weight row per class). */
  osl_model?: OslModel;
  split?: string | null;
  slo?: { ttft_ms: number; tpot_ms: number } | null;
  provenance: Provenance;
  checksum: string;
  /** Extension fields: any top-level key starting with "x_", plain data only; kept and checksummed, never read. */
  [extension: `x_${string}`]: unknown;
}

/** A learned table's load bounds (version 3): K finite numbers ≥ 0 each, in tokens. */
export interface LoadBound {
  prefill: number[];
  decode: number[];
}

/** Rule kinds a learned table may fall back to: every rule that decides from the request and signals alone. */
export type FallbackKind = Exclude<PolicyKind, "kmeans" | "gmm" | "ppd">;
export const FALLBACK_KINDS: readonly FallbackKind[] = KINDS.filter((k) => !k.learned && k.name !== "ppd").map(
  (k) => k.name as FallbackKind,
);
export interface Fallback {
  kind: FallbackKind;
  params: Record<string, number>;
}
/** The fallback of a table that names none: Dynamo's isl_bounding with its defaults (reference-systems.md). */
export const DEFAULT_FALLBACK: Fallback = Object.freeze({
  kind: "dynamo-isl",
  params: Object.freeze({ max_local_prefill_tokens: 2048, max_local_prefill_ratio: 0.7 }),
}) as Fallback;

/** Everything wrong with a table: `table: <field path>: <what is wrong>`. `field` is the path alone. */
export class TableError extends Error {
  readonly field: string;
  constructor(field: string, problem: string) {
    super(`table: ${field}: ${problem}`);
    this.name = "TableError";
    this.field = field;
  }
}
