// The plain-TypeScript reference of the whole hot path: the same observable behaviour as the WebAssembly core
// (hashes, index contents and LRU order, matches, worker choice, features, decisions, error codes), written
// for clarity with JS Maps and Sets. It is the differential-test oracle and the benchmarks' baseline.
// This file is the Engine: input checks, hashing, workers and route (assembly/route.ts); the prefix index is in
// prefix-index.ts, the table's checks in staged-table.ts, the decision in policy.ts.

import {
  DECISION_SLOTS,
  DEFAULT_CORE_CONFIG,
  Flag,
  Reason,
  Slot,
  STAGING_F64,
  TEXT_BLOCK_BYTES,
  type CoreConfig,
  type Engine,
  type RouteInput,
} from "../contract/core-api.js";
import { ErrorCode as E } from "../contract/errors.js";
import { HashScheme, LIMITS, Tier, TIER_WEIGHTS } from "../generated/abi.js";
import { cborFnvRoot, cborFnvTokens } from "../hashing/cbor-fnv.js";
import { hashText as xxh64Text, hashTokens as xxh64Tokens } from "../hashing/hashes.js";
import { stageTable } from "../table/staging.js";
import { decodeTable } from "../table/codec.js";
import { out as xxOut, xxh64 } from "../hashing/xxh64.js";
import { fail } from "./fail.js";
import { ReferencePolicy } from "./policy.js";
import { PrefixIndex, type IndexedWorker } from "./prefix-index.js";
import { checkOsl, checkPolicy } from "./staged-table.js";

const MAX_TOKENS = LIMITS.maxTokens;
const MAX_I32 = 2 ** 31 - 1;
const REASON_NO_PREFILL = Reason.indexOf("no-prefill-worker");

interface WorkerState extends IndexedWorker {
  role: number;
  prefillLoad: number;
  decodeLoad: number;
}

