// Routing tables: the versioned file format of a routing policy (docs/table-format.md).
//
// A table is a plain msgpack map with string keys that Python's `msgpack` and Go's msgpack libraries read as is: no
// msgpackr records, no extension types, no typed arrays. It holds either a learned clustering (k-means centroids or a
// diagonal Gaussian mixture over standardized log1p features, one bit per cluster: 0 = local prefill on the decode
// worker, 1 = remote prefill) or a rule baseline's parameters (shared/docs/reference-systems.md).
//
// This module validates tables field by field (every error names the field path), fills rule defaults, encodes
// canonically and checksums that encoding with xxh64. Canonical encoding (written here, not left to msgpackr, so it
// cannot drift with an encoder's options or version): map keys sorted by code point at every level; the smallest
// msgpack format for every length and integer; numbers that are safe integers (|x| ≤ 2^53 − 1) as msgpack integers,
// all other numbers as float64. For every value msgpackr can write as an integer (−2^31 … 2^32 − 1) this gives the
// same bytes as `new Packr({ useRecords: false, variableMapSize: true })`; beyond that msgpackr writes float64 and
// Python writes an integer, so we follow Python. No Node-only imports: the browser explorer loads tables too.

import { Unpackr } from "msgpackr";
import { FEATURES, KINDS, OSL_FEATURES, type Kind, type ParamDescriptor } from "../generated/abi.js";
import { describeValue, MSGPACK_WORDS } from "../contract/values.js";
import { xxh64Hex } from "../hashing/xxh64.js";

export const TABLE_FORMAT = "dolphin-routing.table";
/** The newest version this build reads and writes. Version 1 tables still load; a learned table is written as
 *  version 2 only when it uses what version 1 lacks (a `rule` cluster, a fallback rule, out-of-distribution bounds). */
export const TABLE_VERSION = 2;
export type TableVersion = 1 | 2;

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

// ------------------------------------------------------------------------------------------------------------------
// Limits and rule parameters.

const MAX_CLUSTERS = 256;
const MAX_OSL_CLASSES = 16;
const MAX_QPS_LEVELS = 64;
const WEIGHT_SUM_TOLERANCE = 1e-6;
/** Deepest nesting accepted anywhere (the format itself needs 4: params.bits[i][j][k]); bounds recursion on bad input. */
const MAX_NESTING = 32;
const PPD_CONTEXT_CLASSES = 3;
const PPD_RATIO_CLASSES = 9;
const CHECKSUM_PATTERN = /^xxh64:[0-9a-f]{16}$/;
const SPLIT_PATTERN = /^\d+P\d+D$/;
const TOP_LEVEL = "(top level)";
const BYTES = "(bytes)";

type RuleKind = Exclude<PolicyKind, "kmeans" | "gmm">;

/** Parameters of each rule kind, with defaults (from reference-systems.md, via spec/abi.json). No default = required. */
const RULE_PARAMS = Object.fromEntries(
  KINDS.filter((k) => !k.learned).map((k) => [k.name, Object.fromEntries(k.params.map((p) => [p.name, p]))]),
) as Record<RuleKind, Record<string, ParamDescriptor>>;

const isRuleKind = (kind: PolicyKind): kind is RuleKind => kind !== "kmeans" && kind !== "gmm";

const TOP_LEVEL_KEYS = new Set([
  "format",
  "version",
  "kind",
  "features",
  "scaler",
  "centroids",
  "bits",
  "weights",
  "variances",
  "params",
  "osl_classes",
  "osl_model",
  "split",
  "slo",
  "provenance",
  "checksum",
  "fallback",
  "ood_bound",
]);
/** Fields only learned tables hold. */
const LEARNED_ONLY = ["scaler", "centroids", "bits", "weights", "variances", "fallback", "ood_bound"];
/** Fields a version-1 table may not hold. */
const VERSION_2_FIELDS = ["fallback", "ood_bound"];

// ------------------------------------------------------------------------------------------------------------------
// Small validation helpers. Each takes the value and its field path, and returns a fresh, plain copy.

type PlainMap = Record<string, unknown>;

const describe = (v: unknown): string => describeValue(v, MSGPACK_WORDS);

function expected(path: string, what: string, v: unknown): TableError {
  return new TableError(path, v === undefined ? `missing (expected ${what})` : `expected ${what}, got ${describe(v)}`);
}

const child = (path: string, key: string): string => (path === TOP_LEVEL ? key : `${path}.${key}`);

function setOwn(obj: PlainMap, key: string, value: unknown): void {
  // defineProperty, not assignment: a key named "__proto__" must stay an ordinary field.
  Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
}

