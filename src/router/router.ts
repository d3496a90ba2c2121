// The API users touch: a Router holds one engine (the WebAssembly core, or the TypeScript reference), the
// workers by name, and one table. `route(request)` is one call into the core; `explain(request)` says why.
// No Node-only imports: the same file serves Node, the browser explorer and tests.

import {
  DEFAULT_CORE_CONFIG,
  Flag,
  Kind,
  Reason,
  Role,
  Slot,
  type Engine,
  type RouteInput,
} from "../contract/core-api.js";
import { HashScheme, Tier } from "../generated/abi.js";
import { createCore, instantiateCore } from "../core/core.js";
import { toPairs, type HashesInput } from "../hashing/hashes.js";
import { ReferenceEngine } from "../reference/engine.js";
import { stageTable } from "../table/staging.js";
import { decodeTable } from "../table/codec.js";
import type { Table } from "../table/table.js";
import { validateTable } from "../table/validate.js";
import { explainWhy } from "./explain.js";
import { CompatibilityGroups } from "./pairing.js";
import type { Decision, Explanation, RouteRequest, RouterOptions, TierName, WorkerSpec } from "./types.js";

type ModuleProvider = () => Promise<WebAssembly.Module>;
let defaultModule: ModuleProvider | null = null;

/** Runtime entries (bindings/node, bindings/browser) register how to find the core. */
export function setDefaultModuleProvider(provider: ModuleProvider): void {
  defaultModule = provider;
}

const encoder = new TextEncoder();
const NO_DATA = new Uint32Array(0);
const DEFAULT_CAPACITY = 31_250;

/** A tier name's code (spec/abi.json tiers), or a TypeError naming it. */
function tierCode(tier: string): number {
  if (!Object.hasOwn(Tier, tier))
    throw new TypeError(`router: unknown tier ${JSON.stringify(tier)} (tiers: ${Object.keys(Tier).join(", ")})`);
  return Tier[tier as TierName];
}

export class Router {
  readonly engine: Engine;
  private tableValue: Table;
  private readonly ids: string[] = [];
  private readonly byId = new Map<string, number>();
  private readonly free: number[] = [];
  /** The workers' compatibility groups: a remote prefill is paired only within one (pairing.ts). */
  private readonly groups = new CompatibilityGroups();
  private readonly record: boolean;
  private readonly capacity: number;
  private tokenScratch = new Uint32Array(0);
  private readonly routeInput: RouteInput = {
    flags: 0,
    data: NO_DATA,
    length: 0,
    promptTokens: 0,
    oslHat: 0,
    turn: 1,
    pinnedDecode: -1,
    contextTokens: -1,
    prevOutputTokens: 0,
    maxTokens: 0,
  };

  /** Loads a table (msgpack bytes or a Table) into a new router. */
  static async load(table: Uint8Array | Table, options: RouterOptions): Promise<Router> {
    let module = options.module;
    if (!module && (options.engine ?? "wasm") === "wasm") {
      if (!defaultModule)
        throw new Error(
          "Router.load: no core module given and no runtime entry registered one (import 'dolphin-routing')",
        );
      module = await defaultModule();
    }
    return Router.create(table, { ...options, ...(module ? { module } : {}) });
  }

  /** Synchronous construction when the module is at hand. */
  static create(table: Uint8Array | Table, options: RouterOptions): Router {
    const capacity = options.capacityBlocks ?? DEFAULT_CAPACITY;
    if (!Number.isInteger(capacity) || capacity < 0)
      throw new RangeError(`router: capacityBlocks must be an integer ≥ 0, got ${capacity}`);
    const sum = options.workers.reduce((s, w) => s + (w.capacityBlocks ?? capacity), 0);
    const maxPromptTokens = options.maxPromptTokens ?? DEFAULT_CORE_CONFIG.maxInputBytes / 4;
    if (!Number.isInteger(maxPromptTokens) || maxPromptTokens < 16 || maxPromptTokens > 1 << 26) {
      throw new RangeError(`router: maxPromptTokens must be an integer in 16–67,108,864, got ${maxPromptTokens}`);
    }
    const config = {
      maxWorkers: options.maxWorkers ?? DEFAULT_CORE_CONFIG.maxWorkers,
      maxInputBytes: maxPromptTokens * 4,
      indexBlocks: options.indexBlocks ?? Math.max(DEFAULT_CORE_CONFIG.indexBlocks, sum),
    };
    let engine: Engine;
    if ((options.engine ?? "wasm") === "reference") engine = new ReferenceEngine(config);
    else {
      if (!options.module)
        throw new Error("Router.create: options.module (the compiled core) is required for the wasm engine");
      engine = createCore(instantiateCore(options.module), config);
    }
    return new Router(engine, table, options, capacity);
  }

