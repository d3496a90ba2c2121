// Plain-TypeScript XXH64: the host's xxh64 (block hashes in hashes.ts, table checksums, the simulator's synthetic
// block contents), the differential-test oracle for the WebAssembly hashing core, and the benchmark baseline.
//
// Algorithm: XXH64 as specified in Yann Collet's xxHash spec (github.com/Cyan4973/xxHash, doc/xxhash_spec.md,
// "XXH64 Algorithm Description"): 32-byte stripes into 4 accumulators, convergence, 8/4/1-byte tail steps, avalanche.
//
// No BigInt on the hot path. Every 64-bit value is a pair of 32-bit halves (lo, hi), carried inside this module as
// int32 bit patterns (`| 0`) so V8 keeps the arithmetic in integer registers (measured ~1.5× faster than carrying
// u32 doubles); halves become unsigned (`>>> 0`) only when written to `out`. Multiplication mod 2^64 uses 16-bit
// limbs for the exact 32×32→64 product of the low halves plus Math.imul for the cross terms (hi×hi vanishes).
// Helpers hand results back through the typed-array register R (module `let`s would box large numbers on every
// store), so nothing allocates per block.

/** Result of the last xxh64* call: unsigned u32 halves of the 64-bit hash. Overwritten by every call. */
export const out = { lo: 0, hi: 0 };

// The five primes of the spec as (hi, lo) halves.
// P1 = 11400714785074694791 = 0x9E3779B185EBCA87   P2 = 14029467366897019727 = 0xC2B2AE3D27D4EB4F
// P3 =  1609587929392839161 = 0x165667B19E3779F9   P4 =  9650029242287828579 = 0x85EBCA77C2B2AE63
// P5 =  2870177450012600261 = 0x27D4EB2F165667C5
const P1_HI = 0x9e3779b1 | 0,
  P1_LO = 0x85ebca87 | 0;
const P2_HI = 0xc2b2ae3d | 0,
  P2_LO = 0x27d4eb4f | 0;
const P3_HI = 0x165667b1 | 0,
  P3_LO = 0x9e3779f9 | 0;
const P4_HI = 0x85ebca77 | 0,
  P4_LO = 0xc2b2ae63 | 0;
const P5_HI = 0x27d4eb2f | 0,
  P5_LO = 0x165667c5 | 0;
// 2^64 − P1, so that `seed − P1` is an addition.
const NEG_P1_HI = 0x61c8864e | 0,
  NEG_P1_LO = 0x7a143579 | 0;
// 16-bit limbs of P1_LO and P2_LO for the written-out stripe rounds.
const P1_LO_0 = P1_LO & 0xffff,
  P1_LO_1 = P1_LO >>> 16;
const P2_LO_0 = P2_LO & 0xffff,
  P2_LO_1 = P2_LO >>> 16;

const TWO_POW_32 = 0x100000000;
const STRIPE_BYTES = 32;
const STRIPE_WORDS = 8;
/** Byte input is assembled into u32 words this many stripes (4 KiB) at a time... */
const SCRATCH_STRIPES = 128;
/** ...unless it is 4-byte aligned on a little-endian host and at least this long (1 KiB): then it is read through
 * one Uint32Array view, allocated per call. Measured on Node 20: assembling makes 80 KB ~1.8× slower. */
const VIEW_MIN_STRIPES = 32;

/** True when typed arrays store u32 words little-endian (every platform we run; checked, not assumed). */
export const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

/** Helper result register: R[0] = lo, R[1] = hi. */
const R = new Int32Array(2);
/** Stripe accumulators v1..v4 as (lo, hi) pairs: [v1lo, v1hi, v2lo, v2hi, v3lo, v3hi, v4lo, v4hi]. */
const V = new Int32Array(8);
/** Little-endian u32 words of the byte input's stripes, filled by assembleWords. */
const SCRATCH = new Uint32Array(SCRATCH_STRIPES * STRIPE_WORDS);

// ---------------------------------------------------------------------------------------------------------------
// 64-bit arithmetic on (lo, hi) int32 pairs; each writes R. Each is self-contained (no nested calls) so that V8
// can inline it into its callers.

