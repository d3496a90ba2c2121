// Which cached blocks the router's index still needs to hear about. The index is only read when a request is routed
// (its prompt's blocks matched against every worker), and the simulator knows every arrival in advance: a block that
// no request still to be routed contains can never be matched again, so reporting its store (and later its eviction)
// cannot change a decision, only cost the index work. At 32P32D on the resampled Mooncake trace most blocks are
// never seen again once their own request is routed, and the index's store and remove were half the wall time.
//
// Exact, not an approximation: the index never evicts on its own here (each worker's index capacity is its cache's,
// and it holds a subset of the cache), so what it holds of the blocks that are still to be matched is the same as
// with every event reported, and match reads nothing else. A decline is also final: `routed` only grows.

import type { KvEventFilter } from "./kv-cache.js";

export class BlocksStillToRoute implements KvEventFilter {
  /** per block id: the arrival position (0-based, routing order) of the last request containing it; −1 none */
  private readonly lastArrival: Int32Array;
  /** requests routed so far: those at positions < routed can no longer be matched */
  routed = 0;

  /** `idsInRoutingOrder[k]`: the block ids of the k-th request routed; `blockCount`: ids are below it. */
  constructor(idsInRoutingOrder: readonly Int32Array[], blockCount: number) {
    const last = new Int32Array(blockCount).fill(-1);
    idsInRoutingOrder.forEach((ids, k) => {
      for (let i = 0; i < ids.length; i++) last[ids[i]!] = k;
    });
    this.lastArrival = last;
  }

  /** True while a request still to be routed contains block `id` (and for ids it was not told about). */
  wanted(id: number): boolean {
    return !(this.lastArrival[id]! < this.routed);
  }
}