export class ReferenceEngine implements Engine {
  readonly name = "reference" as const;
  readonly config: CoreConfig;
  private blockSize = 16;
  private rootLo = 0x51d8e999;
  private rootHi = 0xef46db37;
  private scheme: number = HashScheme["xxh64-chain"];
  private readonly workers: WorkerState[] = [];
  private span = 0;
  private capacitySum = 0;
  private readonly index = new PrefixIndex(this.workers);
  private loadScale = 1;
  private readonly policy = new ReferencePolicy();
  private readonly decision = new Float64Array(DECISION_SLOTS);
  private readonly inputBytes: number;
  /** The input buffer inputTokens and inputText hand out (made on first use) and hashInputTokens' hashes buffer. */
  private input: ArrayBuffer | undefined;
  private hashScratch = new Uint32Array(0);
  private lastCost = 0;
  /** A lower tier's weight (setTierWeight); the route being costed: its block hashes and vLLM's cap in blocks. */
  private lowerWeight: number = TIER_WEIGHTS.CPU;
  private routePairs: Uint32Array = new Uint32Array(0);
  private routeCap = 0;

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
    this.scheme = HashScheme["xxh64-chain"];
  }

  setHashScheme(scheme: number, seed: Uint8Array, model: Uint8Array): void {
    this.fits(seed.length + model.length, 1, "setHashScheme");
    if (scheme === HashScheme["xxh64-chain"]) {
      const both = new Uint8Array(seed.length + model.length);
      both.set(seed);
      both.set(model, seed.length);
      return this.setRoot(both);
    }
    if (scheme !== HashScheme["llm-d-cbor-fnv"]) fail(E.BAD_HASH_SCHEME, scheme, "setHashScheme");
    const root = cborFnvRoot(seed, model);
    this.rootLo = root.lo;
    this.rootHi = root.hi;
    this.scheme = scheme;
  }

  /** Token blocks under the scheme (the core's hashTokenBlocks). */
  private hashTokenBlocks(tokens: Uint32Array, out?: Uint32Array): Uint32Array {
    const hash = this.scheme === HashScheme["llm-d-cbor-fnv"] ? cborFnvTokens : xxh64Tokens;
    return hash(tokens, this.blockSize, this.root, out);
  }

  /** Text blocks: the xxh64 chain only (the core's hashTextBlocks and its text-mode check). */
  private hashTextBlocks(bytes: Uint8Array, what: string, out?: Uint32Array): Uint32Array {
    if (this.scheme !== HashScheme["xxh64-chain"]) fail(E.TEXT_NEEDS_XXH64, this.scheme, what);
    return xxh64Text(bytes, this.root, out);
  }

  private get root(): { lo: number; hi: number } {
    return { lo: this.rootLo, hi: this.rootHi };
  }

  hashTokens(tokens: ArrayLike<number>, out?: Uint32Array): Uint32Array {
    this.fits(tokens.length, 4, "hashTokens");
    const t = tokens instanceof Uint32Array ? tokens : Uint32Array.from(tokens as ArrayLike<number>);
    return this.hashTokenBlocks(t, this.outFor(t.length, out, "hashTokens"));
  }

  hashText(bytes: Uint8Array, out?: Uint32Array): Uint32Array {
    this.fits(bytes.length, 1, "hashText");
    const blocks = Math.floor(bytes.length / TEXT_BLOCK_BYTES);
    return this.hashTextBlocks(bytes, "hashText", out && this.checkedOut(blocks, out, "hashText"));
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
    return this.hashTokenBlocks(words, this.checkedOut(blocks, out, "hashInputTokens"));
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
    while (w.blocks.size > capacityBlocks) this.index.drop(id, w.blocks.keys().next().value as string);
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
    this.policy.prefillQueue = q;
    this.policy.qps = qps;
  }

  // ---- index -------------------------------------------------------------------------------------------

  private pairCount(pairs: Uint32Array, what: string): number {
    if ((pairs.length & 1) !== 0) throw new TypeError(`${what}: hash pairs must have an even length`);
    this.fits(pairs.length >>> 1, 8, what);
    return pairs.length >>> 1;
  }

  private tier(tier: number, what: string): void {
    if (!(Number.isInteger(tier) && tier >= 0 && tier < LIMITS.maxTiers)) fail(E.BAD_TIER, tier, what);
  }

  indexStore(id: number, pairs: Uint32Array, tier = 0): void {
    const what = tier === 0 ? "indexStore" : "indexStoreTier";
    this.worker(id, what);
    this.tier(tier, what);
    this.index.storeKeys(id, pairs, this.pairCount(pairs, what), tier);
  }

  indexRemove(id: number, pairs: Uint32Array, tier = 0): void {
    const what = tier === 0 ? "indexRemove" : "indexRemoveTier";
    this.worker(id, what);
    this.tier(tier, what);
    this.index.removeKeys(id, pairs, this.pairCount(pairs, what), tier);
  }

  indexTiers(id: number, hash: Uint32Array): number {
    const w = Number.isInteger(id) && id >= 0 ? this.workers[id] : undefined;
    return w ? this.index.tiersOf(id, hash[0] ?? 0, hash[1] ?? 0) : -1;
  }

  indexLowerCount(id: number): number {
    const w = Number.isInteger(id) && id >= 0 ? this.workers[id] : undefined;
    return w ? this.index.lowerCount(id) : -1;
  }

  setTierWeight(tier: number, weight: number): void {
    if (!(Number.isInteger(tier) && tier >= 0 && tier < LIMITS.maxTiers)) fail(E.BAD_TIER, tier, "setTierWeight");
    if (!(weight >= 0 && weight <= 1) || (tier === Tier.GPU && weight !== 1)) {
      fail(E.BAD_TIER_WEIGHT, weight, "setTierWeight");
    }
    if (tier !== Tier.GPU) this.lowerWeight = weight;
  }

  /** Worker w's cached blocks, each at its tier's weight (assembly/prefix-index/tiers.ts): m − k + k × weight. */
  private weightedBlocks(w: number, m: number, capped: boolean): number {
    const k = this.index.lowerInPrefix(w, this.routePairs, m, this.routeCap);
    const mc = capped ? Math.min(m, this.routeCap) : m;
    const kc = capped ? k.capped : k.all;
    return mc - kc + kc * this.lowerWeight;
  }

  indexClear(id: number): void {
    if (id === -1) {
      for (let w = 0; w < this.span; w++) this.indexClear(w);
      return;
    }
    this.worker(id, "indexClear");
    this.index.clearWorker(id);
  }

  indexCount(id: number): number {
    const w = Number.isInteger(id) && id >= 0 ? this.workers[id] : undefined;
    return w ? w.blocks.size : -1;
  }

  match(pairs: Uint32Array): Uint32Array {
    const n = this.pairCount(pairs, "match");
    const out = new Uint32Array(this.span);
    this.index.matchInto(pairs, n, this.span, out);
    return out;
  }

  // ---- table -------------------------------------------------------------------------------------------

  loadTable(bytes: Uint8Array): void {
    const s = stageTable(decodeTable(bytes));
    this.setTable(s.kind, s.k, s.dims, s.staged, s.oslAt);
  }

  setTable(kind: number, k: number, dims: number, s: Float64Array, oslAt: number): void {
    if (s.length > STAGING_F64) fail(E.TABLE_TOO_LARGE, s.length, "setTable");
    const osl = oslAt >= 0 ? checkOsl(s, oslAt) : null;
    this.policy.table = checkPolicy(kind, k, dims, s);
    this.policy.osl = osl;
  }

  // ---- deciding ----------------------------------------------------------------------------------------

  decideFeatures(isl: number, effP: number, effD: number, oslHat: number, turn: number, ctx: number): Float64Array {
    if (!(isl >= 0 && isl <= MAX_TOKENS)) fail(E.BAD_LENGTH, isl, "decide");
    if (!(effP >= 0 && effP <= isl)) fail(E.BAD_LENGTH, effP, "decide");
    if (!(effD >= 0 && effD <= isl)) fail(E.BAD_LENGTH, effD, "decide");
    if (!(oslHat >= 0 && oslHat <= MAX_TOKENS)) fail(E.BAD_OSL, oslHat, "decide");
    if (turn < 0) fail(E.BAD_TURN, turn, "decide");
    if (Number.isNaN(ctx) || ctx > MAX_TOKENS) fail(E.BAD_LENGTH, ctx, "decide");
    // no workers: no prefill load (not checked) and a decode load of 0, so load bounds never fire here
    this.policy.decide(isl, effP, effD, oslHat, isl - effD, turn, ctx, -1, 0);
    this.decision.fill(0);
    this.writeDecision(this.policy.outBit, -1, -1, isl, effP, effD, oslHat);
    this.decision[Slot.oslClass] = -1;
    this.decision[Slot.loadP] = -1;
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
    const p = this.policy;
    d[Slot.path] = path;
    d[Slot.bit] = p.outBit;
    d[Slot.reason] = path !== p.outBit ? REASON_NO_PREFILL : p.outReason;
    d[Slot.decode] = decode;
    d[Slot.prefill] = prefill;
    d[Slot.cluster] = p.outCluster;
    d[Slot.isl] = isl;
    d[Slot.effP] = effP;
    d[Slot.effD] = effD;
    d[Slot.oslHat] = oslHat;
    d[Slot.score] = p.outScore;
    return d;
  }

  private cost(w: number, isl: number, matched: Uint32Array, tpb: number): number {
    const s = this.workers[w]!;
    const cached = this.weightedBlocks(w, matched[w]!, false) * tpb;
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
    if (!(predict || r.oslHat <= MAX_TOKENS) || Number.isNaN(r.oslHat) || (predict && !this.policy.osl))
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
      pairs = this.hashTextBlocks((r.data as Uint8Array).subarray(0, r.length), "route");
      tpb = TEXT_BLOCK_BYTES / 4;
      isl = r.promptTokens > 0 ? r.promptTokens : Math.ceil(r.length / 4);
    } else {
      pairs = this.hashTokenBlocks((r.data as Uint32Array).subarray(0, r.length));
      tpb = this.blockSize;
      isl = r.length;
    }
    const blocks = pairs.length >>> 1;
    const matched = new Uint32Array(this.span);
    this.index.matchInto(pairs, blocks, this.span, matched);
    let longest = 0;
    for (let w = 0; w < this.span; w++) longest = Math.max(longest, matched[w]!);
    const reuse = blocks > 0 ? longest / blocks : 0;
    // vLLM's rule (assembly/route.ts cacheableBlocks): at most isl − 1 tokens, in whole blocks, come from cache
    this.routePairs = pairs;
    this.routeCap = Math.floor(Math.max(isl - 1, 0) / tpb);
    const oslHat = predict
      ? this.policy.predictOsl(isl, reuse, r.turn, Math.max(r.prevOutputTokens, 0), r.maxTokens)
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
    const cachedD = this.weightedBlocks(decodeWorker, matchedD, true) * tpb;
    const cachedP = prefillWorker >= 0 ? this.weightedBlocks(prefillWorker, matchedP, true) * tpb : 0;
    const effD = isl - cachedD;
    const effP = isl - cachedP;
    // the chosen workers' loads (assembly/workers.ts prefillLoadOf, decodeLoadOf)
    const loadP = prefillWorker >= 0 ? this.workers[prefillWorker]!.prefillLoad : -1;
    const dw = this.workers[decodeWorker]!;
    const loadD = dw.prefillLoad + dw.decodeLoad;
    this.policy.decide(isl, effP, effD, oslHat, cachedD, r.turn, r.contextTokens, loadP, loadD);
    const path = prefillWorker >= 0 ? this.policy.outBit : 0;
    if ((r.flags & Flag.record) !== 0 && blocks > 0) {
      this.index.storeKeys(decodeWorker, pairs, blocks);
      if (path === 1) this.index.storeKeys(prefillWorker, pairs, blocks);
    }
    const d = this.writeDecision(path, decodeWorker, prefillWorker, isl, effP, effD, oslHat);
    d[Slot.matchedD] = matchedD;
    d[Slot.matchedP] = matchedP;
    d[Slot.blocks] = blocks;
    d[Slot.costD] = costD;
    d[Slot.costP] = costP;
    d[Slot.oslClass] = predict ? this.policy.lastOslClass : -1;
    d[Slot.reuse] = reuse;
    d[Slot.loadP] = loadP;
    d[Slot.loadD] = loadD;
    return d;
  }

  scores(k: number): Float64Array {
    return this.policy.lastScores.slice(0, k);
  }

  standardized(dims: number): Float64Array {
    return this.policy.lastStd.slice(0, dims);
  }
}
