// Block hashes on the host, in plain TypeScript: the chained xxh64 block-hashing scheme (the default, hash scheme 0:
// llm-d-router's newer opt-in xxh64 scheme as its source reads, not proven against its code) that the core runs in assembly/blocks.ts, and the forms users hand hashes over in. The proxy, the emulated
// worker and KV-event ingestion hash with it; the reference engine uses it as the oracle for the core's hasher and
// the benchmarks as its baseline.
//
// Scheme (bit-exact; spec/vectors/hashes.json pins it for every binding):
//   root   h_0 = xxh64(UTF-8(model + "\0" + salt), seed 0); when model and salt are both empty, h_0 = xxh64("", 0)
//          = 0xef46db3751d8e999. A missing model or salt is the empty string ("m" alone hashes the bytes "m\0").
//   tokens full blocks of `blockSize` u32 ids: c_i = xxh64(LE bytes of the ids), h_i = xxh64(LE64(c_i) ‖ LE64(h_{i-1})).
//   text   full blocks of 64 UTF-8 bytes: h_i = xxh64(block's 64 bytes ‖ LE64(h_{i-1})).
//   A trailing partial block is never hashed. All xxh64 calls use seed 0.
// Output layout: a Uint32Array of 2·nBlocks values [lo0, hi0, lo1, hi1, ...].

import { fromHex, LITTLE_ENDIAN, out, toHex, xxh64, xxh64Pair, xxh64StripesLane, xxh64U32 } from "./xxh64.js";

export const DEFAULT_BLOCK_SIZE_TOKENS = 16;
export const MAX_BLOCK_SIZE_TOKENS = 4096;
export const TEXT_BLOCK_BYTES = 64;
const TEXT_BLOCK_WORDS = TEXT_BLOCK_BYTES / 4;

/** A 64-bit hash as unsigned u32 halves. */
export interface Hash64 {
  lo: number;
  hi: number;
}

// Error messages live here.
const errors = {
  blockSize: (value: unknown) =>
    `blockSize must be an integer in 1..${MAX_BLOCK_SIZE_TOKENS}, got ${typeof value === "number" ? value : JSON.stringify(value)}`,
  tokenId: (index: number, value: unknown) =>
    `token id at index ${index} must be an integer in 0..2^32-1, got ${String(value)}`,
  outPairs: (needed: number, got: number) =>
    `outPairs must hold at least ${needed} u32 values (2 per block), got ${got}`,
};

/** Throw unless blockSize is an integer in 1..4096. */
export function checkBlockSize(blockSize: number): void {
  if (!Number.isInteger(blockSize) || blockSize < 1 || blockSize > MAX_BLOCK_SIZE_TOKENS) {
    throw new Error(errors.blockSize(blockSize));
  }
}

/** Number of full token blocks (a trailing partial block does not count). */
export function blockCount(nTokens: number, blockSize: number): number {
  checkBlockSize(blockSize);
  return Math.floor(nTokens / blockSize);
}

/** Number of full 64-byte text blocks. */
export function textBlockCount(nBytes: number): number {
  return Math.floor(nBytes / TEXT_BLOCK_BYTES);
}

const utf8 = new TextEncoder();

/**
 * Root hash h_0 for a model and cache salt. Strings are encoded with TextEncoder (lone surrogates become U+FFFD).
 */
export function rootHash(model = "", salt = ""): Hash64 {
  const bytes = model === "" && salt === "" ? new Uint8Array(0) : utf8.encode(model + "\0" + salt);
  xxh64(bytes, 0, bytes.length);
  return { lo: out.lo, hi: out.hi };
}

function pairsBuffer(nBlocks: number, outPairs: Uint32Array | undefined): Uint32Array {
  if (outPairs === undefined) return new Uint32Array(2 * nBlocks);
  if (outPairs.length < 2 * nBlocks) throw new RangeError(errors.outPairs(2 * nBlocks, outPairs.length));
  return outPairs.length === 2 * nBlocks ? outPairs : outPairs.subarray(0, 2 * nBlocks);
}

/** Copy a number[] of token ids into a Uint32Array, rejecting anything that is not a u32. */
function tokenWords(tokens: Uint32Array | number[]): Uint32Array {
  if (tokens instanceof Uint32Array) return tokens;
  const words = new Uint32Array(tokens.length);
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i]!;
    if (!Number.isInteger(t) || t < 0 || t > 0xffffffff) throw new RangeError(errors.tokenId(i, t));
    words[i] = t;
  }
  return words;
}

/**
 * Chained hashes of the full `blockSize`-token blocks of `tokens`, starting from `root`.
 * Returns `outPairs` (or a view of its first 2·nBlocks values) when given, else a new array.
 * A Uint32Array is hashed in place: xxh64U32 reads the u32 values themselves, so there is no byte view, no copy
 * and no dependence on byte order (JS typed arrays are little-endian on every platform we run anyway).
 */
export function hashTokens(
  tokens: Uint32Array | number[],
  blockSize: number,
  root: Hash64,
  outPairs?: Uint32Array,
): Uint32Array {
  const { nBlocks, pairs, words } = tokenBlocks(tokens, blockSize, outPairs);
  let prevLo = root.lo >>> 0,
    prevHi = root.hi >>> 0;
  for (let i = 0; i < nBlocks; i++) {
    xxh64U32(words, i * blockSize, blockSize); // c_i
    xxh64Pair(out.lo, out.hi, prevLo, prevHi); // h_i = xxh64(LE64(c_i) ‖ LE64(h_{i-1}))
    prevLo = out.lo;
    prevHi = out.hi;
    pairs[2 * i] = prevLo;
    pairs[2 * i + 1] = prevHi;
  }
  return pairs;
}

