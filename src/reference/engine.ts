// The plain-TypeScript reference of the whole hot path: the same observable behaviour as the WebAssembly core
// (hashes, index contents and LRU order, matches, worker choice, features, decisions, error codes), written
// for clarity with JS Maps and Sets. It is the differential-test oracle and the benchmarks' baseline.

import { CoreError } from "../contract/errors.js";
import {
  DECISION_SLOTS,
  DEFAULT_CORE_CONFIG,
  Flag,
  Kind,
  MAX_K,
  Reason,
  Slot,
  STAGING_F64,
  TEXT_BLOCK_BYTES,
  type CoreConfig,
  type Engine,
  type RouteInput,
} from "../contract/core-api.js";
import { ErrorCode as E } from "../contract/errors.js";
import { LIMITS } from "../generated/abi.js";
import { hashText as refHashText, hashTokens as refHashTokens } from "../hashing/hashes.js";
import { stageTable } from "../table/staging.js";
import { decodeTable } from "../table/codec.js";
import { log1p } from "./log1p.js";
import { out as xxOut, xxh64 } from "../hashing/xxh64.js";

const MAX_TOKENS = LIMITS.maxTokens;
const MAX_I32 = 2 ** 31 - 1;
const REASON_CLUSTER = Reason.indexOf("cluster");
const REASON_RULE = Reason.indexOf("rule");
const REASON_FIRST_TURN = Reason.indexOf("first-turn");
const REASON_NO_PREFILL = Reason.indexOf("no-prefill-worker");
const REASON_RULE_FALLBACK = Reason.indexOf("rule-fallback");
const REASON_OUT_OF_DISTRIBUTION = Reason.indexOf("out-of-distribution");
/** A learned cluster whose value is 2 is decided by the table's fallback rule (table version 2). */
const CLUSTER_RULE = 2;
/** Rules a learned table may fall back to: those that decide from the request and the signals alone. */
const FALLBACK_KINDS = new Set<number>([
  Kind["dynamo-isl"],
  Kind["dynamo-load"],
  Kind["dynamo-legacy"],
  Kind.trtllm,
  Kind["llm-d"],
  Kind["always-local"],
  Kind["always-remote"],
]);

/** Exact, cheap Map key for a 64-bit hash given as (lo, hi). */
function key(lo: number, hi: number): string {
  return String.fromCharCode(lo & 0xffff, lo >>> 16, hi & 0xffff, hi >>> 16);
}

class Fail extends CoreError {}
function fail(code: number, detail: number, what: string): never {
  throw new Fail(code, detail, what);
}

interface WorkerState {
  role: number;
  capacity: number;
  /** held blocks in LRU order: first = least recently used */
  blocks: Map<string, true>;
  prefillLoad: number;
  decodeLoad: number;
}

interface OslModelState {
  featureIdx: number[];
  mean: number[];
  std: number[];
  weights: number[][];
  bias: number[];
  representative: number[];
}

interface TableState {
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
  p0: number;
  p1: number;
  ratioEdges: number[];
  qpsLevels: number[];
  /** learned kinds: the fallback rule and its two parameters, and the out-of-distribution bounds (empty: none) */
  fallbackKind: number;
  fallback0: number;
  fallback1: number;
  oodBound: Float64Array;
}

export class ReferenceEngine implements Engine {
  readonly name = "reference" as const;
  readonly config: CoreConfig;
  private blockSize = 16;
  private rootLo = 0x51d8e999;
  private rootHi = 0xef46db37;
  private readonly workers: WorkerState[] = [];
  private span = 0;
  private capacitySum = 0;
  private readonly holders = new Map<string, Set<number>>();
  private loadScale = 1;
  private prefillQueue = 0;
  private qps = 0;
  private table: TableState | null = null;
  private osl: OslModelState | null = null;
  private lastOslClass = -1;
  private readonly decision = new Float64Array(DECISION_SLOTS);
  private readonly lastScores = new Float64Array(MAX_K);
  private readonly lastStd = new Float64Array(4);
  private readonly inputBytes: number;
  /** The input buffer inputTokens and inputText hand out (made on first use) and hashInputTokens' hashes buffer. */
  private input: ArrayBuffer | undefined;
  private hashScratch = new Uint32Array(0);
  private lastCost = 0;

