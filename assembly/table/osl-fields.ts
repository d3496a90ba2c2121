// The output-length fields of a table: `osl_classes` (names, thresholds, representative lengths) and `osl_model`
// (a logistic classifier over OSL_FEATURE_NAMES, one weight row per class). The twin of src/table/osl-fields.ts
// validateOslClasses/validateOslModel, in the same order.

import {
  LIMIT_MAX_OSL_CLASSES, OK, P_CLASS_COUNT, P_CLASS_NAMES, P_DUPLICATE_CLASS, P_DUPLICATE_OSL_FEATURE,
  P_LENGTHS_PER_NAME, P_LOGISTIC, P_MAP, P_NON_EMPTY_STRING, P_OSL_FEATURE_COUNT, P_OSL_FEATURE_LIST,
  P_OSL_MODEL_NEEDS_CLASSES, P_ROWS_PER_OSL_CLASS, P_STRING, P_THRESHOLDS_PER_NAME, P_UNKNOWN_OSL_CLASSES_KEY,
  P_UNKNOWN_OSL_FEATURE, P_UNKNOWN_OSL_MODEL_KEY, P_VALUES_PER_FEATURE, P_VALUES_PER_OSL_CLASS, P_WEIGHTS_PER_FEATURE,
  P_WEIGHT_ROWS, TE_COUNT, TE_LIMIT,
} from "../generated/abi";
import { OSL_FEATURE_NAMES } from "../generated/names";
import {
  ANY, NON_NEGATIVE, POSITIVE, checkAscending, checkNumberArray, isArray, isString, sameString, wrongLength,
} from "./fields";
import { keyIs, mapGet, nextKeyInObjectOrder } from "./keys";
import { T_MAP, nodeCount, nodeEnd, nodeType } from "./msgpack";
import { note, pathIndex, pathKey, pathMark, pathName, pathRestore, reject } from "./report";

const CLASS_KEYS: StaticArray<string> = ["names", "thresholds", "representative"];
const MODEL_KEYS: StaticArray<string> = ["kind", "features", "mean", "std", "weights", "bias"];

function isOneOf(k: i32, names: StaticArray<string>): bool {
  for (let i = 0; i < names.length; i++) if (keyIs(k, names[i])) return true;
  return false;
}

/** A count outside 1…limit. */
function badCount(problem: i32, node: i32, limit: i32): i32 {
  const rc = reject(problem, node);
  note(TE_LIMIT, limit);
  note(TE_COUNT, nodeCount(node));
  return rc;
}

export function validateOslClasses(node: i32): i32 {
  const mark = pathMark();
  pathName("osl_classes");
  if (nodeType(node) != T_MAP) return reject(P_MAP, node);
  for (let k = nextKeyInObjectOrder(node, -1); k >= 0; k = nextKeyInObjectOrder(node, k)) {
    if (!isOneOf(k, CLASS_KEYS)) {
      pathKey(k);
      return reject(P_UNKNOWN_OSL_CLASSES_KEY, -1);
    }
  }
  let inner = pathMark();
  pathName("names");
  const names = mapGet(node, "names");
  if (!isArray(names)) return reject(P_CLASS_NAMES, names);
  const count = nodeCount(names);
  if (count < 1 || count > LIMIT_MAX_OSL_CLASSES) return badCount(P_CLASS_COUNT, names, LIMIT_MAX_OSL_CLASSES);
  let c = names + 1;
  for (let i = 0; i < count; i++) {
    if (!isString(c) || nodeCount(c) == 0) {
      pathIndex(i);
      return reject(P_NON_EMPTY_STRING, c);
    }
    for (let e = names + 1; e != c; e = nodeEnd(e)) {
      if (sameString(e, c)) {
        pathIndex(i);
        return reject(P_DUPLICATE_CLASS, c);
      }
    }
    c = nodeEnd(c);
  }
  pathRestore(inner);
  inner = pathMark();
  pathName("thresholds");
  const thresholds = mapGet(node, "thresholds");
  let rc = checkNumberArray(thresholds, count - 1, ANY, P_THRESHOLDS_PER_NAME);
  if (rc != OK) return rc;
  rc = checkAscending(thresholds);
  if (rc != OK) return rc;
  pathRestore(inner);
  inner = pathMark();
  pathName("representative");
  rc = checkNumberArray(mapGet(node, "representative"), count, NON_NEGATIVE, P_LENGTHS_PER_NAME);
  if (rc != OK) return rc;
  pathRestore(mark);
  return OK;
}

/** `classes` is the validated osl_classes node, or −1 when the table has none. */
export function validateOslModel(node: i32, classes: i32): i32 {
  const mark = pathMark();
  pathName("osl_model");
  if (classes < 0) return reject(P_OSL_MODEL_NEEDS_CLASSES, -1);
  if (nodeType(node) != T_MAP) return reject(P_MAP, node);
  for (let k = nextKeyInObjectOrder(node, -1); k >= 0; k = nextKeyInObjectOrder(node, k)) {
    if (!isOneOf(k, MODEL_KEYS)) {
      pathKey(k);
      return reject(P_UNKNOWN_OSL_MODEL_KEY, -1);
    }
  }
  let inner = pathMark();
  pathName("kind");
  const kind = mapGet(node, "kind");
  if (!isString(kind) || !keyIs(kind, "logistic")) return reject(P_LOGISTIC, kind);
  pathRestore(inner);

  inner = pathMark();
  pathName("features");
  const features = mapGet(node, "features");
  if (!isArray(features)) return reject(P_OSL_FEATURE_LIST, features);
  const d = nodeCount(features);
  if (d < 1 || d > OSL_FEATURE_NAMES.length) return badCount(P_OSL_FEATURE_COUNT, features, OSL_FEATURE_NAMES.length);
  let f = features + 1;
  for (let i = 0; i < d; i++) {
    pathIndex(i);
    if (!isString(f)) return reject(P_STRING, f);
    if (!isOneOf(f, OSL_FEATURE_NAMES)) return reject(P_UNKNOWN_OSL_FEATURE, f);
    for (let e = features + 1; e != f; e = nodeEnd(e)) if (sameString(e, f)) return reject(P_DUPLICATE_OSL_FEATURE, f);
    pathRestore(inner);
    pathName("features");
    f = nodeEnd(f);
  }
  pathRestore(inner);

  const c = nodeCount(mapGet(classes, "names"));
  inner = pathMark();
  pathName("mean");
  let rc = checkNumberArray(mapGet(node, "mean"), d, ANY, P_VALUES_PER_FEATURE);
  if (rc != OK) return rc;
  pathRestore(inner);
  pathName("std");
  rc = checkNumberArray(mapGet(node, "std"), d, POSITIVE, P_VALUES_PER_FEATURE);
  if (rc != OK) return rc;
  pathRestore(inner);

  pathName("weights");
  const rows = mapGet(node, "weights");
  if (!isArray(rows)) return reject(P_WEIGHT_ROWS, rows);
  if (nodeCount(rows) != c) return wrongLength(P_ROWS_PER_OSL_CLASS, rows, c);
  let row = rows + 1;
  for (let i = 0; i < c; i++) {
    const rowMark = pathMark();
    pathIndex(i);
    rc = checkNumberArray(row, d, ANY, P_WEIGHTS_PER_FEATURE);
    if (rc != OK) return rc;
    pathRestore(rowMark);
    row = nodeEnd(row);
  }
  pathRestore(inner);
  pathName("bias");
  rc = checkNumberArray(mapGet(node, "bias"), c, ANY, P_VALUES_PER_OSL_CLASS);
  if (rc != OK) return rc;
  pathRestore(mark);
  return OK;
}
