// One instance's KV cache as vLLM's prefix cache manages it: a fixed number of 16-token blocks; hashed (full,
// computed) blocks are shared by every request whose prompt contains them and stay cached after their requests
// finish until evicted, least recently used first; blocks a running request pins cannot be evicted. Private
// blocks (a trailing partial block, and the reservation for output tokens) are counted but never shared.
// Every store and eviction is reported, as a vLLM worker publishes BlockStored / BlockRemoved KV events.
//
// Blocks are named by small integer ids (BlockIds interns each distinct 64-bit hash once per simulation), so the
// cache is typed arrays: a pin count per id and an intrusive LRU list of unpinned resident blocks. No strings,
// no per-block objects.

export interface KvEventSink {
  stored(pairs: Uint32Array): void;
  removed(pairs: Uint32Array): void;
}

/** Interns 64-bit block hashes, given as (lo, hi) pairs, to dense ids 0, 1, 2, … (open addressing). */
export class BlockIds {
  private lo = new Uint32Array(1 << 16);
  private hi = new Uint32Array(1 << 16);
  private slots = new Int32Array(1 << 17).fill(-1); // id per slot, −1 empty; load ≤ 1/2
  count = 0;

  /** Ids of the first `n` pairs of `pairs`. */
  intern(pairs: Uint32Array, n = pairs.length >>> 1): Int32Array {
    const out = new Int32Array(n);
    for (let i = 0; i < n; i++) out[i] = this.id(pairs[2 * i]!, pairs[2 * i + 1]!);
    return out;
  }

  id(lo: number, hi: number): number {
    if (this.count * 2 >= this.slots.length) this.grow();
    const mask = this.slots.length - 1;
    let s = (Math.imul(lo ^ Math.imul(hi, 0x9e3779b1), 0x85ebca6b) >>> 0) & mask;
    for (;;) {
      const id = this.slots[s]!;
      if (id < 0) break;
      if (this.lo[id] === lo && this.hi[id] === hi) return id;
      s = (s + 1) & mask;
    }
    const id = this.count++;
    if (id >= this.lo.length) {
      const lo2 = new Uint32Array(this.lo.length * 2);
      lo2.set(this.lo);
      this.lo = lo2;
      const hi2 = new Uint32Array(this.hi.length * 2);
      hi2.set(this.hi);
      this.hi = hi2;
    }
    this.lo[id] = lo;
    this.hi[id] = hi;
    this.slots[s] = id;
    return id;
  }

  /** The (lo, hi) pairs of some ids (for KV events). */
  pairs(ids: ArrayLike<number>, n = ids.length): Uint32Array {
    const out = new Uint32Array(2 * n);
    for (let i = 0; i < n; i++) {
      const id = ids[i]!;
      out[2 * i] = this.lo[id]!;
      out[2 * i + 1] = this.hi[id]!;
    }
    return out;
  }

  private grow(): void {
    const slots = new Int32Array(this.slots.length * 2).fill(-1);
    const mask = slots.length - 1;
    for (let id = 0; id < this.count; id++) {
      let s = (Math.imul(this.lo[id]! ^ Math.imul(this.hi[id]!, 0x9e3779b1), 0x85ebca6b) >>> 0) & mask;
      while (slots[s]! >= 0) s = (s + 1) & mask;
      slots[s] = id;
    }
    this.slots = slots;
  }
}

const ABSENT = -1;

export class KvCache {
  readonly capacityBlocks: number;
  private readonly ids: BlockIds;
  private readonly sink: KvEventSink | null;
  /** pin count per block id; ABSENT when not resident */
  private refs = new Int32Array(0);
  /** LRU list of resident unpinned blocks: head = least recently used */
  private prev = new Int32Array(0);
  private next = new Int32Array(0);
  private head = -1;
  private tail = -1;
  private resident = 0;
  private evictableCount = 0;
  private privateBlocks = 0;
  evictions = 0;

  constructor(capacityBlocks: number, ids: BlockIds, sink: KvEventSink | null) {
    this.capacityBlocks = capacityBlocks;
    this.ids = ids;
    this.sink = sink;
  }

  get usedBlocks(): number {
    return this.resident + this.privateBlocks;
  }

  /** Blocks that could be made free now: free ones plus evictable cached ones. */
  get availableBlocks(): number {
    return this.capacityBlocks - this.usedBlocks + this.evictableCount;
  }

  private ensure(id: number): void {
    if (id < this.refs.length) return;
    const n = Math.max(id + 1, this.refs.length * 2, 1024);
    const refs = new Int32Array(n).fill(ABSENT);
    refs.set(this.refs);
    this.refs = refs;
    const prev = new Int32Array(n);
    prev.set(this.prev);
    this.prev = prev;
    const next = new Int32Array(n);
    next.set(this.next);
    this.next = next;
  }