  constructor(config: Partial<CoreConfig> = {}) {
    this.config = { ...DEFAULT_CORE_CONFIG, ...config };
    const c = this.config;
    if (!(c.maxWorkers >= 1 && c.maxWorkers <= 16384)) fail(E.BAD_CONFIG, 0, "init");
    if (!(c.maxInputBytes >= 64 && c.maxInputBytes <= 1 << 28)) fail(E.BAD_CONFIG, 1, "init");
    if (!(c.indexBlocks >= 0 && c.indexBlocks <= 1 << 26)) fail(E.BAD_CONFIG, 2, "init");
    this.inputBytes = (c.maxInputBytes + 7) & ~7;
    for (let w = 0; w < c.maxWorkers; w++) {
      this.workers.push({ role: 0, capacity: 0, blocks: new Map(), prefillLoad: 0, decodeLoad: 0 });
    }
  }

  private fits(n: number, bytesPerItem: number, what: string): void {
    if (n < 0) fail(E.BAD_LENGTH, n, what);
    if (n * bytesPerItem > this.inputBytes) fail(E.INPUT_TOO_LARGE, n, what);
  }

  private worker(id: number, what: string): WorkerState {
    const w = Number.isInteger(id) && id >= 0 ? this.workers[id] : undefined;
    return w ?? fail(E.UNKNOWN_WORKER, id, what);
  }

  setBlockSize(n: number): void {
    if (!(Number.isInteger(n) && n >= 1 && n <= 4096)) fail(E.BAD_BLOCK_SIZE, n, "setBlockSize");
    this.blockSize = n;
  }

  setRoot(bytes: Uint8Array): void {
    this.fits(bytes.length, 1, "setRoot");
    xxh64(bytes, 0, bytes.length);
    this.rootLo = xxOut.lo;
    this.rootHi = xxOut.hi;
  }

  private get root(): { lo: number; hi: number } {
    return { lo: this.rootLo, hi: this.rootHi };
  }

  hashTokens(tokens: ArrayLike<number>, out?: Uint32Array): Uint32Array {
    this.fits(tokens.length, 4, "hashTokens");
    const t = tokens instanceof Uint32Array ? tokens : Uint32Array.from(tokens as ArrayLike<number>);
    return refHashTokens(t, this.blockSize, this.root, this.outFor(t.length, out, "hashTokens"));
  }

  hashText(bytes: Uint8Array, out?: Uint32Array): Uint32Array {
    this.fits(bytes.length, 1, "hashText");
    const blocks = Math.floor(bytes.length / TEXT_BLOCK_BYTES);
    return refHashText(bytes, this.root, out && this.checkedOut(blocks, out, "hashText"));
  }

  /** The whole input buffer, made on first use: what a caller wrote stays there for hashInputTokens. */
  private inputBuffer(): ArrayBuffer {
    return (this.input ??= new ArrayBuffer(this.inputBytes));
  }

  inputTokens(n: number): Uint32Array {
    this.inputRoom(n, 4, "inputTokens");
    return new Uint32Array(this.inputBuffer(), 0, n);
  }

  inputText(n: number): Uint8Array {
    this.inputRoom(n, 1, "inputText");
    return new Uint8Array(this.inputBuffer(), 0, n);
  }

  hashInputTokens(n: number, out?: Uint32Array): Uint32Array {
    this.inputRoom(n, 4, "hashInputTokens");
    const words = new Uint32Array(this.inputBuffer(), 0, n);
    const blocks = Math.floor(n / this.blockSize);
    if (out === undefined) {
      // the engine's own hashes buffer, reused by the next call (as the core's is)
      if (this.hashScratch.length < 2 * blocks) this.hashScratch = new Uint32Array(2 * blocks);
      out = this.hashScratch;
    }
    return refHashTokens(words, this.blockSize, this.root, this.checkedOut(blocks, out, "hashInputTokens"));
  }

