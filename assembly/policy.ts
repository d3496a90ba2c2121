// The policy: one table of any kind, and `decide`, which maps a request's features to a bit.
// Learned kinds (seeds 000/001): log1p, standardize, nearest centroid (k-means, squared Euclidean) or most
// likely diagonal-Gaussian component (GMM, log space), then the cluster's bit. Rule kinds are the baselines
// of reference-systems.md, as data. A table is validated in the staging area and only then copied in, so a
// rejected table leaves the active one untouched.

import { fail } from "./errors";
import {
  E_BAD_BIT, E_BAD_DIMS, E_BAD_FEATURE, E_BAD_K, E_BAD_KIND, E_BAD_NUMBER, E_BAD_PARAM, E_NO_TABLE, E_TABLE_TOO_LARGE, OK,
  KIND_ALWAYS_LOCAL, KIND_ALWAYS_REMOTE, KIND_DYNAMO_ISL, KIND_DYNAMO_LEGACY, KIND_DYNAMO_LOAD, KIND_GMM, KIND_KMEANS,
  KIND_LLM_D, KIND_NONE, KIND_PPD, KIND_TRTLLM, LIMIT_MAX_DIMS, LIMIT_MAX_K, LIMIT_STAGING_F64, REASON_CLUSTER,
  REASON_FIRST_TURN, REASON_OUT_OF_DISTRIBUTION, REASON_RULE, REASON_RULE_FALLBACK,
} from "./generated/abi";


// @ts-ignore: decorator
@inline export const MAX_K: i32 = LIMIT_MAX_K;
// @ts-ignore: decorator
@inline export const MAX_DIMS: i32 = LIMIT_MAX_DIMS;
// @ts-ignore: decorator
@inline const MAX_RATIO_EDGES: i32 = 15;
// @ts-ignore: decorator
@inline const MAX_QPS_LEVELS: i32 = 64;
export const STAGING_F64: i32 = LIMIT_STAGING_F64;
// @ts-ignore: decorator
@inline const MAX_PPD_CELLS: i32 = 3 * (MAX_RATIO_EDGES + 1) * MAX_QPS_LEVELS;

export let staging: usize = 0; // f64[STAGING_F64], written by the host before setTable
export let scores: usize = 0; // f64[MAX_K]: distance (kmeans) or log-likelihood (gmm) per cluster, last decide
export let standardized: usize = 0; // f64[MAX_DIMS]: the last standardized feature vector
let logFeatures: usize = 0; // f64[4]: their log1p
let gathered: usize = 0; // f64[MAX_DIMS]: log1p of the table's features, in its order (0 past dims)
let naturalOrder: bool = false; // the table uses all four features in their own order: no gathering
// musl's log1p constants (standardize)
// @ts-ignore: decorator
@inline const LN2_HI: f64 = reinterpret<f64>(0x3FE62E42FEE00000);
// @ts-ignore: decorator
@inline const LN2_LO: f64 = reinterpret<f64>(0x3DEA39EF35793C76);
// @ts-ignore: decorator
@inline const LG1: f64 = reinterpret<f64>(0x3FE5555555555593);
// @ts-ignore: decorator
@inline const LG2: f64 = reinterpret<f64>(0x3FD999999997FA04);
// @ts-ignore: decorator
@inline const LG3: f64 = reinterpret<f64>(0x3FD2492494229359);
// @ts-ignore: decorator
@inline const LG4: f64 = reinterpret<f64>(0x3FCC71C51D8E78AF);
// @ts-ignore: decorator
@inline const LG5: f64 = reinterpret<f64>(0x3FC7466496CB03DE);
// @ts-ignore: decorator
@inline const LG6: f64 = reinterpret<f64>(0x3FC39A09D078C69F);
// @ts-ignore: decorator
@inline const LG7: f64 = reinterpret<f64>(0x3FC2F112DF3E5244);

// active table
let kind: i32 = KIND_NONE;
let k: i32 = 0;
let dims: i32 = 0;
let featureIdx: usize = 0; // i32[MAX_DIMS]
let mean: usize = 0; // f64[MAX_DIMS]
let std: usize = 0; // f64[MAX_DIMS]
let centroids: usize = 0; // f64[MAX_K * MAX_DIMS]
// k-means centroids for f64x2: pair p (centroids 2p, 2p+1) is 4 dims × 2 lanes, dims past the table's padded with 0
// (x − 0 = 0 adds +0 to a distance, exactly), and the missing partner of an odd K's last centroid with NaN (its
// distance is NaN, which never compares below the best)
let centroidPairs: usize = 0; // f64[(MAX_K / 2) × 4 × 2]
// k-means, K ≤ 8: cluster c's key (c << 8) | value, an i64 lane per cluster in the lanes of centroidPairs, so the
// nearest cluster's index and value come out of one selection (ordered as the indices are: values are < 256)
let clusterKeys: usize = 0; // i64[8]
let invVar: usize = 0; // f64[MAX_K * MAX_DIMS] (gmm)
let logConst: usize = 0; // f64[MAX_K] (gmm): log w_k − ½ Σ_j log σ²_kj, computed by the host
let bits: usize = 0; // u8[MAX_PPD_CELLS] (per cluster 0 local, 1 remote, 2 the fallback rule; or bits per PPD cell)
let param0: f64 = 0;
let param1: f64 = 0;
let ratioEdges: usize = 0; // f64[MAX_RATIO_EDGES]
let nRatioEdges: i32 = 0;
let qpsLevels: usize = 0; // f64[MAX_QPS_LEVELS]
let nQps: i32 = 0;
// the guard of a learned table (table version 2): the fallback rule and the out-of-distribution bounds
let fallbackKind: i32 = KIND_DYNAMO_ISL;
let fallback0: f64 = 2048;
let fallback1: f64 = 0.7;
let oodBound: usize = 0; // f64[MAX_K]: kmeans the largest in-distribution squared distance, gmm the lowest log-likelihood
let hasOodBounds: bool = false;
// @ts-ignore: decorator
@inline const CLUSTER_RULE: u8 = 2;

