// Chained block hashing. Scheme 0, the default (xxh64-chain): llm-d's approximate prefix scheme as llm-d-router's
// newer source writes it (reference-systems.md; that source cannot be built here, so spec/vectors/hashes.json is our
// own reading of it):
//   h_0 = xxh64(model ‖ "\0" ‖ cache_salt)   (xxh64 of no bytes when both are empty)
//   tokens: c_i = xxh64(LE u32 ids of block i), h_i = xxh64(LE64(c_i) ‖ LE64(h_{i−1}))
//   text:   h_i = xxh64(64 bytes of block i ‖ LE64(h_{i−1}))
// Trailing partial blocks are not hashed. WebAssembly memory is little-endian, so the u32 ids the host wrote
// are already the bytes the scheme hashes. Scheme 1 (llm-d-cbor-fnv, tokens only): llm-d-kv-cache's, in cbor-fnv.ts.

import { cborFnvBlocks, cborFnvRoot } from "./cbor-fnv";
import { LIMIT_TEXT_BLOCK_BYTES, SCHEME_LLM_D_CBOR_FNV, SCHEME_XXH64_CHAIN } from "./generated/abi";
import { xxh64, xxh64Block64, xxh64Of64, xxh64Pair } from "./xxh64";

// @ts-ignore: decorator
@inline export const TEXT_BLOCK_BYTES: i32 = LIMIT_TEXT_BLOCK_BYTES;
// @ts-ignore: decorator
@inline export const MAX_BLOCK_SIZE: i32 = 4096;

export let root: u64 = 0xef46db3751d8e999; // xxh64 of no bytes, seed 0
export let blockSize: i32 = 16;
/** The block-hash scheme (spec/abi.json hash_schemes): the xxh64 chain, or llm-d's cbor-fnv (assembly/cbor-fnv.ts). */
export let scheme: i32 = SCHEME_XXH64_CHAIN;

export function setRootFrom(ptr: usize, len: i32): void {
  root = xxh64(ptr, <usize>len, 0);
  scheme = SCHEME_XXH64_CHAIN;
}

/** Selects `s` with its root from the seed's `seedLen` bytes then the model's `modelLen` bytes at `ptr`; false if unknown. */
export function setSchemeFrom(s: i32, ptr: usize, seedLen: i32, modelLen: i32): bool {
  if (s == SCHEME_XXH64_CHAIN) {
    setRootFrom(ptr, seedLen + modelLen);
    return true;
  }
  if (s != SCHEME_LLM_D_CBOR_FNV) return false;
  root = cborFnvRoot(ptr, seedLen, ptr + <usize>seedLen, modelLen);
  scheme = s;
  return true;
}

export function setBlockSizeValue(n: i32): bool {
  if (n < 1 || n > MAX_BLOCK_SIZE) return false;
  blockSize = n;
  return true;
}

/**
 * Hashes the full blocks of `nTokens` u32 ids at `ptr` into `out` (u64 each); returns the block count.
 * Each block's own hash c_i is independent of the others; only the chain h_i = xxh64(c_i ‖ h_{i−1}) is
 * sequential.
 */
export function hashTokenBlocks(ptr: usize, nTokens: i32, out: usize): i32 {
  const bs = blockSize;
  if (scheme == SCHEME_LLM_D_CBOR_FNV) return cborFnvBlocks(ptr, nTokens, bs, root, out);
  const blocks = nTokens / bs;
  if (bs == 16) {
    hash64ByteBlocks(ptr, blocks, out);
    return blocks;
  }
  const blockBytes = <usize>bs << 2;
  let prev = root;
  for (let i = 0; i < blocks; i++) {
    prev = xxh64Pair(xxh64(ptr + <usize>i * blockBytes, blockBytes, 0), prev);
    store<u64>(out + (<usize>i << 3), prev);
  }
  return blocks;
}

/**
 * The default 16-id (64-byte) blocks, software-pipelined two blocks ahead: iteration i hashes block i+2 (c_{i+2})
 * while it chains block i. The chain step is a ~25-cycle dependency from h_{i−1} to h_i; hashing a block is a
 * longer one of its own (~50 cycles) but independent of the chain, so with c_i ready two iterations early the CPU
 * overlaps the two instead of waiting on each block's hash before its chain step. Measured against the
 * interleave-two-then-chain loop this replaced: 10% less time for 1,250 blocks (V8, x86-64); one block ahead or
 * three, four blocks interleaved, or the stripes in i64x2 lanes were all slower.
 */
function hash64ByteBlocks(ptr: usize, blocks: i32, out: usize): void {
  let prev = root;
  let j = 0;
  if (blocks >= 2) {
    let c0 = xxh64Of64(ptr);
    let c1 = xxh64Of64(ptr + 64);
    for (; j + 2 < blocks; j++) {
      const c2 = xxh64Of64(ptr + (<usize>(j + 2) << 6)); // bounded by blocks: j + 2 < blocks
      prev = xxh64Pair(c0, prev);
      store<u64>(out + (<usize>j << 3), prev);
      c0 = c1;
      c1 = c2;
    }
    prev = xxh64Pair(c0, prev);
    store<u64>(out + (<usize>j << 3), prev);
    j++;
    prev = xxh64Pair(c1, prev);
    store<u64>(out + (<usize>j << 3), prev);
    j++;
  }
  // fewer than two blocks (the form of this tail changes how V8 allocates the loop's registers: keep it, measure)
  for (; j < blocks; j++) {
    prev = xxh64Pair(xxh64Of64(ptr + (<usize>j << 6)), prev);
    store<u64>(out + (<usize>j << 3), prev);
  }
}

/** Hashes the full 64-byte blocks of `nBytes` UTF-8 bytes at `ptr` into `out`; returns the block count. */
export function hashTextBlocks(ptr: usize, nBytes: i32, out: usize): i32 {
  const blocks = nBytes / TEXT_BLOCK_BYTES;
  let prev = root;
  let p = ptr;
  for (let i = 0; i < blocks; i++) {
    prev = xxh64Block64(p, prev);
    store<u64>(out + (<usize>i << 3), prev);
    p += <usize>TEXT_BLOCK_BYTES;
  }
  return blocks;
}