/** R = a × b mod 2^64. */
function mul64(aLo: number, aHi: number, bLo: number, bHi: number): void {
  // Each 16×16 partial product fits 32 bits; `>>>` and `&` read imul's signed result as those bits. mid < 3·2^16.
  const a0 = aLo & 0xffff,
    a1 = aLo >>> 16,
    b0 = bLo & 0xffff,
    b1 = bLo >>> 16;
  const p00 = Math.imul(a0, b0),
    p01 = Math.imul(a0, b1),
    p10 = Math.imul(a1, b0),
    p11 = Math.imul(a1, b1);
  const mid = (p00 >>> 16) + (p01 & 0xffff) + (p10 & 0xffff);
  R[0] = (mid << 16) | (p00 & 0xffff);
  // High half: the carry-out of lo×lo plus the cross terms, mod 2^32 (the sum is exact in a double, < 2^53).
  R[1] = (p11 + (p01 >>> 16) + (p10 >>> 16) + (mid >>> 16) + Math.imul(aLo, bHi) + Math.imul(aHi, bLo)) | 0;
}

/** R = a × b + c mod 2^64. */
function mulAdd64(aLo: number, aHi: number, bLo: number, bHi: number, cLo: number, cHi: number): void {
  const a0 = aLo & 0xffff,
    a1 = aLo >>> 16,
    b0 = bLo & 0xffff,
    b1 = bLo >>> 16;
  const p00 = Math.imul(a0, b0),
    p01 = Math.imul(a0, b1),
    p10 = Math.imul(a1, b0),
    p11 = Math.imul(a1, b1);
  const mid = (p00 >>> 16) + (p01 & 0xffff) + (p10 & 0xffff);
  const mLo = (mid << 16) | (p00 & 0xffff);
  const mHi = p11 + (p01 >>> 16) + (p10 >>> 16) + (mid >>> 16) + Math.imul(aLo, bHi) + Math.imul(aHi, bLo);
  const lo = (mLo + cLo) | 0;
  R[0] = lo;
  R[1] = (mHi + cHi + (lo >>> 0 < mLo >>> 0 ? 1 : 0)) | 0; // carry iff the unsigned low sum wrapped
}

/** R = a + b mod 2^64. */
function add64(aLo: number, aHi: number, bLo: number, bHi: number): void {
  const lo = (aLo + bLo) | 0;
  R[0] = lo;
  R[1] = (aHi + bHi + (lo >>> 0 < aLo >>> 0 ? 1 : 0)) | 0;
}

/** R = round(acc, input) = rotl(acc + input × P2, 31) × P1 (spec: XXH64_round). */
function round(accLo: number, accHi: number, inLo: number, inHi: number): void {
  mulAdd64(inLo, inHi, P2_LO, P2_HI, accLo, accHi);
  const lo = R[0]!,
    hi = R[1]!;
  // rotl by r < 32: hi' = hi<<r | lo>>>(32−r), lo' = lo<<r | hi>>>(32−r).
  mul64((lo << 31) | (hi >>> 1), (hi << 31) | (lo >>> 1), P1_LO, P1_HI);
}

// ---------------------------------------------------------------------------------------------------------------
// Steps of the spec; each writes R except avalancheToOut.

/** R = (h ^ round(0, v)) × P1 + P4 (spec: XXH64_mergeRound). */
function mergeRound(hLo: number, hHi: number, vLo: number, vHi: number): void {
  round(0, 0, vLo, vHi);
  mulAdd64(hLo ^ R[0]!, hHi ^ R[1]!, P1_LO, P1_HI, P4_LO, P4_HI);
}

/** R = rotl(h ^ round(0, lane), 27) × P1 + P4: the 8-byte tail step. */
function tail8(hLo: number, hHi: number, laneLo: number, laneHi: number): void {
  round(0, 0, laneLo, laneHi);
  const lo = hLo ^ R[0]!,
    hi = hHi ^ R[1]!;
  mulAdd64((lo << 27) | (hi >>> 5), (hi << 27) | (lo >>> 5), P1_LO, P1_HI, P4_LO, P4_HI);
}