// signals the host keeps current (rule inputs that are not per request)
export let prefillQueue: f64 = 0;
export let qps: f64 = 0;

export function policyInit(): void {
  staging = heap.alloc(<usize>STAGING_F64 << 3);
  scores = heap.alloc(<usize>(MAX_K + 1) << 3); // + 1: an odd K's last pair writes its padding lane's NaN there
  standardized = heap.alloc(<usize>MAX_DIMS << 3);
  logFeatures = heap.alloc(4 << 3);
  gathered = heap.alloc(<usize>MAX_DIMS << 3);
  featureIdx = heap.alloc(<usize>MAX_DIMS << 2);
  mean = heap.alloc(<usize>MAX_DIMS << 3);
  std = heap.alloc(<usize>MAX_DIMS << 3);
  centroids = heap.alloc(<usize>(MAX_K * MAX_DIMS) << 3);
  centroidPairs = heap.alloc(<usize>((MAX_K + 1) >> 1) << 6);
  clusterKeys = heap.alloc(8 << 3);
  invVar = heap.alloc(<usize>(MAX_K * MAX_DIMS) << 3);
  logConst = heap.alloc(<usize>MAX_K << 3);
  oodBound = heap.alloc(<usize>MAX_K << 3);
  bits = heap.alloc(<usize>MAX_PPD_CELLS);
  ratioEdges = heap.alloc(<usize>MAX_RATIO_EDGES << 3);
  qpsLevels = heap.alloc(<usize>MAX_QPS_LEVELS << 3);
}

export function tableKind(): i32 { return kind; }
export function tableK(): i32 { return k; }
export function tableDims(): i32 { return dims; }

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

/** Index (0 or 1) of the first bad parameter of a two-parameter rule, or -1. */
function badRuleParam(ruleKind: i32, p0: f64, p1: f64): i32 {
  if (!isFinite(p0) || !(p0 >= 0)) return 0;
  if (!isFinite(p1) || !(p1 >= 0)) return 1;
  if (ruleKind == KIND_DYNAMO_LOAD && !(p0 > 0 && p1 > 0)) return p0 > 0 ? 1 : 0;
  return -1;
}

/** A fallback rule is any rule that decides from the request and the signals alone (not PPD: it has a grid). */
function isFallbackKind(ruleKind: i32): bool {
  return (ruleKind >= KIND_DYNAMO_ISL && ruleKind <= KIND_LLM_D) || ruleKind == KIND_ALWAYS_LOCAL || ruleKind == KIND_ALWAYS_REMOTE;
}