  private constructor(engine: Engine, table: Uint8Array | Table, options: RouterOptions, capacity: number) {
    this.engine = engine;
    this.record = options.recordDecisions ?? false;
    this.capacity = capacity;
    if (options.blockSize !== undefined) engine.setBlockSize(options.blockSize);
    this.setScheme(engine, options);
    if (options.loadScale !== undefined) engine.setLoadScale(options.loadScale);
    for (const [name, weight] of Object.entries(options.tierWeights ?? {})) {
      if (!Object.hasOwn(Tier, name))
        throw new TypeError(`router: tierWeights: unknown tier "${name}" (tiers: ${Object.keys(Tier).join(", ")})`);
      if (weight !== undefined) engine.setTierWeight(Tier[name as TierName], weight);
    }
    for (const w of options.workers) this.addWorker(w);
    this.tableValue = this.applyTable(table, null);
  }

  private setScheme(engine: Engine, options: RouterOptions): void {
    const scheme = options.hashScheme ?? "xxh64-chain";
    if (!Object.hasOwn(HashScheme, scheme))
      throw new TypeError(
        `hashScheme: expected ${Object.keys(HashScheme).join(" or ")}, got ${JSON.stringify(scheme)}`,
      );
    if (scheme === "xxh64-chain") {
      if (options.hashSeed !== undefined) throw new TypeError("hashSeed: only the llm-d-cbor-fnv hash scheme has one");
      if (options.model || options.salt)
        engine.setRoot(encoder.encode(`${options.model ?? ""}\0${options.salt ?? ""}`));
      return;
    }
    if (options.salt) throw new TypeError("salt: the llm-d-cbor-fnv hash scheme has no cache salt (use hashSeed)");
    engine.setHashScheme(
      HashScheme[scheme],
      encoder.encode(options.hashSeed ?? ""),
      encoder.encode(options.model ?? ""),
    );
  }

  get table(): Table {
    return this.tableValue;
  }

  /** Swaps the table atomically: a table the core rejects leaves the old one in place. */
  setTable(table: Uint8Array | Table): void {
    this.tableValue = this.applyTable(table, this.tableValue);
  }

  /**
   * Makes `table` active in the engine and returns it as a Table. A file (bytes) goes through the engine's own
   * decoder (the core's, in WebAssembly), whose error is the one the caller sees; the Router then reads the same
   * bytes in TypeScript for what it shows (explain, describe). Should that disagree with the core (a bug the
   * differential tests hunt), the previous table is put back and the error is thrown. A Table object is validated
   * and staged in TypeScript (the learner's in-memory tables).
   */
  private applyTable(table: Uint8Array | Table, previous: Table | null): Table {
    if (!(table instanceof Uint8Array)) {
      const t = validateTable(table);
      const s = stageTable(t);
      this.engine.setTable(s.kind, s.k, s.dims, s.staged, s.oslAt);
      return t;
    }
    this.engine.loadTable(table);
    try {
      return decodeTable(table);
    } catch (e) {
      if (previous) {
        const s = stageTable(previous);
        this.engine.setTable(s.kind, s.k, s.dims, s.staged, s.oslAt);
      }
      throw e;
    }
  }

  // ---- workers -----------------------------------------------------------------------------------------

  get workerIds(): readonly string[] {
    return this.ids.filter((id) => id !== "");
  }

