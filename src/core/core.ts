// The JS ↔ WebAssembly boundary: `createCore(instance)` wraps the raw exports of a core module, whatever
// loaded it (Node file, browser fetch, bundler). Exports are destructured once; typed-array views are rebuilt
// whenever memory has grown (old views detach); u64 values cross as (lo, hi) u32 pairs, never as BigInt.

import { loadTableInCore } from "./core-table.js";
import { CoreError } from "../contract/errors.js";
import {
  ABI_VERSION,
  DECISION_SLOTS,
  EXPORT_NAMES,
  DEFAULT_CORE_CONFIG,
  Flag,
  REQUEST_SLOTS,
  RequestSlot,
  STAGING_F64,
  type CoreConfig,
  type Engine,
  type RouteInput,
} from "../contract/core-api.js";

interface RawExports {
  memory: WebAssembly.Memory;
  abiVersion(): number;
  init(maxWorkers: number, maxInputBytes: number, indexBlocks: number): number;
  errorDetail(): number;
  inputPtr(): number;
  inputCapacity(): number;
  hashesPtr(): number;
  matchedPtr(): number;
  decisionPtr(): number;
  requestPtr(): number;
  stagingPtr(): number;
  scoresPtr(): number;
  standardizedPtr(): number;
  workerSpanNow(): number;
  setBlockSize(n: number): number;
  setRoot(len: number): number;
  setHashScheme(scheme: number, seedLen: number, modelLen: number): number;
  hashTokens(n: number): number;
  hashText(n: number): number;
  match(n: number, fromHashes: number): number;
  setWorker(id: number, role: number, capacity: number): number;
  setLoad(id: number, p: number, d: number): number;
  setLoadScale(s: number): number;
  setSignals(q: number, qps: number): number;
  indexStore(id: number, n: number): number;
  indexRemove(id: number, n: number): number;
  indexStoreTier(id: number, n: number, tier: number): number;
  indexRemoveTier(id: number, n: number, tier: number): number;
  indexTiers(id: number): number;
  indexLowerCount(id: number): number;
  setTierWeight(tier: number, weight: number): number;
  indexClear(id: number): number;
  indexCount(id: number): number;
  setTable(kind: number, k: number, dims: number, oslAt: number): number;
  /** Routes the request described by the request record at requestPtr() (spec/abi.json "request_record"). */
  route(): number;
  loadTable(len: number): number;
  tableErrorPtr(): number;
  tableErrorPathPtr(): number;
  tableInfoPtr(): number;
  tableOslClassesPtr(): number;
  decideFeatures(isl: number, effP: number, effD: number, oslHat: number, turn: number, ctx: number): number;
}

/** What this host calls: the spec's exports it uses (createCore checks the module has every one of the spec's). */
const REQUIRED: readonly string[] = ["memory", ...EXPORT_NAMES];

class WasmEngine implements Engine {
  readonly name = "wasm" as const;
  readonly config: CoreConfig;
  private readonly x: RawExports;
  private buffer: ArrayBuffer | null = null;
  private u8!: Uint8Array;
  private u32!: Uint32Array;
  private f64!: Float64Array;
  private readonly inputPtr: number;
  private readonly inputBytes: number;
  private readonly hashesPtr: number;
  private readonly matchedPtr: number;
  private readonly decisionPtr: number;
  private readonly requestPtr: number;
  private readonly stagingPtr: number;
  private readonly scoresPtr: number;
  private readonly standardizedPtr: number;
  private decisionView!: Float64Array;
  private requestView!: Float64Array;

  constructor(x: RawExports, config: CoreConfig) {
    this.x = x;
    this.config = config;
    this.check(x.init(config.maxWorkers, config.maxInputBytes, config.indexBlocks), "init");
    this.inputPtr = x.inputPtr();
    this.inputBytes = x.inputCapacity();
    this.hashesPtr = x.hashesPtr();
    this.matchedPtr = x.matchedPtr();
    this.decisionPtr = x.decisionPtr();
    this.requestPtr = x.requestPtr();
    this.stagingPtr = x.stagingPtr();
    this.scoresPtr = x.scoresPtr();
    this.standardizedPtr = x.standardizedPtr();
    this.views();
  }