/**
 * Validates the staged table and makes it active. Staging layouts (f64):
 *  kmeans: featureIdx[D] mean[D] std[D] centroids[K×D] values[K] guard
 *  gmm:    featureIdx[D] mean[D] std[D] centroids[K×D] values[K] logConst[K] invVar[K×D] guard
 *  guard:  fallbackKind fallbackParam0 fallbackParam1 nBounds(0 or K) oodBound[nBounds]
 *  dynamo-isl, dynamo-load, dynamo-legacy, trtllm, llm-d: param0 param1
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
    const badParam = badRuleParam(<i32>gKind, st(guardAt + 1), st(guardAt + 2));
    if (badParam >= 0) return fail(E_BAD_PARAM, guardAt + 1 + badParam);
    const nB = st(guardAt + 3);
    if (nB != 0 && nB != <f64>newK) return fail(E_BAD_PARAM, guardAt + 3);
    const boundsBad = firstNonFinite(guardAt + 4, guardAt + 4 + <i32>nB);
    if (boundsBad >= 0) return fail(E_BAD_NUMBER, boundsBad);
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
    hasOodBounds = nB > 0;
    if (hasOodBounds) memory.copy(oodBound, staging + (<usize>(guardAt + 4) << 3), <usize>newK << 3);
    kind = newKind;
    k = newK;
    dims = d;
    return OK;
  }
  if (newKind >= KIND_DYNAMO_ISL && newKind <= KIND_LLM_D) {
    const bad = badRuleParam(newKind, st(0), st(1));
    if (bad >= 0) return fail(E_BAD_PARAM, bad);
    param0 = st(0);
    param1 = st(1);
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

export function setSignals(queue: f64, currentQps: f64): bool {
  if (!(queue >= 0) || !(currentQps >= 0) || queue > 1e15 || currentQps > 1e15) return false;
  prefillQueue = queue;
  qps = currentQps;
  return true;
}

// decision outputs of decide()
export let outBit: i32 = 0;
export let outCluster: i32 = -1;
export let outReason: i32 = REASON_RULE;
export let outScore: f64 = 0;

// The splat constants of the log1p below, in memory: loading one is a single instruction, where V8 builds a splat
// of an immediate in two or three, and log1p of four lanes uses about fifty of them.
// @ts-ignore: decorator
@inline const C_NOT_FEATURE_HI = 0; // i64: above it the high word is ∞ or NaN
// @ts-ignore: decorator
@inline const C_ONE = 1;
// @ts-ignore: decorator
@inline const C_HU_BIAS = 2; // i64: 0x3FF00000 − 0x3FE6A09E
// @ts-ignore: decorator
@inline const C_EXPONENT_BIAS = 3; // i64: 0x3FF
// @ts-ignore: decorator
@inline const C_I64_ONE = 4;
// @ts-ignore: decorator
@inline const C_LOW_20_BITS = 5;
// @ts-ignore: decorator
@inline const C_SQRT_HALF_HI = 6; // i64: 0x3FE6A09E, the high word of √2/2
// @ts-ignore: decorator
@inline const C_LOW_32_BITS = 7;
// @ts-ignore: decorator
@inline const C_TWO_52_BITS = 8; // i64: the bits of 2^52
// @ts-ignore: decorator
@inline const C_TWO_52 = 9;
// @ts-ignore: decorator
@inline const C_SMALL_HI = 10; // i64: 0x3FDA827A, the high word of √2 − 1
// @ts-ignore: decorator
@inline const C_ZERO = 11;
// @ts-ignore: decorator
@inline const C_HALF = 12;
// @ts-ignore: decorator
@inline const C_TWO = 13;
// @ts-ignore: decorator
@inline const C_LG1 = 14; // LG1…LG7: 14…20
// @ts-ignore: decorator
@inline const C_LN2_LO = 21;
// @ts-ignore: decorator
@inline const C_LN2_HI = 22;
// @ts-ignore: decorator
@inline const C_TINY_HI = 23; // i64: 0x3CA00000, the high word of 2^−53
// @ts-ignore: decorator
@inline const C_HU_BIAS_HIGH_WORD = 24; // i64: C_HU_BIAS in the high word
// @ts-ignore: decorator
@inline const C_EXPONENT_BIAS_BITS = 25; // i64: 0x3FF << 52
// @ts-ignore: decorator
@inline const C_TWO_52_PLUS_BIAS = 26; // 2^52 + 0x3FF
// @ts-ignore: decorator
@inline const C_TWO_52_EXPONENT = 27; // i64: 0x433, the sign and exponent bits of 2^52
const LOG1P_CONSTANTS = memory.data<u64>([
  0x7FEFFFFF, 0x7FEFFFFF,
  reinterpret<u64>(1.0), reinterpret<u64>(1.0),
  0x3FF00000 - 0x3FE6A09E, 0x3FF00000 - 0x3FE6A09E,
  0x3FF, 0x3FF,
  1, 1,
  0x000FFFFF, 0x000FFFFF,
  0x3FE6A09E, 0x3FE6A09E,
  0xFFFFFFFF, 0xFFFFFFFF,
  0x4330000000000000, 0x4330000000000000,
  reinterpret<u64>(4503599627370496.0), reinterpret<u64>(4503599627370496.0),
  0x3FDA827A, 0x3FDA827A,
  reinterpret<u64>(0.0), reinterpret<u64>(0.0),
  reinterpret<u64>(0.5), reinterpret<u64>(0.5),
  reinterpret<u64>(2.0), reinterpret<u64>(2.0),
  reinterpret<u64>(LG1), reinterpret<u64>(LG1),
  reinterpret<u64>(LG2), reinterpret<u64>(LG2),
  reinterpret<u64>(LG3), reinterpret<u64>(LG3),
  reinterpret<u64>(LG4), reinterpret<u64>(LG4),
  reinterpret<u64>(LG5), reinterpret<u64>(LG5),
  reinterpret<u64>(LG6), reinterpret<u64>(LG6),
  reinterpret<u64>(LG7), reinterpret<u64>(LG7),
  reinterpret<u64>(LN2_LO), reinterpret<u64>(LN2_LO),
  reinterpret<u64>(LN2_HI), reinterpret<u64>(LN2_HI),
  0x3CA00000, 0x3CA00000,
  (<u64>(0x3FF00000 - 0x3FE6A09E)) << 32, (<u64>(0x3FF00000 - 0x3FE6A09E)) << 32,
  0x3FF0000000000000, 0x3FF0000000000000,
  reinterpret<u64>(4503599627370496.0 + 1023.0), reinterpret<u64>(4503599627370496.0 + 1023.0),
  0x433, 0x433,
], 16);

// log1pAnyFeatures' results (the general path, taken when a feature is not an integer): two values out of one call
let log1pLo: v128 = v128.splat<i64>(0);
let log1pHi: v128 = v128.splat<i64>(0);

/** Constant `i` of LOG1P_CONSTANTS (a constant address after inlining: one load). */
// @ts-ignore: decorator
@inline function constant(i: i32): v128 {
  return v128.load(LOG1P_CONSTANTS + (<usize>i << 4));
}

