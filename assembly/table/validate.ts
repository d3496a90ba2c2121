// Field-by-field validation of a table on the tape, the twin of src/table/validate.ts validateBody/validateTable: the
// same rules, checked in the same order, so the first problem found (and the field it names) is the one
// src/table/validate.ts reports. Kind names, parameter names, defaults and limits come from the generated contract
// (spec/abi.json). What validation finds (the kind, K, D, the nodes of the fields staging needs) is kept here for
// stage.ts.

import {
  KIND_KMEANS, KIND_MAX, LIMIT_MAX_DIMS, LIMIT_MAX_K, OK, P_BITS_PER_CLUSTER, P_CHECKSUM_FORM, P_CLUSTER_COUNT,
  P_DUPLICATE_FEATURE, P_FEATURE_LIST, P_FEATURE_NAME, P_FORMAT, P_GMM_ONLY, P_ISO_DATE, P_KIND, P_MAP, P_NO_FEATURES,
  P_PARAMS_ON_LEARNED, P_PROVENANCE_EXTRA, P_ROWS, P_ROWS_PER_CLUSTER, P_RULE_FIELD, P_SPLIT, P_TOO_MANY_FEATURES,
  P_UNKNOWN_SCALER_KEY, P_UNKNOWN_SLO_KEY, P_UNKNOWN_TOP_KEY, P_UNSUPPORTED_VERSION, P_VALUES_PER_FEATURE, P_VERSION,
  P_WEIGHTS_PER_CLUSTER, P_WEIGHT_SUM, TE_COUNT, TE_EXPECTED, TE_KIND, TE_LIMIT, TE_VALUE_NUMBER,
} from "../generated/abi";
import { FEATURE_NAMES, KIND_LEARNED, KIND_NAMES, OSL_FEATURE_NAMES } from "../generated/names";
import {
  ANY, INTEGER, POSITIVE, checkBitArray, checkMap, checkNumber, checkNumberArray, checkString,
  isArray, isChecksum, isIsoDate, isNumber, isSplit, isString, numberValue, sameString, wrongLength,
} from "./fields";
import { isFirstOccurrence, keyInByteOrder, keyIs, mapGet, nextKeyInObjectOrder, valueOf } from "./keys";
import { T_ARRAY, T_MAP, T_NIL, T_STR, byteAt, isSafeInteger, nodeCount, nodeEnd, nodeNum, nodePos, nodeType } from "./msgpack";
import { resetGuard, validateGuard } from "./guard-fields";
import { validateOslClasses, validateOslModel } from "./osl-fields";
import { validateParams } from "./params";
import { note, pathIndex, pathKey, pathMark, pathName, pathRestore, reject } from "./report";

const TABLE_FORMAT = "dolphin-routing.table";
const TABLE_VERSION: i32 = 3; // the newest this build reads; versions 1 and 2 still load
const WEIGHT_SUM_TOLERANCE: f64 = 1e-6;

// what validation found, for staging and the info record
export let kind: i32 = 0;
export let clusters: i32 = 0;
export let dims: i32 = 0;
export let top: i32 = -1; // the top-level map
export let features: i32 = -1;
export let scaler: i32 = -1;
export let centroids: i32 = -1;
export let bits: i32 = -1;
export let weights: i32 = -1;
export let variances: i32 = -1;
export let params: i32 = -1;
export let oslClasses: i32 = -1;
export let oslModel: i32 = -1;
export let split: i32 = -1;
export let slo: i32 = -1;
export let provenance: i32 = -1;
export let checksum: i32 = -1;
export let version: i32 = 1;

/** Appends `.name` to the path; returns the mark to restore it. */
function at(name: string): i32 {
  const mark = pathMark();
  pathName(name);
  return mark;
}

const TOP_LEVEL_KEYS: StaticArray<string> = [
  "format", "version", "kind", "features", "scaler", "centroids", "bits", "weights", "variances", "params",
  "osl_classes", "osl_model", "split", "slo", "provenance", "checksum", "fallback", "ood_bound", "load_bound",
  "cluster_share",
];
const RULE_ONLY_ABSENT: StaticArray<string> = [
  "scaler", "centroids", "bits", "weights", "variances", "fallback", "ood_bound", "load_bound", "cluster_share",
];

function isKnownTopKey(k: i32): bool {
  for (let i = 0; i < TOP_LEVEL_KEYS.length; i++) if (keyIs(k, TOP_LEVEL_KEYS[i])) return true;
  return isExtensionKey(k);
}

/** A key starting with "x_": an extension field. */
function isExtensionKey(k: i32): bool {
  return nodeCount(k) >= 2 && byteAt(nodePos(k)) == 0x78 && byteAt(nodePos(k) + 1) == 0x5f;
}

