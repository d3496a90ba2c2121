// A rule table's `params`, checked against its kind's parameters as spec/abi.json describes them (the generated
// PARAM_* arrays): scalars (≥ 0, or > 0 when `positive`; required when they have no default), lists (each value
// ≥ 0 or > 0, a length range, strictly ascending) and PPD's 3 × 9 × Q bit grid. The twin of src/table/params.ts
// validateParams/validatePpdBits, in the same order.

import {
  OK, P_BITS_PER_QPS_LEVEL, P_CONTEXT_CLASSES, P_LIST_LENGTH, P_LIST_LENGTH_RANGE, P_MAP, P_PPD_BITS,
  P_PPD_BITS_REQUIRED, P_RATIO_CLASSES, P_RATIO_ROWS, P_REQUIRED_POSITIVE, P_UNKNOWN_PARAM, TE_COUNT, TE_EXPECTED,
  TE_LIMIT,
} from "../generated/abi";
import {
  KIND_PARAMS_START, PARAM_HAS_DEFAULT, PARAM_LIST_LENGTH, PARAM_MAX_LENGTH, PARAM_MIN_LENGTH, PARAM_NAMES,
  PARAM_POSITIVE, PARAM_TYPES, PARAM_TYPE_LIST, PARAM_TYPE_SCALAR,
} from "../generated/names";
import { NON_NEGATIVE, POSITIVE, checkAscending, checkBitArray, checkNumber, checkNumberArray, isArray, wrongLength } from "./fields";
import { keyIs, mapGet, nextKeyInObjectOrder } from "./keys";
import { T_MAP, nodeCount, nodeEnd, nodeType } from "./msgpack";
import { note, pathIndex, pathKey, pathMark, pathName, pathRestore, reject } from "./report";

const PPD_CONTEXT_CLASSES: i32 = 3;
const PPD_RATIO_CLASSES: i32 = 9;

/** Index of the parameter of `kind` named like key node `k`, or −1. */
function paramOf(kind: i32, k: i32): i32 {
  for (let p = KIND_PARAMS_START[kind]; p < KIND_PARAMS_START[kind + 1]; p++) if (keyIs(k, PARAM_NAMES[p])) return p;
  return -1;
}

/** The value node of parameter `p` in the params map `params` (−1: absent, or no params map). */
export function paramValue(params: i32, p: i32): i32 {
  return params >= 0 ? mapGet(params, PARAM_NAMES[p]) : -1;
}

/** `params` (−1 when absent: every parameter takes its default) of a rule table of kind `kind`. */
export function validateParams(params: i32, kind: i32): i32 {
  const mark = pathMark();
  pathName("params");
  if (params >= 0) {
    if (nodeType(params) != T_MAP) return reject(P_MAP, params);
    for (let k = nextKeyInObjectOrder(params, -1); k >= 0; k = nextKeyInObjectOrder(params, k)) {
      if (paramOf(kind, k) < 0) {
        pathKey(k);
        return reject(P_UNKNOWN_PARAM, -1);
      }
    }
  }
  let qpsLevels = 0; // PPD's Q, once its qps_levels are known
  for (let p = KIND_PARAMS_START[kind]; p < KIND_PARAMS_START[kind + 1]; p++) {
    const inner = pathMark();
    pathName(PARAM_NAMES[p]);
    const given = paramValue(params, p);
    const type = PARAM_TYPES[p];
    let rc = OK;
    if (type == PARAM_TYPE_SCALAR) {
      if (given < 0 && PARAM_HAS_DEFAULT[p] == 0) rc = reject(P_REQUIRED_POSITIVE, -1);
      else if (given >= 0) rc = checkNumber(given, PARAM_POSITIVE[p] != 0 ? POSITIVE : NON_NEGATIVE);
    } else if (type == PARAM_TYPE_LIST) {
      const length = given >= 0 ? nodeCount(given) : PARAM_LIST_LENGTH[p];
      if (given >= 0) rc = checkList(given, p);
      if (PARAM_NAMES[p] == "qps_levels") qpsLevels = length;
    } else {
      if (given < 0) {
        rc = reject(P_PPD_BITS_REQUIRED, -1);
        note(TE_EXPECTED, qpsLevels);
      } else rc = checkPpdBits(given, qpsLevels);
    }
    if (rc != OK) return rc;
    pathRestore(inner);
  }
  pathRestore(mark);
  return OK;
}

function checkList(node: i32, p: i32): i32 {
  let rc = checkNumberArray(node, -1, PARAM_POSITIVE[p] != 0 ? POSITIVE : NON_NEGATIVE, 0);
  if (rc != OK) return rc;
  const n = nodeCount(node);
  const min = PARAM_MIN_LENGTH[p];
  const max = PARAM_MAX_LENGTH[p];
  if (n < min || n > max) {
    rc = reject(min == max ? P_LIST_LENGTH : P_LIST_LENGTH_RANGE, node);
    note(TE_EXPECTED, min);
    note(TE_LIMIT, max);
    note(TE_COUNT, n);
    return rc;
  }
  return checkAscending(node);
}

/** PPD's bits: 3 context classes × 9 ratio classes × `q` QPS levels, each 0 or 1. */
function checkPpdBits(node: i32, q: i32): i32 {
  if (!isArray(node)) return reject(P_PPD_BITS, node);
  if (nodeCount(node) != PPD_CONTEXT_CLASSES) return wrongLength(P_CONTEXT_CLASSES, node, PPD_CONTEXT_CLASSES);
  let ratios = node + 1;
  for (let i = 0; i < PPD_CONTEXT_CLASSES; i++) {
    const mark = pathMark();
    pathIndex(i);
    if (!isArray(ratios)) return reject(P_RATIO_ROWS, ratios);
    if (nodeCount(ratios) != PPD_RATIO_CLASSES) return wrongLength(P_RATIO_CLASSES, ratios, PPD_RATIO_CLASSES);
    let row = ratios + 1;
    for (let j = 0; j < PPD_RATIO_CLASSES; j++) {
      const inner = pathMark();
      pathIndex(j);
      const rc = checkBitArray(row, q, P_BITS_PER_QPS_LEVEL);
      if (rc != OK) return rc;
      pathRestore(inner);
      row = nodeEnd(row);
    }
    pathRestore(mark);
    ratios = nodeEnd(ratios);
  }
  return OK;
}
