// The engine interface both implementations of the hot path satisfy: the WebAssembly core (src/core/core.ts) and
// the plain-TypeScript reference (src/reference/engine.ts). Numbers only: block hashes travel as pairs of u32
// (lo, hi) in a Uint32Array, exactly the little-endian layout of u64s in WebAssembly memory.

// The constants shared with the core are generated from spec/abi.json (build/gen-abi.mjs): never typed here.
import { FEATURES, Kind, LIMITS, OSL_FEATURES, Reason, Role } from "../generated/abi.js";
export {
  ABI_VERSION,
  DECISION_SLOTS,
  EXPORT_NAMES,
  Flag,
  Kind,
  KINDS,
  OSL_FEATURES,
  Reason,
  REQUEST_SLOTS,
  RequestSlot,
  Role,
  Slot,
  type KindDescriptor,
  type ParamDescriptor,
} from "../generated/abi.js";

export type RoleName = keyof typeof Role;
export type KindName = keyof typeof Kind;
export type OslFeatureName = (typeof OSL_FEATURES)[number];
export type ReasonName = (typeof Reason)[number];
export type FeatureName = (typeof FEATURES)[number];

/** Tokens a 64-byte text block stands for (text mode estimates 4 bytes per token). */
export const TEXT_TOKENS_PER_BLOCK = LIMITS.textTokensPerBlock;
export const TEXT_BLOCK_BYTES = LIMITS.textBlockBytes;
export const MAX_K = LIMITS.maxK;
export const STAGING_F64 = LIMITS.stagingF64;
/** A rule's staged parameters: each scalar at its spec "stage" slot, unused slots 0 (spec limits.rule_slots). */
export const RULE_SLOTS = LIMITS.ruleSlots;

export interface CoreConfig {
  /** Worker slots (ids 0…maxWorkers−1). Default 1024. */
  maxWorkers: number;
  /** Input buffer size in bytes: token ids × 4, text bytes, or hashes × 8. Default 4 MiB (1,048,576 tokens). */
  maxInputBytes: number;
  /** Index pool: the most blocks all workers together may hold. Default 1,048,576. */
  indexBlocks: number;
}

export const DEFAULT_CORE_CONFIG: CoreConfig = { maxWorkers: 1024, maxInputBytes: 4 << 20, indexBlocks: 1 << 20 };

export interface RouteInput {
  /** Flag bits: text, hashes, record. */
  flags: number;
  /** token ids (u32), text bytes, or hash pairs (lo, hi) — by flags */
  data: Uint32Array | Uint8Array;
  /** number of items: tokens, bytes, or hashes */
  length: number;
  promptTokens: number;
  /** < 0: predicted by the table's output-length model */
  oslHat: number;
  turn: number;
  /** the session's previous output tokens, for the output-length model (≤ 0 unknown) */
  prevOutputTokens: number;
  /** the request's max_tokens (≤ 0 not given) */
  maxTokens: number;
  pinnedDecode: number;
  contextTokens: number;
}

export interface Engine {
  readonly name: "wasm" | "reference";
  readonly config: CoreConfig;
  setBlockSize(n: number): void;
  /** Root hash from raw bytes (model ‖ "\0" ‖ salt, or nothing). */
  setRoot(bytes: Uint8Array): void;
  /**
   * Block-hash scheme (spec/abi.json hash_schemes: HashScheme) with its root from a hash seed and a model name
   * (xxh64-chain: the root of the two byte strings as one, as setRoot; llm-d-cbor-fnv: llm-d's h_0).
   */
  setHashScheme(scheme: number, seed: Uint8Array, model: Uint8Array): void;
  /**
   * Chained block hashes of token ids, as (lo, hi) pairs: a fresh array, or the first 2 × blocks values of `out`
   * when given (RangeError if it is shorter), so a caller hashing prompt after prompt allocates nothing.
   */
  hashTokens(tokens: ArrayLike<number>, out?: Uint32Array): Uint32Array;
  /** Chained block hashes of UTF-8 text in 64-byte blocks; `out` as for hashTokens. */
  hashText(bytes: Uint8Array, out?: Uint32Array): Uint32Array;
  /**
   * The engine's input buffer as room for `n` token ids (an input-too-large error past its capacity): a caller
   * that writes a prompt's ids here and calls hashInputTokens(n) hashes them where they are, with no copy in (in
   * the WebAssembly engine this is core memory). The view is valid until the next call into the engine.
   */
  inputTokens(n: number): Uint32Array;
  /**
   * The input buffer as room for `n` bytes of UTF-8 text (an input-too-large error past its capacity), e.g. for
   * TextEncoder.encodeInto. Either view, passed back as a route input's data, is routed where it is, without a copy.
   */
  inputText(n: number): Uint8Array;
  /**
   * Chained block hashes of the `n` token ids already in the input buffer (see inputTokens): the first
   * 2 × blocks values of `out` when given, else a view the next call into the engine reuses.
   */
  hashInputTokens(n: number, out?: Uint32Array): Uint32Array;
  setWorker(id: number, role: number, capacityBlocks: number): void;
  setLoad(id: number, activePrefillTokens: number, activeDecodeTokens: number): void;
  setLoadScale(scale: number): void;
  setSignals(prefillQueue: number, qps: number): void;
  /** The worker now holds the blocks in `tier` (Tier: 0 the device, the default; 1 a lower tier, e.g. CPU). */
  indexStore(id: number, pairs: Uint32Array, tier?: number): void;
  /** The worker no longer holds the blocks in `tier`; a block no tier holds is forgotten. */
  indexRemove(id: number, pairs: Uint32Array, tier?: number): void;
  /** The tiers (bits 1 << tier) in which the worker holds the one hash `hash` (a pair); 0 none, −1 a bad worker. */
  indexTiers(id: number, hash: Uint32Array): number;
  /** Blocks the worker holds in a lower tier only, −1 for a bad worker. */
  indexLowerCount(id: number): number;
  /** A lower tier's weight against a device hit, in [0, 1], in the features' and the cost's cached tokens. */
  setTierWeight(tier: number, weight: number): void;
  /** −1 clears every worker. */
  indexClear(id: number): void;
  indexCount(id: number): number;
  /** Longest cached prefix per worker (blocks), for workers 0…span−1 (a fresh array). */
  match(pairs: Uint32Array): Uint32Array;
  /** Sets the table staged in `staged`; an output-length model, if any, is staged from f64 index `oslAt` (< 0: none). */
  setTable(kind: number, k: number, dims: number, staged: Float64Array, oslAt: number): void;
  /**
   * Decodes, validates and activates a table file (msgpack bytes): the core's own decoder (assembly/table/) in the
   * WebAssembly engine, src/table/codec.ts decodeTable + src/table/staging.ts in the reference (the differential oracle).
   * Throws TableError naming the field; the active table is unchanged when it throws.
   */
  loadTable(bytes: Uint8Array): void;
  /** Routes one request; returns the decision record (a view reused by the next call). */
  route(input: RouteInput): Float64Array;
  decideFeatures(
    isl: number,
    effP: number,
    effD: number,
    oslHat: number,
    turn: number,
    contextTokens: number,
  ): Float64Array;
  /** Per-cluster scores of the last decision (distance for k-means, log-likelihood for GMM). */
  scores(k: number): Float64Array;
  /** The standardized feature vector of the last decision. */
  standardized(dims: number): Float64Array;
}