/** R = rotl(h ^ (word × P1), 23) × P2 + P3: the 4-byte tail step (word is a u32, zero-extended). */
function tail4(hLo: number, hHi: number, word: number): void {
  mul64(word, 0, P1_LO, P1_HI);
  const lo = hLo ^ R[0]!,
    hi = hHi ^ R[1]!;
  mulAdd64((lo << 23) | (hi >>> 9), (hi << 23) | (lo >>> 9), P2_LO, P2_HI, P3_LO, P3_HI);
}

/** R = rotl(h ^ (byte × P5), 11) × P1: the 1-byte tail step. */
function tail1(hLo: number, hHi: number, byte: number): void {
  mul64(byte, 0, P5_LO, P5_HI);
  const lo = hLo ^ R[0]!,
    hi = hHi ^ R[1]!;
  mul64((lo << 11) | (hi >>> 21), (hi << 11) | (lo >>> 21), P1_LO, P1_HI);
}

/** out = avalanche(h): h ^= h>>33; h *= P2; h ^= h>>29; h *= P3; h ^= h>>32 (spec: XXH64_avalanche). */
function avalancheToOut(hLo: number, hHi: number): void {
  mul64(hLo ^ (hHi >>> 1), hHi, P2_LO, P2_HI);
  let lo = R[0]!,
    hi = R[1]!;
  mul64(lo ^ ((lo >>> 29) | (hi << 3)), hi ^ (hi >>> 29), P3_LO, P3_HI);
  lo = R[0]!;
  hi = R[1]!;
  out.lo = (lo ^ hi) >>> 0;
  out.hi = hi >>> 0;
}

/** R = h + total input length in bytes (a u64; lengths here are < 2^53). */
function addLength(hLo: number, hHi: number, lengthBytes: number): void {
  add64(hLo, hHi, lengthBytes | 0, Math.floor(lengthBytes / TWO_POW_32) | 0);
}

// ---------------------------------------------------------------------------------------------------------------
// Stripe phase. Input is always u32 words here: byte input is assembled into SCRATCH first.

/** V = the accumulators for a seed (spec: v1 = seed+P1+P2, v2 = seed+P2, v3 = seed, v4 = seed−P1). */
function initAccumulators(seedLo: number, seedHi: number): void {
  add64(seedLo, seedHi, P1_LO, P1_HI);
  add64(R[0]!, R[1]!, P2_LO, P2_HI);
  V[0] = R[0]!;
  V[1] = R[1]!;
  add64(seedLo, seedHi, P2_LO, P2_HI);
  V[2] = R[0]!;
  V[3] = R[1]!;
  V[4] = seedLo;
  V[5] = seedHi;
  add64(seedLo, seedHi, NEG_P1_LO, NEG_P1_HI);
  V[6] = R[0]!;
  V[7] = R[1]!;
}

/**
 * Feed `stripeCount` stripes of 8 u32 words, from words[w], through V: v_k = round(v_k, lane k) per stripe.
 * The four rounds are written out in full, against the one-screen habit, because measured on Node 20: V8 will not
 * inline four calls of a round helper (inlining budget) and calling it makes the loop ~2.2× slower; written out
 * but one lane at a time, ~1.6× slower (the four independent multiply chains no longer overlap).
 */