  /** Current views over memory; rebuilt after growth. The stub runtime only grows in init, but stay safe. */
  private views(): void {
    const buf = this.x.memory.buffer;
    if (buf === this.buffer) return;
    this.buffer = buf;
    this.u8 = new Uint8Array(buf);
    this.u32 = new Uint32Array(buf);
    this.f64 = new Float64Array(buf);
    this.decisionView = new Float64Array(buf, this.decisionPtr, DECISION_SLOTS);
    this.requestView = new Float64Array(buf, this.requestPtr, REQUEST_SLOTS);
  }

  private check(rc: number, what: string): void {
    if (rc !== 0) throw new CoreError(rc, this.x.errorDetail(), what);
  }

  private fits(bytes: number, what: string): void {
    if (bytes > this.inputBytes) throw new CoreError(5, bytes, `${what} (${bytes} bytes > ${this.inputBytes})`);
  }

  private writePairs(pairs: Uint32Array, what: string): number {
    if ((pairs.length & 1) !== 0) throw new TypeError(`${what}: hash pairs must have an even length`);
    this.fits(pairs.length * 4, what);
    this.views();
    this.u32.set(pairs, this.inputPtr >>> 2);
    return pairs.length >>> 1;
  }

  /**
   * The first `units` values of `data` into the input buffer, as bytes (`width` 1) or u32s (`width` 4), checked to
   * fit: one TypedArray.set (a memcpy for a typed array; an array converts each value), or nothing when `data`
   * already is the input buffer (inputTokens / inputText).
   */
  private writeInput(data: ArrayLike<number>, units: number, width: 1 | 4, what: string): void {
    this.fits(units * width, what);
    this.views();
    if (this.inInput(data)) return;
    const part = data.length === units ? data : (data as Uint32Array | Uint8Array).subarray(0, units);
    if (width === 1) this.u8.set(part, this.inputPtr);
    else this.u32.set(part, this.inputPtr >>> 2);
  }

  /** Whether `data` already is the start of the input buffer (inputTokens / inputText): nothing to copy. */
  private inInput(data: ArrayLike<number>): boolean {
    return ArrayBuffer.isView(data) && data.buffer === this.buffer && data.byteOffset === this.inputPtr;
  }

  /**
   * The `blocks` hash pairs the core just wrote: into `out` when given (no allocation), else a copy (`fresh`) or a
   * view of core memory that the next call reuses.
   */
  private hashPairs(blocks: number, out: Uint32Array | undefined, fresh: boolean, what: string): Uint32Array {
    this.views();
    const at = this.hashesPtr >>> 2;
    const end = at + 2 * blocks;
    if (out === undefined) return fresh ? this.u32.slice(at, end) : this.u32.subarray(at, end);
    if (out.length < 2 * blocks)
      throw new RangeError(`${what}: out must hold at least ${2 * blocks} u32 values (2 per block), got ${out.length}`);
    out.set(this.u32.subarray(at, end));
    return out.length === 2 * blocks ? out : out.subarray(0, 2 * blocks);
  }

  /** Checks `n` values of `width` bytes fit the input buffer: the room inputTokens / inputText hand out. */
  private inputRoom(n: number, width: 1 | 4, what: string): void {
    if (!Number.isInteger(n) || n < 0) throw new CoreError(6, n, what);
    this.fits(n * width, what);
  }

  setBlockSize(n: number): void {
    this.check(this.x.setBlockSize(n), "setBlockSize");
  }

  setRoot(bytes: Uint8Array): void {
    this.fits(bytes.length, "setRoot");
    this.views();
    this.u8.set(bytes, this.inputPtr);
    this.check(this.x.setRoot(bytes.length), "setRoot");
  }

  setHashScheme(scheme: number, seed: Uint8Array, model: Uint8Array): void {
    this.fits(seed.length + model.length, "setHashScheme");
    this.views();
    this.u8.set(seed, this.inputPtr);
    this.u8.set(model, this.inputPtr + seed.length);
    this.check(this.x.setHashScheme(scheme, seed.length, model.length), "setHashScheme");
  }