function isPlainMap(v: unknown): v is PlainMap {
  if (typeof v !== "object" || v === null || Array.isArray(v)) return false;
  const proto: unknown = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

function expectMap(v: unknown, path: string): PlainMap {
  if (!isPlainMap(v)) throw expected(path, "a map", v);
  return v;
}

function rejectUnknownKeys(m: PlainMap, path: string, known: readonly string[]): void {
  for (const key of Object.keys(m)) {
    if (!known.includes(key)) {
      throw new TableError(child(path, key), `unknown key (known in ${path}: ${known.join(", ") || "none"})`);
    }
  }
}

interface NumberRule {
  min?: number;
  minExclusive?: boolean;
  integer?: boolean;
}

function expectNumber(v: unknown, path: string, rule: NumberRule = {}): number {
  if (typeof v !== "number" || !Number.isFinite(v)) throw expected(path, "a finite number", v);
  if (rule.integer && !Number.isSafeInteger(v)) throw expected(path, "an integer", v);
  if (rule.min !== undefined) {
    if (rule.minExclusive ? !(v > rule.min) : !(v >= rule.min)) {
      throw expected(path, `a number ${rule.minExclusive ? ">" : "≥"} ${rule.min}`, v);
    }
  }
  return v === 0 ? 0 : v; // -0 becomes 0, as the canonical encoding writes it
}

/** Plain arrays, or (in-memory input only) numeric typed arrays, which are copied to plain arrays. */
function expectArray(v: unknown, path: string, what: string): unknown[] {
  if (Array.isArray(v)) return v;
  if (ArrayBuffer.isView(v) && !(v instanceof DataView)) return Array.from(v as unknown as ArrayLike<unknown>);
  throw expected(path, what, v);
}

function expectLength(arr: unknown[], path: string, length: number, what: string): void {
  if (arr.length !== length) throw new TableError(path, `expected ${length} ${what}, got ${arr.length}`);
}

function numberArray(
  v: unknown,
  path: string,
  length: number | undefined,
  rule: NumberRule,
  what = "entries",
): number[] {
  const arr = expectArray(v, path, "an array of numbers");
  if (length !== undefined) expectLength(arr, path, length, what);
  return arr.map((x, i) => expectNumber(x, `${path}[${i}]`, rule));
}

function strictlyAscending(values: number[], path: string): void {
  for (let i = 1; i < values.length; i++) {
    if (!(values[i]! > values[i - 1]!)) {
      throw new TableError(
        `${path}[${i}]`,
        `expected strictly ascending values, got ${values[i]} after ${values[i - 1]}`,
      );
    }
  }
}

function bitArray(v: unknown, path: string, length: number, what: string, allowRule = false): number[] {
  const arr = expectArray(v, path, "an array of 0/1 bits");
  expectLength(arr, path, length, what);
  return arr.map((x, i) => {
    if (allowRule) {
      if (x !== 0 && x !== 1 && x !== 2) throw expected(`${path}[${i}]`, "0 (local), 1 (remote) or 2 (rule)", x);
    } else if (x !== 0 && x !== 1) throw expected(`${path}[${i}]`, "0 (local) or 1 (remote)", x);
    return x;
  });
}

function expectString(v: unknown, path: string, nonEmpty = false): string {
  if (typeof v !== "string" || (nonEmpty && v.length === 0))
    throw expected(path, nonEmpty ? "a non-empty string" : "a string", v);
  return v;
}

const ISO_8601 =
  /^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,]\d+)?)?(?:[Zz]|[+-]\d{2}(?::?\d{2})?)?)?$/;

function expectIsoDate(v: unknown, path: string): string {
  const what = 'an ISO-8601 date-time such as "2025-01-31T12:00:00Z"';
  const m = typeof v === "string" ? ISO_8601.exec(v) : null;
  if (!m) throw expected(path, what, v);
  const [month, day, hour, minute, second] = [m[2], m[3], m[4], m[5], m[6]].map((s) =>
    s === undefined ? 0 : Number(s),
  );
  if (month! < 1 || month! > 12 || day! < 1 || day! > 31 || hour! > 24 || minute! > 59 || second! > 60)
    throw expected(path, what, v);
  return v as string;
}

/** Plain msgpack-able data (extension fields): null, booleans, finite numbers, strings, arrays, string-keyed maps. */
function plainData(v: unknown, path: string, depth: number): unknown {
  if (depth > MAX_NESTING) throw new TableError(path, `nested deeper than ${MAX_NESTING} levels`);
  if (v === null || typeof v === "boolean" || typeof v === "string") return v;
  if (typeof v === "number") return expectNumber(v, path);
  if (Array.isArray(v)) return v.map((x, i) => plainData(x, `${path}[${i}]`, depth + 1));
  if (isPlainMap(v)) {
    const out: PlainMap = {};
    for (const [key, x] of Object.entries(v)) {
      if (x !== undefined) setOwn(out, key, plainData(x, child(path, key), depth + 1));
    }
    return out;
  }
  throw expected(path, "plain data (null, boolean, finite number, string, array or map)", v);
}

// ------------------------------------------------------------------------------------------------------------------
// Field validators.

function validateFeatures(v: unknown, path: string, allowEmpty: boolean): FeatureName[] {
  const arr = expectArray(v, path, `a list of feature names from ${FEATURE_NAMES.join(", ")}`);
  if (arr.length === 0 && !allowEmpty) throw new TableError(path, "expected at least one feature, got an empty list");
  if (arr.length > FEATURE_NAMES.length)
    throw new TableError(path, `expected at most ${FEATURE_NAMES.length} features, got ${arr.length}`);
  const seen = new Set<string>();
  return arr.map((name, i) => {
    if (typeof name !== "string" || !(FEATURE_NAMES as readonly string[]).includes(name)) {
      throw expected(`${path}[${i}]`, `one of ${FEATURE_NAMES.join(", ")}`, name);
    }
    if (seen.has(name)) throw new TableError(`${path}[${i}]`, `duplicate feature name "${name}"`);
    seen.add(name);
    return name as FeatureName;
  });
}

