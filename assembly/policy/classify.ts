// Classification for the learned kinds: the four features' log1p, gathered in the table's order and standardized,
// then the nearest k-means centroid (squared Euclidean) or the most likely diagonal-Gaussian component (GMM, log
// space). classify is inlined into decide and returns the cluster with its value in one key; for K ≤ 8 the nearest
// centroid comes out of one SIMD comparison tree, without a loop or a branch on the data.

import { KIND_KMEANS } from "../generated/abi";
import { integerLanes, log1pAnyFeatures, log1pHi, log1pIntegers, log1pLo } from "./log1p";
import {
  bits, centroidPairs, centroids, clusterKeys, dims, featureIdx, gathered, invVar, k, kind, logConst, logFeatures,
  MAX_DIMS, mean, naturalOrder, outScore, scores, standardized, std,
} from "./state";

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
@inline export function classify(a: v128, b: v128): i32 {
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