  /** Checks `n` values of `width` bytes fit the input buffer: the room inputTokens / inputText hand out. */
  private inputRoom(n: number, width: 1 | 4, what: string): void {
    if (!Number.isInteger(n)) fail(E.BAD_LENGTH, n, what);
    this.fits(n, width, what);
  }

  /** `out`'s first 2 × blocks values (RangeError, as the WebAssembly engine's, when it is shorter). */
  private checkedOut(blocks: number, out: Uint32Array, what: string): Uint32Array {
    if (out.length < 2 * blocks)
      throw new RangeError(`${what}: out must hold at least ${2 * blocks} u32 values (2 per block), got ${out.length}`);
    return out.length === 2 * blocks ? out : out.subarray(0, 2 * blocks);
  }

  private outFor(tokens: number, out: Uint32Array | undefined, what: string): Uint32Array | undefined {
    return out && this.checkedOut(Math.floor(tokens / this.blockSize), out, what);
  }

  // ---- workers -----------------------------------------------------------------------------------------

  setWorker(id: number, role: number, capacityBlocks: number): void {
    const w = this.worker(id, "setWorker");
    if (capacityBlocks < 0) fail(E.BAD_CONFIG, capacityBlocks, "setWorker");
    const sum = this.capacitySum - w.capacity + capacityBlocks;
    if (sum > this.config.indexBlocks)
      fail(E.INDEX_FULL, this.config.indexBlocks - (this.capacitySum - w.capacity), "setWorker");
    this.capacitySum = sum;
    w.capacity = capacityBlocks;
    while (w.blocks.size > capacityBlocks) this.drop(id, w.blocks.keys().next().value as string);
    if (role === 0) this.indexClear(id);
    if (!(Number.isInteger(role) && role >= 0 && role <= 3)) fail(E.BAD_ROLE, role, "setWorker");
    w.role = role;
    if (role !== 0 && id >= this.span) this.span = id + 1;
  }

  setLoad(id: number, p: number, d: number): void {
    const w = this.worker(id, "setLoad");
    if (!(p >= 0) || p > 1e15) fail(E.BAD_LOAD, p, "setLoad");
    if (!(d >= 0) || d > 1e15) fail(E.BAD_LOAD, d, "setLoad");
    w.prefillLoad = p;
    w.decodeLoad = d;
  }

  setLoadScale(scale: number): void {
    if (!(scale >= 0) || scale > 1e6) fail(E.BAD_LOAD, scale, "setLoadScale");
    this.loadScale = scale;
  }

  setSignals(q: number, qps: number): void {
    if (!(q >= 0) || !(qps >= 0) || q > 1e15 || qps > 1e15)
      fail(E.BAD_SIGNAL, Number.isNaN(q) || q < 0 ? 0 : 1, "setSignals");
    this.prefillQueue = q;
    this.qps = qps;
  }

  // ---- index -------------------------------------------------------------------------------------------

  private drop(id: number, k: string): void {
    this.workers[id]!.blocks.delete(k);
    const set = this.holders.get(k);
    if (set) {
      set.delete(id);
      if (set.size === 0) this.holders.delete(k);
    }
  }

  private storeKeys(id: number, pairs: Uint32Array, n: number): void {
    const w = this.workers[id]!;
    if (w.capacity === 0) return;
    for (let i = 0; i < n; i++) {
      const k = key(pairs[2 * i]!, pairs[2 * i + 1]!);
      if (w.blocks.has(k)) {
        w.blocks.delete(k);
        w.blocks.set(k, true);
        continue;
      }
      if (w.blocks.size >= w.capacity) this.drop(id, w.blocks.keys().next().value as string);
      w.blocks.set(k, true);
      let set = this.holders.get(k);
      if (!set) this.holders.set(k, (set = new Set()));
      set.add(id);
    }
  }

  private pairCount(pairs: Uint32Array, what: string): number {
    if ((pairs.length & 1) !== 0) throw new TypeError(`${what}: hash pairs must have an even length`);
    this.fits(pairs.length >>> 1, 8, what);
    return pairs.length >>> 1;
  }

  indexStore(id: number, pairs: Uint32Array): void {
    this.worker(id, "indexStore");
    this.storeKeys(id, pairs, this.pairCount(pairs, "indexStore"));
  }