function validateScaler(v: unknown, dims: number): { mean: number[]; std: number[] } {
  const m = expectMap(v, "scaler");
  rejectUnknownKeys(m, "scaler", ["mean", "std"]);
  return {
    mean: numberArray(m.mean, "scaler.mean", dims, {}, "values (one per feature)"),
    std: numberArray(m.std, "scaler.std", dims, { min: 0, minExclusive: true }, "values (one per feature)"),
  };
}

/** K rows of D finite numbers (K in 1..256), each checked by `rule`. */
function clusterMatrix(
  v: unknown,
  path: string,
  clusters: number | undefined,
  dims: number,
  rule: NumberRule,
): number[][] {
  const rows = expectArray(v, path, "an array of rows (one per cluster)");
  if (clusters === undefined && (rows.length < 1 || rows.length > MAX_CLUSTERS)) {
    throw new TableError(path, `expected 1 to ${MAX_CLUSTERS} clusters, got ${rows.length}`);
  }
  if (clusters !== undefined) expectLength(rows, path, clusters, "rows (one per cluster)");
  return rows.map((row, i) => numberArray(row, `${path}[${i}]`, dims, rule, "values (one per feature)"));
}

interface LearnedFields {
  features: FeatureName[];
  scaler: { mean: number[]; std: number[] };
  centroids: number[][];
  bits: number[];
  weights?: number[];
  variances?: number[][];
  fallback?: Fallback;
  ood_bound?: number[];
}

function validateLearned(m: PlainMap, kind: "kmeans" | "gmm", version: TableVersion): LearnedFields {
  const fields = validateClusters(m, kind, version);
  if (version === 1) {
    for (const key of VERSION_2_FIELDS) {
      if (m[key] !== undefined)
        throw new TableError(
          key,
          "needs table version 2 (version 1 has no fallback rule and no out-of-distribution bounds)",
        );
    }
    return fields;
  }
  if (m.fallback !== undefined) fields.fallback = validateFallback(m.fallback);
  if (m.ood_bound !== undefined) {
    fields.ood_bound = numberArray(
      m.ood_bound,
      "ood_bound",
      fields.bits.length,
      kind === "kmeans" ? { min: 0 } : {},
      "bounds (one per cluster)",
    );
  }
  return fields;
}

function validateFallback(v: unknown): Fallback {
  const m = expectMap(v, "fallback");
  rejectUnknownKeys(m, "fallback", ["kind", "params"]);
  if (typeof m.kind !== "string" || !(FALLBACK_KINDS as readonly string[]).includes(m.kind)) {
    throw expected("fallback.kind", `a rule kind other than ppd (${FALLBACK_KINDS.join(", ")})`, m.kind);
  }
  const kind = m.kind as FallbackKind;
  return { kind, params: validateParams(m.params, kind, "fallback.params") as Record<string, number> };
}

function validateClusters(m: PlainMap, kind: "kmeans" | "gmm", version: TableVersion): LearnedFields {
  if (m.params !== undefined)
    throw new TableError("params", `not used by kind "${kind}" (only rule kinds take params)`);
  const features = validateFeatures(m.features, "features", false);
  const dims = features.length;
  const scaler = validateScaler(m.scaler, dims);
  const centroids = clusterMatrix(m.centroids, "centroids", undefined, dims, {});
  const clusters = centroids.length;
  const bits = bitArray(m.bits, "bits", clusters, "bits (one per cluster)", version >= 2);
  if (kind === "kmeans") {
    for (const key of ["weights", "variances"]) {
      if (m[key] !== undefined) throw new TableError(key, `used only by kind "gmm", not by "kmeans"`);
    }
    return { features, scaler, centroids, bits };
  }
  const weights = numberArray(
    m.weights,
    "weights",
    clusters,
    { min: 0, minExclusive: true },
    "weights (one per cluster)",
  );
  const sum = weights.reduce((a, b) => a + b, 0);
  if (!(Math.abs(sum - 1) <= WEIGHT_SUM_TOLERANCE)) {
    throw new TableError(
      "weights",
      `expected weights summing to 1 (within ${WEIGHT_SUM_TOLERANCE}), got a sum of ${sum}`,
    );
  }
  const variances = clusterMatrix(m.variances, "variances", clusters, dims, { min: 0, minExclusive: true });
  return { features, scaler, centroids, bits, weights, variances };
}

function validatePpdBits(v: unknown, path: string, qpsLevels: number): number[][][] {
  const contexts = expectArray(v, path, `a ${PPD_CONTEXT_CLASSES}×${PPD_RATIO_CLASSES}×Q array of 0/1 bits`);
  expectLength(contexts, path, PPD_CONTEXT_CLASSES, "context classes");
  return contexts.map((ratios, i) => {
    const ratioRows = expectArray(ratios, `${path}[${i}]`, "an array of ratio classes");
    expectLength(ratioRows, `${path}[${i}]`, PPD_RATIO_CLASSES, "ratio classes");
    return ratioRows.map((row, j) => bitArray(row, `${path}[${i}][${j}]`, qpsLevels, "bits (one per QPS level)"));
  });
}

