// What a simulation takes (SimConfig: the preset, split, SLO, table, link and transfer model, and how KV events and
// predicted output lengths reach the router) and what it gives back (SimResult). Types only; simulator.ts runs it.

import type { RouterOptions } from "../router/types.js";
import type { Table } from "../table/table.js";
import type { InstanceRole } from "./instance.js";
import type { LinkPreset, TransferModel } from "./kv-transfer.js";
import type { RequestRecord, Slo, Summary } from "./metrics.js";
import type { ModelPreset } from "./model-presets.js";
import type { SplitSpec } from "./split.js";
import type { SimRequest } from "./types.js";

/**
 * How the router learns each request's predicted output length: "model" lets the table's output-length classifier
 * predict it in the core (the default when the table has one); "oracle" gives the true length, or the true class's
 * representative length when the table has classes; a function decides per request (e.g. a noisy classifier).
 */
export type OslPredictor = "model" | "oracle" | ((req: SimRequest) => number);

export interface SimConfig {
  preset: ModelPreset;
  split: SplitSpec;
  slo: Slo;
  table: Table;
  link?: LinkPreset;
  /** Setup cost, efficiency and links per instance; default DEFAULT_TRANSFER with one link per GPU (preset.tp). */
  transfer?: TransferModel;
  /** Ship only the blocks the decode side lacks (backends that deduplicate). Default false. */
  dedupeTransfer?: boolean;
  /** Delay before a KV event reaches the router's index. Default 0. */
  indexLagMs?: number;
  /**
   * "vllm": every store and eviction travels as a vLLM msgpack EventBatch that the router decodes (the path a live
   * cluster's events take); "direct" (default): the same operations applied without encoding (faster, identical).
   */
  kvEvents?: "direct" | "vllm";
  /**
   * "needed" (default): only the KV events that can change a match (remaining.ts; the same decisions, less work);
   * "all": every store and eviction, as a live worker's stream (to check that the two agree).
   */
  indexEvents?: "needed" | "all";
  osl?: OslPredictor;
  /**
   * How the router's index learns what is cached: "precise" (default) from the instances' KV events; "approximate"
   * from its own decisions only (what `dolphin serve` in approximate mode and the Envoy filter see), forgetting
   * everything every approximateTtlMs (default 300,000, as approximate_ttl_s).
   */
  cacheView?: "precise" | "approximate";
  approximateTtlMs?: number;
  /** KV-cache blocks per instance; default from the preset's HBM. */
  capacityBlocks?: number;
  /** The compiled core; without it the router runs on the TypeScript reference engine. */
  module?: WebAssembly.Module;
  /** Extra router options (loadScale, ...). */
  router?: Partial<RouterOptions>;
}

export interface SimResult {
  records: RequestRecord[];
  summary: Summary;
  instances: { name: string; role: InstanceRole; busyMs: number; steps: number; evictions: number }[];
  /** Simulated time from the first arrival to the last event. */
  simulatedMs: number;
}
