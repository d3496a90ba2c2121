// One instance's KV cache as vLLM's prefix cache manages it: a fixed number of 16-token blocks; hashed (full,
// computed) blocks are shared by every request whose prompt contains them and stay cached after their requests
// finish until evicted, least recently used first; blocks a running request pins cannot be evicted. Private
// blocks (a trailing partial block, and the reservation for output tokens) are counted but never shared.
// Every store and eviction is reported, as a vLLM worker publishes BlockStored / BlockRemoved KV events (unless a
// KvEventFilter holds stores back: the simulator sends the router only what can change a match; cache-events.ts).
//
// Blocks are named by small integer ids (block-ids.ts: each distinct 64-bit hash interned once per simulation), so
// the cache is typed arrays: a pin count per id and an intrusive LRU list of unpinned resident blocks. No strings,
// no per-block objects.

import type { BlockHashes } from "./block-ids.js";
import type { KvEventFilter, KvEventSink } from "./cache-events.js";

const ABSENT = -1;
const EMPTY = -1;
// a slot record's fields (KvCache.rec)
const REFS = 0;
const PREV = 1;
const NEXT = 2;
const ID = 3;
/**
 * The id → slot table is kept by chunk: ids that differ only in their low CHUNK_BITS share one bucket, a 64-byte
 * line of BUCKET ints holding the chunk's key, how many of its ids are resident, and a slot (or ABSENT) per id.
 * A prompt's new blocks get consecutive ids (ChainedBlockIds), so committing, matching or evicting a run of them
 * reads one line per CHUNK ids; and the table holds one key per chunk, not per block, so its probe runs stay short
 * (with a key per block, runs of consecutive ids made long clusters that every deletion's backward shift scanned).
 */
const CHUNK_BITS = 5;
const CHUNK = 1 << CHUNK_BITS;
const KEY = 0;
const LIVE = 1;
const SLOTS = 2;
const BUCKET = SLOTS + CHUNK;

/**
 * One instance's KV cache. Block ids are global to the simulation (every instance's blocks), so arrays indexed by
 * id would cost every instance memory in proportion to the whole cluster's distinct blocks (tens of millions at
 * 32P32D); instead each resident block takes a local slot (at most about the capacity), found through a small
 * open-addressing table from id to slot. The behaviour is the same; only the storage is per instance.
 */
export class KvCache {
  readonly capacityBlocks: number;
  private readonly ids: BlockHashes;
  private readonly sink: KvEventSink | null;
  private readonly filter: KvEventFilter | null;
  /**
   * id → slot, by chunk (CHUNK_BITS): bucket p is buckets[BUCKET p, BUCKET (p + 1)); linear probing on the chunk
   * key, EMPTY keys free, backward-shift deletion (no tombstones); at most half the buckets in use.
   */
  private buckets = new Int32Array(BUCKET * 256).fill(EMPTY);
  private bucketMask = 256 - 1;
  private bucketShift = 32 - 8;
  private bucketsUsed = 0;
  private lastChunk = -1;
  private lastBucket = 0;
  /**
   * per slot s, one 16-byte record (one cache line holds it whole): pin count at 4s + REFS, LRU links (slots) at
   * 4s + PREV and 4s + NEXT, and at 4s + ID the block id it holds when the block's store was reported (so its
   * eviction is reported too), or ~id (negative) when not. An eviction or a pin touches one line, not several.
   */
  private rec = new Int32Array(4 * 1024);
  /**
   * Slots given back by evictions, reused first and in the order they were freed (a ring of freeCount slots from
   * freeHead): evictions free a run of blocks' slots in LRU order, which is the order a request committed them, so
   * the next request's run gets them back in order and its records lie in consecutive lines again (reusing the
   * last freed first would reverse the run at every reuse, and scatter it once runs interleave).
   */
  private free = new Int32Array(1024);
  private freeHead = 0;
  private freeCount = 0;
  private slotCount = 0;
  /** makeRoom's list of the evicted blocks it reports, kept between calls */
  private gone = new Int32Array(64);
  /** LRU list of resident unpinned blocks (slots): head = least recently used */
  private head = -1;
  private tail = -1;
  private resident = 0;
  private evictableCount = 0;
  private privateBlocks = 0;
  evictions = 0;

