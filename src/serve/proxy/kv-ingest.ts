// One worker's KV events into the router's index, with the engine's block hashes mapped to the router's chained
// hashes. The events come from kv-feed.ts (ZMQ subscriptions) and admin.ts (POST /admin/kv-events).

import { tierOfMedium, type EventBatch } from "../../router/kv-events.js";
import { hashTokens, type Hash64 } from "../../hashing/hashes.js";
import type { Router } from "../../router/router.js";
import type { TierName } from "../../router/types.js";

export interface IngestCounts {
  stored: number;
  removed: number;
  cleared: number;
  unmapped: number;
  /** blocks stored in a lower tier (CPU), also counted in `stored` */
  lower: number;
  /** blocks of events whose medium names no tier the core has (not indexed) */
  untiered: number;
}

/** A hash's map key: its four 16-bit halves as one 4-character string (5–9× cheaper to make than two hex strings). */
export const pairKey = (lo: number, hi: number): string =>
  String.fromCharCode(lo & 0xffff, lo >>> 16, hi & 0xffff, hi >>> 16);

/**
 * Applies one worker's vLLM KV events to the router's index. vLLM's block hashes (sha256 by default) are not the
 * router's, so a BlockStored that carries its `token_ids` is rehashed under the router's scheme, chained from the
 * rehash of its parent, and the engine → router hash pairs are remembered so a later BlockRemoved finds its blocks.
 * When a rehash equals the engine's own hashes (an engine that hashes as the router does, like the emulated worker),
 * the worker's hashes are used as they come from then on, with no map. A device BlockStored without token ids is
 * taken to use the router's scheme already.
 *
 * Tiers: each event goes to its medium's tier (tierOfMedium; an unknown medium is counted as `untiered` and
 * dropped). A lower-tier BlockStored with token ids is rehashed as a device one is. Without token ids (vLLM's
 * offloading connector publishes the CPU copy of blocks the device stored before) its blocks are matched by hash
 * only: through the engine → router map when the engine's hash is known (the device stored that block with its
 * token ids), as they come when the engine's hashes are the router's (a rehash matched them, or the worker's device
 * events carry no token ids either), and otherwise dropped and counted as `unmapped` (an engine-scheme hash the
 * router never saw tokens for can never match a prompt). A removal keeps a block's map entry while another tier
 * still holds it.
 */
export class EventIngest {
  private readonly map = new Map<string, [number, number]>();
  private sameScheme = false;
  /** the worker's device events came without token ids: its hashes are taken as the router's */
  private givenHashes = false;
  /** the worker stored lower-tier blocks: a device removal may leave a block held */
  private lowerSeen = false;
  constructor(
    private readonly blockSize: number,
    private readonly root: Hash64,
    private readonly maxEntries: number,
    /** The router's block-hash scheme from a parent (hashes.ts's xxh64 chain, or cbor-fnv.ts's llm-d scheme). */
    private readonly chain: (tokens: number[], blockSize: number, parent: Hash64) => Uint32Array = hashTokens,
  ) {}

  reset(): void {
    this.map.clear();
    this.sameScheme = false;
    this.givenHashes = false;
    this.lowerSeen = false;
  }

  apply(router: Router, worker: string, batch: EventBatch): IngestCounts {
    const n: IngestCounts = { stored: 0, removed: 0, cleared: 0, unmapped: 0, lower: 0, untiered: 0 };
    for (const e of batch.events) {
      if (e.kind === "cleared") {
        router.index.clear(worker);
        this.map.clear();
        n.cleared++;
        continue;
      }
      const blocks = e.hashes.length >>> 1;
      const tier = tierOfMedium(e.medium);
      if (tier === null) {
        n.untiered += blocks;
        continue;
      }
      if (e.kind === "removed") {
        if (this.sameScheme || this.givenHashes) router.index.remove(worker, e.hashes, tier);
        else this.removeTranslated(router, worker, e.hashes, tier);
        n.removed += blocks;
        continue;
      }
      let ours: Uint32Array | null;
      if (this.sameScheme || this.givenHashes) ours = e.hashes;
      else if (e.tokenIds.length > 0) ours = this.rehash(e.hashes, e.parent, e.tokenIds, e.blockSize);
      else if (tier === "GPU") {
        this.givenHashes = true;
        ours = e.hashes;
      } else ours = this.translateKnown(e.hashes);
      const stored = ours ? ours.length >>> 1 : 0;
      if (ours && stored > 0) router.index.store(worker, ours, tier);
      n.stored += stored;
      if (tier !== "GPU") {
        n.lower += stored;
        this.lowerSeen = true;
      }
      n.unmapped += blocks - stored;
    }
    return n;
  }

  /** The router's hashes of the blocks whose engine hash the map knows; the others are left out. */
  private translateKnown(engine: Uint32Array): Uint32Array {
    const pairs: number[] = [];
    for (let i = 0; i < engine.length >>> 1; i++) {
      const ours = this.map.get(pairKey(engine[2 * i]!, engine[2 * i + 1]!));
      if (ours) pairs.push(ours[0], ours[1]);
    }
    return Uint32Array.from(pairs);
  }

  /** The router's hashes of a stored run of blocks, or null when its parent or block size does not allow them. */
  private rehash(
    engine: Uint32Array,
    parentPair: Uint32Array | null,
    tokenIds: number[],
    blockSize: number,
  ): Uint32Array | null {
    const blocks = engine.length >>> 1;
    if (blockSize !== this.blockSize || tokenIds.length !== blocks * this.blockSize) return null;
    let parent: Hash64 = this.root;
    if (parentPair) {
      const p = this.map.get(pairKey(parentPair[0]!, parentPair[1]!));
      if (!p) return null;
      parent = { lo: p[0], hi: p[1] };
    }
    const ours = this.chain(tokenIds, this.blockSize, parent);
    if (!parentPair && ours.every((v, i) => v === engine[i])) {
      this.sameScheme = true;
      this.map.clear();
      return ours;
    }
    for (let i = 0; i < blocks; i++)
      this.map.set(pairKey(engine[2 * i]!, engine[2 * i + 1]!), [ours[2 * i]!, ours[2 * i + 1]!]);
    for (const k of this.map.keys()) {
      if (this.map.size <= this.maxEntries) break;
      this.map.delete(k);
    }
    return ours;
  }

  /**
   * Removes blocks given by engine hash from `tier`, translated through the map; an entry is forgotten once no tier
   * holds its block (looked up only once the worker stored lower-tier blocks: before, a removal leaves none).
   */
  private removeTranslated(router: Router, worker: string, engine: Uint32Array, tier: TierName): void {
    const pairs = new Uint32Array(engine.length);
    const keys: string[] = [];
    for (let i = 0; i < engine.length >>> 1; i++) {
      const k = pairKey(engine[2 * i]!, engine[2 * i + 1]!);
      const ours = this.map.get(k);
      keys.push(k);
      pairs[2 * i] = ours ? ours[0] : engine[2 * i]!;
      pairs[2 * i + 1] = ours ? ours[1] : engine[2 * i + 1]!;
    }
    const tiered = tier !== "GPU" || this.lowerSeen;
    router.index.remove(worker, pairs, tier);
    for (let i = 0; i < keys.length; i++) {
      if (tiered && router.index.tiers(worker, pairs.subarray(2 * i, 2 * i + 2)).length > 0) continue;
      this.map.delete(keys[i]!);
    }
  }
}