  addWorker(spec: WorkerSpec): void {
    if (typeof spec.id !== "string" || spec.id === "")
      throw new TypeError("router: worker id must be a non-empty string");
    if (this.byId.has(spec.id)) throw new Error(`router: worker "${spec.id}" already exists`);
    const role = Role[spec.role];
    if (role === undefined || role === 0)
      throw new TypeError(
        `router: worker "${spec.id}": role must be prefill, decode or both, got ${String(spec.role)}`,
      );
    const index = this.free.length > 0 ? this.free.pop()! : this.ids.length;
    if (index >= this.engine.config.maxWorkers)
      throw new RangeError(`router: more than maxWorkers (${this.engine.config.maxWorkers}) workers`);
    const capacity = spec.capacityBlocks ?? this.capacity;
    this.engine.setWorker(index, role, capacity);
    this.groups.add(index, spec.group ?? "", role, capacity);
    this.ids[index] = spec.id;
    this.byId.set(spec.id, index);
  }

  /** Moves a worker to another compatibility group (its index, role and load stay). */
  setWorkerGroup(id: string, group: string): void {
    const index = this.indexOf(id);
    const role = this.groups.roleOf(index);
    const capacity = this.groups.capacityOf(index);
    this.groups.remove(index);
    this.groups.add(index, group, role, capacity);
  }

  removeWorker(id: string): void {
    const index = this.indexOf(id);
    this.engine.setWorker(index, 0, 0);
    this.groups.remove(index);
    this.byId.delete(id);
    this.ids[index] = "";
    this.free.push(index);
  }

  private indexOf(id: string): number {
    const i = this.byId.get(id);
    if (i === undefined) throw new Error(`router: unknown worker "${id}"`);
    return i;
  }

  setLoad(id: string, load: { activePrefillTokens?: number; activeDecodeTokens?: number }): void {
    this.engine.setLoad(this.indexOf(id), load.activePrefillTokens ?? 0, load.activeDecodeTokens ?? 0);
  }

  setSignals(signals: { prefillQueue?: number; qps?: number }): void {
    this.engine.setSignals(signals.prefillQueue ?? 0, signals.qps ?? 0);
  }

  /** The prefix index, fed by KV events (precise mode) or by the router's own decisions. */
  readonly index = {
    /** The worker holds these blocks in `tier` (default "GPU", the device). */
    store: (worker: string, hashes: HashesInput, tier: TierName = "GPU"): void =>
      this.engine.indexStore(this.indexOf(worker), toPairs(hashes), tierCode(tier)),
    /** The worker no longer holds these blocks in `tier`; a block no tier holds is forgotten. */
    remove: (worker: string, hashes: HashesInput, tier: TierName = "GPU"): void =>
      this.engine.indexRemove(this.indexOf(worker), toPairs(hashes), tierCode(tier)),
    /** The tiers in which the worker holds one block hash. */
    tiers: (worker: string, hash: HashesInput): TierName[] => {
      const bits = this.engine.indexTiers(this.indexOf(worker), toPairs(hash));
      return (Object.keys(Tier) as TierName[]).filter((t) => (bits & (1 << Tier[t])) !== 0);
    },
    /** Blocks the worker holds in a lower tier only. */
    lowerCount: (worker: string): number => this.engine.indexLowerCount(this.indexOf(worker)),
    clear: (worker?: string): void => this.engine.indexClear(worker === undefined ? -1 : this.indexOf(worker)),
    count: (worker: string): number => this.engine.indexCount(this.indexOf(worker)),
    /** Longest cached prefix (blocks) of these hashes on every worker. */
    match: (hashes: HashesInput): Record<string, number> => {
      const m = this.engine.match(toPairs(hashes));
      const out: Record<string, number> = {};
      for (let i = 0; i < this.ids.length; i++) if (this.ids[i]) out[this.ids[i]!] = m[i] ?? 0;
      return out;
    },
  };

  /** Chained block hashes of a prompt under this router's block size and root, as (lo, hi) pairs. */
  hash(request: Pick<RouteRequest, "tokens" | "text">): Uint32Array {
    if (request.text !== undefined)
      return this.engine.hashText(typeof request.text === "string" ? encoder.encode(request.text) : request.text);
    if (request.tokens !== undefined) return this.engine.hashTokens(request.tokens);
    throw new TypeError("router.hash: give tokens or text");
  }