  constructor(capacityBlocks: number, ids: BlockHashes, sink: KvEventSink | null, filter: KvEventFilter | null = null) {
    this.capacityBlocks = capacityBlocks;
    this.ids = ids;
    this.sink = sink;
    this.filter = filter;
  }

  get usedBlocks(): number {
    return this.resident + this.privateBlocks;
  }

  /** Blocks that could be made free now: free ones plus evictable cached ones. */
  get availableBlocks(): number {
    return this.capacityBlocks - this.usedBlocks + this.evictableCount;
  }

  // ---- the id → slot table ---------------------------------------------------------------------------------

  /** Where a chunk's probe starts: Fibonacci hashing (the product's top bits). */
  private home(chunk: number): number {
    return Math.imul(chunk, 0x9e3779b1) >>> this.bucketShift;
  }

  /**
   * The bucket holding `chunk`, or the free one where it would go. The last answer is kept: a run of consecutive
   * ids asks for the same chunk CHUNK times in a row, and a bucket whose key is the chunk is its bucket (so the
   * kept answer stays right across growth and deletions whenever that key check passes).
   */
  private bucketOf(chunk: number): number {
    const b = this.buckets;
    if (chunk === this.lastChunk && b[BUCKET * this.lastBucket + KEY] === chunk) return this.lastBucket;
    this.lastChunk = chunk;
    return (this.lastBucket = this.probe(chunk));
  }

  private probe(chunk: number): number {
    const b = this.buckets;
    const mask = this.bucketMask;
    for (let p = this.home(chunk); ; p = (p + 1) & mask) {
      const k = b[BUCKET * p + KEY]!;
      if (k === chunk || k === EMPTY) return p;
    }
  }

  /** The slot holding block `id`, or ABSENT when it is not resident. */
  private slotOf(id: number): number {
    const base = BUCKET * this.bucketOf(id >>> CHUNK_BITS);
    const b = this.buckets;
    return b[base + KEY] === EMPTY ? ABSENT : b[base + SLOTS + (id & (CHUNK - 1))]!;
  }

  /** A fresh slot for block `id` (not resident), entered in the table; `publish` then records the id in it. */
  private addSlot(id: number): number {
    const slot = this.takeSlot();
    if (2 * (this.bucketsUsed + 1) > this.bucketMask + 1) this.growBuckets();
    const chunk = id >>> CHUNK_BITS;
    const base = BUCKET * this.bucketOf(chunk);
    const b = this.buckets;
    if (b[base + KEY] === EMPTY) this.claim(base, chunk);
    b[base + LIVE]!++;
    b[base + SLOTS + (id & (CHUNK - 1))] = slot;
    return slot;
  }

  /** A slot for a block about to be stored: the longest-free one, or a new one (which may grow this.rec). */
  private takeSlot(): number {
    if (this.freeCount > 0) {
      const slot = this.free[this.freeHead]!;
      this.freeHead = this.freeHead + 1 === this.free.length ? 0 : this.freeHead + 1;
      this.freeCount--;
      return slot;
    }
    const slot = this.slotCount++;
    if (4 * slot >= this.rec.length) this.growSlots();
    return slot;
  }

  /** Makes the empty bucket at `base` the chunk's (room checked by the caller). */
  private claim(base: number, chunk: number): void {
    const b = this.buckets;
    b[base + KEY] = chunk;
    b[base + LIVE] = 0;
    b.fill(ABSENT, base + SLOTS, base + BUCKET);
    this.bucketsUsed++;
  }

