// Which cached blocks the router's index needs to hear about. The index is read only when a request is routed (its
// prompt's blocks matched against every worker), and the simulator knows every arrival and every cache, so most KV
// events cannot change a decision and only cost the index work (at 32P32D on the resampled Mooncake trace its store
// and remove were half the wall time). Two exact ways to send fewer:
//  - without index lag, HeldBackStores: no store is sent when it happens; just before a request is routed, each
//    instance reports the blocks of the prompt's resident prefix that it has not reported yet (KvCache.publishFrom).
//    The index then holds, of each worker's cache, at least that prefix, and nothing the cache lacks (evictions of
//    reported blocks are sent at once), so each worker's match is its cache's prefix hit, as with every event sent.
//    A count per block of the instances holding it unreported finds the first block of a prompt to report from
//    (before it, every holder has reported), so instances are probed only from there.
//  - with index lag (the index sees the caches as they were), BlocksStillToRoute: a store is sent unless no request
//    still to be routed contains the block; only those can be matched again, and a decline is final (`routed` only
//    grows).
// Either way a block's eviction is sent only when its store was. Each worker's index holds a subset of its cache and
// never evicts on its own (its capacity is the cache's), so what it holds of any block a match reads is unchanged.

import type { KvEventFilter } from "./cache-events.js";

/** Holds back every store until a request about to be routed can match the block (KvCache.publishFrom). */
export class HeldBackStores implements KvEventFilter {
  /** per block id: instances holding it without having reported it */
  private readonly heldBack: Uint16Array;

  /** `blockCount`: ids below it are counted; a block beyond (not interned before the run) is reported at once. */
  constructor(blockCount: number) {
    this.heldBack = new Uint16Array(blockCount);
  }

  wanted(id: number): boolean {
    if (id >= this.heldBack.length) return true;
    this.heldBack[id]!++; // at most one per instance: ≤ 1,024 (parseSplit)
    return false;
  }

  heldBackEnds(id: number): void {
    this.heldBack[id]!--;
  }

  /** The first position of `ids` whose block some instance holds unreported, or −1: nothing to report before it. */
  firstHeldBack(ids: Int32Array): number {
    const held = this.heldBack;
    for (let i = 0; i < ids.length; i++) if (held[ids[i]!] !== 0) return i;
    return -1;
  }
}

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