function validateParams(v: unknown, kind: RuleKind, base = "params"): Record<string, number | number[] | number[][][]> {
  const m = v === undefined ? {} : expectMap(v, base);
  const specs = RULE_PARAMS[kind];
  const known = Object.keys(specs);
  for (const key of Object.keys(m)) {
    if (!known.includes(key)) {
      throw new TableError(
        `${base}.${key}`,
        `unknown parameter for kind "${kind}" (known: ${known.join(", ") || "none"})`,
      );
    }
  }
  const out: Record<string, number | number[] | number[][][]> = {};
  for (const [key, spec] of Object.entries(specs)) {
    const path = `${base}.${key}`;
    const given = m[key];
    if (spec.type === "scalar") {
      if (given === undefined && spec.default === undefined) throw expected(path, "a number > 0 (required)", given);
      out[key] =
        given === undefined
          ? spec.default!
          : expectNumber(given, path, { min: 0, minExclusive: spec.positive === true });
    } else if (spec.type === "list") {
      if (given === undefined) {
        out[key] = [...spec.default];
        continue;
      }
      const values = numberArray(given, path, undefined, { min: 0, minExclusive: spec.positive });
      if (values.length < spec.min_length || values.length > spec.max_length) {
        const range =
          spec.min_length === spec.max_length ? `${spec.min_length}` : `${spec.min_length} to ${spec.max_length}`;
        throw new TableError(path, `expected ${range} values, got ${values.length}`);
      }
      strictlyAscending(values, path);
      out[key] = values;
    } else {
      const qps = out.qps_levels as number[];
      if (given === undefined)
        throw expected(
          path,
          `a ${PPD_CONTEXT_CLASSES}×${PPD_RATIO_CLASSES}×${qps.length} array of 0/1 bits (required)`,
          given,
        );
      out[key] = validatePpdBits(given, path, qps.length);
    }
  }
  return out;
}

function validateOslModel(v: unknown, classes: OslClasses | undefined): OslModel {
  const path = "osl_model";
  if (!classes)
    throw new TableError(path, "needs osl_classes (the classes it predicts and their representative lengths)");
  const m = expectMap(v, path);
  rejectUnknownKeys(m, path, ["kind", "features", "mean", "std", "weights", "bias"]);
  if (m.kind !== "logistic") throw expected(`${path}.kind`, '"logistic"', m.kind);
  const names = expectArray(m.features, `${path}.features`, "an array of feature names");
  if (names.length < 1 || names.length > OSL_MODEL_FEATURES.length) {
    throw new TableError(
      `${path}.features`,
      `expected 1 to ${OSL_MODEL_FEATURES.length} features, got ${names.length}`,
    );
  }
  const features = names.map((n, i) => {
    const f = expectString(n, `${path}.features[${i}]`) as OslModelFeature;
    if (!OSL_MODEL_FEATURES.includes(f))
      throw new TableError(
        `${path}.features[${i}]`,
        `unknown feature ${JSON.stringify(f)} (known: ${OSL_MODEL_FEATURES.join(", ")})`,
      );
    if (names.indexOf(f) !== i)
      throw new TableError(`${path}.features[${i}]`, `duplicate feature ${JSON.stringify(f)}`);
    return f;
  });
  const d = features.length;
  const c = classes.names.length;
  const mean = numberArray(m.mean, `${path}.mean`, d, {}, "values (one per feature)");
  const std = numberArray(m.std, `${path}.std`, d, { min: 0, minExclusive: true }, "values (one per feature)");
  const rows = expectArray(m.weights, `${path}.weights`, "an array of weight rows (one per class)");
  expectLength(rows, `${path}.weights`, c, "rows (one per osl class)");
  const weights = rows.map((r, i) => numberArray(r, `${path}.weights[${i}]`, d, {}, "weights (one per feature)"));
  const bias = numberArray(m.bias, `${path}.bias`, c, {}, "values (one per osl class)");
  return { kind: "logistic", features, mean, std, weights, bias };
}

function validateOslClasses(v: unknown): OslClasses {
  const path = "osl_classes";
  const m = expectMap(v, path);
  rejectUnknownKeys(m, path, ["names", "thresholds", "representative"]);
  const names = expectArray(m.names, `${path}.names`, "an array of class names");
  if (names.length < 1 || names.length > MAX_OSL_CLASSES) {
    throw new TableError(`${path}.names`, `expected 1 to ${MAX_OSL_CLASSES} classes, got ${names.length}`);
  }
  const seen = new Set<string>();
  const classNames = names.map((name, i) => {
    const s = expectString(name, `${path}.names[${i}]`, true);
    if (seen.has(s)) throw new TableError(`${path}.names[${i}]`, `duplicate class name ${JSON.stringify(s)}`);
    seen.add(s);
    return s;
  });
  const count = classNames.length;
  const thresholds = numberArray(
    m.thresholds,
    `${path}.thresholds`,
    count - 1,
    {},
    "thresholds (one fewer than names)",
  );
  strictlyAscending(thresholds, `${path}.thresholds`);
  const representative = numberArray(
    m.representative,
    `${path}.representative`,
    count,
    { min: 0 },
    "lengths (one per name)",
  );
  return { names: classNames, thresholds, representative };
}