  /** Empties bucket i (backward-shift deletion keeps probe runs whole). */
  private dropBucket(i: number): void {
    const b = this.buckets;
    const mask = this.bucketMask;
    for (let j = (i + 1) & mask; b[BUCKET * j + KEY] !== EMPTY; j = (j + 1) & mask) {
      const h = this.home(b[BUCKET * j + KEY]!);
      // the bucket at j may move back to i unless its home lies cyclically in (i, j]
      if (i <= j ? h <= i || h > j : h <= i && h > j) {
        b.copyWithin(BUCKET * i, BUCKET * j, BUCKET * (j + 1));
        i = j;
      }
    }
    b[BUCKET * i + KEY] = EMPTY;
    this.bucketsUsed--;
  }

  private growBuckets(): void {
    const old = this.buckets;
    const b = (this.buckets = new Int32Array(old.length * 2).fill(EMPTY));
    this.bucketShift--;
    const mask = (this.bucketMask = 2 * this.bucketMask + 1);
    for (let q = 0; q < old.length; q += BUCKET) {
      const chunk = old[q + KEY]!;
      if (chunk === EMPTY) continue;
      let p = this.home(chunk);
      while (b[BUCKET * p + KEY] !== EMPTY) p = (p + 1) & mask;
      b.set(old.subarray(q, q + BUCKET), BUCKET * p);
    }
  }

  /** More slots, taken only when none is free (so the ring of free slots is empty and starts over). */
  private growSlots(): void {
    const n = this.free.length * 2;
    const rec = new Int32Array(4 * n);
    rec.set(this.rec);
    this.rec = rec;
    this.free = new Int32Array(n);
    this.freeHead = 0;
  }

  // ---- the LRU list (of slots) -----------------------------------------------------------------------------

  private unlink(slot: number): void {
    const rec = this.rec;
    const p = rec[4 * slot + PREV]!;
    const n = rec[4 * slot + NEXT]!;
    if (p >= 0) rec[4 * p + NEXT] = n;
    else this.head = n;
    if (n >= 0) rec[4 * n + PREV] = p;
    else this.tail = p;
    this.evictableCount--;
  }

  private pushMostRecent(slot: number): void {
    const rec = this.rec;
    rec[4 * slot + PREV] = this.tail;
    rec[4 * slot + NEXT] = -1;
    if (this.tail >= 0) rec[4 * this.tail + NEXT] = slot;
    else this.head = slot;
    this.tail = slot;
    this.evictableCount++;
  }

  /** Records block `id` in its new slot, reported or not: whether its store is reported (and later its eviction). */
  private publish(slot: number, id: number): boolean {
    const wanted = this.filter === null || this.filter.wanted(id);
    this.rec[4 * slot + ID] = wanted ? id : ~id;
    return wanted;
  }

  // ---- the cache -------------------------------------------------------------------------------------------

  /**
   * Leading blocks of `ids` that are resident (the prefix-cache hit, in blocks); with `slots`, each hit block's slot
   * is written there, for `admit` (a resident block keeps its slot until evicted, and a pinned one cannot be).
   */
  prefixHit(ids: Int32Array, nBlocks: number, slots?: Int32Array): number {
    let i = 0;
    for (; i < nBlocks; i++) {
      const slot = this.slotOf(ids[i]!);
      if (slot === ABSENT) break;
      if (slots) slots[i] = slot;
    }
    return i;
  }

  /**
   * Reports stores a reader is about to need: of the blocks of `ids` from `from` on, as long as each is resident
   * here, those whose store the filter held back, in prompt order.
   */
  publishFrom(ids: Int32Array, from: number): void {
    let late: number[] | null = null;
    for (let i = from; i < ids.length; i++) {
      const slot = this.slotOf(ids[i]!);
      if (slot === ABSENT) break;
      if (this.rec[4 * slot + ID]! < 0) {
        this.rec[4 * slot + ID] = ids[i]!;
        this.filter?.heldBackEnds?.(ids[i]!);
        (late ??= []).push(ids[i]!);
      }
    }
    if (late && this.sink) this.sink.stored(this.ids.pairs(late));
  }

