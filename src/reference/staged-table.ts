// A staged table (the layout src/table/staging.ts makes) checked slot by slot in the core's order and with its
// error codes (assembly/policy/set-table.ts setTable, assembly/osl.ts checkOslSection), and unpacked into the state the
// reference decides from (policy.ts). A table that fails a check is not unpacked.

import { Kind, MAX_K, RULE_SLOTS, STAGING_F64 } from "../contract/core-api.js";
import { ErrorCode as E } from "../contract/errors.js";
import { fail } from "./fail.js";

/** A learned cluster whose value is 2 is decided by the table's fallback rule (table version 2). */
export const CLUSTER_RULE = 2;
/** Rules a learned table may fall back to: those that decide from the request and the signals alone. */
const FALLBACK_KINDS = new Set<number>([
  Kind["dynamo-isl"],
  Kind["dynamo-load"],
  Kind["dynamo-legacy"],
  Kind.trtllm,
  Kind["llm-d"],
  Kind["dynamo-isl-or-load"],
  Kind["always-local"],
  Kind["always-remote"],
]);

export interface OslModelState {
  featureIdx: number[];
  mean: number[];
  std: number[];
  weights: number[][];
  bias: number[];
  representative: number[];
}

export interface TableState {
  kind: number;
  k: number;
  dims: number;
  featureIdx: number[];
  mean: number[];
  std: number[];
  centroids: Float64Array;
  invVar: Float64Array;
  logConst: Float64Array;
  bits: Uint8Array;
  /** a rule's staged parameters (RULE_SLOTS; PPD: its two context edges in p0 and p1) */
  p0: number;
  p1: number;
  p2: number;
  p3: number;
  ratioEdges: number[];
  qpsLevels: number[];
  /** learned kinds: the fallback rule and its RULE_SLOTS parameters, and the out-of-distribution bounds (empty: none) */
  fallbackKind: number;
  fallback0: number;
  fallback1: number;
  fallback2: number;
  fallback3: number;
  oodBound: Float64Array;
  /** table version 3: per cluster, the highest prefill and decode load its value was tested at (empty: none) */
  loadBoundPrefill: Float64Array;
  loadBoundDecode: Float64Array;
}

/** assembly/osl.ts checkOslSection: validates the staged output-length model (F = 0: none). */
export function checkOsl(s: Float64Array, at: number): OslModelState | null {
  const st = (i: number): number => s[i] ?? 0;
  if (at + 2 > STAGING_F64) fail(E.BAD_PARAM, at, "setTable");
  const f = st(at);
  const c = st(at + 1);
  if (f === 0) return null;
  if (!(f >= 1 && f <= 6) || f !== Math.floor(f)) fail(E.BAD_FEATURE, at, "setTable");
  if (!(c >= 1 && c <= 16) || c !== Math.floor(c)) fail(E.BAD_K, c, "setTable");
  const end = at + 2 + 3 * f + c * f + 2 * c;
  if (end > STAGING_F64) fail(E.BAD_PARAM, at, "setTable");
  let seen = 0;
  for (let j = 0; j < f; j++) {
    const v = st(at + 2 + j);
    if (!(v >= 0 && v < 6) || v !== Math.floor(v) || (seen & (1 << v)) !== 0) fail(E.BAD_FEATURE, j, "setTable");
    seen |= 1 << v;
  }
  for (let i = at + 2 + f; i < end; i++) if (!Number.isFinite(st(i))) fail(E.BAD_NUMBER, i, "setTable");
  for (let j = 0; j < f; j++) if (!(st(at + 2 + 2 * f + j) > 0)) fail(E.BAD_NUMBER, at + 2 + 2 * f + j, "setTable");
  const repAt = at + 2 + 3 * f + c * f + c;
  for (let i = 0; i < c; i++) if (!(st(repAt + i) >= 0)) fail(E.BAD_NUMBER, repAt + i, "setTable");
  const w = at + 2 + 3 * f;
  return {
    featureIdx: Array.from(s.subarray(at + 2, at + 2 + f)),
    mean: Array.from(s.subarray(at + 2 + f, at + 2 + 2 * f)),
    std: Array.from(s.subarray(at + 2 + 2 * f, at + 2 + 3 * f)),
    weights: Array.from({ length: c }, (_, k) => Array.from(s.subarray(w + k * f, w + (k + 1) * f))),
    bias: Array.from(s.subarray(w + c * f, w + c * f + c)),
    representative: Array.from(s.subarray(repAt, repAt + c)),
  };
}

