// Making a staged table the active one: setTable checks the values the host staged (see the layouts below) for
// the kind, and only once all of them pass copies them into the active table (state.ts), laying the k-means
// centroids out in pairs for classify's two-lane distances. A rejected table leaves the active one untouched.

import { fail } from "../errors";
import {
  E_BAD_BIT, E_BAD_DIMS, E_BAD_FEATURE, E_BAD_K, E_BAD_KIND, E_BAD_NUMBER, E_BAD_PARAM, E_TABLE_TOO_LARGE, OK,
  KIND_ALWAYS_LOCAL, KIND_ALWAYS_REMOTE, KIND_DYNAMO_ISL, KIND_DYNAMO_ISL_OR_LOAD, KIND_DYNAMO_LOAD, KIND_GMM, KIND_KMEANS,
  KIND_LLM_D, KIND_PPD, LIMIT_RULE_SLOTS,
} from "../generated/abi";
import {
  bits, centroidPairs, centroids, clusterKeys, dims, fallback0, fallback1, fallback2, fallback3, fallbackKind, featureIdx, hasLoadBounds,
  hasOodBounds, invVar, k, kind, loadBoundDecode, loadBoundPrefill, logConst, MAX_DIMS, MAX_K, MAX_QPS_LEVELS, MAX_RATIO_EDGES, mean, naturalOrder, nQps, nRatioEdges,
  oodBound, param0, param1, param2, param3, qpsLevels, ratioEdges, staging, STAGING_F64, std,
} from "./state";

// @ts-ignore: decorator
@inline function st(i: i32): f64 { return load<f64>(staging + (<usize>i << 3)); }

/** Index of the first staging value in [from, to) that is not finite, or -1. */
function firstNonFinite(from: i32, to: i32): i32 {
  for (let i = from; i < to; i++) if (!isFinite(st(i))) return i;
  return -1;
}

function checkBits(from: i32, n: i32): i32 {
  for (let i = 0; i < n; i++) {
    const b = st(from + i);
    if (b != 0 && b != 1) return fail(E_BAD_BIT, i);
  }
  return OK;
}

function copyBits(from: i32, n: i32): void {
  for (let i = 0; i < n; i++) store<u8>(bits + <usize>i, <u8>st(from + i));
}

/**
 * Fills centroidPairs from the active centroids (row-major K × d); for K ≤ 8, all four pairs classify reads (the
 * clusters past K all NaN).
 */
function layCentroidPairs(newK: i32, d: i32): void {
  const pairs = max((newK + 1) >> 1, 4);
  for (let p = 0; p < pairs; p++) {
    for (let lane = 0; lane < 2; lane++) {
      const c = 2 * p + lane;
      for (let j = 0; j < MAX_DIMS; j++) {
        const v = c >= newK ? NaN : j < d ? load<f64>(centroids + (<usize>(c * d + j) << 3)) : 0.0;
        store<f64>(centroidPairs + (<usize>(p * 8 + j * 2 + lane) << 3), v);
      }
    }
  }
}

/** Fills clusterKeys from the active values (bits); the clusters past K get value 0 (they are never chosen). */
function layClusterKeys(newK: i32): void {
  for (let c = 0; c < 8; c++) {
    const value: i64 = c < newK ? <i64>load<u8>(bits + <usize>c) : 0;
    store<i64>(clusterKeys + (<usize>c << 3), (<i64>c << 8) | value);
  }
}

/** A learned table's cluster values: 0 local, 1 remote, 2 the fallback rule. */
function checkClusterValues(from: i32, n: i32): i32 {
  for (let i = 0; i < n; i++) {
    const b = st(from + i);
    if (b != 0 && b != 1 && b != 2) return fail(E_BAD_BIT, i);
  }
  return OK;
}

/** Index (0 to LIMIT_RULE_SLOTS − 1) of the first bad staged parameter of a rule whose slots start at `at`, or -1:
 *  every slot finite and ≥ 0, and the positive ones (spec "positive") > 0. */
function badRuleParam(ruleKind: i32, at: i32): i32 {
  for (let i = 0; i < LIMIT_RULE_SLOTS; i++) if (!isFinite(st(at + i)) || !(st(at + i) >= 0)) return i;
  if (ruleKind == KIND_DYNAMO_LOAD && !(st(at) > 0 && st(at + 1) > 0)) return st(at) > 0 ? 1 : 0;
  if (ruleKind == KIND_DYNAMO_ISL_OR_LOAD && !(st(at + 2) > 0)) return 2;
  return -1;
}