function validateSlo(v: unknown): { ttft_ms: number; tpot_ms: number } | null {
  if (v === null) return null;
  const m = expectMap(v, "slo");
  rejectUnknownKeys(m, "slo", ["ttft_ms", "tpot_ms"]);
  const positive = { min: 0, minExclusive: true };
  return {
    ttft_ms: expectNumber(m.ttft_ms, "slo.ttft_ms", positive),
    tpot_ms: expectNumber(m.tpot_ms, "slo.tpot_ms", positive),
  };
}

function validateProvenance(v: unknown): Provenance {
  const m = expectMap(v, "provenance");
  const out: Provenance = {
    tool: expectString(m.tool, "provenance.tool", true),
    created: expectIsoDate(m.created, "provenance.created"),
    workload: expectString(m.workload, "provenance.workload"),
    seed: expectNumber(m.seed, "provenance.seed", { integer: true }),
  };
  if (m.notes !== undefined) out.notes = expectString(m.notes, "provenance.notes");
  for (const [key, x] of Object.entries(m)) {
    if (Object.hasOwn(out, key) || x === undefined) continue;
    const path = `provenance.${key}`;
    if (typeof x === "string") setOwn(out, key, x);
    else if (typeof x === "number") setOwn(out, key, expectNumber(x, path));
    else throw expected(path, "a string or a finite number (extra provenance keys hold only those)", x);
  }
  return out;
}

/** Validates everything but the checksum; returns the normalized table without `checksum`. */
function validateBody(v: unknown): Omit<Table, "checksum"> {
  const m = expectMap(v, TOP_LEVEL);
  if (m.format !== TABLE_FORMAT) throw expected("format", JSON.stringify(TABLE_FORMAT), m.format);
  if (typeof m.version === "number" && Number.isSafeInteger(m.version) && m.version > TABLE_VERSION) {
    throw new TableError("version", `unsupported table version ${m.version} (this build reads 1 and ${TABLE_VERSION})`);
  }
  if (m.version !== 1 && m.version !== TABLE_VERSION)
    throw expected("version", `the integer 1 or ${TABLE_VERSION}`, m.version);
  const version = m.version as TableVersion;
  if (typeof m.kind !== "string" || !(POLICY_KINDS as readonly string[]).includes(m.kind)) {
    throw expected("kind", `one of ${POLICY_KINDS.join(", ")}`, m.kind);
  }
  const kind = m.kind as PolicyKind;
  for (const key of Object.keys(m)) {
    if (!TOP_LEVEL_KEYS.has(key) && !key.startsWith("x_")) {
      throw new TableError(key, 'unknown top-level key (extension keys must start with "x_")');
    }
  }

  const out = { format: TABLE_FORMAT, version, kind } as Omit<Table, "checksum">;
  if (isRuleKind(kind)) {
    for (const key of LEARNED_ONLY) {
      if (m[key] !== undefined)
        throw new TableError(key, `not used by kind "${kind}" (rule tables keep their settings in params)`);
    }
    if (m.features !== undefined) out.features = validateFeatures(m.features, "features", true);
    out.params = validateParams(m.params, kind);
  } else {
    Object.assign(out, validateLearned(m, kind, version));
  }
  if (m.osl_classes !== undefined) out.osl_classes = validateOslClasses(m.osl_classes);
  if (m.osl_model !== undefined) out.osl_model = validateOslModel(m.osl_model, out.osl_classes);
  if (m.split !== undefined) {
    if (m.split !== null && (typeof m.split !== "string" || !SPLIT_PATTERN.test(m.split))) {
      throw expected("split", 'a split such as "3P1D" or null', m.split);
    }
    out.split = m.split;
  }
  if (m.slo !== undefined) out.slo = validateSlo(m.slo);
  out.provenance = validateProvenance(m.provenance);
  for (const key of Object.keys(m).sort()) {
    if (key.startsWith("x_") && m[key] !== undefined) setOwn(out as PlainMap, key, plainData(m[key], key, 1));
  }
  return out;
}

/** Full validation of an in-memory or decoded table; returns a normalized copy. Does not recompute the checksum
 *  (decodeTable does): it only checks its form. Throws TableError naming the field path. */
export function validateTable(obj: unknown): Table {
  const body = validateBody(obj);
  const checksum = (obj as PlainMap).checksum;
  if (typeof checksum !== "string" || !CHECKSUM_PATTERN.test(checksum)) {
    throw expected("checksum", '"xxh64:" followed by 16 lowercase hex digits', checksum);
  }
  return { ...body, checksum } as Table;
}

// ------------------------------------------------------------------------------------------------------------------
// Canonical msgpack encoding (see the header comment and docs/table-format.md, "Checksum").

const UTF8 = new TextEncoder();