  // ---- routing -----------------------------------------------------------------------------------------

  route(request: RouteRequest): Decision {
    return this.toDecision(this.paired(request, this.record));
  }

  explain(request: RouteRequest): Explanation {
    const d = this.toDecision(this.paired(request, false));
    const t = this.tableValue;
    const learned = t.kind === "kmeans" || t.kind === "gmm";
    const k = learned ? (t.centroids?.length ?? 0) : 0;
    const scores = Array.from(this.engine.scores(k));
    const standardized = learned ? Array.from(this.engine.standardized(t.features?.length ?? 0)) : [];
    return {
      decision: d,
      kind: t.kind,
      featureNames: learned ? [...(t.features ?? [])] : [],
      standardized,
      scores,
      bits: learned ? [...(t.bits ?? [])] : [],
      why: explainWhy(t, d, scores),
    };
  }

  /** osl_hat for the core: given, from a class, or −1 to let the table's output-length model predict it. */
  private oslHatOf(r: RouteRequest): number {
    if (r.oslHat !== undefined) {
      if (!(r.oslHat >= 0)) throw new RangeError(`route: oslHat must be a number ≥ 0, got ${r.oslHat}`);
      return r.oslHat;
    }
    const classes = this.tableValue.osl_classes;
    if (r.oslClass !== undefined) {
      if (!classes) throw new Error("route: oslClass given but the table has no osl_classes");
      const i = typeof r.oslClass === "number" ? r.oslClass : classes.names.indexOf(r.oslClass);
      const rep = classes.representative[i];
      if (rep === undefined)
        throw new RangeError(
          `route: unknown oslClass ${JSON.stringify(r.oslClass)} (table classes: ${classes.names.join(", ")})`,
        );
      return rep;
    }
    if (this.tableValue.osl_model) return -1;
    if (this.tableValue.features?.includes("osl_hat")) {
      throw new Error("route: this table uses osl_hat and has no output-length model: give oslHat or oslClass");
    }
    return 0;
  }

  /**
   * One decision whose prefill worker is in the decode worker's compatibility group (pairing.ts). With one group, the
   * core's call as it is; with several, the decode worker chosen first (a call that records nothing), then the
   * decision with it pinned and the other groups' workers out of the prefill role.
   */
  private paired(r: RouteRequest, record: boolean): Float64Array {
    if (!this.groups.mixed) return this.run(r, record);
    let pinned = r.decodeWorker;
    if (pinned === undefined) {
      const probe = this.run(r, false);
      const decode = probe[Slot.decode]!;
      const prefill = probe[Slot.prefill]!;
      const compatible = prefill < 0 || this.groups.compatible(decode, prefill);
      if (compatible && !record) return probe;
      pinned = this.ids[decode]!;
      // the same decision again, now recorded (nothing changed in between)
      if (compatible) return this.run({ ...r, decodeWorker: pinned }, record);
    }
    const request = pinned === r.decodeWorker ? r : { ...r, decodeWorker: pinned };
    return this.groups.within(this.engine, this.groups.groupOf(this.indexOf(pinned)), () => this.run(request, record));
  }

