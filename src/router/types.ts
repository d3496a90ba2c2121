// What a Router is given and what it gives back: the workers and options it is built with, a request, and the
// decision and explanation `route` and `explain` return. Types only, shared by the Router, the explain text and
// every host that routes.

import type { ReasonName, RoleName } from "../contract/core-api.js";
import type { HashScheme, Tier } from "../generated/abi.js";
import type { HashesInput } from "../hashing/hashes.js";
import type { Table } from "../table/table.js";

export type HashSchemeName = keyof typeof HashScheme;
/** A cache tier (spec/abi.json tiers): the medium a KV event names. */
export type TierName = keyof typeof Tier;

export interface WorkerSpec {
  /** The name the host uses (URL, pod name, engine id). */
  id: string;
  role: RoleName;
  /** Blocks the index keeps for this worker (LRU beyond). Default: options.capacityBlocks. */
  capacityBlocks?: number;
  /**
   * Compatibility group: a remote prefill goes only to a worker of the decode worker's group (engines that can hand
   * KV over: one model, revision, dtype and layout). Default "" (one group for every worker).
   */
  group?: string;
}

export interface RouterOptions {
  workers: WorkerSpec[];
  /** Tokens per block in token and hash modes (1–4096). Default 16. */
  blockSize?: number;
  /** Root of the hash chain: xxh64(model ‖ "\0" ‖ salt), or llm-d's h_0 of hashSeed and model. Default: neither. */
  model?: string;
  salt?: string;
  /**
   * Block-hash scheme (spec/abi.json hash_schemes). Default "xxh64-chain". "llm-d-cbor-fnv" is llm-d-kv-cache
   * v0.9.0's TokenProcessor, bit for bit (token prompts only; no salt): the hashes llm-d's index and KV-event
   * pipeline compute from token ids.
   */
  hashScheme?: HashSchemeName;
  /** llm-d's HashSeed (vLLM's PYTHONHASHSEED), for "llm-d-cbor-fnv". Default "". */
  hashSeed?: string;
  /** Store each routed prompt on the chosen workers (approximate mode, when no KV events feed the index). */
  recordDecisions?: boolean;
  /** Default per-worker index capacity in blocks. Default 31,250 (GIE's LRU size per pod). */
  capacityBlocks?: number;
  /** Dynamo-style weight of prefill work against decode load in worker choice. Default 1. */
  loadScale?: number;
  /**
   * What a block held only in a lower cache tier counts for against a device hit (0–1), by tier name (spec/abi.json
   * tiers: GPU, fixed at 1; CPU), in the cached tokens of the features and of the worker cost. Default: CPU 0.8
   * (llm-d's KV-block scorer).
   */
  tierWeights?: Partial<Record<TierName, number>>;
  /** Worker slots. Default 1024. */
  maxWorkers?: number;
  /** Longest prompt in tokens (text: bytes / 4). Default 1,048,576. */
  maxPromptTokens?: number;
  /** Index pool shared by all workers, in blocks. Default max(1,048,576, sum of capacities). */
  indexBlocks?: number;
  /** Which hot path: the WebAssembly core (default) or the plain-TypeScript reference. */
  engine?: "wasm" | "reference";
  /** The compiled core (otherwise the runtime entry's default loader provides it). */
  module?: WebAssembly.Module;
}

export interface RouteRequest {
  /** Token ids of the prompt (token mode). */
  tokens?: ArrayLike<number>;
  /** The prompt as text (text mode, 64-byte blocks). */
  text?: string | Uint8Array;
  /** Precomputed block hashes (e.g. from a trace or an engine's events). */
  blockHashes?: HashesInput;
  /** Prompt length in tokens when it cannot be derived (text and hash modes). */
  promptTokens?: number;
  /** Predicted output length in tokens (the representative length of its class). */
  oslHat?: number;
  /** Predicted output class (name or index into the table's osl_classes); used when oslHat is absent. */
  oslClass?: string | number;
  /** Conversation turn (1 = first), for PPD. Default 1. */
  turn?: number;
  /** Pin the decode worker (a session's). */
  decodeWorker?: string;
  /** Accumulated context tokens of the conversation, for PPD. Default: the decode worker's cached tokens. */
  contextTokens?: number;
  /** The session's previous output tokens (for the table's output-length model). */
  prevOutputTokens?: number;
  /** The request's max_tokens, when the client set one (for the output-length model). */
  maxTokens?: number;
}

export interface Features {
  isl: number;
  effP: number;
  effD: number;
  oslHat: number;
}

export interface Decision {
  path: "local" | "remote";
  /** The policy's bit before worker constraints (1 = remote). */
  bit: 0 | 1;
  reason: ReasonName;
  decodeWorker: string;
  /** The prefill worker chosen (also when the path is local: it is where eff_P was measured). */
  prefillWorker: string | null;
  /** Cluster (k-means, GMM) or grid cell (PPD); null for other rules. */
  cluster: number | null;
  features: Features;
  matchedBlocks: { decode: number; prefill: number };
  /** Full blocks in the prompt. */
  blocks: number;
  /** The output-length class the table's model predicted (null when the caller gave osl_hat). */
  oslClass: number | null;
  /** The longest cached prefix on any worker / the prompt's blocks (0 for an empty prompt). */
  reuse: number;
  cost: { decode: number; prefill: number };
  /** The loads a table's load bounds are checked against (table version 3): the chosen prefill worker's active
   *  prefill tokens (null when no prefill worker was chosen) and the chosen decode worker's active prefill +
   *  active decode tokens, as setLoad reported them. */
  load: { prefill: number | null; decode: number };
}

export interface Explanation {
  decision: Decision;
  kind: Table["kind"];
  featureNames: string[];
  /** log1p + standardized features, in the table's feature order (learned kinds). */
  standardized: number[];
  /** Squared distance to every centroid (k-means) or log-likelihood of every component (GMM). */
  scores: number[];
  bits: number[];
  why: string;
}
