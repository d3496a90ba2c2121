// Chained block hashing, bit-exact to llm-d's approximate prefix scheme (reference-systems.md):
//   h_0 = xxh64(model ‖ "\0" ‖ cache_salt)   (xxh64 of no bytes when both are empty)
//   tokens: c_i = xxh64(LE u32 ids of block i), h_i = xxh64(LE64(c_i) ‖ LE64(h_{i−1}))
//   text:   h_i = xxh64(64 bytes of block i ‖ LE64(h_{i−1}))
// Trailing partial blocks are not hashed. WebAssembly memory is little-endian, so the u32 ids the host wrote
// are already the bytes the scheme hashes.

import { LIMIT_TEXT_BLOCK_BYTES } from "./generated/abi";
import { xxh64, xxh64Block64, xxh64Pair, xxh64Two64 } from "./xxh64";

// @ts-ignore: decorator
@inline export const TEXT_BLOCK_BYTES: i32 = LIMIT_TEXT_BLOCK_BYTES;
// @ts-ignore: decorator
@inline export const MAX_BLOCK_SIZE: i32 = 4096;

export let root: u64 = 0xef46db3751d8e999; // xxh64 of no bytes, seed 0
export let blockSize: i32 = 16;

export function setRootFrom(ptr: usize, len: i32): void {
  root = xxh64(ptr, <usize>len, 0);
}

export function setBlockSizeValue(n: i32): bool {
  if (n < 1 || n > MAX_BLOCK_SIZE) return false;
  blockSize = n;
  return true;
}

/**
 * Hashes the full blocks of `nTokens` u32 ids at `ptr` into `out` (u64 each); returns the block count.
 * Each block's own hash c_i is independent of the others; only the chain h_i = xxh64(c_i ‖ h_{i−1}) is
 * sequential. At the default 16-id blocks two c_i are computed interleaved (xxh64Two64), then chained.
 */
export function hashTokenBlocks(ptr: usize, nTokens: i32, out: usize): i32 {
  const bs = blockSize;
  const blocks = nTokens / bs;
  const blockBytes = <usize>bs << 2;
  let prev = root;
  let i = 0;
  if (bs == 16) {
    for (; i + 1 < blocks; i += 2) {
      const at = out + (<usize>i << 3);
      const p = ptr + (<usize>i << 6);
      xxh64Two64(p, p + 64, at);
      prev = xxh64Pair(load<u64>(at), prev);
      store<u64>(at, prev);
      prev = xxh64Pair(load<u64>(at, 8), prev);
      store<u64>(at, prev, 8);
    }
  }
  for (; i < blocks; i++) {
    prev = xxh64Pair(xxh64(ptr + <usize>i * blockBytes, blockBytes, 0), prev);
    store<u64>(out + (<usize>i << 3), prev);
  }
  return blocks;
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
