// The reference's prefix index (assembly/prefix-index/, with JS Maps and Sets): per worker the blocks it holds in
// LRU order within its capacity and the tiers it holds each in, per block the workers holding it, and the
// longest-prefix match of every worker.

/** A block's tiers as bits: on the device (tier 0), in a lower tier (tier 1). */
export const ON_DEVICE = 1;
export const IN_LOWER = 2;

/** Exact, cheap Map key for a 64-bit hash given as (lo, hi). */
function key(lo: number, hi: number): string {
  return String.fromCharCode(lo & 0xffff, lo >>> 16, hi & 0xffff, hi >>> 16);
}

/** What the index keeps of a worker. */
export interface IndexedWorker {
  capacity: number;
  /** held blocks in LRU order (first = least recently used) → the tiers holding each (ON_DEVICE | IN_LOWER) */
  blocks: Map<string, number>;
}

/** The index over the engine's workers (indexed by worker id); it checks nothing, the engine checks the calls. */
export class PrefixIndex {
  private readonly holders = new Map<string, Set<number>>();

  constructor(private readonly workers: readonly IndexedWorker[]) {}

  drop(id: number, k: string): void {
    this.workers[id]!.blocks.delete(k);
    const set = this.holders.get(k);
    if (set) {
      set.delete(id);
      if (set.size === 0) this.holders.delete(k);
    }
  }

  storeKeys(id: number, pairs: Uint32Array, n: number, tier = 0): void {
    const w = this.workers[id]!;
    if (w.capacity === 0) return;
    const bit = tier === 0 ? ON_DEVICE : IN_LOWER;
    for (let i = 0; i < n; i++) {
      const k = key(pairs[2 * i]!, pairs[2 * i + 1]!);
      const tiers = w.blocks.get(k);
      if (tiers !== undefined) {
        w.blocks.delete(k);
        w.blocks.set(k, tiers | bit);
        continue;
      }
      if (w.blocks.size >= w.capacity) this.drop(id, w.blocks.keys().next().value as string);
      w.blocks.set(k, bit);
      let set = this.holders.get(k);
      if (!set) this.holders.set(k, (set = new Set()));
      set.add(id);
    }
  }

  /** Forgets the blocks in `tier` (their place in the LRU order is kept); a block no tier holds is dropped. */
  removeKeys(id: number, pairs: Uint32Array, n: number, tier = 0): void {
    const w = this.workers[id]!;
    const bit = tier === 0 ? ON_DEVICE : IN_LOWER;
    for (let i = 0; i < n; i++) {
      const k = key(pairs[2 * i]!, pairs[2 * i + 1]!);
      const tiers = w.blocks.get(k);
      if (tiers === undefined || (tiers & bit) === 0) continue;
      if (tiers === bit) this.drop(id, k);
      else w.blocks.set(k, tiers & ~bit);
    }
  }

  /** The tiers (ON_DEVICE | IN_LOWER) in which worker `id` holds the block (lo, hi); 0 when it does not. */
  tiersOf(id: number, lo: number, hi: number): number {
    return this.workers[id]!.blocks.get(key(lo, hi)) ?? 0;
  }

  /** Blocks worker `id` holds in a lower tier only. */
  lowerCount(id: number): number {
    let n = 0;
    for (const tiers of this.workers[id]!.blocks.values()) if (tiers === IN_LOWER) n++;
    return n;
  }

  /** How many of the first `m` blocks of `pairs` worker `id` holds in a lower tier only: all, and of the first `cap`. */
  lowerInPrefix(id: number, pairs: Uint32Array, m: number, cap: number): { all: number; capped: number } {
    let all = 0;
    let capped = 0;
    for (let i = 0; i < m; i++) {
      if (this.tiersOf(id, pairs[2 * i]!, pairs[2 * i + 1]!) !== IN_LOWER) continue;
      all++;
      if (i < cap) capped++;
    }
    return { all, capped };
  }

  clearWorker(id: number): void {
    const w = this.workers[id]!;
    for (const k of [...w.blocks.keys()]) this.drop(id, k);
  }

  /** out[w] = how many leading blocks of `pairs` worker w (of the first `span`) holds. */
  matchInto(pairs: Uint32Array, n: number, span: number, out: Uint32Array): void {
    out.fill(0);
    let alive: number[] = [];
    for (let w = 0; w < span; w++) if (this.workers[w]!.blocks.size > 0) alive.push(w);
    let i = 0;
    while (alive.length > 0 && i < n) {
      const set = this.holders.get(key(pairs[2 * i]!, pairs[2 * i + 1]!));
      const still: number[] = [];
      for (const w of alive) {
        if (set?.has(w)) still.push(w);
        else out[w] = i;
      }
      alive = still;
      if (alive.length > 0) i++;
    }
    for (const w of alive) out[w] = i;
  }
}
