// What an answer's usage says about a worker's cache, folded back into the index (precise mode). vLLM publishes a
// block once, when it stores it: a proxy that missed that event (started after the engine, or the batch lost beyond
// what the replay socket still buffers) would never learn the block while it stays cached. But every answer reports
// `cached_tokens`, the engine's own count of the prompt's tokens it found cached, so when that exceeds what the index
// predicted, the prompt's first ⌊cached / block_size⌋ blocks are in that engine's cache: they are stored in its
// index, and the next request with that prefix is routed to it. Only ever adds what the engine itself reported.

import { hashTokens, type Hash64 } from "../../hashing/hashes.js";
import type { Router } from "../../router/router.js";
import type { ProxyMetrics } from "./metrics.js";
import type { WorkerRegistry } from "./registry.js";

export class CacheEvidence {
  constructor(
    private readonly router: Router,
    private readonly registry: WorkerRegistry,
    private readonly blockSize: number,
    private readonly root: Hash64,
    private readonly metrics: ProxyMetrics,
  ) {}

  /**
   * `worker` (the engine that prefilled) reported `reported` of the prompt `tokens` cached where the index predicted
   * `predicted`: the blocks it proved are stored in its index.
   */
  note(worker: string | null, tokens: ArrayLike<number> | null, predicted: number, reported: number | null): void {
    if (worker === null || tokens === null || reported === null || reported <= predicted) return;
    if (!this.registry.get(worker)?.healthy) return;
    const bs = this.blockSize;
    const blocks = Math.min(Math.floor(reported / bs), Math.floor(tokens.length / bs));
    const known = Math.floor(predicted / bs);
    if (blocks <= known) return;
    this.router.index.store(
      worker,
      hashTokens(Array.prototype.slice.call(tokens, 0, blocks * bs) as number[], bs, this.root),
    );
    this.metrics.cacheEvidenceBlocks.inc({ worker }, blocks - known);
  }
}