  /**
   * Makes `n` blocks free by evicting least recently used unpinned blocks; false if impossible. The evicted blocks
   * are the first `need` of the LRU list: walked in one pass (the list is cut after them once), each block's
   * table entry and slot given back as it goes.
   */
  private makeRoom(n: number): boolean {
    const free = this.capacityBlocks - this.usedBlocks;
    if (free >= n) return true;
    const need = n - free;
    if (need > this.evictableCount) return false;
    if (this.gone.length < need) this.gone = new Int32Array(Math.max(need, 2 * this.gone.length));
    const gone = this.gone;
    let reported = 0;
    const rec = this.rec;
    const filter = this.filter;
    const b = this.buckets; // only moved within, never replaced, while evicting
    const ring = this.free;
    let freeAt = this.freeHead + this.freeCount;
    if (freeAt >= ring.length) freeAt -= ring.length;
    let chunk = -1;
    let p = 0;
    let slot = this.head;
    for (let i = 0; i < need; i++) {
      const held = rec[4 * slot + ID]!;
      const id = held < 0 ? ~held : held;
      const next = rec[4 * slot + NEXT]!;
      // out of the table: consecutive ids share their bucket, looked up once
      const c = id >>> CHUNK_BITS;
      if (c !== chunk || b[BUCKET * p + KEY] !== c) p = this.bucketOf((chunk = c));
      b[BUCKET * p + SLOTS + (id & (CHUNK - 1))] = ABSENT;
      if (--b[BUCKET * p + LIVE]! === 0) {
        this.dropBucket(p);
        chunk = -1;
      }
      ring[freeAt] = slot; // fits: the ring has a place for every slot
      if (++freeAt === ring.length) freeAt = 0;
      if (held >= 0) gone[reported++] = id;
      else filter?.heldBackEnds?.(id);
      slot = next;
    }
    this.freeCount += need;
    this.head = slot;
    if (slot >= 0) rec[4 * slot + PREV] = -1;
    else this.tail = -1;
    this.evictableCount -= need;
    this.resident -= need;
    this.evictions += need;
    if (reported > 0) this.sink?.removed(this.ids.pairs(gone, reported));
    return true;
  }

  /**
   * Admits a request: pins its first `hit` blocks (resident), and reserves `reserve` more blocks (the rest of its
   * prompt and whatever else it will hold). False, with nothing changed, when the cache cannot make room.
   */
  admit(ids: Int32Array, hit: number, reserve: number, slots?: Int32Array): boolean {
    // the hit blocks stop being evictable, so room must come from the others; `slots` (filled by prefixHit just
    // before, or null) saves finding each hit block's slot twice more
    const slotAt = (i: number): number => (slots ? slots[i]! : this.slotOf(ids[i]!));
    let hitEvictable = 0;
    for (let i = 0; i < hit; i++) {
      const slot = slotAt(i);
      if (slot !== ABSENT && this.rec[4 * slot + REFS] === 0) hitEvictable++;
    }
    if (reserve > this.capacityBlocks - this.usedBlocks + this.evictableCount - hitEvictable) return false;
    for (let i = 0; i < hit; i++) {
      const slot = slotAt(i); // resident: `hit` comes from prefixHit just before
      if (this.rec[4 * slot + REFS] === 0) this.unlink(slot);
      this.rec[4 * slot + REFS]!++;
    }
    this.makeRoom(reserve);
    this.privateBlocks += reserve;
    return true;
  }