/** Whether either lane of x is negative (−0 included), infinite or NaN: not a feature, for Math.log1p instead. */
// @ts-ignore: decorator
@inline function notFeatureLanes(x: v128): v128 {
  return v128.or(i64x2.shr_u(x, 63), i64x2.gt_s(i64x2.shr_u(x, 32), constant(C_NOT_FEATURE_HI)));
}

/** Whether all four lanes are integers in [0, 2^52) (+0 included, −0 not): log1pIntegers' domain. */
// @ts-ignore: decorator
@inline function integerLanes(a: v128, b: v128): bool {
  // sign and exponent below those of 2^52 (0x433): x in [0, 2^52), −0 not (its sign makes it 0x800), nor NaN or ∞
  const inA = v128.and(f64x2.eq(f64x2.floor(a), a), i64x2.lt_s(i64x2.shr_u(a, 52), constant(C_TWO_52_EXPONENT)));
  const inB = v128.and(f64x2.eq(f64x2.floor(b), b), i64x2.lt_s(i64x2.shr_u(b, 52), constant(C_TWO_52_EXPONENT)));
  return i64x2.all_true(v128.and(inA, inB));
}

/**
 * log1p of two integers in [0, 2^52): the reduction branch of musl's log1p, operation for operation, less what is
 * exactly nothing for them. 1 + x is exact, so the rounding correction c is +0 (k ≥ 2: 1 − ((1 + x) − x) = 1 − 1;
 * k < 2: x − ((1 + x) − 1) = x − x; then +0 / (1 + x)), and dk × ln2_lo + c is dk × ln2_lo. x = 0 takes the
 * reduction too (k = 0, f = 0: every term +0, so +0 = x, as the x < 2^−53 branch answers). The reduced 1 + f is
 * 1 + x with its exponent lowered by k (musl's hu = (hu & 0xFFFFF) + 0x3FE6A09E is hi(1 + x) − (k << 20)).
 */
// @ts-ignore: decorator
@inline function log1pIntegers(x: v128): v128 {
  const one = constant(C_ONE);
  const uf = f64x2.add(one, x);
  const biasedK = i64x2.shr_u(i64x2.add(uf, constant(C_HU_BIAS_HIGH_WORD)), 52); // k + 0x3FF
  const f = f64x2.sub(i64x2.sub(i64x2.add(uf, constant(C_EXPONENT_BIAS_BITS)), i64x2.shl(biasedK, 52)), one);
  // <f64>k exactly: (2^52 + k + 0x3FF) − (2^52 + 0x3FF)
  const dk = f64x2.sub(v128.or(biasedK, constant(C_TWO_52_BITS)), constant(C_TWO_52_PLUS_BIAS));
  const hfsq = f64x2.mul(f64x2.mul(constant(C_HALF), f), f);
  const s = f64x2.div(f, f64x2.add(constant(C_TWO), f));
  const z = f64x2.mul(s, s);
  const w = f64x2.mul(z, z);
  const t1 = f64x2.mul(w, f64x2.add(constant(C_LG1 + 1), f64x2.mul(w, f64x2.add(constant(C_LG1 + 3), f64x2.mul(w, constant(C_LG1 + 5))))));
  const t2 = f64x2.mul(z, f64x2.add(constant(C_LG1), f64x2.mul(w, f64x2.add(constant(C_LG1 + 2),
    f64x2.mul(w, f64x2.add(constant(C_LG1 + 4), f64x2.mul(w, constant(C_LG1 + 6))))))));
  const r = f64x2.add(t2, t1);
  const y = f64x2.add(f64x2.mul(s, f64x2.add(hfsq, r)), f64x2.mul(dk, constant(C_LN2_LO)));
  return f64x2.add(f64x2.add(f64x2.sub(y, hfsq), f), f64x2.mul(dk, constant(C_LN2_HI)));
}

/** Math.log1p of each lane: classify's fallback for what no feature is (but never a wrong answer either). */
function log1pEachLane(x: v128): v128 {
  return f64x2(Math.log1p(f64x2.extract_lane(x, 0)), Math.log1p(f64x2.extract_lane(x, 1)));
}

/**
 * log1p of the features in two pairs (a: isl, eff_P; b: eff_D, osl_hat) into log1pLo and log1pHi, for any features
 * (classify takes log1pIntegers when all four are integers, as they nearly always are).
 *
 * log1p is bit-identical to Math.log1p (AssemblyScript's port of musl's log1p.c) for finite x ≥ 0 (the only
 * features there are; anything else goes to log1pEachLane): the same operations in the same order, its three
 * branches (x < 2^−53: x itself; x < 0.4142: f = x, k = c = 0; else the reduction of 1 + x) computed for both
 * lanes and selected. Two lanes share each division, the costliest step (two per log1p), and the two pairs' steps
 * are written side by side (A, B): the computation is one long chain of dependent operations per pair, and
 * interleaved the CPU runs the two chains together instead of mostly one after the other (5% of a decide).
 */