  hashTokens(tokens: ArrayLike<number>, out?: Uint32Array): Uint32Array {
    this.writeInput(tokens, tokens.length, 4, "hashTokens");
    const n = this.x.hashTokens(tokens.length);
    if (n < 0) this.check(-n, "hashTokens");
    return this.hashPairs(n, out, true, "hashTokens");
  }

  hashText(bytes: Uint8Array, out?: Uint32Array): Uint32Array {
    this.writeInput(bytes, bytes.length, 1, "hashText");
    const n = this.x.hashText(bytes.length);
    if (n < 0) this.check(-n, "hashText");
    return this.hashPairs(n, out, true, "hashText");
  }

  inputTokens(n: number): Uint32Array {
    this.inputRoom(n, 4, "inputTokens");
    this.views();
    const at = this.inputPtr >>> 2;
    return this.u32.subarray(at, at + n);
  }

  inputText(n: number): Uint8Array {
    this.inputRoom(n, 1, "inputText");
    this.views();
    return this.u8.subarray(this.inputPtr, this.inputPtr + n);
  }

  hashInputTokens(n: number, out?: Uint32Array): Uint32Array {
    this.inputRoom(n, 4, "hashInputTokens");
    const blocks = this.x.hashTokens(n);
    if (blocks < 0) this.check(-blocks, "hashInputTokens");
    return this.hashPairs(blocks, out, false, "hashInputTokens");
  }

  setWorker(id: number, role: number, capacityBlocks: number): void {
    this.check(this.x.setWorker(id, role, capacityBlocks), "setWorker");
  }
  setLoad(id: number, p: number, d: number): void {
    this.check(this.x.setLoad(id, p, d), "setLoad");
  }
  setLoadScale(scale: number): void {
    this.check(this.x.setLoadScale(scale), "setLoadScale");
  }
  setSignals(q: number, qps: number): void {
    this.check(this.x.setSignals(q, qps), "setSignals");
  }

  indexStore(id: number, pairs: Uint32Array, tier = 0): void {
    if (tier === 0) {
      const n = this.writePairs(pairs, "indexStore");
      this.check(this.x.indexStore(id, n), "indexStore");
      return;
    }
    const n = this.writePairs(pairs, "indexStoreTier");
    this.check(this.x.indexStoreTier(id, n, tier), "indexStoreTier");
  }
  indexRemove(id: number, pairs: Uint32Array, tier = 0): void {
    if (tier === 0) {
      const n = this.writePairs(pairs, "indexRemove");
      this.check(this.x.indexRemove(id, n), "indexRemove");
      return;
    }
    const n = this.writePairs(pairs, "indexRemoveTier");
    this.check(this.x.indexRemoveTier(id, n, tier), "indexRemoveTier");
  }
  indexTiers(id: number, hash: Uint32Array): number {
    this.writePairs(hash.subarray(0, 2), "indexTiers");
    return this.x.indexTiers(id);
  }
  indexLowerCount(id: number): number {
    return this.x.indexLowerCount(id);
  }
  setTierWeight(tier: number, weight: number): void {
    this.check(this.x.setTierWeight(tier, weight), "setTierWeight");
  }
  indexClear(id: number): void {
    this.check(this.x.indexClear(id), "indexClear");
  }
  indexCount(id: number): number {
    return this.x.indexCount(id);
  }

  match(pairs: Uint32Array): Uint32Array {
    const n = this.writePairs(pairs, "match");
    const rc = this.x.match(n, 0);
    if (rc < 0) this.check(-rc, "match");
    this.views();
    const at = this.matchedPtr >>> 2;
    return this.u32.slice(at, at + this.x.workerSpanNow());
  }

  setTable(kind: number, k: number, dims: number, staged: Float64Array, oslAt: number): void {
    if (staged.length > STAGING_F64) throw new CoreError(25, staged.length, "setTable");
    this.views();
    this.f64.set(staged, this.stagingPtr >>> 3);
    this.check(this.x.setTable(kind, k, dims, oslAt), "setTable");
  }