  private run(r: RouteRequest, record: boolean): Float64Array {
    if (r === null || typeof r !== "object") throw new TypeError("route: request must be an object");
    let flags = record ? Flag.record : 0;
    let data: Uint32Array | Uint8Array;
    let length: number;
    const given =
      (r.tokens !== undefined ? 1 : 0) + (r.text !== undefined ? 1 : 0) + (r.blockHashes !== undefined ? 1 : 0);
    if (given !== 1) throw new TypeError("route: give exactly one of tokens, text or blockHashes");
    if (r.text !== undefined) {
      data = typeof r.text === "string" ? this.utf8(r.text) : r.text;
      length = data.length;
      flags |= Flag.text;
    } else if (r.blockHashes !== undefined) {
      data = toPairs(r.blockHashes, "route: blockHashes");
      length = data.length >>> 1;
      flags |= Flag.hashes;
    } else {
      data = this.tokensOf(r.tokens!);
      length = r.tokens!.length;
    }
    const pinned = r.decodeWorker === undefined ? -1 : this.indexOf(r.decodeWorker);
    // one record reused by every call (the engine reads it before returning)
    const q = this.routeInput;
    q.flags = flags;
    q.data = data;
    q.length = length;
    q.promptTokens = r.promptTokens ?? 0;
    q.oslHat = this.oslHatOf(r);
    q.turn = r.turn ?? 1;
    q.pinnedDecode = pinned;
    q.contextTokens = r.contextTokens ?? -1;
    q.prevOutputTokens = r.prevOutputTokens ?? 0;
    q.maxTokens = r.maxTokens ?? 0;
    const decision = this.engine.route(q);
    q.data = NO_DATA; // keep no caller's prompt alive between calls
    return decision;
  }

  /**
   * A prompt's UTF-8 bytes, encoded straight into the engine's input buffer (TextEncoder.encodeInto: no array
   * made, nothing copied to route it). UTF-8 takes at most 3 bytes per UTF-16 unit; a text that does not fit the
   * buffer is encoded on its own, and the engine reports its length as before.
   */
  private utf8(text: string): Uint8Array {
    const into = this.engine.inputText(Math.min(3 * text.length, this.engine.config.maxInputBytes));
    const { read, written } = encoder.encodeInto(text, into);
    return read === text.length ? into.subarray(0, written) : encoder.encode(text);
  }

  /**
   * Token ids as a Uint32Array, checking each is an integer in u32 range (no silent wrap-around). An array is
   * written straight into the engine's input buffer (one pass, nothing copied to route it) when it fits, else
   * into a scratch array, and the engine reports its length as before.
   */
  private tokensOf(tokens: ArrayLike<number>): Uint32Array {
    if (tokens instanceof Uint32Array) return tokens;
    if (typeof tokens !== "object" || tokens === null || typeof tokens.length !== "number")
      throw new TypeError("route: tokens must be an array of token ids");
    let out: Uint32Array;
    if (tokens.length <= this.engine.config.maxInputBytes >>> 2) out = this.engine.inputTokens(tokens.length);
    else {
      if (this.tokenScratch.length < tokens.length)
        this.tokenScratch = new Uint32Array(Math.max(tokens.length, 2 * this.tokenScratch.length));
      out = this.tokenScratch.subarray(0, tokens.length);
    }
    for (let i = 0; i < tokens.length; i++) {
      const t = tokens[i]!;
      if (!(Number.isInteger(t) && t >= 0 && t <= 0xffffffff))
        throw new TypeError(`route: tokens[${i}] is not a token id (integer 0–2^32−1): ${String(t)}`);
      out[i] = t;
    }
    return out;
  }

  private toDecision(d: Float64Array): Decision {
    const prefill = d[Slot.prefill]!;
    const cluster = d[Slot.cluster]!;
    return {
      path: d[Slot.path] === 1 ? "remote" : "local",
      bit: d[Slot.bit] === 1 ? 1 : 0,
      reason: Reason[d[Slot.reason]!] ?? "rule",
      decodeWorker: this.ids[d[Slot.decode]!] ?? "",
      prefillWorker: prefill >= 0 ? (this.ids[prefill] ?? null) : null,
      cluster: cluster >= 0 ? cluster : null,
      features: { isl: d[Slot.isl]!, effP: d[Slot.effP]!, effD: d[Slot.effD]!, oslHat: d[Slot.oslHat]! },
      matchedBlocks: { decode: d[Slot.matchedD]!, prefill: d[Slot.matchedP]! },
      blocks: d[Slot.blocks]!,
      oslClass: d[Slot.oslClass]! >= 0 ? d[Slot.oslClass]! : null,
      reuse: d[Slot.reuse]!,
      cost: { decode: d[Slot.costD]!, prefill: d[Slot.costP]! },
      load: { prefill: d[Slot.loadP]! >= 0 ? d[Slot.loadP]! : null, decode: d[Slot.loadD]! },
    };
  }
}

export { Kind };