function log1pAnyFeatures(a: v128, b: v128): void {
  if (v128.any_true(v128.or(notFeatureLanes(a), notFeatureLanes(b)))) {
    log1pLo = log1pEachLane(a);
    log1pHi = log1pEachLane(b);
  } else {
    const hxA = i64x2.shr_u(a, 32);
    const hxB = i64x2.shr_u(b, 32);
    const one = constant(C_ONE);
    // x ≥ 0.4142…: 1 + x = 2^k × (1 + f) with √2/2 ≤ 1 + f < √2, and c corrects the rounding of 1 + x
    const ufA = f64x2.add(one, a);
    const ufB = f64x2.add(one, b);
    let huA = i64x2.add(i64x2.shr_u(ufA, 32), constant(C_HU_BIAS));
    let huB = i64x2.add(i64x2.shr_u(ufB, 32), constant(C_HU_BIAS));
    const kA = i64x2.sub(i64x2.shr_u(huA, 20), constant(C_EXPONENT_BIAS)); // 0 ≤ k < 54 for these x
    const kB = i64x2.sub(i64x2.shr_u(huB, 20), constant(C_EXPONENT_BIAS));
    const cA = f64x2.div(
      v128.bitselect(f64x2.sub(one, f64x2.sub(ufA, a)), f64x2.sub(a, f64x2.sub(ufA, one)), i64x2.gt_s(kA, constant(C_I64_ONE))),
      ufA,
    );
    const cB = f64x2.div(
      v128.bitselect(f64x2.sub(one, f64x2.sub(ufB, b)), f64x2.sub(b, f64x2.sub(ufB, one)), i64x2.gt_s(kB, constant(C_I64_ONE))),
      ufB,
    );
    huA = i64x2.add(v128.and(huA, constant(C_LOW_20_BITS)), constant(C_SQRT_HALF_HI));
    huB = i64x2.add(v128.and(huB, constant(C_LOW_20_BITS)), constant(C_SQRT_HALF_HI));
    const reducedA = f64x2.sub(v128.or(i64x2.shl(huA, 32), v128.and(ufA, constant(C_LOW_32_BITS))), one);
    const reducedB = f64x2.sub(v128.or(i64x2.shl(huB, 32), v128.and(ufB, constant(C_LOW_32_BITS))), one);
    // <f64>k exactly: 2^52 + k has k in its low bits
    const kfA = f64x2.sub(v128.or(kA, constant(C_TWO_52_BITS)), constant(C_TWO_52));
    const kfB = f64x2.sub(v128.or(kB, constant(C_TWO_52_BITS)), constant(C_TWO_52));
    // x < 0.4142…: no reduction
    const smallA = i64x2.lt_s(hxA, constant(C_SMALL_HI));
    const smallB = i64x2.lt_s(hxB, constant(C_SMALL_HI));
    const zero = constant(C_ZERO);
    const fA = v128.bitselect(a, reducedA, smallA);
    const fB = v128.bitselect(b, reducedB, smallB);
    const ccA = v128.bitselect(zero, cA, smallA);
    const ccB = v128.bitselect(zero, cB, smallB);
    const dkA = v128.bitselect(zero, kfA, smallA);
    const dkB = v128.bitselect(zero, kfB, smallB);
    const hfsqA = f64x2.mul(f64x2.mul(constant(C_HALF), fA), fA);
    const hfsqB = f64x2.mul(f64x2.mul(constant(C_HALF), fB), fB);
    const sA = f64x2.div(fA, f64x2.add(constant(C_TWO), fA));
    const sB = f64x2.div(fB, f64x2.add(constant(C_TWO), fB));
    const zA = f64x2.mul(sA, sA);
    const zB = f64x2.mul(sB, sB);
    const wA = f64x2.mul(zA, zA);
    const wB = f64x2.mul(zB, zB);
    // t1 = w(LG2 + w(LG4 + w LG6)), t2 = z(LG1 + w(LG3 + w(LG5 + w LG7)))
    const t1A = f64x2.mul(wA, f64x2.add(constant(C_LG1 + 1), f64x2.mul(wA, f64x2.add(constant(C_LG1 + 3), f64x2.mul(wA, constant(C_LG1 + 5))))));
    const t1B = f64x2.mul(wB, f64x2.add(constant(C_LG1 + 1), f64x2.mul(wB, f64x2.add(constant(C_LG1 + 3), f64x2.mul(wB, constant(C_LG1 + 5))))));
    const t2A = f64x2.mul(zA, f64x2.add(constant(C_LG1), f64x2.mul(wA, f64x2.add(constant(C_LG1 + 2),
      f64x2.mul(wA, f64x2.add(constant(C_LG1 + 4), f64x2.mul(wA, constant(C_LG1 + 6))))))));
    const t2B = f64x2.mul(zB, f64x2.add(constant(C_LG1), f64x2.mul(wB, f64x2.add(constant(C_LG1 + 2),
      f64x2.mul(wB, f64x2.add(constant(C_LG1 + 4), f64x2.mul(wB, constant(C_LG1 + 6))))))));
    const rA = f64x2.add(t2A, t1A);
    const rB = f64x2.add(t2B, t1B);
    // s × (hfsq + r) + (dk × ln2_lo + c) − hfsq + f + dk × ln2_hi, left to right
    let yA = f64x2.add(f64x2.mul(sA, f64x2.add(hfsqA, rA)), f64x2.add(f64x2.mul(dkA, constant(C_LN2_LO)), ccA));
    let yB = f64x2.add(f64x2.mul(sB, f64x2.add(hfsqB, rB)), f64x2.add(f64x2.mul(dkB, constant(C_LN2_LO)), ccB));
    yA = f64x2.add(f64x2.add(f64x2.sub(yA, hfsqA), fA), f64x2.mul(dkA, constant(C_LN2_HI)));
    yB = f64x2.add(f64x2.add(f64x2.sub(yB, hfsqB), fB), f64x2.mul(dkB, constant(C_LN2_HI)));
    // x < 2^−53 (0 included): log1p(x) is x
    log1pLo = v128.bitselect(a, yA, i64x2.lt_s(hxA, constant(C_TINY_HI)));
    log1pHi = v128.bitselect(b, yB, i64x2.lt_s(hxB, constant(C_TINY_HI)));
  }
}