function stripesFromWords(words: Uint32Array, w: number, stripeCount: number): void {
  let v1Lo = V[0]!,
    v1Hi = V[1]!,
    v2Lo = V[2]!,
    v2Hi = V[3]!,
    v3Lo = V[4]!,
    v3Hi = V[5]!,
    v4Lo = V[6]!,
    v4Hi = V[7]!;
  let inLo = 0,
    inHi = 0,
    a0 = 0,
    a1 = 0,
    p00 = 0,
    p01 = 0,
    p10 = 0,
    p11 = 0,
    mid = 0;
  let mLo = 0,
    mHi = 0,
    sLo = 0,
    sHi = 0,
    rLo = 0,
    rHi = 0;
  // bounded by the callers' entry checks: w + 8·stripeCount <= words.length
  for (const end = w + stripeCount * STRIPE_WORDS; w < end; w += STRIPE_WORDS) {
    // Each block: s = v + in × P2 (limb product, then add with carry); r = rotl(s, 31); v = r × P1.
    inLo = words[w]! | 0;
    inHi = words[w + 1]! | 0;
    a0 = inLo & 0xffff;
    a1 = inLo >>> 16;
    p00 = Math.imul(a0, P2_LO_0);
    p01 = Math.imul(a0, P2_LO_1);
    p10 = Math.imul(a1, P2_LO_0);
    p11 = Math.imul(a1, P2_LO_1);
    mid = (p00 >>> 16) + (p01 & 0xffff) + (p10 & 0xffff);
    mLo = (mid << 16) | (p00 & 0xffff);
    mHi = p11 + (p01 >>> 16) + (p10 >>> 16) + (mid >>> 16) + Math.imul(inLo, P2_HI) + Math.imul(inHi, P2_LO);
    sLo = (v1Lo + mLo) | 0;
    sHi = (v1Hi + mHi + (sLo >>> 0 < mLo >>> 0 ? 1 : 0)) | 0;
    rLo = (sLo << 31) | (sHi >>> 1);
    rHi = (sHi << 31) | (sLo >>> 1);
    a0 = rLo & 0xffff;
    a1 = rLo >>> 16;
    p00 = Math.imul(a0, P1_LO_0);
    p01 = Math.imul(a0, P1_LO_1);
    p10 = Math.imul(a1, P1_LO_0);
    p11 = Math.imul(a1, P1_LO_1);
    mid = (p00 >>> 16) + (p01 & 0xffff) + (p10 & 0xffff);
    v1Lo = (mid << 16) | (p00 & 0xffff);
    v1Hi = (p11 + (p01 >>> 16) + (p10 >>> 16) + (mid >>> 16) + Math.imul(rLo, P1_HI) + Math.imul(rHi, P1_LO)) | 0;

    inLo = words[w + 2]! | 0;
    inHi = words[w + 3]! | 0;
    a0 = inLo & 0xffff;
    a1 = inLo >>> 16;
    p00 = Math.imul(a0, P2_LO_0);
    p01 = Math.imul(a0, P2_LO_1);
    p10 = Math.imul(a1, P2_LO_0);
    p11 = Math.imul(a1, P2_LO_1);
    mid = (p00 >>> 16) + (p01 & 0xffff) + (p10 & 0xffff);
    mLo = (mid << 16) | (p00 & 0xffff);
    mHi = p11 + (p01 >>> 16) + (p10 >>> 16) + (mid >>> 16) + Math.imul(inLo, P2_HI) + Math.imul(inHi, P2_LO);
    sLo = (v2Lo + mLo) | 0;
    sHi = (v2Hi + mHi + (sLo >>> 0 < mLo >>> 0 ? 1 : 0)) | 0;
    rLo = (sLo << 31) | (sHi >>> 1);
    rHi = (sHi << 31) | (sLo >>> 1);
    a0 = rLo & 0xffff;
    a1 = rLo >>> 16;
    p00 = Math.imul(a0, P1_LO_0);
    p01 = Math.imul(a0, P1_LO_1);
    p10 = Math.imul(a1, P1_LO_0);
    p11 = Math.imul(a1, P1_LO_1);
    mid = (p00 >>> 16) + (p01 & 0xffff) + (p10 & 0xffff);
    v2Lo = (mid << 16) | (p00 & 0xffff);
    v2Hi = (p11 + (p01 >>> 16) + (p10 >>> 16) + (mid >>> 16) + Math.imul(rLo, P1_HI) + Math.imul(rHi, P1_LO)) | 0;

    inLo = words[w + 4]! | 0;
    inHi = words[w + 5]! | 0;
    a0 = inLo & 0xffff;
    a1 = inLo >>> 16;
    p00 = Math.imul(a0, P2_LO_0);
    p01 = Math.imul(a0, P2_LO_1);
    p10 = Math.imul(a1, P2_LO_0);
    p11 = Math.imul(a1, P2_LO_1);
    mid = (p00 >>> 16) + (p01 & 0xffff) + (p10 & 0xffff);
    mLo = (mid << 16) | (p00 & 0xffff);
    mHi = p11 + (p01 >>> 16) + (p10 >>> 16) + (mid >>> 16) + Math.imul(inLo, P2_HI) + Math.imul(inHi, P2_LO);
    sLo = (v3Lo + mLo) | 0;
    sHi = (v3Hi + mHi + (sLo >>> 0 < mLo >>> 0 ? 1 : 0)) | 0;
    rLo = (sLo << 31) | (sHi >>> 1);
    rHi = (sHi << 31) | (sLo >>> 1);
    a0 = rLo & 0xffff;
    a1 = rLo >>> 16;
    p00 = Math.imul(a0, P1_LO_0);
    p01 = Math.imul(a0, P1_LO_1);
    p10 = Math.imul(a1, P1_LO_0);
    p11 = Math.imul(a1, P1_LO_1);
    mid = (p00 >>> 16) + (p01 & 0xffff) + (p10 & 0xffff);
    v3Lo = (mid << 16) | (p00 & 0xffff);
    v3Hi = (p11 + (p01 >>> 16) + (p10 >>> 16) + (mid >>> 16) + Math.imul(rLo, P1_HI) + Math.imul(rHi, P1_LO)) | 0;

    inLo = words[w + 6]! | 0;
    inHi = words[w + 7]! | 0;
    a0 = inLo & 0xffff;
    a1 = inLo >>> 16;
    p00 = Math.imul(a0, P2_LO_0);
    p01 = Math.imul(a0, P2_LO_1);
    p10 = Math.imul(a1, P2_LO_0);
    p11 = Math.imul(a1, P2_LO_1);
    mid = (p00 >>> 16) + (p01 & 0xffff) + (p10 & 0xffff);
    mLo = (mid << 16) | (p00 & 0xffff);
    mHi = p11 + (p01 >>> 16) + (p10 >>> 16) + (mid >>> 16) + Math.imul(inLo, P2_HI) + Math.imul(inHi, P2_LO);
    sLo = (v4Lo + mLo) | 0;
    sHi = (v4Hi + mHi + (sLo >>> 0 < mLo >>> 0 ? 1 : 0)) | 0;
    rLo = (sLo << 31) | (sHi >>> 1);
    rHi = (sHi << 31) | (sLo >>> 1);
    a0 = rLo & 0xffff;
    a1 = rLo >>> 16;
    p00 = Math.imul(a0, P1_LO_0);
    p01 = Math.imul(a0, P1_LO_1);
    p10 = Math.imul(a1, P1_LO_0);
    p11 = Math.imul(a1, P1_LO_1);
    mid = (p00 >>> 16) + (p01 & 0xffff) + (p10 & 0xffff);
    v4Lo = (mid << 16) | (p00 & 0xffff);
    v4Hi = (p11 + (p01 >>> 16) + (p10 >>> 16) + (mid >>> 16) + Math.imul(rLo, P1_HI) + Math.imul(rHi, P1_LO)) | 0;
  }
  V[0] = v1Lo;
  V[1] = v1Hi;
  V[2] = v2Lo;
  V[3] = v2Hi;
  V[4] = v3Lo;
  V[5] = v3Hi;
  V[6] = v4Lo;
  V[7] = v4Hi;
}

