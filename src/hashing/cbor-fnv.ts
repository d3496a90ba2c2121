// llm-d's block hashing on the host (hash scheme 1, "llm-d-cbor-fnv"; llm-d-kv-cache v0.9.0's TokenProcessor), the
// reference engine's oracle for assembly/cbor-fnv.ts:
//   init = FNV-1a-64(UTF-8 hash seed), h_0 = FNV-1a-64(CBOR([init, null, model])),
//   h_i = FNV-1a-64(CBOR([h_{i−1}, [block i's ids], null])), CBOR canonical (shortest heads).
// 64-bit state as u32 halves; known answers in spec/vectors/hashes-cbor-fnv.json. Output as hashes.ts's: (lo, hi)
// pairs, a trailing partial block not hashed.

import { tokenBlocks, type Hash64 } from "./hashes.js";

const OFFSET: Hash64 = { lo: 0x84222325, hi: 0xcbf29ce4 };
const ARRAY3 = 0x83;
const NULL = 0xf6;
const UINT = 0;
const TEXT = 3 << 5;
const ARRAY = 4 << 5;

/** FNV-1a-64 state, mutated byte by byte: h = (h ^ b) × (2^40 + 0x1b3) mod 2^64. */
class Fnv {
  lo = OFFSET.lo;
  hi = OFFSET.hi;

  byte(b: number): void {
    const lo = (this.lo ^ b) >>> 0;
    const low = lo * 0x1b3; // < 2^41: exact
    this.hi = (Math.imul(this.hi, 0x1b3) + Math.floor(low / 2 ** 32) + (lo << 8)) >>> 0;
    this.lo = low >>> 0;
  }

  /** A CBOR head of major type `major` (shifted) and argument hi·2^32 + lo, shortest form. */
  head(major: number, lo: number, hi = 0): void {
    if (hi !== 0) {
      this.byte(major | 27);
      for (let s = 24; s >= 0; s -= 8) this.byte((hi >>> s) & 0xff);
      for (let s = 24; s >= 0; s -= 8) this.byte((lo >>> s) & 0xff);
    } else if (lo < 24) this.byte(major | lo);
    else if (lo < 0x100) {
      this.byte(major | 24);
      this.byte(lo);
    } else if (lo < 0x10000) {
      this.byte(major | 25);
      this.byte(lo >>> 8);
      this.byte(lo & 0xff);
    } else {
      this.byte(major | 26);
      for (let s = 24; s >= 0; s -= 8) this.byte((lo >>> s) & 0xff);
    }
  }

  bytes(b: Uint8Array): void {
    for (const x of b) this.byte(x);
  }
}

/** h_0 of a hash seed and a model name (UTF-8 bytes each). */
export function cborFnvRoot(seed: Uint8Array, model: Uint8Array): Hash64 {
  const init = new Fnv();
  init.bytes(seed);
  const h = new Fnv();
  h.byte(ARRAY3);
  h.head(UINT, init.lo, init.hi);
  h.byte(NULL);
  h.head(TEXT, model.length);
  h.bytes(model);
  return { lo: h.lo, hi: h.hi };
}

/** cbor-fnv hashes of the full `blockSize`-id blocks of `tokens` from `root`, as (lo, hi) pairs (into `outPairs`). */
export function cborFnvTokens(
  tokens: Uint32Array | number[],
  blockSize: number,
  root: Hash64,
  outPairs?: Uint32Array,
): Uint32Array {
  const { nBlocks, pairs, words } = tokenBlocks(tokens, blockSize, outPairs);
  let prev = root;
  for (let i = 0; i < nBlocks; i++) {
    const h = new Fnv();
    h.byte(ARRAY3);
    h.head(UINT, prev.lo, prev.hi);
    h.head(ARRAY, blockSize);
    for (let j = i * blockSize; j < (i + 1) * blockSize; j++) h.head(UINT, words[j]!);
    h.byte(NULL);
    prev = { lo: h.lo, hi: h.hi };
    pairs[2 * i] = h.lo;
    pairs[2 * i + 1] = h.hi;
  }
  return pairs;
}
