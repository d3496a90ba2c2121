// The reference's policy (assembly/policy/decide.ts decide, assembly/osl.ts predictOsl): the table in force, the signals
// the rules read (prefill queue, QPS), and the decision for every kind, written to fields so the hot path allocates
// nothing. The engine (engine.ts) checks the inputs, sets the table (staged-table.ts checks it) and reads the outputs.

import { Kind, MAX_K, Reason } from "../contract/core-api.js";
import { ErrorCode as E } from "../contract/errors.js";
import { fail } from "./fail.js";
import { log1p } from "./log1p.js";
import { CLUSTER_RULE, type OslModelState, type TableState } from "./staged-table.js";

const REASON_CLUSTER = Reason.indexOf("cluster");
const REASON_RULE = Reason.indexOf("rule");
const REASON_FIRST_TURN = Reason.indexOf("first-turn");
const REASON_RULE_FALLBACK = Reason.indexOf("rule-fallback");
const REASON_OUT_OF_DISTRIBUTION = Reason.indexOf("out-of-distribution");
const REASON_LOAD_OUT_OF_RANGE = Reason.indexOf("load-out-of-range");

export class ReferencePolicy {
  /** the policy in force (null: no table yet) and the table's output-length model (null: none) */
  table: TableState | null = null;
  osl: OslModelState | null = null;
  /** the class predictOsl chose last */
  lastOslClass = -1;
  /** the signals (setSignals): the prefill queue and the arrival rate */
  prefillQueue = 0;
  qps = 0;
  /** the last learned decision's score per cluster and standardized features (scores(), standardized()) */
  readonly lastScores = new Float64Array(MAX_K);
  readonly lastStd = new Float64Array(4);

  // outputs of decide(), kept in fields so the hot path allocates nothing
  outBit = 0;
  outCluster = -1;
  outReason = REASON_RULE;
  outScore = 0;
  private readonly features = new Float64Array(4);

  private out(bit: number, cluster = -1, reason = REASON_RULE, score = 0): void {
    this.outBit = bit;
    this.outCluster = cluster;
    this.outReason = reason;
    this.outScore = score;
  }

  /** Sets outBit, outCluster, outReason, outScore. Mirrors assembly/policy/decide.ts operation for operation.
   *  `prefillBusy`: the chosen prefill worker's active prefill tokens (< 0: none); `decodeLoad`: the chosen decode
   *  worker's active prefill + decode tokens. */
  decide(
    isl: number,
    effP: number,
    effD: number,
    oslHat: number,
    cachedD: number,
    turn: number,
    ctxTokens: number,
    prefillBusy: number,
    decodeLoad: number,
  ): void {
    const t = this.table ?? fail(E.NO_TABLE, 0, "route");
    const features = this.features;
    features[0] = isl;
    features[1] = effP;
    features[2] = effD;
    features[3] = oslHat;
    switch (t.kind) {
      case Kind.kmeans:
      case Kind.gmm: {
        const x = this.lastStd;
        for (let j = 0; j < t.dims; j++) x[j] = (log1p(features[t.featureIdx[j]!]!) - t.mean[j]!) / t.std[j]!;
        let best = 0;
        let bestScore = t.kind === Kind.kmeans ? Infinity : -Infinity;
        for (let c = 0; c < t.k; c++) {
          let q = 0;
          for (let j = 0; j < t.dims; j++) {
            const diff = x[j]! - t.centroids[c * t.dims + j]!;
            q += t.kind === Kind.kmeans ? diff * diff : diff * diff * t.invVar[c * t.dims + j]!;
          }
          const score = t.kind === Kind.kmeans ? q : t.logConst[c]! - 0.5 * q;
          this.lastScores[c] = score;
          if (t.kind === Kind.kmeans ? score < bestScore : score > bestScore) {
            bestScore = score;
            best = c;
          }
        }
        // beyond the cluster's bound (kmeans: farther; gmm: less likely) → the fallback rule decides
        const outside =
          t.oodBound.length > 0 &&
          (t.kind === Kind.kmeans ? bestScore > t.oodBound[best]! : bestScore < t.oodBound[best]!);
        const value = t.bits[best]!;
        // above the load the cluster's value was tested at (table version 3) → the fallback rule decides
        const beyondLoad =
          t.loadBoundPrefill.length > 0 &&
          ((prefillBusy >= 0 && prefillBusy > t.loadBoundPrefill[best]!) || decodeLoad > t.loadBoundDecode[best]!);
        // the core's order: out of distribution, then a rule cluster, then the load bound
        const reason = outside
          ? REASON_OUT_OF_DISTRIBUTION
          : value === CLUSTER_RULE
            ? REASON_RULE_FALLBACK
            : beyondLoad
              ? REASON_LOAD_OUT_OF_RANGE
              : REASON_CLUSTER;
        if (reason === REASON_CLUSTER) return this.out(value, best, REASON_CLUSTER, bestScore);
        const bit = this.ruleBit(
          t.fallbackKind,
          t.fallback0,
          t.fallback1,
          t.fallback2,
          t.fallback3,
          isl,
          effD,
          cachedD,
          prefillBusy,
          decodeLoad,
        );
        return this.out(bit, best, reason, bestScore);
      }
      case Kind["dynamo-isl"]:
      case Kind["dynamo-isl-or-load"]:
      case Kind["dynamo-load"]:
      case Kind["dynamo-legacy"]:
      case Kind.trtllm:
      case Kind["llm-d"]:
      case Kind["always-local"]:
      case Kind["always-remote"]:
        return this.out(this.ruleBit(t.kind, t.p0, t.p1, t.p2, t.p3, isl, effD, cachedD, prefillBusy, decodeLoad));
      case Kind.ppd: {
        if (turn <= 1) return this.out(1, -1, REASON_FIRST_TURN);
        const ctx = ctxTokens >= 0 ? ctxTokens : Math.min(cachedD, isl);
        const newInput = isl > ctx ? isl - ctx : 0;
        const ratio = newInput / Math.max(oslHat, 1);
        const ctxClass = ctx <= t.p0 ? 0 : ctx <= t.p1 ? 1 : 2;
        let ratioClass = 0;
        while (ratioClass < t.ratioEdges.length && ratio > t.ratioEdges[ratioClass]!) ratioClass++;
        let q = 0;
        let bestGap = Math.abs(this.qps - t.qpsLevels[0]!);
        for (let i = 1; i < t.qpsLevels.length; i++) {
          const gap = Math.abs(this.qps - t.qpsLevels[i]!);
          if (gap < bestGap) {
            bestGap = gap;
            q = i;
          }
        }
        const cell = (ctxClass * (t.ratioEdges.length + 1) + ratioClass) * t.qpsLevels.length + q;
        return this.out(t.bits[cell]!, cell);
      }
      default:
        return fail(E.NO_TABLE, 0, "route");
    }
  }