/** log1p of the four features (lo, hi) gathered in the table's order into `gathered` (0 past dims). */
function gather(lo: v128, hi: v128): void {
  store<v128>(logFeatures, lo);
  store<v128>(logFeatures, hi, 16);
  for (let j = 0; j < MAX_DIMS; j++) {
    const v = j < dims ? load<f64>(logFeatures + (<usize>load<i32>(featureIdx + (<usize>j << 2)) << 3)) : 0.0;
    store<f64>(gathered + (<usize>j << 3), v);
  }
}

/**
 * Squared distances of the standardized features (x0..x3, each splat) to the centroid pair at `row`, one centroid per
 * lane, summed as the scalar loop did: ((e0² + e1²) + e2²) + e3² (the scalar 0 + e0² is e0² exactly, and the padded
 * dims past the table's add +0), so the scores are bit-identical.
 */
// @ts-ignore: decorator
@inline function pairDistances(row: usize, x0: v128, x1: v128, x2: v128, x3: v128): v128 {
  const e0 = f64x2.sub(x0, v128.load(row));
  const e1 = f64x2.sub(x1, v128.load(row, 16));
  const e2 = f64x2.sub(x2, v128.load(row, 32));
  const e3 = f64x2.sub(x3, v128.load(row, 48));
  return f64x2.add(f64x2.add(f64x2.add(f64x2.mul(e0, e0), f64x2.mul(e1, e1)), f64x2.mul(e2, e2)), f64x2.mul(e3, e3));
}

/**
 * Standardized log1p features into `standardized` (f64[MAX_DIMS], the lanes past `dims` 0), from the features in
 * two pairs (a: isl, eff_P; b: eff_D, osl_hat, passed in registers: stored as four f64 and loaded as two v128, they
 * would stall on store forwarding): log1p of all four, gathered in the table's order, then (x − mean) / std two at
 * a time (the padded mean 0 and std 1 give 0); then the nearest centroid or most likely component. Returns its
 * key, (cluster << 8) | the cluster's value, and sets outScore. Inlined into decide, and the standardized features
 * stay in registers for the distances (stored for the host, not reloaded): each call or store-and-reload on this
 * one dependent chain costs a few ns (measured: 10 ns of a K = 8 decide for the reload, 4 for the calls).
 */
// @ts-ignore: decorator
@inline function classify(a: v128, b: v128): i32 {
  if (!integerLanes(a, b)) return classifyAnyFeatures(a, b);
  return classifyWith(a, b, true);
}

/**
 * classify for features that are not all integers (log1pAnyFeatures), in a function of its own: with the two
 * paths joined inside classify, the integer path's decide at K = 8 took 3.5 ns longer.
 */
function classifyAnyFeatures(a: v128, b: v128): i32 {
  return classifyWith(a, b, false);
}

