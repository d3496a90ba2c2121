// One worker's KV events into the router's index, with the engine's block hashes mapped to the router's chained
// hashes. The events come from kv-feed.ts (ZMQ subscriptions) and admin.ts (POST /admin/kv-events).

import type { EventBatch } from "../../router/kv-events.js";
import { hashTokens, type Hash64 } from "../../hashing/hashes.js";
import type { Router } from "../../router/router.js";

export interface IngestCounts {
  stored: number;
  removed: number;
  cleared: number;
  unmapped: number;
}

/** A hash's map key: its four 16-bit halves as one 4-character string (5–9× cheaper to make than two hex strings). */
export const pairKey = (lo: number, hi: number): string =>
  String.fromCharCode(lo & 0xffff, lo >>> 16, hi & 0xffff, hi >>> 16);

/**
 * Applies one worker's vLLM KV events to the router's index. vLLM's block hashes (sha256 by default) are not the
 * router's, so a BlockStored that carries its `token_ids` is rehashed under the router's scheme, chained from the
 * rehash of its parent, and the engine → router hash pairs are remembered so a later BlockRemoved finds its blocks.
 * When a rehash equals the engine's own hashes (an engine that hashes as the router does, like the emulated worker),
 * the worker's hashes are used as they come from then on, with no map. A BlockStored without token ids is taken to
 * use the router's scheme already.
 */
export class EventIngest {
  private readonly map = new Map<string, [number, number]>();
  private sameScheme = false;
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
  }

  apply(router: Router, worker: string, batch: EventBatch): IngestCounts {
    const n: IngestCounts = { stored: 0, removed: 0, cleared: 0, unmapped: 0 };
    for (const e of batch.events) {
      if (e.kind === "cleared") {
        router.index.clear(worker);
        this.map.clear();
        n.cleared++;
        continue;
      }
      if (e.medium !== null && e.medium.toUpperCase() !== "GPU") continue; // CPU/disk tiers are not routed on yet
      const blocks = e.hashes.length >>> 1;
      if (e.kind === "removed") {
        router.index.remove(worker, this.sameScheme ? e.hashes : this.translateRemoved(e.hashes));
        n.removed += blocks;
      } else if (this.sameScheme || e.tokenIds.length === 0) {
        router.index.store(worker, e.hashes);
        n.stored += blocks;
      } else {
        const ours = this.rehash(e.hashes, e.parent, e.tokenIds, e.blockSize);
        if (ours) {
          router.index.store(worker, ours);
          n.stored += blocks;
        } else n.unmapped += blocks;
      }
    }
    return n;
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

  private translateRemoved(engine: Uint32Array): Uint32Array {
    const pairs = new Uint32Array(engine.length);
    for (let i = 0; i < engine.length >>> 1; i++) {
      const k = pairKey(engine[2 * i]!, engine[2 * i + 1]!);
      const ours = this.map.get(k);
      this.map.delete(k);
      pairs[2 * i] = ours ? ours[0] : engine[2 * i]!;
      pairs[2 * i + 1] = ours ? ours[1] : engine[2 * i + 1]!;
    }
    return pairs;
  }
}