/** A rule kind with staged scalar parameters (LIMIT_RULE_SLOTS of them). */
function hasRuleParams(ruleKind: i32): bool {
  return (ruleKind >= KIND_DYNAMO_ISL && ruleKind <= KIND_LLM_D) || ruleKind == KIND_DYNAMO_ISL_OR_LOAD;
}

/** A fallback rule is any rule that decides from the request and the signals alone (not PPD: it has a grid). */
function isFallbackKind(ruleKind: i32): bool {
  return hasRuleParams(ruleKind) || ruleKind == KIND_ALWAYS_LOCAL || ruleKind == KIND_ALWAYS_REMOTE;
}

/**
 * Validates the staged table and makes it active. Staging layouts (f64):
 *  kmeans: featureIdx[D] mean[D] std[D] centroids[K×D] values[K] guard
 *  gmm:    featureIdx[D] mean[D] std[D] centroids[K×D] values[K] logConst[K] invVar[K×D] guard
 *  guard:  fallbackKind fallbackParam[R] nBounds(0 or K) oodBound[nBounds]
 *          nLoadBounds(0 or K) loadBoundPrefill[nLoadBounds] loadBoundDecode[nLoadBounds]
 *  dynamo-isl, dynamo-load, dynamo-legacy, trtllm, llm-d, dynamo-isl-or-load: param[R]
 *  (R = LIMIT_RULE_SLOTS: each scalar at its spec "stage" slot, unused slots 0)
 *  always-local, always-remote: nothing
 *  ppd: ctxEdge0 ctxEdge1 nRatioEdges ratioEdges[nE] nQps qpsLevels[nQ] bits[3 × (nE+1) × nQ]
 */
export function setTable(newKind: i32, newK: i32, newDims: i32): i32 {
  if (newKind == KIND_KMEANS || newKind == KIND_GMM) {
    if (newK < 1 || newK > MAX_K) return fail(E_BAD_K, newK);
    if (newDims < 1 || newDims > MAX_DIMS) return fail(E_BAD_DIMS, newDims);
    const d = newDims;
    let seen = 0;
    for (let j = 0; j < d; j++) {
      const f = st(j);
      if (!(f >= 0 && f <= 3) || f != Math.floor(f) || (seen & (1 << <i32>f)) != 0) return fail(E_BAD_FEATURE, j);
      seen |= 1 << <i32>f;
    }
    const total = newKind == KIND_GMM ? 3 * d + 2 * newK * d + 2 * newK : 3 * d + newK * d + newK;
    const bad = firstNonFinite(d, total);
    if (bad >= 0) return fail(E_BAD_NUMBER, bad);
    for (let j = 0; j < d; j++) if (!(st(2 * d + j) > 0)) return fail(E_BAD_NUMBER, 2 * d + j);
    const bitsAt = 3 * d + newK * d;
    const rc = checkClusterValues(bitsAt, newK);
    if (rc != OK) return rc;
    // the guard section follows the table (learned kinds only)
    const guardAt = total;
    const gKind = st(guardAt);
    if (!isFinite(gKind) || gKind != Math.floor(gKind) || !isFallbackKind(<i32>gKind)) return fail(E_BAD_PARAM, guardAt); // the fallback kind
    const badParam = badRuleParam(<i32>gKind, guardAt + 1);
    if (badParam >= 0) return fail(E_BAD_PARAM, guardAt + 1 + badParam);
    const boundsAt = guardAt + 1 + LIMIT_RULE_SLOTS; // nBounds, then the bounds
    const nB = st(boundsAt);
    if (nB != 0 && nB != <f64>newK) return fail(E_BAD_PARAM, boundsAt);
    const boundsBad = firstNonFinite(boundsAt + 1, boundsAt + 1 + <i32>nB);
    if (boundsBad >= 0) return fail(E_BAD_NUMBER, boundsBad);
    // table version 3: the load bounds, finite and ≥ 0 (a NaN bound would never fire, so it is rejected)
    const loadAt = boundsAt + 1 + <i32>nB;
    const nL = st(loadAt);
    if (nL != 0 && nL != <f64>newK) return fail(E_BAD_PARAM, loadAt);
    const nLoad = <i32>nL;
    for (let i = loadAt + 1; i < loadAt + 1 + 2 * nLoad; i++) {
      if (!isFinite(st(i)) || !(st(i) >= 0)) return fail(E_BAD_NUMBER, i);
    }
    if (newKind == KIND_GMM) {
      const ivAt = bitsAt + 2 * newK;
      for (let i = 0; i < newK * d; i++) if (!(st(ivAt + i) > 0)) return fail(E_BAD_NUMBER, ivAt + i);
      for (let c = 0; c < newK; c++) store<f64>(logConst + (<usize>c << 3), st(bitsAt + newK + c));
      memory.copy(invVar, staging + (<usize>ivAt << 3), <usize>(newK * d) << 3);
    }
    for (let j = 0; j < MAX_DIMS; j++) {
      // past d: mean 0, std 1, so the padded lanes of the standardized features are 0
      store<i32>(featureIdx + (<usize>j << 2), j < d ? <i32>st(j) : 0);
      store<f64>(mean + (<usize>j << 3), j < d ? st(d + j) : 0.0);
      store<f64>(std + (<usize>j << 3), j < d ? st(2 * d + j) : 1.0);
    }
    memory.copy(centroids, staging + (<usize>(3 * d) << 3), <usize>(newK * d) << 3);
    if (newKind == KIND_KMEANS) layCentroidPairs(newK, d);
    naturalOrder = d == 4 && st(0) == 0 && st(1) == 1 && st(2) == 2 && st(3) == 3;
    copyBits(bitsAt, newK);
    layClusterKeys(newK);
    fallbackKind = <i32>gKind;
    fallback0 = st(guardAt + 1);
    fallback1 = st(guardAt + 2);
    fallback2 = st(guardAt + 3);
    fallback3 = st(guardAt + 4);
    hasOodBounds = nB > 0;
    if (hasOodBounds) memory.copy(oodBound, staging + (<usize>(boundsAt + 1) << 3), <usize>newK << 3);
    hasLoadBounds = nLoad > 0;
    if (hasLoadBounds) {
      memory.copy(loadBoundPrefill, staging + (<usize>(loadAt + 1) << 3), <usize>newK << 3);
      memory.copy(loadBoundDecode, staging + (<usize>(loadAt + 1 + newK) << 3), <usize>newK << 3);
    }
    kind = newKind;
    k = newK;
    dims = d;
    return OK;
  }
  if (hasRuleParams(newKind)) {
    const bad = badRuleParam(newKind, 0);
    if (bad >= 0) return fail(E_BAD_PARAM, bad);
    param0 = st(0);
    param1 = st(1);
    param2 = st(2);
    param3 = st(3);
    kind = newKind;
    k = 0;
    dims = 0;
    return OK;
  }
  if (newKind == KIND_ALWAYS_LOCAL || newKind == KIND_ALWAYS_REMOTE) {
    kind = newKind;
    k = 0;
    dims = 0;
    return OK;
  }
  if (newKind == KIND_PPD) return setPpd();
  return fail(E_BAD_KIND, newKind);
}