class ByteWriter {
  private bytes = new Uint8Array(256);
  private view = new DataView(this.bytes.buffer);
  length = 0;
  private reserve(n: number): void {
    if (this.length + n <= this.bytes.length) return;
    const grown = new Uint8Array(Math.max(this.bytes.length * 2, this.length + n));
    grown.set(this.bytes.subarray(0, this.length));
    this.bytes = grown;
    this.view = new DataView(grown.buffer); // the old view still points at the old buffer
  }
  u8(b: number): void {
    this.reserve(1);
    this.bytes[this.length++] = b;
  }
  u16(n: number): void {
    this.reserve(2);
    this.view.setUint16(this.length, n);
    this.length += 2;
  }
  u32(n: number): void {
    this.reserve(4);
    this.view.setUint32(this.length, n);
    this.length += 4;
  }
  i8(n: number): void {
    this.reserve(1);
    this.view.setInt8(this.length, n);
    this.length += 1;
  }
  i16(n: number): void {
    this.reserve(2);
    this.view.setInt16(this.length, n);
    this.length += 2;
  }
  i32(n: number): void {
    this.reserve(4);
    this.view.setInt32(this.length, n);
    this.length += 4;
  }
  u64(n: bigint): void {
    this.reserve(8);
    this.view.setBigUint64(this.length, n);
    this.length += 8;
  }
  i64(n: bigint): void {
    this.reserve(8);
    this.view.setBigInt64(this.length, n);
    this.length += 8;
  }
  f64(n: number): void {
    this.reserve(8);
    this.view.setFloat64(this.length, n);
    this.length += 8;
  }
  raw(b: Uint8Array): void {
    this.reserve(b.length);
    this.bytes.set(b, this.length);
    this.length += b.length;
  }
  result(): Uint8Array {
    return this.bytes.slice(0, this.length);
  }
}

/** Smallest msgpack integer format, the same choice as Python's msgpack and msgpackr (uint formats for n ≥ 0). */
function writeInteger(w: ByteWriter, n: bigint): void {
  if (n >= 0n) {
    if (n < 0x80n) w.u8(Number(n));
    else if (n < 0x100n) {
      w.u8(0xcc);
      w.u8(Number(n));
    } else if (n < 0x10000n) {
      w.u8(0xcd);
      w.u16(Number(n));
    } else if (n < 0x100000000n) {
      w.u8(0xce);
      w.u32(Number(n));
    } else {
      w.u8(0xcf);
      w.u64(n);
    }
  } else if (n >= -32n) w.i8(Number(n));
  else if (n >= -0x80n) {
    w.u8(0xd0);
    w.i8(Number(n));
  } else if (n >= -0x8000n) {
    w.u8(0xd1);
    w.i16(Number(n));
  } else if (n >= -0x80000000n) {
    w.u8(0xd2);
    w.i32(Number(n));
  } else {
    w.u8(0xd3);
    w.i64(n);
  }
}

function writeNumber(w: ByteWriter, n: number): void {
  if (Number.isSafeInteger(n)) {
    // Fast path for the common small case; -0 is a safe integer and is written as 0, as Python's int(-0.0) is.
    if (n >= 0 && n < 0x80) w.u8(n);
    else writeInteger(w, BigInt(n));
  } else {
    w.u8(0xcb);
    w.f64(n);
  }
}

function writeLength(
  w: ByteWriter,
  n: number,
  fix: number,
  fixMax: number,
  op16: number,
  op32: number,
  op8?: number,
): void {
  if (n <= fixMax) w.u8(fix | n);
  else if (op8 !== undefined && n < 0x100) {
    w.u8(op8);
    w.u8(n);
  } else if (n < 0x10000) {
    w.u8(op16);
    w.u16(n);
  } else {
    w.u8(op32);
    w.u32(n);
  }
}

/** Order of code points (what Python's sorted() and Go's byte-wise string order give), not of UTF-16 code units. */
function compareCodePoints(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    let x = a.charCodeAt(i),
      y = b.charCodeAt(i);
    if (x === y) continue;
    // Surrogates (D800–DFFF) encode code points above FFFF, so they must sort after E000–FFFF.
    if (x >= 0xd800) x += x >= 0xe000 ? -0x800 : 0x2000;
    if (y >= 0xd800) y += y >= 0xe000 ? -0x800 : 0x2000;
    return x - y;
  }
  return a.length - b.length;
}

function writeCanonical(w: ByteWriter, v: unknown, path: string, depth: number): void {
  if (depth > MAX_NESTING) throw new TableError(path, `nested deeper than ${MAX_NESTING} levels`);
  if (v === null) w.u8(0xc0);
  else if (typeof v === "boolean") w.u8(v ? 0xc3 : 0xc2);
  else if (typeof v === "number") writeNumber(w, v);
  else if (typeof v === "bigint") {
    if (v < -(2n ** 63n) || v >= 2n ** 64n) throw new TableError(path, `integer ${v} does not fit in 64 bits`);
    if (v >= -BigInt(Number.MAX_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER)) writeNumber(w, Number(v));
    else writeInteger(w, v);
  } else if (typeof v === "string") {
    const bytes = UTF8.encode(v);
    writeLength(w, bytes.length, 0xa0, 31, 0xda, 0xdb, 0xd9);
    w.raw(bytes);
  } else if (Array.isArray(v) || (ArrayBuffer.isView(v) && !(v instanceof DataView) && !(v instanceof Uint8Array))) {
    const items = Array.from(v as ArrayLike<unknown>);
    writeLength(w, items.length, 0x90, 15, 0xdc, 0xdd);
    items.forEach((x, i) => writeCanonical(w, x, `${path}[${i}]`, depth + 1));
  } else if (isPlainMap(v)) {
    const keys = Object.keys(v)
      .filter((k) => v[k] !== undefined)
      .sort(compareCodePoints);
    writeLength(w, keys.length, 0x80, 15, 0xde, 0xdf);
    for (const key of keys) {
      writeCanonical(w, key, path, depth + 1);
      writeCanonical(w, v[key], child(path, key), depth + 1);
    }
  } else {
    throw new TableError(path, `cannot be written to a table: ${describe(v)} (plain msgpack data only)`);
  }
}

