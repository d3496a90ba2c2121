// The engine interface both implementations of the hot path satisfy: the WebAssembly core (src/core.ts) and
// the plain-TypeScript reference (src/reference/engine.ts). Numbers only: block hashes travel as pairs of u32
// (lo, hi) in a Uint32Array, exactly the little-endian layout of u64s in WebAssembly memory.

export const Role = { none: 0, prefill: 1, decode: 2, both: 3 } as const;
export type RoleName = keyof typeof Role;

export const Kind = {
  kmeans: 1, gmm: 2, "dynamo-isl": 3, "dynamo-load": 4, "dynamo-legacy": 5, trtllm: 6, "llm-d": 7,
  "always-local": 8, "always-remote": 9, ppd: 10,
} as const;

export const Flag = { text: 1, hashes: 2, record: 4 } as const;

/** Slots of the decision record (Float64Array of DECISION_SLOTS). */
export const Slot = {
  path: 0, bit: 1, reason: 2, decode: 3, prefill: 4, cluster: 5, isl: 6, effP: 7, effD: 8, oslHat: 9,
  matchedD: 10, matchedP: 11, blocks: 12, score: 13, costD: 14, costP: 15, oslClass: 16, reuse: 17,
} as const;
export const DECISION_SLOTS = 18;

/** Features of the output-length model, by index (assembly/osl.ts). */
export const OSL_FEATURES = ["log_isl", "prefix_reuse", "log_turn", "log_prev_output", "log_max_tokens", "has_max_tokens"] as const;
export type OslFeatureName = (typeof OSL_FEATURES)[number];

export const Reason = ["cluster", "rule", "first-turn", "no-prefill-worker"] as const;
export type ReasonName = (typeof Reason)[number];

/** Tokens a 64-byte text block stands for (text mode estimates 4 bytes per token). */
export const TEXT_TOKENS_PER_BLOCK = 16;
export const TEXT_BLOCK_BYTES = 64;
export const MAX_K = 256;
export const STAGING_F64 = 4096;

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
  /** Chained block hashes of token ids, as (lo, hi) pairs (a fresh array). */
  hashTokens(tokens: ArrayLike<number>): Uint32Array;
  hashText(bytes: Uint8Array): Uint32Array;
  setWorker(id: number, role: number, capacityBlocks: number): void;
  setLoad(id: number, activePrefillTokens: number, activeDecodeTokens: number): void;
  setLoadScale(scale: number): void;
  setSignals(prefillQueue: number, qps: number): void;
  indexStore(id: number, pairs: Uint32Array): void;
  indexRemove(id: number, pairs: Uint32Array): void;
  /** −1 clears every worker. */
  indexClear(id: number): void;
  indexCount(id: number): number;
  /** Longest cached prefix per worker (blocks), for workers 0…span−1 (a fresh array). */
  match(pairs: Uint32Array): Uint32Array;
  /** Sets the table staged in `staged`; an output-length model, if any, is staged from f64 index `oslAt` (< 0: none). */
  setTable(kind: number, k: number, dims: number, staged: Float64Array, oslAt: number): void;
  /** Routes one request; returns the decision record (a view reused by the next call). */
  route(input: RouteInput): Float64Array;
  decideFeatures(isl: number, effP: number, effD: number, oslHat: number, turn: number, contextTokens: number): Float64Array;
  /** Per-cluster scores of the last decision (distance for k-means, log-likelihood for GMM). */
  scores(k: number): Float64Array;
  /** The standardized feature vector of the last decision. */
  standardized(dims: number): Float64Array;
}