  loadTable(bytes: Uint8Array): void {
    this.views();
    loadTableInCore(this.x, bytes);
  }

  route(r: RouteInput): Float64Array {
    const x = this.x;
    // the input is copied into core memory unless the caller wrote it there (inputTokens / inputText)
    if ((r.flags & Flag.text) !== 0) this.writeInput(r.data, r.length, 1, "route");
    else if ((r.flags & Flag.hashes) !== 0) this.writeInput(r.data, 2 * r.length, 4, "route");
    else this.writeInput(r.data, r.length, 4, "route");
    const q = this.requestView;
    q[RequestSlot.length] = r.length;
    q[RequestSlot.flags] = r.flags;
    q[RequestSlot.promptTokens] = r.promptTokens;
    q[RequestSlot.oslHat] = r.oslHat;
    q[RequestSlot.turn] = r.turn;
    q[RequestSlot.pinnedDecode] = r.pinnedDecode;
    q[RequestSlot.contextTokens] = r.contextTokens;
    q[RequestSlot.prevOutputTokens] = r.prevOutputTokens;
    q[RequestSlot.maxTokens] = r.maxTokens;
    const rc = x.route();
    if (rc !== 0) this.check(rc, "route");
    return this.decisionView;
  }

  decideFeatures(isl: number, effP: number, effD: number, oslHat: number, turn: number, ctx: number): Float64Array {
    const rc = this.x.decideFeatures(isl, effP, effD, oslHat, turn, ctx);
    if (rc !== 0) this.check(rc, "decide");
    return this.decisionView;
  }

  scores(k: number): Float64Array {
    this.views();
    return this.f64.slice(this.scoresPtr >>> 3, (this.scoresPtr >>> 3) + k);
  }

  standardized(dims: number): Float64Array {
    this.views();
    return this.f64.slice(this.standardizedPtr >>> 3, (this.standardizedPtr >>> 3) + dims);
  }
}

/** Imports a core module may ask for: the debug build's env.abort (message from AssemblyScript's string layout). */
export function coreImports(getMemory: () => WebAssembly.Memory | undefined): WebAssembly.Imports {
  return {
    env: {
      abort(msgPtr: number, filePtr: number, line: number, column: number): never {
        const memory = getMemory();
        const read = (ptr: number): string => {
          if (!memory || ptr === 0) return "";
          const len = new Uint32Array(memory.buffer, ptr - 4, 1)[0]! >>> 1;
          return String.fromCharCode(...new Uint16Array(memory.buffer, ptr, len));
        };
        throw new Error(`core abort: ${read(msgPtr)} at ${read(filePtr)}:${line}:${column}`);
      },
    },
  };
}

/** Instantiates a compiled core module synchronously with the imports it needs. */
export function instantiateCore(module: WebAssembly.Module): WebAssembly.Instance {
  let instance: WebAssembly.Instance | undefined;
  instance = new WebAssembly.Instance(
    module,
    coreImports(() => instance?.exports["memory"] as WebAssembly.Memory | undefined),
  );
  return instance;
}

/** Throws unless a core module implements the contract this host was generated from (spec/abi.json). */
export function checkAbiVersion(moduleVersion: number): void {
  if (moduleVersion !== ABI_VERSION) {
    throw new TypeError(
      `createCore: the core module implements ABI version ${moduleVersion}, but this host expects ABI ` +
        `version ${ABI_VERSION} (rebuild the core and the host from the same spec/abi.json: npm run build)`,
    );
  }
}

/** Wraps a core instance. Throws if the instance is not a dolphin-routing core. */
export function createCore(instance: WebAssembly.Instance, config: Partial<CoreConfig> = {}): Engine {
  const x = instance.exports as unknown as RawExports;
  for (const name of REQUIRED) {
    if (!(name in x))
      throw new TypeError(`createCore: the module does not export "${name}" (not a dolphin-routing core?)`);
  }
  checkAbiVersion(x.abiVersion());
  return new WasmEngine(x, { ...DEFAULT_CORE_CONFIG, ...config });
}
