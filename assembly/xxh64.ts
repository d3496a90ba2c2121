// XXH64 (Yann Collet's xxHash, 64-bit variant; spec: github.com/Cyan4973/xxHash doc/xxhash_spec.md).
// Entry points: general bytes, the 64-byte token block (xxh64Of64), the 16-byte chaining step LE64(a) ‖ LE64(b),
// and the 72-byte text-block step (64 bytes ‖ LE64(prev)). The specialised forms avoid copying into a scratch
// buffer and are inlined into blocks.ts's loops.

// @ts-ignore: decorator
@inline export const P1: u64 = 11400714785074694791;
// @ts-ignore: decorator
@inline export const P2: u64 = 14029467366897019727;
// @ts-ignore: decorator
@inline export const P3: u64 = 1609587929392839161;
// @ts-ignore: decorator
@inline export const P4: u64 = 9650029242287828579;
// @ts-ignore: decorator
@inline export const P5: u64 = 2870177450012600261;

// @ts-ignore: decorator
@inline export function round(acc: u64, input: u64): u64 {
  return rotl<u64>(acc + input * P2, 31) * P1;
}

// @ts-ignore: decorator
@inline function mergeRound(acc: u64, val: u64): u64 {
  return (acc ^ round(0, val)) * P1 + P4;
}

// @ts-ignore: decorator
@inline function avalanche(h: u64): u64 {
  h ^= h >> 33;
  h *= P2;
  h ^= h >> 29;
  h *= P3;
  h ^= h >> 32;
  return h;
}

// @ts-ignore: decorator
@inline function mix8(h: u64, k: u64): u64 {
  return rotl<u64>(h ^ round(0, k), 27) * P1 + P4;
}

/** The four lanes folded into one (inputs of 32 bytes or more). */
// @ts-ignore: decorator
@inline export function converge(v1: u64, v2: u64, v3: u64, v4: u64): u64 {
  let h = rotl<u64>(v1, 1) + rotl<u64>(v2, 7) + rotl<u64>(v3, 12) + rotl<u64>(v4, 18);
  h = mergeRound(h, v1);
  h = mergeRound(h, v2);
  h = mergeRound(h, v3);
  return mergeRound(h, v4);
}

/** The last step of every xxh64: fold in the bytes [p, end) left after the stripes, then avalanche. */
// @ts-ignore: decorator
@inline export function finish(h: u64, p: usize, end: usize): u64 {
  while (p + 8 <= end) {
    h = mix8(h, load<u64>(p));
    p += 8;
  }
  if (p + 4 <= end) {
    h ^= <u64>load<u32>(p) * P1;
    h = rotl<u64>(h, 23) * P2 + P3;
    p += 4;
  }
  while (p < end) {
    h ^= <u64>load<u8>(p) * P5;
    h = rotl<u64>(h, 11) * P1;
    p++;
  }
  return avalanche(h);
}

/** xxh64 of `len` bytes at `ptr`. The caller guarantees [ptr, ptr+len) lies in memory. */
export function xxh64(ptr: usize, len: usize, seed: u64): u64 {
  let p = ptr;
  const end = ptr + len;
  let h: u64;
  if (len >= 32) {
    let v1 = seed + P1 + P2;
    let v2 = seed + P2;
    let v3 = seed;
    let v4 = seed - P1;
    const limit = end - 32;
    do {
      v1 = round(v1, load<u64>(p));
      v2 = round(v2, load<u64>(p, 8));
      v3 = round(v3, load<u64>(p, 16));
      v4 = round(v4, load<u64>(p, 24));
      p += 32;
    } while (p <= limit);
    h = converge(v1, v2, v3, v4);
  } else {
    h = seed + P5;
  }
  return finish(h + <u64>len, p, end);
}

// @ts-ignore: decorator
@inline const P1P2: u64 = P1 * P2; // mod 2^64

/**
 * xxh64 (seed 0) of the 64 bytes at `p`: the token-mode block hash c_i at the default block size (16 ids). The
 * same value as xxh64(p, 64, 0), computed with a shorter dependency chain: each lane's second round stops before
 * its multiply by P1 (r), and the merge round's round(0, v) = rotl(v × P2, 31) × P1 with v = r × P1 becomes
 * rotl(r × (P1·P2), 31) × P1, so v and round(0, v) are two independent multiplies of r instead of three in a row.
 */
// @ts-ignore: decorator
@inline export function xxh64Of64(p: usize): u64 {
  const v1 = round(P1 + P2, load<u64>(p));
  const v2 = round(P2, load<u64>(p, 8));
  const v3 = round(0, load<u64>(p, 16));
  const v4 = round(0 - P1, load<u64>(p, 24));
  const r1 = rotl<u64>(v1 + load<u64>(p, 32) * P2, 31);
  const r2 = rotl<u64>(v2 + load<u64>(p, 40) * P2, 31);
  const r3 = rotl<u64>(v3 + load<u64>(p, 48) * P2, 31);
  const r4 = rotl<u64>(v4 + load<u64>(p, 56) * P2, 31);
  let h = rotl<u64>(r1 * P1, 1) + rotl<u64>(r2 * P1, 7) + rotl<u64>(r3 * P1, 12) + rotl<u64>(r4 * P1, 18);
  h = (h ^ (rotl<u64>(r1 * P1P2, 31) * P1)) * P1 + P4;
  h = (h ^ (rotl<u64>(r2 * P1P2, 31) * P1)) * P1 + P4;
  h = (h ^ (rotl<u64>(r3 * P1P2, 31) * P1)) * P1 + P4;
  h = (h ^ (rotl<u64>(r4 * P1P2, 31) * P1)) * P1 + P4;
  return avalanche(h + 64);
}

/** xxh64(LE64(a) ‖ LE64(b), seed 0): the chaining step of token-mode block hashing. */
// @ts-ignore: decorator
@inline export function xxh64Pair(a: u64, b: u64): u64 {
  let h: u64 = P5 + 16;
  h = mix8(h, a);
  h = mix8(h, b);
  return avalanche(h);
}

/** xxh64(64 bytes at ptr ‖ LE64(prev), seed 0): the text-mode block step (72 bytes). */
export function xxh64Block64(ptr: usize, prev: u64): u64 {
  let v1: u64 = P1 + P2;
  let v2: u64 = P2;
  let v3: u64 = 0;
  let v4: u64 = 0 - P1;
  v1 = round(v1, load<u64>(ptr));
  v2 = round(v2, load<u64>(ptr, 8));
  v3 = round(v3, load<u64>(ptr, 16));
  v4 = round(v4, load<u64>(ptr, 24));
  v1 = round(v1, load<u64>(ptr, 32));
  v2 = round(v2, load<u64>(ptr, 40));
  v3 = round(v3, load<u64>(ptr, 48));
  v4 = round(v4, load<u64>(ptr, 56));
  let h = rotl<u64>(v1, 1) + rotl<u64>(v2, 7) + rotl<u64>(v3, 12) + rotl<u64>(v4, 18);
  h = mergeRound(h, v1);
  h = mergeRound(h, v2);
  h = mergeRound(h, v3);
  h = mergeRound(h, v4);
  h += 72;
  h = mix8(h, prev);
  return avalanche(h);
}