  indexRemove(id: number, pairs: Uint32Array): void {
    const w = this.worker(id, "indexRemove");
    const n = this.pairCount(pairs, "indexRemove");
    for (let i = 0; i < n; i++) {
      const k = key(pairs[2 * i]!, pairs[2 * i + 1]!);
      if (w.blocks.has(k)) this.drop(id, k);
    }
  }

  indexClear(id: number): void {
    if (id === -1) {
      for (let w = 0; w < this.span; w++) this.indexClear(w);
      return;
    }
    const w = this.worker(id, "indexClear");
    for (const k of [...w.blocks.keys()]) this.drop(id, k);
  }

  indexCount(id: number): number {
    const w = Number.isInteger(id) && id >= 0 ? this.workers[id] : undefined;
    return w ? w.blocks.size : -1;
  }

  private matchInto(pairs: Uint32Array, n: number, out: Uint32Array): void {
    out.fill(0);
    let alive: number[] = [];
    for (let w = 0; w < this.span; w++) if (this.workers[w]!.blocks.size > 0) alive.push(w);
    let i = 0;
    while (alive.length > 0 && i < n) {
      const set = this.holders.get(key(pairs[2 * i]!, pairs[2 * i + 1]!));
      const still: number[] = [];
      for (const w of alive) {
        if (set?.has(w)) still.push(w);
        else out[w] = i;
      }
      alive = still;
      if (alive.length > 0) i++;
    }
    for (const w of alive) out[w] = i;
  }

  match(pairs: Uint32Array): Uint32Array {
    const n = this.pairCount(pairs, "match");
    const out = new Uint32Array(this.span);
    this.matchInto(pairs, n, out);
    return out;
  }

  // ---- table -------------------------------------------------------------------------------------------

  loadTable(bytes: Uint8Array): void {
    const s = stageTable(decodeTable(bytes));
    this.setTable(s.kind, s.k, s.dims, s.staged, s.oslAt);
  }

  setTable(kind: number, k: number, dims: number, s: Float64Array, oslAt: number): void {
    if (s.length > STAGING_F64) fail(E.TABLE_TOO_LARGE, s.length, "setTable");
    const osl = oslAt >= 0 ? this.checkOsl(s, oslAt) : null;
    this.setPolicy(kind, k, dims, s);
    this.osl = osl;
  }

