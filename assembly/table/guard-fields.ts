// The guard of a learned table on the tape, the twin of src/table/validate.ts validateGuard: version 2's fallback
// rule and out-of-distribution bounds, version 3's load bounds and cluster shares. Checked in src/table/'s order, so
// the first problem found (and the field it names) is the one src/table/ reports; the nodes found are kept here
// for stage.ts.

import {
  KIND_KMEANS, KIND_MAX, KIND_PPD, OK, P_BOUNDS_PER_CLUSTER, P_FALLBACK_KIND, P_NEEDS_VERSION_2, P_NEEDS_VERSION_3,
  P_SHARES_PER_CLUSTER, P_SHARE_SUM, P_UNKNOWN_FALLBACK_KEY, P_UNKNOWN_LOAD_BOUND_KEY, TE_KIND, TE_VALUE_NUMBER,
} from "../generated/abi";
import { KIND_LEARNED, KIND_NAMES } from "../generated/names";
import { ANY, NON_NEGATIVE, checkMap, checkNumberArray, isString, numberValue } from "./fields";
import { keyIs, mapGet, nextKeyInObjectOrder } from "./keys";
import { nodeEnd } from "./msgpack";
import { validateParams } from "./params";
import { note, pathKey, pathMark, pathName, pathRestore, reject } from "./report";

const SHARE_SUM_TOLERANCE: f64 = 1e-6;
const VERSION_2_FIELDS: StaticArray<string> = ["fallback", "ood_bound"];
const VERSION_3_FIELDS: StaticArray<string> = ["load_bound", "cluster_share"];

export let fallback: i32 = -1; // version 2: the fallback map (−1: the default rule)
export let fallbackKind: i32 = 0;
export let fallbackParams: i32 = -1;
export let oodBound: i32 = -1;
export let loadBound: i32 = -1; // version 3: the load_bound map (−1: no load bounds)
export let clusterShare: i32 = -1;

export function resetGuard(): void {
  fallback = -1;
  fallbackKind = 0;
  fallbackParams = -1;
  oodBound = -1;
  loadBound = -1;
  clusterShare = -1;
}

/** Appends `.name` to the path; returns the mark to restore it. */
function at(name: string): i32 {
  const mark = pathMark();
  pathName(name);
  return mark;
}

/** The first of `fields` the table holds, rejected with `problem` (a field of a newer version); else OK. */
function rejectNewer(root: i32, fields: StaticArray<string>, problem: i32): i32 {
  for (let i = 0; i < fields.length; i++) {
    if (mapGet(root, fields[i]) >= 0) {
      pathName(fields[i]);
      return reject(problem, -1);
    }
  }
  return OK;
}

/**
 * Version 2: `fallback` ({kind, params}) and `ood_bound` (K numbers; ≥ 0 for kmeans). Version 3: `load_bound`
 * ({prefill, decode}, K numbers ≥ 0 each) and `cluster_share` (K numbers ≥ 0 summing to 1). `kind` is the table's.
 */
export function validateGuard(root: i32, version: i32, kind: i32, clusters: i32): i32 {
  let rc = version < 2 ? rejectNewer(root, VERSION_2_FIELDS, P_NEEDS_VERSION_2) : OK;
  if (rc != OK) return rc;
  rc = version < 3 ? rejectNewer(root, VERSION_3_FIELDS, P_NEEDS_VERSION_3) : OK;
  if (rc != OK || version < 2) return rc;
  fallback = mapGet(root, "fallback");
  if (fallback >= 0) {
    rc = validateFallback(kind);
    if (rc != OK) return rc;
  }
  oodBound = mapGet(root, "ood_bound");
  if (oodBound >= 0) {
    const mark = at("ood_bound");
    rc = checkNumberArray(oodBound, clusters, kind == KIND_KMEANS ? NON_NEGATIVE : ANY, P_BOUNDS_PER_CLUSTER);
    if (rc != OK) return rc;
    pathRestore(mark);
  }
  if (version < 3) return OK;
  loadBound = mapGet(root, "load_bound");
  if (loadBound >= 0) {
    rc = validateLoadBound(clusters);
    if (rc != OK) return rc;
  }
  clusterShare = mapGet(root, "cluster_share");
  if (clusterShare >= 0) {
    rc = validateClusterShare(clusters);
    if (rc != OK) return rc;
  }
  return OK;
}

function validateFallback(kind: i32): i32 {
  const mark = at("fallback");
  let rc = checkMap(fallback);
  if (rc != OK) return rc;
  for (let k = nextKeyInObjectOrder(fallback, -1); k >= 0; k = nextKeyInObjectOrder(fallback, k)) {
    if (!keyIs(k, "kind") && !keyIs(k, "params")) {
      pathKey(k);
      return reject(P_UNKNOWN_FALLBACK_KEY, -1);
    }
  }
  const kindNode = mapGet(fallback, "kind");
  if (isString(kindNode)) {
    for (let c = 1; c <= KIND_MAX; c++) {
      if (KIND_LEARNED[c] == 0 && c != KIND_PPD && keyIs(kindNode, KIND_NAMES[c])) fallbackKind = c;
    }
  }
  if (fallbackKind == 0) {
    pathName("kind");
    return reject(P_FALLBACK_KIND, kindNode);
  }
  fallbackParams = mapGet(fallback, "params");
  note(TE_KIND, fallbackKind); // {kind} in an unknown-parameter message names the fallback's kind
  rc = validateParams(fallbackParams, fallbackKind);
  if (rc != OK) return rc;
  note(TE_KIND, kind);
  pathRestore(mark);
  return OK;
}

/** load_bound: a map of exactly `prefill` and `decode`, K finite numbers ≥ 0 each. */
function validateLoadBound(clusters: i32): i32 {
  const mark = at("load_bound");
  let rc = checkMap(loadBound);
  if (rc != OK) return rc;
  for (let k = nextKeyInObjectOrder(loadBound, -1); k >= 0; k = nextKeyInObjectOrder(loadBound, k)) {
    if (!keyIs(k, "prefill") && !keyIs(k, "decode")) {
      pathKey(k);
      return reject(P_UNKNOWN_LOAD_BOUND_KEY, -1);
    }
  }
  let inner = at("prefill");
  rc = checkNumberArray(mapGet(loadBound, "prefill"), clusters, NON_NEGATIVE, P_BOUNDS_PER_CLUSTER);
  if (rc != OK) return rc;
  pathRestore(inner);
  inner = at("decode");
  rc = checkNumberArray(mapGet(loadBound, "decode"), clusters, NON_NEGATIVE, P_BOUNDS_PER_CLUSTER);
  if (rc != OK) return rc;
  pathRestore(mark);
  return OK;
}

/** cluster_share: K finite numbers ≥ 0 summing to 1 within 1e-6 (summed in order, as src/table/ sums them). */
function validateClusterShare(clusters: i32): i32 {
  const mark = at("cluster_share");
  let rc = checkNumberArray(clusterShare, clusters, NON_NEGATIVE, P_SHARES_PER_CLUSTER);
  if (rc != OK) return rc;
  let sum: f64 = 0;
  for (let c = clusterShare + 1, i = 0; i < clusters; i++, c = nodeEnd(c)) sum += numberValue(c);
  if (!(Math.abs(sum - 1) <= SHARE_SUM_TOLERANCE)) {
    rc = reject(P_SHARE_SUM, -1);
    note(TE_VALUE_NUMBER, sum);
    return rc;
  }
  pathRestore(mark);
  return OK;
}