// @ts-ignore: decorator
@inline function classifyWith(a: v128, b: v128, integers: bool): i32 {
  let x01: v128, x23: v128;
  if (integers) {
    x01 = log1pIntegers(a);
    x23 = log1pIntegers(b);
  } else {
    log1pAnyFeatures(a, b);
    x01 = log1pLo;
    x23 = log1pHi;
  }
  if (!naturalOrder) {
    gather(x01, x23);
    x01 = v128.load(gathered);
    x23 = v128.load(gathered, 16);
  }
  const z01 = f64x2.div(f64x2.sub(x01, v128.load(mean)), v128.load(std));
  const z23 = f64x2.div(f64x2.sub(x23, v128.load(mean, 16)), v128.load(std, 16));
  v128.store(standardized, z01);
  v128.store(standardized, z23, 16);
  let best = 0;
  let bestScore: f64 = 0;
  if (kind == KIND_KMEANS) {
    // Two centroids per f64x2 (centroidPairs), two pairs per step into two running minima (A: pairs 0, 2, 4, …; B:
    // 1, 3, 5, …), so no step waits on the previous one's comparison; then the nearest cluster is the first whose
    // score is the minimum, found four scores at a time. That is the first strict minimum over all clusters, as the
    // one scalar scan with `<` found it: pmin returns one of its operands, so the minimum is one of the scores,
    // bits and all; ties go to the lowest index; the NaN in an odd K's padding lane never compares below anything
    // (pmin keeps the running minimum) nor equal to it (the search stops at K).
    const x0 = v128.shuffle<f64>(z01, z01, 0, 0);
    const x1 = v128.shuffle<f64>(z01, z01, 1, 1); // the lanes past dims are 0 (mean 0, std 1: see setTable)
    const x2 = v128.shuffle<f64>(z23, z23, 0, 0);
    const x3 = v128.shuffle<f64>(z23, z23, 1, 1);
    if (k <= 8) {
      // up to four pairs, all computed (the pairs past K are all NaN: see layCentroidPairs), no loop and no branch
      // on the data: a two-level tournament in both lanes (lane 0 the even clusters, lane 1 the odd ones), each
      // match keeping the distance with pmin and the cluster's key (see clusterKeys) with the same comparison, then
      // the two lanes' winners. pmin(a, b) is `b < a ? b : a`: the later cluster wins only when strictly nearer, a
      // NaN b is never chosen, and a NaN a only where its lane has no cluster left (the clusters past K are the last
      // ones: when a pair's lane is NaN, so is that lane of every later pair; lane 0 always holds cluster 0). Across
      // the lanes, the odd winner when strictly nearer, or as near with the lower index. So this is the first strict
      // minimum, ties to the lowest index, as the scalar scan found it, and the score is that distance bit for bit.
      const d0 = pairDistances(centroidPairs, x0, x1, x2, x3);
      const d1 = pairDistances(centroidPairs + 64, x0, x1, x2, x3);
      const d2 = pairDistances(centroidPairs + 128, x0, x1, x2, x3);
      const d3 = pairDistances(centroidPairs + 192, x0, x1, x2, x3);
      v128.store(scores, d0);
      v128.store(scores, d1, 16);
      v128.store(scores, d2, 32);
      v128.store(scores, d3, 48);
      const key01 = v128.bitselect(v128.load(clusterKeys, 16), v128.load(clusterKeys), f64x2.lt(d1, d0));
      const key23 = v128.bitselect(v128.load(clusterKeys, 48), v128.load(clusterKeys, 32), f64x2.lt(d3, d2));
      const m01 = f64x2.pmin(d0, d1);
      const m23 = f64x2.pmin(d2, d3);
      const m = f64x2.pmin(m01, m23);
      const key = v128.bitselect(key23, key01, f64x2.lt(m23, m01));
      const mSwapped = v128.shuffle<f64>(m, m, 1, 0);
      const keySwapped = v128.shuffle<i64>(key, key, 1, 0);
      // per lane, whether the other lane's winner wins: both lanes then hold the same key (the low word: i32 lane 0)
      const other = v128.or(f64x2.lt(mSwapped, m), v128.and(f64x2.eq(mSwapped, m), i64x2.lt_s(keySwapped, key)));
      outScore = f64x2.extract_lane(f64x2.pmin(m, mSwapped), 0);
      return i32x4.extract_lane(v128.bitselect(keySwapped, key, other), 0);
    }
    let minA = f64x2.splat(Infinity);
    let minB = minA;
    let row = centroidPairs;
    let out = scores;
    const end = scores + (<usize>((k + 1) >> 1) << 4); // bounded by the pairs: (K + 1) / 2 of them
    while (out + 16 < end) {
      const dA = pairDistances(row, x0, x1, x2, x3);
      const dB = pairDistances(row + 64, x0, x1, x2, x3);
      v128.store(out, dA);
      v128.store(out, dB, 16);
      minA = f64x2.pmin(minA, dA);
      minB = f64x2.pmin(minB, dB);
      row += 128;
      out += 32;
    }
    if (out < end) {
      const dA = pairDistances(row, x0, x1, x2, x3);
      v128.store(out, dA);
      minA = f64x2.pmin(minA, dA);
    }
    const m = f64x2.pmin(minA, minB);
    const m0 = f64x2.extract_lane(m, 0);
    const m1 = f64x2.extract_lane(m, 1);
    bestScore = m1 < m0 ? m1 : m0;
    // the first of the scores equal to it, four at a time (may read 16 bytes past the pairs: scores has MAX_K + 1
    // slots and the heap goes on after it). Within the four, the lowest lane that matches (ctz of the lane mask):
    // the minimum is one of the scores below K, so a match past K is never the lowest.
    const splatBest = f64x2.splat(bestScore);
    let at = scores;
    let lanes = 0;
    while (at < end) {
      const eqLo = f64x2.eq(v128.load(at), splatBest);
      const eqHi = f64x2.eq(v128.load(at, 16), splatBest);
      lanes = i64x2.bitmask(eqLo) | (i64x2.bitmask(eqHi) << 2);
      if (lanes != 0) break;
      at += 32;
    }
    best = <i32>((at - scores) >> 3) + ctz(lanes);
    // the minimum is always one of the scores (distances are ≥ 0, never NaN; all +∞ gives cluster 0 as the scalar
    // scan did): a guard
    if (best >= k) best = 0;
    outScore = bestScore;
    return (best << 8) | <i32>load<u8>(bits + <usize>best);
  } else {
    bestScore = -Infinity;
    for (let c = 0; c < k; c++) {
      let q: f64 = 0;
      const row = centroids + (<usize>(c * dims) << 3);
      const iv = invVar + (<usize>(c * dims) << 3);
      for (let j = 0; j < dims; j++) {
        const diff = load<f64>(standardized + (<usize>j << 3)) - load<f64>(row + (<usize>j << 3));
        q += diff * diff * load<f64>(iv + (<usize>j << 3));
      }
      const ll = load<f64>(logConst + (<usize>c << 3)) - 0.5 * q;
      store<f64>(scores + (<usize>c << 3), ll);
      if (ll > bestScore) { bestScore = ll; best = c; }
    }
  }
  outScore = bestScore;
  return (best << 8) | <i32>load<u8>(bits + <usize>best);
}