  /** assembly/osl.ts checkOslSection: validates the staged output-length model (F = 0: none). */
  private checkOsl(s: Float64Array, at: number): OslModelState | null {
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

  /** assembly/osl.ts predictOsl: the most likely class's representative length; sets lastOslClass. */
  private predictOsl(isl: number, reuse: number, turn: number, prevOutput: number, maxTokens: number): number {
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

  private setPolicy(kind: number, k: number, dims: number, s: Float64Array): void {
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
      ratioEdges: [],
      qpsLevels: [],
      fallbackKind: Kind["dynamo-isl"],
      fallback0: 2048,
      fallback1: 0.7,
      oodBound: new Float64Array(0),
    } satisfies TableState;
    /** Index (0 or 1) of the first bad parameter of a two-parameter rule, or −1 (assembly/policy.ts badRuleParam). */
    const badRuleParam = (ruleKind: number, p0: number, p1: number): number => {
      if (!Number.isFinite(p0) || !(p0 >= 0)) return 0;
      if (!Number.isFinite(p1) || !(p1 >= 0)) return 1;
      if (ruleKind === Kind["dynamo-load"] && !(p0 > 0 && p1 > 0)) return p0 > 0 ? 1 : 0;
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
      // the guard section: fallbackKind fallback0 fallback1 nBounds(0 or K) oodBound[nBounds]
      const g = total;
      const gKind = st(g);
      if (!Number.isFinite(gKind) || gKind !== Math.floor(gKind) || !FALLBACK_KINDS.has(gKind))
        fail(E.BAD_PARAM, g, "setTable");
      const badParam = badRuleParam(gKind, st(g + 1), st(g + 2));
      if (badParam >= 0) fail(E.BAD_PARAM, g + 1 + badParam, "setTable");
      const nB = st(g + 3);
      if (nB !== 0 && nB !== k) fail(E.BAD_PARAM, g + 3, "setTable");
      const badBound = finiteFrom(g + 4, g + 4 + nB);
      if (badBound >= 0) fail(E.BAD_NUMBER, badBound, "setTable");
      const t: TableState = {
        ...base,
        k,
        dims,
        fallbackKind: gKind,
        fallback0: st(g + 1),
        fallback1: st(g + 2),
        oodBound: s.slice(g + 4, g + 4 + nB),
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
      this.table = t;
      return;
    }
    if (kind >= Kind["dynamo-isl"] && kind <= Kind["llm-d"]) {
      const bad = badRuleParam(kind, st(0), st(1));
      if (bad >= 0) fail(E.BAD_PARAM, bad, "setTable");
      this.table = { ...base, p0: st(0), p1: st(1) };
      return;
    }
    if (kind === Kind["always-local"] || kind === Kind["always-remote"]) {
      this.table = base;
      return;
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
        if (!Number.isFinite(q) || !(q >= 0) || (i > 0 && !(q > st(qAt + i))))
          fail(E.BAD_PARAM, qAt + 1 + i, "setTable");
      }
      const cells = 3 * (nE + 1) * nQ;
      const bitsAt = qAt + 1 + nQ;
      if (bitsAt + cells > STAGING_F64) fail(E.TABLE_TOO_LARGE, bitsAt + cells, "setTable");
      checkBits(bitsAt, cells);
      this.table = {
        ...base,
        k: cells,
        p0: st(0),
        p1: st(1),
        ratioEdges: Array.from(s.subarray(3, 3 + nE)),
        qpsLevels: Array.from(s.subarray(qAt + 1, qAt + 1 + nQ)),
        bits: Uint8Array.from(s.subarray(bitsAt, bitsAt + cells)),
      };
      return;
    }
    fail(E.BAD_KIND, kind, "setTable");
  }

  // ---- deciding ----------------------------------------------------------------------------------------

  // outputs of decide(), kept in fields so the hot path allocates nothing
  private outBit = 0;
  private outCluster = -1;
  private outReason = REASON_RULE;
  private outScore = 0;
  private readonly features = new Float64Array(4);

  private out(bit: number, cluster = -1, reason = REASON_RULE, score = 0): void {
    this.outBit = bit;
    this.outCluster = cluster;
    this.outReason = reason;
    this.outScore = score;
  }

  /** Sets outBit, outCluster, outReason, outScore. Mirrors assembly/policy.ts operation for operation. */
  private decide(
    isl: number,
    effP: number,
    effD: number,
    oslHat: number,
    cachedD: number,
    turn: number,
    ctxTokens: number,
    prefillBusy: number,
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
        if (outside || value === CLUSTER_RULE) {
          const bit = this.ruleBit(t.fallbackKind, t.fallback0, t.fallback1, isl, effD, cachedD, prefillBusy);
          return this.out(bit, best, outside ? REASON_OUT_OF_DISTRIBUTION : REASON_RULE_FALLBACK, bestScore);
        }
        return this.out(value, best, REASON_CLUSTER, bestScore);
      }
      case Kind["dynamo-isl"]:
      case Kind["dynamo-load"]:
      case Kind["dynamo-legacy"]:
      case Kind.trtllm:
      case Kind["llm-d"]:
      case Kind["always-local"]:
      case Kind["always-remote"]:
        return this.out(this.ruleBit(t.kind, t.p0, t.p1, isl, effD, cachedD, prefillBusy));
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

  /** The bit of a rule that needs only the request and the signals (assembly/policy.ts ruleBit). */
  private ruleBit(
    kind: number,
    p0: number,
    p1: number,
    isl: number,
    effD: number,
    cachedD: number,
    prefillBusy: number,
  ): number {
    switch (kind) {
      case Kind["dynamo-isl"]:
        return effD < p0 && effD / Math.max(isl, 1) < p1 ? 0 : 1;
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

  decideFeatures(isl: number, effP: number, effD: number, oslHat: number, turn: number, ctx: number): Float64Array {
    if (!(isl >= 0 && isl <= MAX_TOKENS)) fail(E.BAD_LENGTH, isl, "decide");
    if (!(effP >= 0 && effP <= isl)) fail(E.BAD_LENGTH, effP, "decide");
    if (!(effD >= 0 && effD <= isl)) fail(E.BAD_LENGTH, effD, "decide");
    if (!(oslHat >= 0 && oslHat <= MAX_TOKENS)) fail(E.BAD_OSL, oslHat, "decide");
    if (turn < 0) fail(E.BAD_TURN, turn, "decide");
    if (Number.isNaN(ctx) || ctx > MAX_TOKENS) fail(E.BAD_LENGTH, ctx, "decide");
    this.decide(isl, effP, effD, oslHat, isl - effD, turn, ctx, -1);
    this.decision.fill(0);
    this.writeDecision(this.outBit, -1, -1, isl, effP, effD, oslHat);
    this.decision[Slot.oslClass] = -1;
    return this.decision;
  }

  /** The slots route and decideFeatures share (assembly/route.ts writeDecision). */
  private writeDecision(
    path: number,
    decode: number,
    prefill: number,
    isl: number,
    effP: number,
    effD: number,
    oslHat: number,
  ): Float64Array {
    const d = this.decision;
    d[Slot.path] = path;
    d[Slot.bit] = this.outBit;
    d[Slot.reason] = path !== this.outBit ? REASON_NO_PREFILL : this.outReason;
    d[Slot.decode] = decode;
    d[Slot.prefill] = prefill;
    d[Slot.cluster] = this.outCluster;
    d[Slot.isl] = isl;
    d[Slot.effP] = effP;
    d[Slot.effD] = effD;
    d[Slot.oslHat] = oslHat;
    d[Slot.score] = this.outScore;
    return d;
  }

  private cost(w: number, isl: number, matched: Uint32Array, tpb: number): number {
    const s = this.workers[w]!;
    const cached = matched[w]! * tpb;
    const uncached = isl > cached ? isl - cached : 0;
    return this.loadScale * (s.prefillLoad + uncached) + s.decodeLoad;
  }

  private choose(roleBit: number, isl: number, matched: Uint32Array, tpb: number, exclude: number): number {
    let best = -1;
    let bestCost = Infinity;
    for (let w = 0; w < this.span; w++) {
      if ((this.workers[w]!.role & roleBit) === 0 || w === exclude) continue;
      const c = this.cost(w, isl, matched, tpb);
      if (c < bestCost) {
        bestCost = c;
        best = w;
      }
    }
    this.lastCost = bestCost;
    return best;
  }

  route(r: RouteInput): Float64Array {
    // the request record's integers, checked in the core's order (assembly/route.ts)
    const integral = (v: number): boolean => v >= 0 && v <= MAX_I32 && v === Math.floor(v);
    if (!integral(r.length)) fail(E.BAD_LENGTH, r.length, "route");
    if (!integral(r.flags) || r.flags > (Flag.text | Flag.hashes | Flag.record)) fail(E.BAD_FLAGS, r.flags, "route");
    if (!integral(r.turn)) fail(E.BAD_TURN, r.turn, "route");
    if (!(r.pinnedDecode < 0) && !integral(r.pinnedDecode)) fail(E.BAD_PINNED, r.pinnedDecode, "route");
    const pinned = r.pinnedDecode < 0 ? -1 : r.pinnedDecode;
    const text = (r.flags & Flag.text) !== 0;
    const given = (r.flags & Flag.hashes) !== 0;
    this.fits(r.length, given ? 8 : text ? 1 : 4, "route");
    if (!(r.promptTokens >= 0 && r.promptTokens <= MAX_TOKENS)) fail(E.BAD_LENGTH, r.promptTokens, "route");
    const predict = r.oslHat < 0;
    if (!(predict || r.oslHat <= MAX_TOKENS) || Number.isNaN(r.oslHat) || (predict && !this.osl))
      fail(E.BAD_OSL, r.oslHat, "route");
    if (!(r.prevOutputTokens <= MAX_TOKENS) || !(r.maxTokens <= MAX_TOKENS)) {
      fail(E.BAD_LENGTH, Number.isNaN(r.prevOutputTokens) ? r.prevOutputTokens : r.maxTokens, "route");
    }
    if (Number.isNaN(r.contextTokens) || r.contextTokens > MAX_TOKENS) fail(E.BAD_LENGTH, r.contextTokens, "route");
    if (pinned >= 0 && !((this.workers[pinned]?.role ?? 0) & 2)) fail(E.BAD_PINNED, pinned, "route");

    let pairs: Uint32Array;
    let tpb: number;
    let isl: number;
    if (given) {
      pairs = (r.data as Uint32Array).subarray(0, 2 * r.length);
      tpb = this.blockSize;
      isl = r.promptTokens > 0 ? r.promptTokens : r.length * tpb;
    } else if (text) {
      pairs = refHashText((r.data as Uint8Array).subarray(0, r.length), this.root);
      tpb = TEXT_BLOCK_BYTES / 4;
      isl = r.promptTokens > 0 ? r.promptTokens : Math.ceil(r.length / 4);
    } else {
      pairs = refHashTokens((r.data as Uint32Array).subarray(0, r.length), this.blockSize, this.root);
      tpb = this.blockSize;
      isl = r.length;
    }
    const blocks = pairs.length >>> 1;
    const matched = new Uint32Array(this.span);
    this.matchInto(pairs, blocks, matched);
    let longest = 0;
    for (let w = 0; w < this.span; w++) longest = Math.max(longest, matched[w]!);
    const reuse = blocks > 0 ? longest / blocks : 0;
    const oslHat = predict
      ? this.predictOsl(isl, reuse, r.turn, Math.max(r.prevOutputTokens, 0), r.maxTokens)
      : r.oslHat;

    let decodeWorker = pinned;
    let costD: number;
    if (decodeWorker >= 0) costD = this.cost(decodeWorker, isl, matched, tpb);
    else {
      decodeWorker = this.choose(2, isl, matched, tpb, -1);
      costD = this.lastCost;
    }
    if (decodeWorker < 0) fail(E.NO_DECODE_WORKER, 0, "route");
    const prefillWorker = this.choose(1, isl, matched, tpb, decodeWorker);
    const costP = prefillWorker >= 0 ? this.lastCost : 0;

    const matchedD = matched[decodeWorker]!;
    const matchedP = prefillWorker >= 0 ? matched[prefillWorker]! : 0;
    // vLLM's rule (assembly/route.ts cacheableTokens): at most isl − 1 tokens, in whole blocks, come from cache
    const cacheable = Math.floor(Math.max(isl - 1, 0) / tpb) * tpb;
    const cachedD = Math.min(matchedD * tpb, cacheable);
    const cachedP = Math.min(matchedP * tpb, cacheable);
    const effD = isl - cachedD;
    const effP = isl - cachedP;
    this.decide(
      isl,
      effP,
      effD,
      oslHat,
      cachedD,
      r.turn,
      r.contextTokens,
      prefillWorker >= 0 ? this.workers[prefillWorker]!.prefillLoad : -1,
    );
    const path = prefillWorker >= 0 ? this.outBit : 0;
    if ((r.flags & Flag.record) !== 0 && blocks > 0) {
      this.storeKeys(decodeWorker, pairs, blocks);
      if (path === 1) this.storeKeys(prefillWorker, pairs, blocks);
    }
    const d = this.writeDecision(path, decodeWorker, prefillWorker, isl, effP, effD, oslHat);
    d[Slot.matchedD] = matchedD;
    d[Slot.matchedP] = matchedP;
    d[Slot.blocks] = blocks;
    d[Slot.costD] = costD;
    d[Slot.costP] = costP;
    d[Slot.oslClass] = predict ? this.lastOslClass : -1;
    d[Slot.reuse] = reuse;
    return d;
  }

  scores(k: number): Float64Array {
    return this.lastScores.slice(0, k);
  }

  standardized(dims: number): Float64Array {
    return this.lastStd.slice(0, dims);
  }
}