/** Validates the whole table at tape node `root`; OK or E_BAD_TABLE. Does not verify the checksum's value. */
export function validateTable(root: i32): i32 {
  kind = 0;
  clusters = 0;
  dims = 0;
  top = root;
  version = 1;
  resetGuard();
  if (nodeType(root) != T_MAP) return reject(P_MAP, root);
  let mark = at("format");
  const format = mapGet(root, "format");
  if (!isString(format) || !keyIs(format, TABLE_FORMAT)) return reject(P_FORMAT, format);
  pathRestore(mark);

  mark = at("version");
  const versionNode = mapGet(root, "version");
  if (isNumber(versionNode) && isSafeInteger(nodeNum(versionNode)) && nodeNum(versionNode) > TABLE_VERSION) {
    const rc = reject(P_UNSUPPORTED_VERSION, versionNode);
    note(TE_EXPECTED, TABLE_VERSION);
    return rc;
  }
  const v = isNumber(versionNode) ? nodeNum(versionNode) : 0;
  if (v != 1 && v != 2 && v != TABLE_VERSION) {
    const rc = reject(P_VERSION, versionNode);
    note(TE_EXPECTED, TABLE_VERSION);
    return rc;
  }
  version = <i32>nodeNum(versionNode);
  pathRestore(mark);

  mark = at("kind");
  const kindNode = mapGet(root, "kind");
  if (isString(kindNode)) for (let c = 1; c <= KIND_MAX; c++) if (keyIs(kindNode, KIND_NAMES[c])) kind = c;
  if (kind == 0) return reject(P_KIND, kindNode);
  note(TE_KIND, kind);
  pathRestore(mark);

  for (let k = nextKeyInObjectOrder(root, -1); k >= 0; k = nextKeyInObjectOrder(root, k)) {
    if (!isKnownTopKey(k)) {
      pathKey(k);
      return reject(P_UNKNOWN_TOP_KEY, -1);
    }
  }

  let rc = OK;
  features = mapGet(root, "features");
  params = mapGet(root, "params");
  if (KIND_LEARNED[kind] == 0) {
    for (let i = 0; i < RULE_ONLY_ABSENT.length; i++) {
      if (mapGet(root, RULE_ONLY_ABSENT[i]) >= 0) {
        pathName(RULE_ONLY_ABSENT[i]);
        return reject(P_RULE_FIELD, -1);
      }
    }
    if (features >= 0) {
      mark = at("features");
      rc = validateFeatures(features, true);
      if (rc != OK) return rc;
      pathRestore(mark);
      dims = nodeCount(features);
    }
    rc = validateParams(params, kind);
    if (rc != OK) return rc;
  } else {
    rc = validateLearned(root);
    if (rc != OK) return rc;
  }

  oslClasses = mapGet(root, "osl_classes");
  if (oslClasses >= 0) {
    rc = validateOslClasses(oslClasses);
    if (rc != OK) return rc;
  }
  oslModel = mapGet(root, "osl_model");
  if (oslModel >= 0) {
    rc = validateOslModel(oslModel, oslClasses);
    if (rc != OK) return rc;
  }
  split = mapGet(root, "split");
  if (split >= 0 && nodeType(split) != T_NIL && !isSplit(split)) {
    pathName("split");
    return reject(P_SPLIT, split);
  }
  slo = mapGet(root, "slo");
  if (slo >= 0) {
    rc = validateSlo(slo);
    if (rc != OK) return rc;
  }
  provenance = mapGet(root, "provenance");
  rc = validateProvenance(provenance);
  if (rc != OK) return rc;
  rc = validateExtensions(root);
  if (rc != OK) return rc;

  checksum = mapGet(root, "checksum");
  if (!isChecksum(checksum)) {
    pathName("checksum");
    return reject(P_CHECKSUM_FORM, checksum);
  }
  return OK;
}

// ---- learned kinds -----------------------------------------------------------------------------------------

/** features: 1–4 (or, for rule kinds, 0–4) distinct names from FEATURE_NAMES. Path: "features". */
function validateFeatures(node: i32, allowEmpty: bool): i32 {
  if (!isArray(node)) return reject(P_FEATURE_LIST, node);
  const n = nodeCount(node);
  if (n == 0 && !allowEmpty) return reject(P_NO_FEATURES, node);
  if (n > LIMIT_MAX_DIMS) {
    const rc = reject(P_TOO_MANY_FEATURES, node);
    note(TE_LIMIT, LIMIT_MAX_DIMS);
    note(TE_COUNT, n);
    return rc;
  }
  let c = node + 1;
  for (let i = 0; i < n; i++) {
    let known = false;
    if (isString(c)) for (let f = 0; f < FEATURE_NAMES.length; f++) if (keyIs(c, FEATURE_NAMES[f])) known = true;
    if (!known) {
      pathIndex(i);
      return reject(P_FEATURE_NAME, c);
    }
    for (let e = node + 1; e != c; e = nodeEnd(e)) {
      if (sameString(e, c)) {
        pathIndex(i);
        return reject(P_DUPLICATE_FEATURE, c);
      }
    }
    c = nodeEnd(c);
  }
  return OK;
}