/** Canonical msgpack bytes of `v` (object keys whose value is undefined are left out, as JSON does). */
function encodeCanonical(v: unknown): Uint8Array {
  const w = new ByteWriter();
  writeCanonical(w, v, TOP_LEVEL, 0);
  return w.result();
}

/** "xxh64:" + 16 hex digits: xxh64 (seed 0) of the canonical encoding of `t` without its `checksum` key. */
export function tableChecksum(t: object): string {
  const { checksum: _ignored, ...body } = t as PlainMap;
  return `xxh64:${xxh64Hex(encodeCanonical(body))}`;
}

// ------------------------------------------------------------------------------------------------------------------
// Decoding.

// int64AsType "bigint": 64-bit msgpack integers arrive as bigint whatever their size; fromMsgpack turns the safe ones
// into numbers. mapsAsObjects false: maps arrive as Map, so non-string keys and "__proto__" are seen, not mangled.
const UNPACKR = new Unpackr({ useRecords: false, mapsAsObjects: false, int64AsType: "bigint" });
const SAFE_BIG = BigInt(Number.MAX_SAFE_INTEGER);

/** Decoded msgpack value → plain data (objects, arrays, numbers, strings, booleans, null). Rejects bin and ext. */
function fromMsgpack(v: unknown, path: string, depth: number): unknown {
  if (depth > MAX_NESTING) throw new TableError(path, `nested deeper than ${MAX_NESTING} levels`);
  if (v === null || typeof v === "number" || typeof v === "string" || typeof v === "boolean") return v;
  if (typeof v === "bigint") {
    if (v < -SAFE_BIG || v > SAFE_BIG) throw new TableError(path, `integer ${v} is outside the safe range ±(2^53 − 1)`);
    return Number(v);
  }
  if (Array.isArray(v)) return v.map((x, i) => fromMsgpack(x, `${path}[${i}]`, depth + 1));
  if (v instanceof Map) {
    const out: PlainMap = {};
    for (const [key, x] of v) {
      if (typeof key !== "string") throw new TableError(path, `map key ${describe(key)} is not a string`);
      setOwn(out, key, fromMsgpack(x, child(path, key), depth + 1));
    }
    return out;
  }
  if (v instanceof Uint8Array) throw new TableError(path, `msgpack bin values are not allowed, got ${describe(v)}`);
  throw new TableError(path, "msgpack extension values are not allowed (plain msgpack only)");
}

/** Decodes, validates and verifies the checksum. Throws only TableError, whatever the bytes. */
export function decodeTable(bytes: Uint8Array): Table {
  if (!(bytes instanceof Uint8Array)) throw expected(BYTES, "a Uint8Array", bytes);
  if (bytes.length === 0) throw new TableError(BYTES, "empty input (expected a msgpack map)");
  let decoded: unknown;
  try {
    decoded = UNPACKR.unpack(bytes);
  } catch (e) {
    const reason = e instanceof Error ? e.message : String(e);
    throw new TableError(BYTES, `truncated or corrupt msgpack (${bytes.length} bytes): ${reason}`);
  }
  const raw = fromMsgpack(decoded, TOP_LEVEL, 0);
  const table = validateTable(raw);
  const actual = tableChecksum(raw as PlainMap); // over the map as stored, before rule defaults are filled in
  if (actual !== table.checksum) {
    throw new TableError(
      "checksum",
      `mismatch: the table says ${table.checksum} but its contents hash to ${actual} (changed or corrupted after writing)`,
    );
  }
  return table;
}

// ------------------------------------------------------------------------------------------------------------------
// Encoding and building.

type TableInput = Omit<Table, "checksum" | "format" | "version"> & Partial<Pick<Table, "format" | "version">>;

/** Validates (filling rule defaults), computes the checksum, returns the canonical msgpack bytes. */
/** The oldest version that holds `t`: 2 for a learned table with a guard or a `rule` cluster, else 1. */
export function versionNeeded(t: { fallback?: unknown; ood_bound?: unknown; bits?: ArrayLike<number> }): TableVersion {
  const bits = t.bits ? Array.from(t.bits) : [];
  return t.fallback !== undefined || t.ood_bound !== undefined || bits.includes(CLUSTER_RULE) ? 2 : 1;
}

