// llm-d's block hashing, hash scheme 1 (llm-d-kv-cache v0.9.0, pkg/kvcache/kvblock/token_processor.go, "cbor-fnv"):
//   init = FNV-1a-64(hash seed bytes)
//   h_0  = FNV-1a-64(CBOR([init, null, model]))
//   h_i  = FNV-1a-64(CBOR([h_{i−1}, [block i's ids], null]))
// CBOR is canonical (RFC 8949 §4.2.1, fxamacker/cbor's CanonicalEncOptions): every head in its shortest form. The
// bytes are never materialized: each one goes straight into the FNV state. Each block depends on the one before, as
// the xxh64 chain does; known answers in spec/vectors/hashes-cbor-fnv.json, checked against llm-d's Go code by
// test/peers-hashes.test.ts.

// @ts-ignore: decorator
@inline const FNV_OFFSET: u64 = 0xcbf29ce484222325;
// @ts-ignore: decorator
@inline const FNV_PRIME: u64 = 0x100000001b3;
// @ts-ignore: decorator
@inline const CBOR_ARRAY3: u32 = 0x83;
// @ts-ignore: decorator
@inline const CBOR_NULL: u32 = 0xf6;
// @ts-ignore: decorator
@inline const MAJOR_UINT: u32 = 0;
// @ts-ignore: decorator
@inline const MAJOR_TEXT: u32 = 3 << 5;
// @ts-ignore: decorator
@inline const MAJOR_ARRAY: u32 = 4 << 5;

// @ts-ignore: decorator
@inline function fnvByte(h: u64, b: u32): u64 { return (h ^ <u64>b) * FNV_PRIME; }

function fnvBytes(h: u64, ptr: usize, len: i32): u64 {
  for (let i = 0; i < len; i++) h = fnvByte(h, load<u8>(ptr + <usize>i));
  return h;
}

/** A CBOR head (major type already shifted into the top three bits, argument `v`) in its shortest form. */
function head(h: u64, major: u32, v: u64): u64 {
  if (v < 24) return fnvByte(h, major | <u32>v);
  let width: i32;
  if (v < 0x100) {
    h = fnvByte(h, major | 24);
    width = 1;
  } else if (v < 0x10000) {
    h = fnvByte(h, major | 25);
    width = 2;
  } else if (v < 0x100000000) {
    h = fnvByte(h, major | 26);
    width = 4;
  } else {
    h = fnvByte(h, major | 27);
    width = 8;
  }
  for (let i = width - 1; i >= 0; i--) h = fnvByte(h, <u32>(v >> (<u64>i << 3)) & 0xff);
  return h;
}

/** h_0 from the seed's `seedLen` bytes at `seed` and the model name's `modelLen` bytes at `model`. */
export function cborFnvRoot(seed: usize, seedLen: i32, model: usize, modelLen: i32): u64 {
  const init = fnvBytes(FNV_OFFSET, seed, seedLen);
  let h = fnvByte(FNV_OFFSET, CBOR_ARRAY3);
  h = head(h, MAJOR_UINT, init);
  h = fnvByte(h, CBOR_NULL); // no tokens: a nil []uint32 encodes as null
  h = head(h, MAJOR_TEXT, <u64>modelLen);
  return fnvBytes(h, model, modelLen);
}

/** Hashes the full `bs`-id blocks of `nTokens` u32 ids at `ptr` into `out` (u64 each) from `root`; the block count. */
export function cborFnvBlocks(ptr: usize, nTokens: i32, bs: i32, root: u64, out: usize): i32 {
  const blocks = nTokens / bs;
  let prev = root;
  let p = ptr;
  for (let i = 0; i < blocks; i++) {
    let h = fnvByte(FNV_OFFSET, CBOR_ARRAY3);
    h = head(h, MAJOR_UINT, prev);
    h = head(h, MAJOR_ARRAY, <u64>bs);
    for (let j = 0; j < bs; j++) {
      h = head(h, MAJOR_UINT, <u64>load<u32>(p)); // bounded by blocks × bs ≤ nTokens
      p += 4;
    }
    prev = fnvByte(h, CBOR_NULL);
    store<u64>(out + (<usize>i << 3), prev);
  }
  return blocks;
}