/** The index in FEATURE_NAMES of the feature name node `node` (validated). */
export function featureIndex(node: i32): i32 {
  for (let f = 0; f < FEATURE_NAMES.length; f++) if (keyIs(node, FEATURE_NAMES[f])) return f;
  return -1;
}

export function oslFeatureIndex(node: i32): i32 {
  for (let f = 0; f < OSL_FEATURE_NAMES.length; f++) if (keyIs(node, OSL_FEATURE_NAMES[f])) return f;
  return -1;
}

/** K rows of D finite numbers (K in 1…256 when `expected` < 0, else exactly `expected`), each by `rule`. */
function clusterMatrix(node: i32, expected: i32, rule: i32): i32 {
  if (!isArray(node)) return reject(P_ROWS, node);
  const n = nodeCount(node);
  if (expected < 0 && (n < 1 || n > LIMIT_MAX_K)) {
    const rc = reject(P_CLUSTER_COUNT, node);
    note(TE_LIMIT, LIMIT_MAX_K);
    note(TE_COUNT, n);
    return rc;
  }
  if (expected >= 0 && n != expected) return wrongLength(P_ROWS_PER_CLUSTER, node, expected);
  let row = node + 1;
  for (let i = 0; i < n; i++) {
    const mark = pathMark();
    pathIndex(i);
    const rc = checkNumberArray(row, dims, rule, P_VALUES_PER_FEATURE);
    if (rc != OK) return rc;
    pathRestore(mark);
    row = nodeEnd(row);
  }
  return OK;
}

function validateLearned(root: i32): i32 {
  const rc = validateClusters(root);
  if (rc != OK) return rc;
  return validateGuard(root, version, kind, clusters);
}

function validateClusters(root: i32): i32 {
  if (params >= 0) {
    pathName("params");
    return reject(P_PARAMS_ON_LEARNED, -1);
  }
  let mark = at("features");
  let rc = validateFeatures(features, false);
  if (rc != OK) return rc;
  pathRestore(mark);
  dims = nodeCount(features);

  mark = at("scaler");
  scaler = mapGet(root, "scaler");
  rc = checkMap(scaler);
  if (rc != OK) return rc;
  for (let k = nextKeyInObjectOrder(scaler, -1); k >= 0; k = nextKeyInObjectOrder(scaler, k)) {
    if (!keyIs(k, "mean") && !keyIs(k, "std")) {
      pathKey(k);
      return reject(P_UNKNOWN_SCALER_KEY, -1);
    }
  }
  let inner = at("mean");
  rc = checkNumberArray(mapGet(scaler, "mean"), dims, ANY, P_VALUES_PER_FEATURE);
  if (rc != OK) return rc;
  pathRestore(inner);
  inner = at("std");
  rc = checkNumberArray(mapGet(scaler, "std"), dims, POSITIVE, P_VALUES_PER_FEATURE);
  if (rc != OK) return rc;
  pathRestore(mark);

  mark = at("centroids");
  centroids = mapGet(root, "centroids");
  rc = clusterMatrix(centroids, -1, ANY);
  if (rc != OK) return rc;
  pathRestore(mark);
  clusters = nodeCount(centroids);

  mark = at("bits");
  bits = mapGet(root, "bits");
  rc = checkBitArray(bits, clusters, P_BITS_PER_CLUSTER, version >= 2);
  if (rc != OK) return rc;
  pathRestore(mark);

  weights = mapGet(root, "weights");
  variances = mapGet(root, "variances");
  if (kind == KIND_KMEANS) {
    if (weights >= 0) { pathName("weights"); return reject(P_GMM_ONLY, -1); }
    if (variances >= 0) { pathName("variances"); return reject(P_GMM_ONLY, -1); }
    return OK;
  }
  mark = at("weights");
  rc = checkNumberArray(weights, clusters, POSITIVE, P_WEIGHTS_PER_CLUSTER);
  if (rc != OK) return rc;
  let sum: f64 = 0;
  for (let c = weights + 1, i = 0; i < clusters; i++, c = nodeEnd(c)) sum += numberValue(c);
  if (!(Math.abs(sum - 1) <= WEIGHT_SUM_TOLERANCE)) {
    rc = reject(P_WEIGHT_SUM, -1);
    note(TE_VALUE_NUMBER, sum);
    return rc;
  }
  pathRestore(mark);
  mark = at("variances");
  rc = clusterMatrix(variances, clusters, POSITIVE);
  if (rc != OK) return rc;
  pathRestore(mark);
  return OK;
}

