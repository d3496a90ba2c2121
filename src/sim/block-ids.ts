// Block ids: the small dense integers a cache names blocks by instead of their 64-bit hashes (the emulated worker's
// caches use BlockIds; a simulation, ChainedBlockIds in chained-ids.ts, which interns chained prompts faster), and
// the way back from ids to hashes (BlockHashes) that KV events need.

/** The hashes blocks are named by, for KV events: BlockIds, or ChainedBlockIds in a simulation. */
export interface BlockHashes {
  /** The (lo, hi) pairs of some ids. */
  pairs(ids: ArrayLike<number>, n?: number): Uint32Array;
}

/** The (lo, hi) pairs of the first `n` ids, from a table holding id's hash at (2 id, 2 id + 1). */
export function pairsOfIds(hashes: Uint32Array, ids: ArrayLike<number>, n: number): Uint32Array {
  const out = new Uint32Array(2 * n);
  for (let i = 0; i < n; i++) {
    const id = ids[i]!;
    out[2 * i] = hashes[2 * id]!;
    out[2 * i + 1] = hashes[2 * id + 1]!;
  }
  return out;
}

/** Interns 64-bit block hashes, given as (lo, hi) pairs, to dense ids 0, 1, 2, … (open addressing). */
export class BlockIds implements BlockHashes {
  /** id's hash at (2 id, 2 id + 1): one cache line holds both halves a probe compares */
  private hashes = new Uint32Array(2 << 16);
  private slots = new Int32Array(1 << 17).fill(-1); // id per slot, −1 empty; load ≤ 1/2
  count = 0;

  /**
   * Ids of the first `n` pairs of `pairs`. `like`: pairs interned before with their ids (a conversation's previous
   * turn): the leading pairs both share take its ids, compared in place instead of looked up in the table.
   */
  intern(pairs: Uint32Array, n = pairs.length >>> 1, like?: { pairs: Uint32Array; ids: Int32Array }): Int32Array {
    const out = new Int32Array(n);
    let i = 0;
    if (like) {
      const shared = Math.min(n, like.ids.length, like.pairs.length >>> 1);
      const p = like.pairs;
      while (i < shared && p[2 * i] === pairs[2 * i] && p[2 * i + 1] === pairs[2 * i + 1]) {
        out[i] = like.ids[i]!;
        i++;
      }
    }
    for (; i < n; i++) out[i] = this.id(pairs[2 * i]!, pairs[2 * i + 1]!);
    return out;
  }

  id(lo: number, hi: number): number {
    if (this.count * 2 >= this.slots.length) this.grow();
    const mask = this.slots.length - 1;
    const hashes = this.hashes;
    let s = (Math.imul(lo ^ Math.imul(hi, 0x9e3779b1), 0x85ebca6b) >>> 0) & mask;
    for (;;) {
      const id = this.slots[s]!;
      if (id < 0) break;
      if (hashes[2 * id] === lo && hashes[2 * id + 1] === hi) return id;
      s = (s + 1) & mask;
    }
    const id = this.count++;
    if (2 * id >= this.hashes.length) {
      const grown = new Uint32Array(this.hashes.length * 2);
      grown.set(this.hashes);
      this.hashes = grown;
    }
    this.hashes[2 * id] = lo;
    this.hashes[2 * id + 1] = hi;
    this.slots[s] = id;
    return id;
  }

  /** The (lo, hi) pairs of some ids (for KV events). */
  pairs(ids: ArrayLike<number>, n = ids.length): Uint32Array {
    return pairsOfIds(this.hashes, ids, n);
  }

  private grow(size = this.slots.length * 2): void {
    const slots = new Int32Array(size).fill(-1);
    const mask = slots.length - 1;
    const hashes = this.hashes;
    for (let id = 0; id < this.count; id++) {
      let s = (Math.imul(hashes[2 * id]! ^ Math.imul(hashes[2 * id + 1]!, 0x9e3779b1), 0x85ebca6b) >>> 0) & mask;
      while (slots[s]! >= 0) s = (s + 1) & mask;
      slots[s] = id;
    }
    this.slots = slots;
  }
}