// @ts-ignore: decorator
@inline function bool01(b: bool): i32 { return b ? 1 : 0; }

/** The bit of a rule that needs only the request and the signals (every rule kind but PPD). */
function ruleBit(
  ruleKind: i32, p0: f64, p1: f64, isl: f64, effD: f64, decodeCachedTokens: f64, prefillBusyTokens: f64,
): i32 {
  switch (ruleKind) {
    case KIND_DYNAMO_ISL: {
      // local iff eff_D < max_local_prefill_tokens and eff_D / max(isl, 1) < max_local_prefill_ratio
      const local = effD < p0 && effD / max(isl, 1.0) < p1;
      return bool01(!local);
    }
    case KIND_DYNAMO_LOAD: {
      // local iff the prefill worker the router would pick is busy; unknown load → no bypass
      const busy = prefillBusyTokens >= 0 && prefillBusyTokens > p0 * p1;
      return bool01(!busy);
    }
    // remote iff isl × (1 − hit rate_D) > max_local_prefill_length and prefill queue < max queue size
    case KIND_DYNAMO_LEGACY: return bool01(effD > p0 && prefillQueue < p1);
    // remote iff nothing matched or isl − match > max_local_prefill_length
    case KIND_TRTLLM: return bool01(decodeCachedTokens == 0 || isl - decodeCachedTokens > p0);
    // remote iff nonCached threshold > 0, isl ≥ promptTokens threshold, and uncached ≥ nonCached threshold
    case KIND_LLM_D: return bool01(p0 > 0 && isl >= p1 && isl - decodeCachedTokens >= p0);
    case KIND_ALWAYS_LOCAL: return 0;
    default: return 1; // KIND_ALWAYS_REMOTE
  }
}

/**
 * The policy's bit (0 local, 1 remote) for one request. `decodeCachedTokens` is hit_D before clamping,
 * `contextTokens` < 0 means "unknown" (PPD then uses the decode worker's cached tokens), `prefillBusyTokens`
 * is the chosen prefill worker's active prefill tokens (< 0 when there is none).
 */
// inlined into its two callers (decideFeatures and route): no call on the dependent chain, the cluster in a local
// @ts-ignore: decorator
@inline export function decide(
  isl: f64, effP: f64, effD: f64, oslHat: f64, decodeCachedTokens: f64, turn: i32, contextTokens: f64,
  prefillBusyTokens: f64,
): i32 {
  outCluster = -1;
  outScore = 0;
  outReason = REASON_RULE;
  switch (kind) {
    case KIND_KMEANS:
    case KIND_GMM: {
      const key = classify(f64x2(isl, effP), f64x2(effD, oslHat));
      const cluster = key >> 8;
      outCluster = cluster;
      // the cluster's value, unless the request lies beyond what the cluster was trained on
      const outside = hasOodBounds && (kind == KIND_KMEANS
        ? outScore > load<f64>(oodBound + (<usize>cluster << 3))
        : outScore < load<f64>(oodBound + (<usize>cluster << 3)));
      const value = key & 0xFF;
      if (outside || value == CLUSTER_RULE) {
        outReason = outside ? REASON_OUT_OF_DISTRIBUTION : REASON_RULE_FALLBACK;
        outBit = ruleBit(fallbackKind, fallback0, fallback1, isl, effD, decodeCachedTokens, prefillBusyTokens);
      } else {
        outReason = REASON_CLUSTER;
        outBit = <i32>value;
      }
      break;
    }
    case KIND_DYNAMO_ISL:
    case KIND_DYNAMO_LOAD:
    case KIND_DYNAMO_LEGACY:
    case KIND_TRTLLM:
    case KIND_LLM_D:
    case KIND_ALWAYS_LOCAL:
    case KIND_ALWAYS_REMOTE: {
      outBit = ruleBit(kind, param0, param1, isl, effD, decodeCachedTokens, prefillBusyTokens);
      break;
    }
    case KIND_PPD: {
      if (turn <= 1) {
        outBit = 1;
        outReason = REASON_FIRST_TURN;
        break;
      }
      const ctx = contextTokens >= 0 ? contextTokens : min(decodeCachedTokens, isl);
      const newInput = isl > ctx ? isl - ctx : 0.0;
      const ratio = newInput / max(oslHat, 1.0);
      const ctxClass = ctx <= param0 ? 0 : ctx <= param1 ? 1 : 2;
      let ratioClass = 0;
      while (ratioClass < nRatioEdges && ratio > load<f64>(ratioEdges + (<usize>ratioClass << 3))) ratioClass++;
      // nearest QPS level, ties to the lower level
      let q = 0;
      let bestGap = Math.abs(qps - load<f64>(qpsLevels));
      for (let i = 1; i < nQps; i++) {
        const gap = Math.abs(qps - load<f64>(qpsLevels + (<usize>i << 3)));
        if (gap < bestGap) { bestGap = gap; q = i; }
      }
      const cell = (ctxClass * (nRatioEdges + 1) + ratioClass) * nQps + q;
      outCluster = cell;
      outBit = <i32>load<u8>(bits + <usize>cell);
      break;
    }
    default:
      return fail(E_NO_TABLE, 0);
  }
  return OK;
}