export function encodeTable(t: TableInput): Uint8Array {
  const { checksum: _recomputed, ...rest } = t as TableInput & { checksum?: unknown };
  const body = validateBody({
    ...rest,
    format: rest.format ?? TABLE_FORMAT,
    version: rest.version ?? versionNeeded(rest),
  });
  return encodeCanonical({ ...body, checksum: tableChecksum(body) });
}

/** A copy of the default parameters of a rule kind (required ones, without defaults, are absent; learned kinds: {}). */
export function defaultParams(kind: PolicyKind): Record<string, number | number[]> {
  if (!(POLICY_KINDS as readonly string[]).includes(kind))
    throw expected("kind", `one of ${POLICY_KINDS.join(", ")}`, kind);
  if (!isRuleKind(kind)) return {};
  const out: Record<string, number | number[]> = {};
  for (const [key, spec] of Object.entries(RULE_PARAMS[kind])) {
    if (spec.type === "scalar" && spec.default !== undefined) out[key] = spec.default;
    else if (spec.type === "list") out[key] = [...spec.default];
  }
  return out;
}

/** A validated rule-kind table: defaults filled, provenance {tool: "dolphin-routing", created: now, workload:
 *  "(rule)", seed: 0} unless `extra.provenance` is given, checksum computed. */
export function ruleTable(kind: PolicyKind, params: Record<string, unknown> = {}, extra: Partial<Table> = {}): Table {
  if (!(POLICY_KINDS as readonly string[]).includes(kind) || !isRuleKind(kind)) {
    throw expected(
      "kind",
      `a rule kind (${POLICY_KINDS.filter(isRuleKind).join(", ")}); learned tables are built by the learner`,
      kind,
    );
  }
  const { checksum: _recomputed, ...rest } = extra;
  const provenance: Provenance = extra.provenance ?? {
    tool: "dolphin-routing",
    created: new Date().toISOString(),
    workload: "(rule)",
    seed: 0,
  };
  const body = validateBody({
    ...rest,
    format: TABLE_FORMAT,
    version: 1,
    kind,
    params: { ...extra.params, ...params },
    provenance,
  });
  return { ...body, checksum: tableChecksum(body) } as Table;
}

// ------------------------------------------------------------------------------------------------------------------
// Description.

const KIND_SUMMARY = new Map(KINDS.map((k) => [k.name, k.summary]));

function ruleSummary(kind: RuleKind, p: Record<string, unknown>): string {
  if (kind === "ppd") {
    const cells = ((p.bits ?? []) as number[][][]).flat(2);
    const remote = cells.filter((b) => b === 1).length;
    return (
      `turn 1 remote; later turns by a ${PPD_CONTEXT_CLASSES}×${PPD_RATIO_CLASSES}×${(p.qps_levels as number[]).length} ` +
      `(context, input/output ratio, QPS) table, ${cells.length - remote} cells local / ${remote} remote, ` +
      `w_ttft ${p.w_ttft}, w_tpot ${p.w_tpot}`
    );
  }
  // the spec's summary template, each {param} replaced by the table's value
  return (KIND_SUMMARY.get(kind) ?? kind).replace(/\{(\w+)\}/g, (_, name: string) => String(p[name]));
}

/** One paragraph for humans: kind, clusters, features, split, SLO, provenance. */
export function describeTable(t: Table): string {
  const parts: string[] = [];
  if (t.kind === "kmeans" || t.kind === "gmm") {
    const bits = t.bits ?? [];
    const remote = bits.filter((b) => b === CLUSTER_REMOTE).length;
    const rule = bits.filter((b) => b === CLUSTER_RULE).length;
    const model = t.kind === "kmeans" ? "k-means" : "Gaussian-mixture";
    parts.push(
      `${t.kind} table: K = ${bits.length} ${model} clusters over (${(t.features ?? []).join(", ")}), ` +
        `${bits.length - remote - rule} local / ${remote} remote` +
        (t.version >= 2 ? ` / ${rule} rule` : ""),
    );
    if (t.version >= 2) {
      const f = t.fallback ?? DEFAULT_FALLBACK;
      parts.push(
        `fallback rule ${f.kind} (${ruleSummary(f.kind, f.params)})` +
          (t.ood_bound ? `, out-of-distribution bounds per cluster` : ", no out-of-distribution bounds"),
      );
    }
  } else {
    parts.push(`${t.kind} rule table: ${ruleSummary(t.kind, t.params ?? {})}`);
  }
  if (t.osl_classes) {
    const c = t.osl_classes;
    parts.push(`output-length classes ${c.names.map((n, i) => `${n}→${c.representative[i]}`).join(", ")}`);
  }
  parts.push(t.split ? `learned for split ${t.split}` : "no split recorded");
  parts.push(t.slo ? `SLO TTFT ${t.slo.ttft_ms} ms, TPOT ${t.slo.tpot_ms} ms` : "no SLO recorded");
  const p = t.provenance;
  parts.push(
    `made by ${p.tool} on ${p.created} from workload ${JSON.stringify(p.workload)} (seed ${p.seed})` +
      (p.notes ? `: ${p.notes}` : ""),
  );
  return `${parts.join("; ")}; checksum ${t.checksum}.`;
}