  /** The bit of a rule that needs only the request and the signals (assembly/policy/decide.ts ruleBit). */
  private ruleBit(
    kind: number,
    p0: number,
    p1: number,
    p2: number,
    p3: number,
    isl: number,
    effD: number,
    cachedD: number,
    prefillBusy: number,
    decodeLoad: number,
  ): number {
    switch (kind) {
      case Kind["dynamo-isl"]:
        return effD < p0 && effD / Math.max(isl, 1) < p1 ? 0 : 1;
      case Kind["dynamo-isl-or-load"]: {
        const islLocal = effD < p0 && effD / Math.max(isl, 1) < p1;
        const prefillBusyNow = prefillBusy >= 0 && prefillBusy > p2;
        const decodeBusy = p3 > 0 && decodeLoad > p3;
        return (islLocal || prefillBusyNow) && !decodeBusy ? 0 : 1;
      }
      case Kind["dynamo-load"]:
        return prefillBusy >= 0 && prefillBusy > p0 * p1 ? 0 : 1;
      case Kind["dynamo-legacy"]:
        return effD > p0 && this.prefillQueue < p1 ? 1 : 0;
      case Kind.trtllm:
        return cachedD === 0 || isl - cachedD > p0 ? 1 : 0;
      case Kind["llm-d"]:
        return p0 > 0 && isl >= p1 && isl - cachedD >= p0 ? 1 : 0;
      case Kind["always-local"]:
        return 0;
      default:
        return 1; // always-remote
    }
  }

  /** assembly/osl.ts predictOsl: the most likely class's representative length; sets lastOslClass. */
  predictOsl(isl: number, reuse: number, turn: number, prevOutput: number, maxTokens: number): number {
    const m = this.osl!;
    const x = [
      log1p(isl),
      reuse,
      log1p(turn),
      log1p(prevOutput),
      maxTokens > 0 ? log1p(maxTokens) : 0,
      maxTokens > 0 ? 1 : 0,
    ];
    let best = 0;
    let bestScore = -Infinity;
    for (let k = 0; k < m.bias.length; k++) {
      let sc = m.bias[k]!;
      for (let j = 0; j < m.featureIdx.length; j++)
        sc += m.weights[k]![j]! * ((x[m.featureIdx[j]!]! - m.mean[j]!) / m.std[j]!);
      if (sc > bestScore) {
        bestScore = sc;
        best = k;
      }
    }
    this.lastOslClass = best;
    return m.representative[best]!;
  }
}
