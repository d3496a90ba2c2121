// Validation of a whole table (the twin of assembly/table/validate.ts): the top-level keys, the learned clustering's
// fields, the fallback rule, split, SLO and provenance, with params.ts and osl-fields.ts for their fields. Every error
// is a TableError naming the field path; what passes comes back as a normalized, plain copy.

import {
  bitArray,
  expectArray,
  expected,
  expectIsoDate,
  expectLength,
  expectMap,
  expectNumber,
  expectString,
  numberArray,
  plainData,
  rejectUnknownKeys,
  setOwn,
  TOP_LEVEL,
  type NumberRule,
  type PlainMap,
} from "./fields.js";
import { validateOslClasses, validateOslModel } from "./osl-fields.js";
import { isRuleKind, validateParams } from "./params.js";
import {
  FALLBACK_KINDS,
  FEATURE_NAMES,
  POLICY_KINDS,
  TABLE_FORMAT,
  TABLE_VERSION,
  TableError,
  type Fallback,
  type FallbackKind,
  type FeatureName,
  type LoadBound,
  type PolicyKind,
  type Provenance,
  type Table,
  type TableVersion,
} from "./table.js";

const MAX_CLUSTERS = 256;
const WEIGHT_SUM_TOLERANCE = 1e-6;
const CHECKSUM_PATTERN = /^xxh64:[0-9a-f]{16}$/;
const SPLIT_PATTERN = /^\d+P\d+D$/;

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
  "load_bound",
  "cluster_share",
]);
/** Fields only learned tables hold. */
const LEARNED_ONLY = [
  "scaler",
  "centroids",
  "bits",
  "weights",
  "variances",
  "fallback",
  "ood_bound",
  "load_bound",
  "cluster_share",
];
/** Fields a version-1 table may not hold. */
const VERSION_2_FIELDS = ["fallback", "ood_bound"];
/** Fields a version-1 or version-2 table may not hold. */
const VERSION_3_FIELDS = ["load_bound", "cluster_share"];

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
  load_bound?: LoadBound;
  cluster_share?: number[];
}

function validateLearned(m: PlainMap, kind: "kmeans" | "gmm", version: TableVersion): LearnedFields {
  const fields = validateClusters(m, kind, version);
  if (version === 1) rejectNewer(m, VERSION_2_FIELDS, NEEDS_VERSION_2);
  if (version < 3) rejectNewer(m, VERSION_3_FIELDS, NEEDS_VERSION_3);
  if (version === 1) return fields;
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
  if (version < 3) return fields;
  if (m.load_bound !== undefined) fields.load_bound = validateLoadBound(m.load_bound, fields.bits.length);
  if (m.cluster_share !== undefined) fields.cluster_share = validateClusterShare(m.cluster_share, fields.bits.length);
  return fields;
}

const NEEDS_VERSION_2 = "needs table version 2 (version 1 has no fallback rule and no out-of-distribution bounds)";
const NEEDS_VERSION_3 = "needs table version 3 (versions 1 and 2 have no load bounds and no cluster shares)";

/** Throws `problem` at the first of `keys` the table holds (a field of a newer version than it declares). */
function rejectNewer(m: PlainMap, keys: readonly string[], problem: string): void {
  for (const key of keys) if (m[key] !== undefined) throw new TableError(key, problem);
}

/** load_bound (version 3): exactly `prefill` and `decode`, K finite numbers ≥ 0 each. */
function validateLoadBound(v: unknown, clusters: number): LoadBound {
  const m = expectMap(v, "load_bound");
  rejectUnknownKeys(m, "load_bound", ["prefill", "decode"]);
  const bound = (key: string): number[] =>
    numberArray(m[key], `load_bound.${key}`, clusters, { min: 0 }, "bounds (one per cluster)");
  const prefill = bound("prefill");
  return { prefill, decode: bound("decode") };
}

/** cluster_share (version 3): K finite numbers ≥ 0 summing to 1 within 1e-6. */
function validateClusterShare(v: unknown, clusters: number): number[] {
  const shares = numberArray(v, "cluster_share", clusters, { min: 0 }, "shares (one per cluster)");
  const sum = shares.reduce((a, b) => a + b, 0);
  if (!(Math.abs(sum - 1) <= WEIGHT_SUM_TOLERANCE)) {
    throw new TableError(
      "cluster_share",
      `expected shares summing to 1 (within ${WEIGHT_SUM_TOLERANCE}), got a sum of ${sum}`,
    );
  }
  return shares;
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
export function validateBody(v: unknown): Omit<Table, "checksum"> {
  const m = expectMap(v, TOP_LEVEL);
  if (m.format !== TABLE_FORMAT) throw expected("format", JSON.stringify(TABLE_FORMAT), m.format);
  if (typeof m.version === "number" && Number.isSafeInteger(m.version) && m.version > TABLE_VERSION) {
    throw new TableError("version", `unsupported table version ${m.version} (this build reads 1 to ${TABLE_VERSION})`);
  }
  if (m.version !== 1 && m.version !== 2 && m.version !== TABLE_VERSION)
    throw expected("version", `the integer 1, 2 or ${TABLE_VERSION}`, m.version);
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