/** R = rotl(v1,1) + rotl(v2,7) + rotl(v3,12) + rotl(v4,18), then the four merge rounds (spec: "Step 3"). */
function convergeAccumulators(): void {
  let lo = V[0]!,
    hi = V[1]!;
  const hLo = (lo << 1) | (hi >>> 31),
    hHi = (hi << 1) | (lo >>> 31);
  lo = V[2]!;
  hi = V[3]!;
  add64(hLo, hHi, (lo << 7) | (hi >>> 25), (hi << 7) | (lo >>> 25));
  lo = V[4]!;
  hi = V[5]!;
  add64(R[0]!, R[1]!, (lo << 12) | (hi >>> 20), (hi << 12) | (lo >>> 20));
  lo = V[6]!;
  hi = V[7]!;
  add64(R[0]!, R[1]!, (lo << 18) | (hi >>> 14), (hi << 18) | (lo >>> 14));
  mergeRound(R[0]!, R[1]!, V[0]!, V[1]!);
  mergeRound(R[0]!, R[1]!, V[2]!, V[3]!);
  mergeRound(R[0]!, R[1]!, V[4]!, V[5]!);
  mergeRound(R[0]!, R[1]!, V[6]!, V[7]!);
}

/** Little-endian u32 at bytes[p] (as int32 bits); the caller has bounds-checked p + 3. */
function readU32(bytes: Uint8Array, p: number): number {
  return bytes[p]! | (bytes[p + 1]! << 8) | (bytes[p + 2]! << 16) | (bytes[p + 3]! << 24);
}