/** What a token hasher starts from: the full-block count, the (lo, hi) output, the ids as u32 words. */
export function tokenBlocks(
  tokens: Uint32Array | number[],
  blockSize: number,
  outPairs: Uint32Array | undefined,
): { nBlocks: number; pairs: Uint32Array; words: Uint32Array } {
  const nBlocks = blockCount(tokens.length, blockSize);
  return { nBlocks, pairs: pairsBuffer(nBlocks, outPairs), words: tokenWords(tokens) };
}

/** The LE u32 words of bytes[0, 4·nWords): a view of the same memory when possible, else one copy per call. */
function leWords(bytes: Uint8Array, nWords: number): Uint32Array {
  if (LITTLE_ENDIAN && bytes.byteOffset % 4 === 0) return new Uint32Array(bytes.buffer, bytes.byteOffset, nWords);
  const words = new Uint32Array(nWords);
  for (let i = 0, p = 0; i < nWords; i++, p += 4) {
    words[i] = (bytes[p]! | (bytes[p + 1]! << 8) | (bytes[p + 2]! << 16) | (bytes[p + 3]! << 24)) >>> 0;
  }
  return words;
}

/**
 * Chained hashes of the full 64-byte blocks of UTF-8 `bytes`, starting from `root`. Same output contract as
 * hashTokens. Blocks may split a multi-byte character; that is part of the scheme.
 */
export function hashText(bytes: Uint8Array, root: Hash64, outPairs?: Uint32Array): Uint32Array {
  const nBlocks = textBlockCount(bytes.length);
  const pairs = pairsBuffer(nBlocks, outPairs);
  const words = leWords(bytes, nBlocks * TEXT_BLOCK_WORDS);
  let prevLo = root.lo >>> 0,
    prevHi = root.hi >>> 0;
  for (let i = 0; i < nBlocks; i++) {
    // h_i = xxh64(64 block bytes ‖ LE64(h_{i-1})): two 32-byte stripes, then one 8-byte lane.
    xxh64StripesLane(words, i * TEXT_BLOCK_WORDS, TEXT_BLOCK_BYTES / 32, prevLo, prevHi);
    prevLo = out.lo;
    prevHi = out.hi;
    pairs[2 * i] = prevLo;
    pairs[2 * i + 1] = prevHi;
  }
  return pairs;
}

// ---------------------------------------------------------------------------------------------------------------
// Forms at the edge: users hand hashes over as bigint, 16-digit hex strings, a BigUint64Array, or (lo, hi) u32
// pairs; inside, they are pairs, the layout of u64s in WebAssembly memory.

export type HashesInput = Uint32Array | BigUint64Array | readonly (bigint | string | number)[];

const TWO_64 = 1n << 64n;

/** (lo, hi) pairs for any accepted form. A Uint32Array is taken to be pairs already. */
export function toPairs(hashes: HashesInput, what = "hashes"): Uint32Array {
  if (hashes instanceof Uint32Array) {
    if ((hashes.length & 1) !== 0) throw new TypeError(`${what}: a Uint32Array of hash pairs must have an even length`);
    return hashes;
  }
  if (hashes instanceof BigUint64Array) {
    return new Uint32Array(hashes.buffer, hashes.byteOffset, hashes.length * 2).slice();
  }
  if (!Array.isArray(hashes)) throw new TypeError(`${what}: expected an array of hashes`);
  const out = new Uint32Array(hashes.length * 2);
  for (let i = 0; i < hashes.length; i++) {
    const h = hashes[i];
    if (typeof h === "string") {
      let p: { lo: number; hi: number };
      try {
        p = fromHex(h);
      } catch {
        throw new TypeError(`${what}[${i}]: expected 16 hex digits, got ${JSON.stringify(h)}`);
      }
      out[2 * i] = p.lo;
      out[2 * i + 1] = p.hi;
      continue;
    }
    let b: bigint;
    if (typeof h === "bigint") b = h;
    else if (typeof h === "number" && Number.isSafeInteger(h)) b = BigInt(h);
    else throw new TypeError(`${what}[${i}]: expected a bigint, a safe integer or 16 hex digits, got ${String(h)}`);
    // vLLM publishes block hashes as signed or unsigned 64-bit ints; both name the same 64 bits
    if (b < -(1n << 63n) || b >= TWO_64) throw new RangeError(`${what}[${i}]: ${b} does not fit in 64 bits`);
    b = BigInt.asUintN(64, b);
    out[2 * i] = Number(b & 0xffffffffn);
    out[2 * i + 1] = Number(b >> 32n);
  }
  return out;
}

export function pairsToBigInts(pairs: Uint32Array): bigint[] {
  const out: bigint[] = [];
  for (let i = 0; i + 1 < pairs.length; i += 2) out.push((BigInt(pairs[i + 1]!) << 32n) | BigInt(pairs[i]!));
  return out;
}

/** Hex strings (16 lowercase digits each) of a [lo0, hi0, lo1, hi1, ...] array. */
export function pairsToHex(pairs: Uint32Array): string[] {
  const hex: string[] = new Array<string>(pairs.length >>> 1);
  for (let i = 0; i < hex.length; i++) hex[i] = toHex(pairs[2 * i]!, pairs[2 * i + 1]!);
  return hex;
}