function setPpd(): i32 {
  if (!isFinite(st(0)) || !isFinite(st(1)) || !(st(0) >= 0) || !(st(1) > st(0))) return fail(E_BAD_PARAM, 0);
  const nE = st(2);
  if (!(nE >= 1 && nE <= <f64>MAX_RATIO_EDGES) || nE != Math.floor(nE)) return fail(E_BAD_PARAM, 2);
  const ne = <i32>nE;
  for (let i = 0; i < ne; i++) {
    const e = st(3 + i);
    if (!isFinite(e) || !(e > 0) || (i > 0 && !(e > st(2 + i)))) return fail(E_BAD_PARAM, 3 + i);
  }
  const qAt = 3 + ne;
  const nQ = st(qAt);
  if (!(nQ >= 1 && nQ <= <f64>MAX_QPS_LEVELS) || nQ != Math.floor(nQ)) return fail(E_BAD_PARAM, qAt);
  const nq = <i32>nQ;
  for (let i = 0; i < nq; i++) {
    const q = st(qAt + 1 + i);
    if (!isFinite(q) || !(q >= 0) || (i > 0 && !(q > st(qAt + i)))) return fail(E_BAD_PARAM, qAt + 1 + i);
  }
  const cells = 3 * (ne + 1) * nq;
  const bitsAt = qAt + 1 + nq;
  if (bitsAt + cells > STAGING_F64) return fail(E_TABLE_TOO_LARGE, bitsAt + cells);
  const rc = checkBits(bitsAt, cells);
  if (rc != OK) return rc;
  param0 = st(0);
  param1 = st(1);
  nRatioEdges = ne;
  memory.copy(ratioEdges, staging + (3 << 3), <usize>ne << 3);
  nQps = nq;
  memory.copy(qpsLevels, staging + (<usize>(qAt + 1) << 3), <usize>nq << 3);
  copyBits(bitsAt, cells);
  kind = KIND_PPD;
  k = cells;
  dims = 0;
  return OK;
}
