// One instance's KV cache as vLLM's prefix cache manages it: a fixed number of 16-token blocks; hashed (full,
// computed) blocks are shared by every request whose prompt contains them and stay cached after their requests
// finish until evicted, least recently used first; blocks a running request pins cannot be evicted. Private
// blocks (a trailing partial block, and the reservation for output tokens) are counted but never shared.
// Every store and eviction is reported, as a vLLM worker publishes BlockStored / BlockRemoved KV events.

export interface KvEventSink {
  stored(pairs: Uint32Array): void;
  removed(pairs: Uint32Array): void;
}

/** Exact Map key of a (lo, hi) hash pair. */
export function blockKey(lo: number, hi: number): string {
  return String.fromCharCode(lo & 0xffff, lo >>> 16, hi & 0xffff, hi >>> 16);
}

function keyToPair(k: string, out: Uint32Array, i: number): void {
  out[2 * i] = (k.charCodeAt(0) | (k.charCodeAt(1) << 16)) >>> 0;
  out[2 * i + 1] = (k.charCodeAt(2) | (k.charCodeAt(3) << 16)) >>> 0;
}

export class KvCache {
  readonly capacityBlocks: number;
  /** resident hashed blocks → pin count */
  private readonly refs = new Map<string, number>();
  /** resident hashed blocks with no pins, least recently used first */
  private readonly evictable = new Map<string, true>();
  private privateBlocks = 0;
  private readonly sink: KvEventSink | null;
  evictions = 0;

  constructor(capacityBlocks: number, sink: KvEventSink | null) {
    this.capacityBlocks = capacityBlocks;
    this.sink = sink;
  }

  get usedBlocks(): number {
    return this.refs.size + this.privateBlocks;
  }

  /** Blocks that could be made free now: free ones plus evictable cached ones. */
  get availableBlocks(): number {
    return this.capacityBlocks - this.usedBlocks + this.evictable.size;
  }

  /** Leading blocks of `pairs` that are resident (the prefix-cache hit, in blocks). */
  prefixHit(pairs: Uint32Array, nBlocks: number): number {
    let i = 0;
    while (i < nBlocks && this.refs.has(blockKey(pairs[2 * i]!, pairs[2 * i + 1]!))) i++;
    return i;
  }

  /** Makes `n` blocks free by evicting least recently used unpinned blocks; false if impossible. */
  private makeRoom(n: number): boolean {
    const free = this.capacityBlocks - this.usedBlocks;
    if (free >= n) return true;
    const need = n - free;
    if (need > this.evictable.size) return false;
    const gone = new Uint32Array(2 * need);
    let i = 0;
    for (const k of this.evictable.keys()) {
      if (i === need) break;
      keyToPair(k, gone, i++);
    }
    for (let j = 0; j < need; j++) {
      const k = blockKey(gone[2 * j]!, gone[2 * j + 1]!);
      this.evictable.delete(k);
      this.refs.delete(k);
    }
    this.evictions += need;
    this.sink?.removed(gone);
    return true;
  }

  /**
   * Admits a request: pins its first `hit` blocks (resident), and reserves `reserve` more blocks (the rest of its
   * prompt and whatever else it will hold). False, with nothing changed, when the cache cannot make room.
   */
  admit(pairs: Uint32Array, hit: number, reserve: number): boolean {
    // the hit blocks stop being evictable, so room must come from the others
    let hitEvictable = 0;
    for (let i = 0; i < hit; i++) if (this.evictable.has(blockKey(pairs[2 * i]!, pairs[2 * i + 1]!))) hitEvictable++;
    if (reserve > this.capacityBlocks - this.usedBlocks + this.evictable.size - hitEvictable) return false;
    for (let i = 0; i < hit; i++) {
      const k = blockKey(pairs[2 * i]!, pairs[2 * i + 1]!);
      this.refs.set(k, this.refs.get(k)! + 1);
      this.evictable.delete(k);
    }
    this.makeRoom(reserve);
    this.privateBlocks += reserve;
    return true;
  }

  /**
   * Blocks [from, to) of `pairs` are now computed: each turns one reserved block into a pinned hashed block (or,
   * when another request computed the same block meanwhile, shares it and gives the reservation back).
   */
  commit(pairs: Uint32Array, from: number, to: number): void {
    let fresh = 0;
    const stored = new Uint32Array(2 * Math.max(0, to - from));
    for (let i = from; i < to; i++) {
      const lo = pairs[2 * i]!;
      const hi = pairs[2 * i + 1]!;
      const k = blockKey(lo, hi);
      const r = this.refs.get(k);
      this.privateBlocks--;
      if (r !== undefined) {
        if (r === 0) this.evictable.delete(k);
        this.refs.set(k, r + 1);
      } else {
        this.refs.set(k, 1);
        stored[2 * fresh] = lo;
        stored[2 * fresh + 1] = hi;
        fresh++;
      }
    }
    if (fresh > 0) this.sink?.stored(stored.subarray(0, 2 * fresh));
  }

  /** A request is done with blocks [0, n) of `pairs` and with `reserved` private blocks. */
  release(pairs: Uint32Array, n: number, reserved: number): void {
    for (let i = 0; i < n; i++) {
      const k = blockKey(pairs[2 * i]!, pairs[2 * i + 1]!);
      const r = this.refs.get(k);
      if (r === undefined) continue;
      if (r <= 1) {
        this.refs.set(k, 0);
        this.evictable.delete(k); // most recently used goes last
        this.evictable.set(k, true);
      } else this.refs.set(k, r - 1);
    }
    this.privateBlocks -= reserved;
  }

  /** Caches blocks a finished request produced (e.g. a conversation's output) as unpinned, most recent. */
  cacheUnpinned(pairs: Uint32Array, from: number, to: number): void {
    const stored: number[] = [];
    for (let i = from; i < to; i++) {
      const lo = pairs[2 * i]!;
      const hi = pairs[2 * i + 1]!;
      const k = blockKey(lo, hi);
      if (this.refs.has(k)) continue;
      if (!this.makeRoom(1)) break;
      this.refs.set(k, 0);
      this.evictable.set(k, true);
      stored.push(lo, hi);
    }
    if (stored.length > 0) this.sink?.stored(Uint32Array.from(stored));
  }
}
