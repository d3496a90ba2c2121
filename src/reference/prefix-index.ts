// The reference's prefix index (assembly/prefix-index/, with JS Maps and Sets): per worker the blocks it holds in
// LRU order within its capacity, per block the workers holding it, and the longest-prefix match of every worker.

/** Exact, cheap Map key for a 64-bit hash given as (lo, hi). */
function key(lo: number, hi: number): string {
  return String.fromCharCode(lo & 0xffff, lo >>> 16, hi & 0xffff, hi >>> 16);
}

/** What the index keeps of a worker. */
export interface IndexedWorker {
  capacity: number;
  /** held blocks in LRU order: first = least recently used */
  blocks: Map<string, true>;
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

  storeKeys(id: number, pairs: Uint32Array, n: number): void {
    const w = this.workers[id]!;
    if (w.capacity === 0) return;
    for (let i = 0; i < n; i++) {
      const k = key(pairs[2 * i]!, pairs[2 * i + 1]!);
      if (w.blocks.has(k)) {
        w.blocks.delete(k);
        w.blocks.set(k, true);
        continue;
      }
      if (w.blocks.size >= w.capacity) this.drop(id, w.blocks.keys().next().value as string);
      w.blocks.set(k, true);
      let set = this.holders.get(k);
      if (!set) this.holders.set(k, (set = new Set()));
      set.add(id);
    }
  }

  removeKeys(id: number, pairs: Uint32Array, n: number): void {
    const w = this.workers[id]!;
    for (let i = 0; i < n; i++) {
      const k = key(pairs[2 * i]!, pairs[2 * i + 1]!);
      if (w.blocks.has(k)) this.drop(id, k);
    }
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
