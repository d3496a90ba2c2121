// The policy's decision: `decide` maps a request's features to a bit (0 local, 1 remote) under the active table.
// Learned kinds (seeds 000/001): classify (classify.ts), then the cluster's bit, or the table's fallback rule for a
// cluster that names it, a request outside what the cluster was trained on, or a load above the one it was tested at. Rule kinds are the baselines of
// reference-systems.md, as data (ruleBit); PPD reads its bit from a grid of context, ratio and QPS classes.

import { fail } from "../errors";
import {
  E_NO_TABLE, OK, KIND_ALWAYS_LOCAL, KIND_ALWAYS_REMOTE, KIND_DYNAMO_ISL, KIND_DYNAMO_ISL_OR_LOAD, KIND_DYNAMO_LEGACY,
  KIND_DYNAMO_LOAD,
  KIND_GMM, KIND_KMEANS, KIND_LLM_D, KIND_PPD, KIND_TRTLLM, REASON_CLUSTER, REASON_FIRST_TURN,
  REASON_LOAD_OUT_OF_RANGE, REASON_OUT_OF_DISTRIBUTION, REASON_RULE, REASON_RULE_FALLBACK,
} from "../generated/abi";
import { classify } from "./classify";
import {
  bits, fallback0, fallback1, fallback2, fallback3, fallbackKind, hasLoadBounds, hasOodBounds, kind, loadBoundDecode, loadBoundPrefill, nQps,
  nRatioEdges, oodBound, outBit, outCluster, outReason, outScore, param0, param1, param2, param3, prefillQueue, qps, qpsLevels,
  ratioEdges,
} from "./state";

// @ts-ignore: decorator
@inline const CLUSTER_RULE: u8 = 2;

// @ts-ignore: decorator
@inline function bool01(b: bool): i32 { return b ? 1 : 0; }

/** The bit of a rule that needs only the request and the signals (every rule kind but PPD). */
function ruleBit(
  ruleKind: i32, p0: f64, p1: f64, p2: f64, p3: f64, isl: f64, effD: f64, decodeCachedTokens: f64,
  prefillBusyTokens: f64, decodeLoad: f64,
): i32 {
  switch (ruleKind) {
    case KIND_DYNAMO_ISL: {
      // local iff eff_D < max_local_prefill_tokens and eff_D / max(isl, 1) < max_local_prefill_ratio
      const local = effD < p0 && effD / max(isl, 1.0) < p1;
      return bool01(!local);
    }
    case KIND_DYNAMO_ISL_OR_LOAD: {
      // Dynamo's isl_or_load: local iff isl_bounding says so or the chosen prefill worker is busy (unknown load:
      // calm), unless its decode-busy gate (p3 > 0) finds the chosen decode worker above p3 tokens
      const islLocal = effD < p0 && effD / max(isl, 1.0) < p1;
      const prefillBusy = prefillBusyTokens >= 0 && prefillBusyTokens > p2;
      const decodeBusy = p3 > 0 && decodeLoad > p3;
      return bool01(!((islLocal || prefillBusy) && !decodeBusy));
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
 * The load lies above what cluster `cluster` was tested at: the prefill load (when a prefill worker was chosen:
 * `prefillLoad` ≥ 0) above its prefill bound, or the decode load above its decode bound. Bounds are ≥ 0, so a
 * prefill load of −1 (none chosen) never exceeds one.
 */
function beyondLoadBound(cluster: i32, prefillLoad: f64, decodeLoad: f64): bool {
  const at = <usize>cluster << 3;
  return (prefillLoad >= 0 && prefillLoad > load<f64>(loadBoundPrefill + at)) || decodeLoad > load<f64>(loadBoundDecode + at);
}

/**
 * The policy's bit (0 local, 1 remote) for one request. `decodeCachedTokens` is hit_D before clamping,
 * `contextTokens` < 0 means "unknown" (PPD then uses the decode worker's cached tokens), `prefillBusyTokens`
 * is the chosen prefill worker's active prefill tokens (< 0 when there is none), `decodeLoad` the chosen decode
 * worker's active prefill + decode tokens: the loads a table version 3's `load_bound` is checked against.
 */
// inlined into its two callers (decideFeatures and route): no call on the dependent chain, the cluster in a local
// @ts-ignore: decorator
@inline export function decide(
  isl: f64, effP: f64, effD: f64, oslHat: f64, decodeCachedTokens: f64, turn: i32, contextTokens: f64,
  prefillBusyTokens: f64, decodeLoad: f64,
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
        outBit = ruleBit(
          fallbackKind, fallback0, fallback1, fallback2, fallback3, isl, effD, decodeCachedTokens, prefillBusyTokens, decodeLoad,
        );
      } else if (hasLoadBounds && beyondLoadBound(cluster, prefillBusyTokens, decodeLoad)) {
        // the cluster's value was not tested at this load (table version 3): the fallback rule decides
        outReason = REASON_LOAD_OUT_OF_RANGE;
        outBit = ruleBit(
          fallbackKind, fallback0, fallback1, fallback2, fallback3, isl, effD, decodeCachedTokens, prefillBusyTokens, decodeLoad,
        );
      } else {
        outReason = REASON_CLUSTER;
        outBit = <i32>value;
      }
      break;
    }
    case KIND_DYNAMO_ISL:
    case KIND_DYNAMO_ISL_OR_LOAD:
    case KIND_DYNAMO_LOAD:
    case KIND_DYNAMO_LEGACY:
    case KIND_TRTLLM:
    case KIND_LLM_D:
    case KIND_ALWAYS_LOCAL:
    case KIND_ALWAYS_REMOTE: {
      outBit = ruleBit(kind, param0, param1, param2, param3, isl, effD, decodeCachedTokens, prefillBusyTokens, decodeLoad);
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