  private refOf(id: number): number {
    return id < this.refs.length ? this.refs[id]! : ABSENT;
  }

  private unlink(id: number): void {
    const p = this.prev[id]!;
    const n = this.next[id]!;
    if (p >= 0) this.next[p] = n;
    else this.head = n;
    if (n >= 0) this.prev[n] = p;
    else this.tail = p;
    this.evictableCount--;
  }

  private pushMostRecent(id: number): void {
    this.prev[id] = this.tail;
    this.next[id] = -1;
    if (this.tail >= 0) this.next[this.tail] = id;
    else this.head = id;
    this.tail = id;
    this.evictableCount++;
  }

  /** Leading blocks of `ids` that are resident (the prefix-cache hit, in blocks). */
  prefixHit(ids: Int32Array, nBlocks: number): number {
    let i = 0;
    while (i < nBlocks && this.refOf(ids[i]!) !== ABSENT) i++;
    return i;
  }

  /** Makes `n` blocks free by evicting least recently used unpinned blocks; false if impossible. */
  private makeRoom(n: number): boolean {
    const free = this.capacityBlocks - this.usedBlocks;
    if (free >= n) return true;
    const need = n - free;
    if (need > this.evictableCount) return false;
    const gone = new Int32Array(need);
    for (let i = 0; i < need; i++) {
      const id = this.head;
      this.unlink(id);
      this.refs[id] = ABSENT;
      gone[i] = id;
    }
    this.resident -= need;
    this.evictions += need;
    this.sink?.removed(this.ids.pairs(gone));
    return true;
  }

  /**
   * Admits a request: pins its first `hit` blocks (resident), and reserves `reserve` more blocks (the rest of its
   * prompt and whatever else it will hold). False, with nothing changed, when the cache cannot make room.
   */
  admit(ids: Int32Array, hit: number, reserve: number): boolean {
    // the hit blocks stop being evictable, so room must come from the others
    let hitEvictable = 0;
    for (let i = 0; i < hit; i++) if (this.refs[ids[i]!] === 0) hitEvictable++;
    if (reserve > this.capacityBlocks - this.usedBlocks + this.evictableCount - hitEvictable) return false;
    for (let i = 0; i < hit; i++) {
      const id = ids[i]!;
      if (this.refs[id] === 0) this.unlink(id);
      this.refs[id]!++;
    }
    this.makeRoom(reserve);
    this.privateBlocks += reserve;
    return true;
  }

  /**
   * Blocks [from, to) of `ids` are now computed: each turns one reserved block into a pinned hashed block (or,
   * when another request computed the same block meanwhile, shares it and gives the reservation back).
   */
  commit(ids: Int32Array, from: number, to: number): void {
    let fresh: number[] | null = null;
    for (let i = from; i < to; i++) {
      const id = ids[i]!;
      this.ensure(id);
      const r = this.refs[id]!;
      this.privateBlocks--;
      if (r !== ABSENT) {
        if (r === 0) this.unlink(id);
        this.refs[id] = r + 1;
      } else {
        this.refs[id] = 1;
        this.resident++;
        (fresh ??= []).push(id);
      }
    }
    if (fresh && this.sink) this.sink.stored(this.ids.pairs(fresh));
  }

  /** A request is done with blocks [0, n) of `ids` and with `reserved` private blocks. */
  release(ids: Int32Array, n: number, reserved: number): void {
    for (let i = 0; i < n; i++) {
      const id = ids[i]!;
      const r = this.refOf(id);
      if (r === ABSENT) continue;
      if (r <= 1) {
        if (r === 0) this.unlink(id); // touch: most recently used goes last
        this.refs[id] = 0;
        this.pushMostRecent(id);
      } else this.refs[id] = r - 1;
    }
    this.privateBlocks -= reserved;
  }

  /** Caches blocks a finished request produced (e.g. a conversation's output) as unpinned, most recent. */
  cacheUnpinned(ids: Int32Array, from: number, to: number): void {
    const stored: number[] = [];
    for (let i = from; i < to; i++) {
      const id = ids[i]!;
      if (this.refOf(id) !== ABSENT) continue;
      if (!this.makeRoom(1)) break;
      this.ensure(id);
      this.refs[id] = 0;
      this.resident++;
      this.pushMostRecent(id);
      stored.push(id);
    }
    if (stored.length > 0) this.sink?.stored(this.ids.pairs(stored));
  }
}