// ---- slo, provenance, extensions ---------------------------------------------------------------------------

function validateSlo(node: i32): i32 {
  if (nodeType(node) == T_NIL) return OK;
  const mark = at("slo");
  let rc = checkMap(node);
  if (rc != OK) return rc;
  for (let k = nextKeyInObjectOrder(node, -1); k >= 0; k = nextKeyInObjectOrder(node, k)) {
    if (!keyIs(k, "ttft_ms") && !keyIs(k, "tpot_ms")) {
      pathKey(k);
      return reject(P_UNKNOWN_SLO_KEY, -1);
    }
  }
  let inner = at("ttft_ms");
  rc = checkNumber(mapGet(node, "ttft_ms"), POSITIVE);
  if (rc != OK) return rc;
  pathRestore(inner);
  inner = at("tpot_ms");
  rc = checkNumber(mapGet(node, "tpot_ms"), POSITIVE);
  if (rc != OK) return rc;
  pathRestore(mark);
  return OK;
}

const PROVENANCE_KEYS: StaticArray<string> = ["tool", "created", "workload", "seed", "notes"];

function validateProvenance(node: i32): i32 {
  const mark = at("provenance");
  let rc = checkMap(node);
  if (rc != OK) return rc;
  let inner = at("tool");
  rc = checkString(mapGet(node, "tool"), true);
  if (rc != OK) return rc;
  pathRestore(inner);
  inner = at("created");
  const created = mapGet(node, "created");
  if (!isIsoDate(created)) return reject(P_ISO_DATE, created);
  pathRestore(inner);
  inner = at("workload");
  rc = checkString(mapGet(node, "workload"), false);
  if (rc != OK) return rc;
  pathRestore(inner);
  inner = at("seed");
  rc = checkNumber(mapGet(node, "seed"), INTEGER);
  if (rc != OK) return rc;
  pathRestore(inner);
  const notes = mapGet(node, "notes");
  if (notes >= 0) {
    inner = at("notes");
    rc = checkString(notes, false);
    if (rc != OK) return rc;
    pathRestore(inner);
  }
  for (let k = nextKeyInObjectOrder(node, -1); k >= 0; k = nextKeyInObjectOrder(node, k)) {
    let fixed = false;
    for (let i = 0; i < PROVENANCE_KEYS.length; i++) if (keyIs(k, PROVENANCE_KEYS[i])) fixed = true;
    if (fixed) continue;
    const v = valueOf(node, k);
    if (nodeType(v) == T_STR) continue;
    inner = pathMark();
    pathKey(k);
    if (isNumber(v)) {
      rc = checkNumber(v, ANY);
      if (rc != OK) return rc;
    } else return reject(P_PROVENANCE_EXTRA, v);
    pathRestore(inner);
  }
  pathRestore(mark);
  return OK;
}

/** Extension fields: every top-level key starting with "x_", in sorted order, holds plain data with finite numbers. */
function validateExtensions(root: i32): i32 {
  for (let i = 0; i < nodeCount(root); i++) {
    const k = keyInByteOrder(root, i);
    if (!isFirstOccurrence(root, k) || !isExtensionKey(k)) continue;
    const mark = pathMark();
    pathKey(k);
    const rc = finiteEverywhere(valueOf(root, k));
    if (rc != OK) return rc;
    pathRestore(mark);
  }
  return OK;
}

/** Every number in plain data `node` is finite (its maps visited in JavaScript's key order). */
function finiteEverywhere(node: i32): i32 {
  const t = nodeType(node);
  if (isNumber(node)) return checkNumber(node, ANY);
  if (t == T_ARRAY) {
    let c = node + 1;
    for (let i = 0; i < nodeCount(node); i++) {
      const mark = pathMark();
      pathIndex(i);
      const rc = finiteEverywhere(c);
      if (rc != OK) return rc;
      pathRestore(mark);
      c = nodeEnd(c);
    }
  } else if (t == T_MAP) {
    for (let k = nextKeyInObjectOrder(node, -1); k >= 0; k = nextKeyInObjectOrder(node, k)) {
      const mark = pathMark();
      pathKey(k);
      const rc = finiteEverywhere(valueOf(node, k));
      if (rc != OK) return rc;
      pathRestore(mark);
    }
  }
  return OK;
}