  /**
   * Blocks [from, to) of `ids` are now computed: each turns one reserved block into a pinned hashed block (or,
   * when another request computed the same block meanwhile, shares it and gives the reservation back).
   */
  commit(ids: Int32Array, from: number, to: number, slots?: Int32Array): void {
    if (to <= from) return;
    let fresh: number[] | null = null;
    const filter = this.filter;
    let added = 0;
    for (let i = from; i < to;) {
      // the blocks from i on in the same chunk (a run of consecutive ids) share one bucket, found once
      const chunk = ids[i]! >>> CHUNK_BITS;
      if (2 * (this.bucketsUsed + 1) > this.bucketMask + 1) this.growBuckets();
      const b = this.buckets;
      const base = BUCKET * this.bucketOf(chunk);
      if (b[base + KEY] === EMPTY) this.claim(base, chunk); // its first block is new, so the bucket gets one
      let live = b[base + LIVE]!;
      for (; i < to; i++) {
        const id = ids[i]!;
        if (id >>> CHUNK_BITS !== chunk) break;
        const at = base + SLOTS + (id & (CHUNK - 1));
        let slot = b[at]!;
        if (slot !== ABSENT) {
          // computed meanwhile by another request: share it
          const rec = this.rec;
          const r = rec[4 * slot + REFS]!;
          if (r === 0) this.unlink(slot);
          rec[4 * slot + REFS] = r + 1;
        } else {
          slot = this.takeSlot();
          b[at] = slot;
          live++;
          const rec = this.rec; // taking a slot may have grown it
          rec[4 * slot + REFS] = 1;
          added++;
          const wanted = filter === null || filter.wanted(id);
          rec[4 * slot + ID] = wanted ? id : ~id; // publish, inline
          if (wanted) (fresh ??= []).push(id);
        }
        if (slots) slots[i] = slot;
      }
      b[base + LIVE] = live;
    }
    this.privateBlocks -= to - from;
    this.resident += added;
    if (fresh && this.sink) this.sink.stored(this.ids.pairs(fresh));
  }

  /**
   * A request is done with blocks [0, n) of `ids` and with `reserved` private blocks. `slots`: where admit and
   * commit wrote the pinned blocks' slots (they stay put while pinned), so none is looked up again.
   */
  release(ids: Int32Array, n: number, reserved: number, slots?: Int32Array): void {
    const rec = this.rec;
    let tail = this.tail;
    let unpinned = 0;
    for (let i = 0; i < n; i++) {
      const slot = slots ? slots[i]! : this.slotOf(ids[i]!);
      if (slot === ABSENT) continue;
      const r = rec[4 * slot + REFS]!;
      if (r > 1) {
        rec[4 * slot + REFS] = r - 1;
        continue;
      }
      if (r === 0) {
        // touch: most recently used goes last (unlink reads and may set this.tail)
        this.tail = tail;
        this.unlink(slot);
        tail = this.tail;
      }
      rec[4 * slot + REFS] = 0;
      // pushMostRecent, inline
      rec[4 * slot + PREV] = tail;
      rec[4 * slot + NEXT] = -1;
      if (tail >= 0) rec[4 * tail + NEXT] = slot;
      else this.head = slot;
      tail = slot;
      unpinned++;
    }
    this.tail = tail;
    this.evictableCount += unpinned;
    this.privateBlocks -= reserved;
  }

  /** Caches blocks a finished request produced (e.g. a conversation's output) as unpinned, most recent. */
  cacheUnpinned(ids: Int32Array, from: number, to: number): void {
    const stored: number[] = [];
    for (let i = from; i < to; i++) {
      const id = ids[i]!;
      if (this.slotOf(id) !== ABSENT) continue;
      if (!this.makeRoom(1)) break;
      const slot = this.addSlot(id);
      this.rec[4 * slot + REFS] = 0;
      this.resident++;
      this.pushMostRecent(slot);
      if (this.publish(slot, id)) stored.push(id);
    }
    if (stored.length > 0) this.sink?.stored(this.ids.pairs(stored));
  }
}
