// Shared shapes of the cluster simulator: requests as the simulator sees them, and workloads.

/** vLLM's KV block: the simulator's caches, KV events and the router's index all use 16-token blocks. */
export const SIM_BLOCK_TOKENS = 16;

export interface SimRequest {
  /** 0-based, in arrival order. */
  id: number;
  arrivalMs: number;
  promptTokens: number;
  outputTokens: number;
  /**
   * Chained hashes of the prompt's full 16-token blocks, as (lo, hi) u32 pairs (floor(promptTokens / 16) blocks).
   * Requests that share a prefix share the leading hashes, exactly as vLLM's prefix cache would see them.
   */
  blocks: Uint32Array;
  /** Conversation this request belongs to, when known (multi-turn workloads, traces with chained turns). */
  session?: number;
  /** 1-based turn within its session (1 when unknown). */
  turn: number;
  /** Tokens of the conversation before this turn's new input (0 on turn 1). */
  contextTokens?: number;
  /** Dataset-level type tag, e.g. "arxiv", "leval", "humaneval" (for per-type reports). */
  type?: string;
}

export interface Workload {
  name: string;
  requests: SimRequest[];
  /** Arrival rate the workload was recorded or generated at (requests per second). */
  rate: number;
}
