// Block ids for a simulated workload, interned by prompt rather than by hash.
//
// A prompt's block hashes are chained (SimRequest.blocks): block i's hash covers the whole prefix up to it, so two
// prompts with the same hash at some block share every block before it, and a prompt's blocks that no earlier prompt
// had form a suffix: once one is new, all the rest are. Interning a prompt therefore only has to find where its known
// prefix ends. New blocks get consecutive ids (a run), so a later prompt that shares a run's prefix finds each next
// block at the id after the last one (a compare in the id → hash array, read in order), and only a block that leaves
// the run it is on needs the hash table. Every such block is the first of a run: the table holds run starts only
// (at most one per prompt), not every hash. Interning the 32P32D scale workload's 77.6 M hashes was 11.7 s with a
// table of every hash (a cache miss each); this reads them in order instead.
//
// Why the table needs only run starts: take a known block b at position i+1 of a prompt whose block i has id x.
// The first prompt that had b also had block i = x before it. If that block was new there, so was b (the suffix
// rule), and b got the id after it: x + 1. If it was not new there, b was the first new block of that prompt: a
// run start, in the table. So b is at x + 1 or in the table; block 0 of any prompt is always a run start.
//
// The ids are the same partition of hashes as interning each hash (BlockIds) gives, for chained hashes; which
// numbers they get does not change a simulation (caches find blocks by id and order them by use).

import { pairsOfIds, type BlockHashes } from "./block-ids.js";

export class ChainedBlockIds implements BlockHashes {
  /** id's hash at (2 id, 2 id + 1) */
  private hashes = new Uint32Array(2 << 16);
  /** run starts: id per slot, −1 empty (open addressing, linear probing); load ≤ 1/2 */
  private slots = new Int32Array(1 << 12).fill(-1);
  private runStarts = 0;
  count = 0;

  /**
   * Ids of a prompt's blocks, given as chained (lo, hi) hash pairs: written to `out` when given (its first
   * pairs.length / 2 places; many prompts' ids can share one buffer), else to a new array.
   */
  intern(pairs: Uint32Array, out: Int32Array = new Int32Array(pairs.length >>> 1)): Int32Array {
    const n = pairs.length >>> 1;
    if (n === 0) return out;
    // room for every block being new, so the loops below never grow the array
    if (2 * (this.count + n) > this.hashes.length) this.growHashes(this.count + n);
    const hashes = this.hashes;
    let i = 0;
    let id = this.runStart(pairs[0]!, pairs[1]!);
    if (id >= 0) {
      // the known prefix: each block at the id after the one before, or at a run start
      out[0] = id;
      for (i = 1; i < n; i++) {
        const lo = pairs[2 * i]!;
        const hi = pairs[2 * i + 1]!;
        const next = id + 1;
        if (next < this.count && hashes[2 * next] === lo && hashes[2 * next + 1] === hi) id = next;
        else if ((id = this.runStart(lo, hi)) < 0) break;
        out[i] = id;
      }
      if (i === n) return out;
    }
    // the new suffix from block i: one run of consecutive ids, its first block a run start
    this.addRunStart(pairs[2 * i]!, pairs[2 * i + 1]!, this.count);
    for (; i < n; i++) {
      const next = this.count++;
      hashes[2 * next] = pairs[2 * i]!;
      hashes[2 * next + 1] = pairs[2 * i + 1]!;
      out[i] = next;
    }
    return out;
  }

  /**
   * Room for `blocks` more ids at once (an upper bound: the blocks of prompts about to be interned), instead of
   * doubling step by step and copying every hash each time; pages of it no id reaches are never touched.
   */
  reserve(blocks: number): void {
    if (2 * (this.count + blocks) > this.hashes.length) this.growHashes(this.count + blocks, true);
  }

  /** The (lo, hi) pairs of some ids (for KV events). */
  pairs(ids: ArrayLike<number>, n = ids.length): Uint32Array {
    return pairsOfIds(this.hashes, ids, n);
  }

  private home(lo: number, hi: number, mask: number): number {
    return (Math.imul(lo ^ Math.imul(hi, 0x9e3779b1), 0x85ebca6b) >>> 0) & mask;
  }

  /** The id of the run start with this hash, or −1. */
  private runStart(lo: number, hi: number): number {
    const slots = this.slots;
    const hashes = this.hashes;
    const mask = slots.length - 1;
    for (let s = this.home(lo, hi, mask); ; s = (s + 1) & mask) {
      const id = slots[s]!;
      if (id < 0) return -1;
      if (hashes[2 * id] === lo && hashes[2 * id + 1] === hi) return id;
    }
  }

  private addRunStart(lo: number, hi: number, id: number): void {
    if (2 * (this.runStarts + 1) > this.slots.length) this.growSlots();
    const slots = this.slots;
    const mask = slots.length - 1;
    let s = this.home(lo, hi, mask);
    while (slots[s]! >= 0) s = (s + 1) & mask;
    slots[s] = id;
    this.runStarts++;
  }

  /** Room for `ids` ids: the next power of two, or just that many (`exact`, for a reservation). */
  private growHashes(ids: number, exact = false): void {
    let size = this.hashes.length;
    if (exact) size = 2 * ids;
    else while (size < 2 * ids) size *= 2;
    const grown = new Uint32Array(size);
    grown.set(this.hashes.subarray(0, 2 * this.count));
    this.hashes = grown;
  }

  private growSlots(): void {
    const old = this.slots;
    const slots = new Int32Array(old.length * 2).fill(-1);
    const mask = slots.length - 1;
    const hashes = this.hashes;
    for (const id of old) {
      if (id < 0) continue;
      let s = this.home(hashes[2 * id]!, hashes[2 * id + 1]!, mask);
      while (slots[s]! >= 0) s = (s + 1) & mask;
      slots[s] = id;
    }
    this.slots = slots;
  }
}