/** SCRATCH[0, 8·stripeCount) = the little-endian u32 words of bytes[p, p + 32·stripeCount). */
function assembleWords(bytes: Uint8Array, p: number, stripeCount: number): void {
  for (let i = 0, n = stripeCount * STRIPE_WORDS; i < n; i++, p += 4) SCRATCH[i] = readU32(bytes, p);
}

function checkRange(what: string, total: number, start: number, count: number): void {
  if (!Number.isSafeInteger(start) || !Number.isSafeInteger(count) || start < 0 || count < 0 || start + count > total) {
    throw new RangeError(`xxh64: ${what} range [${start}, ${start}+${count}) is outside an input of ${total}`);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Entry points.

/**
 * XXH64 of bytes[offset, offset+length) with a 64-bit seed given as u32 halves (default 0). Result in `out`.
 * Allocates nothing, except one typed-array view for aligned inputs of 1 KiB or more (see VIEW_MIN_STRIPES).
 */
export function xxh64(bytes: Uint8Array, offset: number, length: number, seedLo = 0, seedHi = 0): void {
  checkRange("byte", bytes.length, offset, length);
  let stripesLeft = Math.floor(length / STRIPE_BYTES);
  let p = offset;
  if (stripesLeft > 0) {
    initAccumulators(seedLo | 0, seedHi | 0);
    const byteStart = bytes.byteOffset + offset;
    if (LITTLE_ENDIAN && stripesLeft >= VIEW_MIN_STRIPES && (byteStart & 3) === 0) {
      stripesFromWords(new Uint32Array(bytes.buffer, byteStart, stripesLeft * STRIPE_WORDS), 0, stripesLeft);
      p += stripesLeft * STRIPE_BYTES;
    } else {
      while (stripesLeft > 0) {
        const n = Math.min(stripesLeft, SCRATCH_STRIPES);
        assembleWords(bytes, p, n);
        stripesFromWords(SCRATCH, 0, n);
        p += n * STRIPE_BYTES;
        stripesLeft -= n;
      }
    }
    convergeAccumulators();
  } else {
    add64(seedLo | 0, seedHi | 0, P5_LO, P5_HI);
  }
  addLength(R[0]!, R[1]!, length);
  const end = offset + length;
  // bounded by checkRange: every read below ends at or before `end`
  for (; p + 8 <= end; p += 8) tail8(R[0]!, R[1]!, readU32(bytes, p), readU32(bytes, p + 4));
  if (p + 4 <= end) {
    tail4(R[0]!, R[1]!, readU32(bytes, p));
    p += 4;
  }
  for (; p < end; p++) tail1(R[0]!, R[1]!, bytes[p]!);
  avalancheToOut(R[0]!, R[1]!);
}

/**
 * XXH64 (seed as u32 halves, default 0) of the little-endian bytes of words[start, start+count). Result in `out`.
 * Reads the u32 values arithmetically, so the result does not depend on the host's byte order.
 */
export function xxh64U32(words: Uint32Array, start: number, count: number, seedLo = 0, seedHi = 0): void {
  checkRange("word", words.length, start, count);
  const stripeCount = Math.floor(count / STRIPE_WORDS);
  let w = start;
  if (stripeCount > 0) {
    initAccumulators(seedLo | 0, seedHi | 0);
    stripesFromWords(words, w, stripeCount);
    w += stripeCount * STRIPE_WORDS;
    convergeAccumulators();
  } else {
    add64(seedLo | 0, seedHi | 0, P5_LO, P5_HI);
  }
  addLength(R[0]!, R[1]!, count * 4);
  const end = start + count;
  // bounded by checkRange; a length that is a multiple of 4 bytes has no 1-byte tail steps
  for (; w + 2 <= end; w += 2) tail8(R[0]!, R[1]!, words[w]! | 0, words[w + 1]! | 0);
  if (w < end) tail4(R[0]!, R[1]!, words[w]! | 0);
  avalancheToOut(R[0]!, R[1]!);
}

/**
 * XXH64, seed 0, of the 32·stripeCount little-endian bytes of words[start, start + 8·stripeCount) followed by
 * the 8 bytes LE64(lane). Result in `out`. Text-mode chaining (64-byte block ‖ previous hash) uses it per block.
 */
export function xxh64StripesLane(
  words: Uint32Array,
  start: number,
  stripeCount: number,
  laneLo: number,
  laneHi: number,
): void {
  checkRange("word", words.length, start, stripeCount * STRIPE_WORDS);
  if (stripeCount > 0) {
    initAccumulators(0, 0);
    stripesFromWords(words, start, stripeCount);
    convergeAccumulators();
  } else {
    add64(0, 0, P5_LO, P5_HI);
  }
  addLength(R[0]!, R[1]!, stripeCount * STRIPE_BYTES + 8);
  tail8(R[0]!, R[1]!, laneLo | 0, laneHi | 0);
  avalancheToOut(R[0]!, R[1]!);
}

/** XXH64, seed 0, of the 16 bytes LE64(a) ‖ LE64(b). Result in `out`. */
export function xxh64Pair(aLo: number, aHi: number, bLo: number, bHi: number): void {
  // Under 32 bytes: h = seed + P5 + length, then two 8-byte tail steps.
  add64(P5_LO, P5_HI, 16, 0);
  tail8(R[0]!, R[1]!, aLo | 0, aHi | 0);
  tail8(R[0]!, R[1]!, bLo | 0, bHi | 0);
  avalancheToOut(R[0]!, R[1]!);
}

// ---------------------------------------------------------------------------------------------------------------
// Conveniences (these allocate; not for hot paths).

const HEX_DIGITS_16 = /^[0-9a-fA-F]{16}$/;

/** 16 lowercase hex digits of the 64-bit value (hi, lo), most significant first. */
export function toHex(lo: number, hi: number): string {
  return (hi >>> 0).toString(16).padStart(8, "0") + (lo >>> 0).toString(16).padStart(8, "0");
}

/** Parse exactly 16 hex digits (no prefix, either case) into u32 halves. */
export function fromHex(hex: string): { lo: number; hi: number } {
  if (typeof hex !== "string" || !HEX_DIGITS_16.test(hex)) {
    throw new Error(`fromHex: expected exactly 16 hex digits, got ${JSON.stringify(hex)}`);
  }
  return { lo: Number.parseInt(hex.slice(8), 16) >>> 0, hi: Number.parseInt(hex.slice(0, 8), 16) >>> 0 };
}

/** XXH64 of all of `bytes`, seed 0, as 16 lowercase hex digits. */
export function xxh64Hex(bytes: Uint8Array): string {
  xxh64(bytes, 0, bytes.length);
  return toHex(out.lo, out.hi);
}

const U64_MASK = (1n << 64n) - 1n;

/** XXH64 of all of `bytes` as a bigint; the seed is taken mod 2^64. */
export function xxh64BigInt(bytes: Uint8Array, seed: bigint = 0n): bigint {
  const s = seed & U64_MASK;
  xxh64(bytes, 0, bytes.length, Number(s & 0xffffffffn), Number(s >> 32n));
  return (BigInt(out.hi) << 32n) | BigInt(out.lo);
}