/** assembly/policy/set-table.ts setTable: the staged policy of `kind` checked and unpacked (the output-length section apart). */
export function checkPolicy(kind: number, k: number, dims: number, s: Float64Array): TableState {
  const st = (i: number): number => s[i] ?? 0;
  const finiteFrom = (from: number, to: number): number => {
    for (let i = from; i < to; i++) if (!Number.isFinite(st(i))) return i;
    return -1;
  };
  const checkBits = (from: number, n: number): void => {
    for (let i = 0; i < n; i++) if (st(from + i) !== 0 && st(from + i) !== 1) fail(E.BAD_BIT, i, "setTable");
  };
  const base = {
    kind,
    k: 0,
    dims: 0,
    featureIdx: [],
    mean: [],
    std: [],
    centroids: new Float64Array(0),
    invVar: new Float64Array(0),
    logConst: new Float64Array(0),
    bits: new Uint8Array(0),
    p0: 0,
    p1: 0,
    p2: 0,
    p3: 0,
    ratioEdges: [],
    qpsLevels: [],
    fallbackKind: Kind["dynamo-isl"],
    fallback0: 2048,
    fallback1: 0.7,
    fallback2: 0,
    fallback3: 0,
    oodBound: new Float64Array(0),
    loadBoundPrefill: new Float64Array(0),
    loadBoundDecode: new Float64Array(0),
  } satisfies TableState;
  /** Index of the first bad staged parameter of a rule whose slots start at `at`, or −1 (set-table.ts badRuleParam). */
  const badRuleParam = (ruleKind: number, at: number): number => {
    for (let i = 0; i < RULE_SLOTS; i++) if (!Number.isFinite(st(at + i)) || !(st(at + i) >= 0)) return i;
    if (ruleKind === Kind["dynamo-load"] && !(st(at) > 0 && st(at + 1) > 0)) return st(at) > 0 ? 1 : 0;
    if (ruleKind === Kind["dynamo-isl-or-load"] && !(st(at + 2) > 0)) return 2;
    return -1;
  };
  if (kind === Kind.kmeans || kind === Kind.gmm) {
    if (!(k >= 1 && k <= MAX_K)) fail(E.BAD_K, k, "setTable");
    if (!(dims >= 1 && dims <= 4)) fail(E.BAD_DIMS, dims, "setTable");
    let seen = 0;
    for (let j = 0; j < dims; j++) {
      const f = st(j);
      if (!(f >= 0 && f <= 3) || f !== Math.floor(f) || (seen & (1 << f)) !== 0) fail(E.BAD_FEATURE, j, "setTable");
      seen |= 1 << f;
    }
    const gmm = kind === Kind.gmm;
    const total = gmm ? 3 * dims + 2 * k * dims + 2 * k : 3 * dims + k * dims + k;
    const bad = finiteFrom(dims, total);
    if (bad >= 0) fail(E.BAD_NUMBER, bad, "setTable");
    for (let j = 0; j < dims; j++) if (!(st(2 * dims + j) > 0)) fail(E.BAD_NUMBER, 2 * dims + j, "setTable");
    const bitsAt = 3 * dims + k * dims;
    for (let i = 0; i < k; i++) {
      const v = st(bitsAt + i);
      if (v !== 0 && v !== 1 && v !== CLUSTER_RULE) fail(E.BAD_BIT, i, "setTable");
    }
    // the guard section: fallbackKind fallbackParam[RULE_SLOTS] nBounds(0 or K) oodBound[nBounds]
    //   nLoadBounds(0 or K) loadBoundPrefill[nLoadBounds] loadBoundDecode[nLoadBounds]
    const g = total;
    const gKind = st(g);
    if (!Number.isFinite(gKind) || gKind !== Math.floor(gKind) || !FALLBACK_KINDS.has(gKind))
      fail(E.BAD_PARAM, g, "setTable");
    const badParam = badRuleParam(gKind, g + 1);
    if (badParam >= 0) fail(E.BAD_PARAM, g + 1 + badParam, "setTable");
    const boundsAt = g + 1 + RULE_SLOTS;
    const nB = st(boundsAt);
    if (nB !== 0 && nB !== k) fail(E.BAD_PARAM, boundsAt, "setTable");
    const badBound = finiteFrom(boundsAt + 1, boundsAt + 1 + nB);
    if (badBound >= 0) fail(E.BAD_NUMBER, badBound, "setTable");
    const loadAt = boundsAt + 1 + nB;
    const nL = st(loadAt);
    if (nL !== 0 && nL !== k) fail(E.BAD_PARAM, loadAt, "setTable");
    for (let i = loadAt + 1; i < loadAt + 1 + 2 * nL; i++) {
      if (!Number.isFinite(st(i)) || !(st(i) >= 0)) fail(E.BAD_NUMBER, i, "setTable");
    }
    const t: TableState = {
      ...base,
      k,
      dims,
      fallbackKind: gKind,
      fallback0: st(g + 1),
      fallback1: st(g + 2),
      fallback2: st(g + 3),
      fallback3: st(g + 4),
      oodBound: s.slice(boundsAt + 1, boundsAt + 1 + nB),
      loadBoundPrefill: s.slice(loadAt + 1, loadAt + 1 + nL),
      loadBoundDecode: s.slice(loadAt + 1 + nL, loadAt + 1 + 2 * nL),
    };
    if (gmm) {
      const ivAt = bitsAt + 2 * k;
      for (let i = 0; i < k * dims; i++) if (!(st(ivAt + i) > 0)) fail(E.BAD_NUMBER, ivAt + i, "setTable");
      t.logConst = s.slice(bitsAt + k, bitsAt + 2 * k);
      t.invVar = s.slice(ivAt, ivAt + k * dims);
    }
    t.featureIdx = Array.from(s.subarray(0, dims));
    t.mean = Array.from(s.subarray(dims, 2 * dims));
    t.std = Array.from(s.subarray(2 * dims, 3 * dims));
    t.centroids = s.slice(3 * dims, 3 * dims + k * dims);
    t.bits = Uint8Array.from(s.subarray(bitsAt, bitsAt + k));
    return t;
  }
  if ((kind >= Kind["dynamo-isl"] && kind <= Kind["llm-d"]) || kind === Kind["dynamo-isl-or-load"]) {
    const bad = badRuleParam(kind, 0);
    if (bad >= 0) fail(E.BAD_PARAM, bad, "setTable");
    return { ...base, p0: st(0), p1: st(1), p2: st(2), p3: st(3) };
  }
  if (kind === Kind["always-local"] || kind === Kind["always-remote"]) {
    return base;
  }
  if (kind === Kind.ppd) {
    if (!Number.isFinite(st(0)) || !Number.isFinite(st(1)) || !(st(0) >= 0) || !(st(1) > st(0)))
      fail(E.BAD_PARAM, 0, "setTable");
    const nE = st(2);
    if (!(nE >= 1 && nE <= 15) || nE !== Math.floor(nE)) fail(E.BAD_PARAM, 2, "setTable");
    for (let i = 0; i < nE; i++) {
      const e = st(3 + i);
      if (!Number.isFinite(e) || !(e > 0) || (i > 0 && !(e > st(2 + i)))) fail(E.BAD_PARAM, 3 + i, "setTable");
    }
    const qAt = 3 + nE;
    const nQ = st(qAt);
    if (!(nQ >= 1 && nQ <= 64) || nQ !== Math.floor(nQ)) fail(E.BAD_PARAM, qAt, "setTable");
    for (let i = 0; i < nQ; i++) {
      const q = st(qAt + 1 + i);
      if (!Number.isFinite(q) || !(q >= 0) || (i > 0 && !(q > st(qAt + i)))) fail(E.BAD_PARAM, qAt + 1 + i, "setTable");
    }
    const cells = 3 * (nE + 1) * nQ;
    const bitsAt = qAt + 1 + nQ;
    if (bitsAt + cells > STAGING_F64) fail(E.TABLE_TOO_LARGE, bitsAt + cells, "setTable");
    checkBits(bitsAt, cells);
    return {
      ...base,
      k: cells,
      p0: st(0),
      p1: st(1),
      ratioEdges: Array.from(s.subarray(3, 3 + nE)),
      qpsLevels: Array.from(s.subarray(qAt + 1, qAt + 1 + nQ)),
      bits: Uint8Array.from(s.subarray(bitsAt, bitsAt + cells)),
    };
  }
  return fail(E.BAD_KIND, kind, "setTable");
}
