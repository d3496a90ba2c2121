// Equivalence tests for the host's plain-TypeScript hashing (src/hashing/xxh64.ts, src/hashing/hashes.ts): xxh64 against
// xxhash-wasm's h64Raw, and chained block hashing against a straightforward BigInt implementation built here on h64Raw.

import fc from "fast-check";
import xxhash from "xxhash-wasm";
import { describe, expect, it } from "vitest";
import { blockCount, hashText, hashTokens, pairsToHex, rootHash, type Hash64 } from "../src/hashing/hashes.js";
import {
  fromHex,
  out,
  toHex,
  xxh64,
  xxh64BigInt,
  xxh64Hex,
  xxh64Pair,
  xxh64StripesLane,
  xxh64U32,
} from "../src/hashing/xxh64.js";

const { h64Raw } = await xxhash();
const utf8 = new TextEncoder();
const U64_MASK = (1n << 64n) - 1n;

/** Deterministic byte source (mulberry32) so failures reproduce. */
function randomBytes(length: number, seed: number): Uint8Array {
  const bytes = new Uint8Array(length);
  let a = seed >>> 0;
  for (let i = 0; i < length; i++) {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    bytes[i] = (t ^ (t >>> 14)) & 0xff;
  }
  return bytes;
}

/** Our xxh64 of a whole array as a bigint, via the allocation-free entry point. */
function ours(bytes: Uint8Array, seed = 0n): bigint {
  xxh64(bytes, 0, bytes.length, Number(seed & 0xffffffffn), Number((seed >> 32n) & 0xffffffffn));
  return (BigInt(out.hi) << 32n) | BigInt(out.lo);
}

function le64(h: bigint): Uint8Array {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setBigUint64(0, h, true);
  return b;
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const c = new Uint8Array(a.length + b.length);
  c.set(a, 0);
  c.set(b, a.length);
  return c;
}

// ---------------------------------------------------------------------------------------------------------------
// The scheme, straightforwardly, on h64Raw and BigInt.

function oracleRoot(model: string, salt: string): bigint {
  return h64Raw(model === "" && salt === "" ? new Uint8Array(0) : utf8.encode(`${model}\0${salt}`), 0n);
}

function oracleTokens(tokens: number[], blockSize: number, h: bigint): string[] {
  const hashes: string[] = [];
  for (let i = 0; i + blockSize <= tokens.length; i += blockSize) {
    const block = new Uint8Array(4 * blockSize);
    const view = new DataView(block.buffer);
    for (let j = 0; j < blockSize; j++) view.setUint32(4 * j, tokens[i + j]!, true);
    h = h64Raw(concat(le64(h64Raw(block, 0n)), le64(h)), 0n);
    hashes.push(h.toString(16).padStart(16, "0"));
  }
  return hashes;
}

function oracleText(bytes: Uint8Array, h: bigint): string[] {
  const hashes: string[] = [];
  for (let i = 0; i + 64 <= bytes.length; i += 64) {
    h = h64Raw(concat(bytes.subarray(i, i + 64), le64(h)), 0n);
    hashes.push(h.toString(16).padStart(16, "0"));
  }
  return hashes;
}

const asBigInt = (h: Hash64): bigint => (BigInt(h.hi) << 32n) | BigInt(h.lo);

// ---------------------------------------------------------------------------------------------------------------

describe("xxh64 equals xxhash-wasm h64Raw", () => {
  it("on empty input: ef46db3751d8e999", () => {
    expect(xxh64Hex(new Uint8Array(0))).toBe("ef46db3751d8e999");
    expect(ours(new Uint8Array(0))).toBe(h64Raw(new Uint8Array(0), 0n));
  });

  it("on every length 0..100", () => {
    for (let n = 0; n <= 100; n++) {
      const bytes = randomBytes(n, n + 1);
      expect(ours(bytes), `length ${n}`).toBe(h64Raw(bytes, 0n));
    }
  });

  it("on lengths crossing the 32- and 64-byte stripe boundaries, with every tail shape", () => {
    for (const n of [31, 32, 33, 35, 36, 39, 40, 41, 44, 63, 64, 65, 71, 72, 76, 79, 95, 96, 97, 127, 128, 129]) {
      const bytes = randomBytes(n, 1000 + n);
      expect(ours(bytes), `length ${n}`).toBe(h64Raw(bytes, 0n));
    }
  });

  it("on inputs larger than a 64 KiB page", () => {
    for (const n of [65536, 65537, 70_003, 200_000]) {
      const bytes = randomBytes(n, n);
      expect(ours(bytes), `length ${n}`).toBe(h64Raw(bytes, 0n));
    }
  });

  it("on long inputs at aligned and unaligned offsets (typed-array view and word-assembly paths)", () => {
    const bytes = randomBytes(80_000, 21);
    for (const offset of [0, 1, 2, 3, 4, 8]) {
      for (const length of [992, 1023, 1024, 1025, 4096 + 40, 70_001]) {
        xxh64(bytes, offset, length);
        const got = (BigInt(out.hi) << 32n) | BigInt(out.lo);
        expect(got, `offset ${offset} length ${length}`).toBe(h64Raw(bytes.subarray(offset, offset + length), 0n));
      }
    }
  });

  it("on random seeds, including ones with the top bit set", () => {
    const bytes = randomBytes(100, 5);
    for (const seed of [1n, 0xffffffffn, 0x100000000n, 1n << 63n, U64_MASK, 0x9e3779b185ebca87n, 0x0123456789abcdefn]) {
      for (const n of [0, 3, 8, 31, 32, 100]) {
        const part = bytes.subarray(0, n);
        expect(ours(part, seed), `seed ${seed} length ${n}`).toBe(h64Raw(part, seed));
      }
    }
  });

  it("on a sub-range given by offset and length", () => {
    const bytes = randomBytes(300, 9);
    for (const [offset, length] of [
      [1, 0],
      [7, 31],
      [13, 64],
      [100, 200],
      [299, 1],
    ] as const) {
      xxh64(bytes, offset, length);
      expect((BigInt(out.hi) << 32n) | BigInt(out.lo)).toBe(h64Raw(bytes.slice(offset, offset + length), 0n));
    }
  });

  it("rejects a range outside the input", () => {
    const bytes = new Uint8Array(10);
    expect(() => xxh64(bytes, 5, 6)).toThrow(RangeError);
    expect(() => xxh64(bytes, -1, 2)).toThrow(RangeError);
    expect(() => xxh64(bytes, 0.5, 2)).toThrow(RangeError);
  });

  it("property: random bytes and seeds", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), fc.bigInt({ min: 0n, max: U64_MASK }), (bytes, seed) => {
        expect(ours(bytes, seed)).toBe(h64Raw(bytes, seed));
        expect(xxh64BigInt(bytes, seed)).toBe(h64Raw(bytes, seed));
      }),
      { numRuns: 500 },
    );
  });
});

describe("specialised xxh64 forms equal the byte form", () => {
  it("xxh64U32 hashes the little-endian bytes of u32 words, for every count 0..40 and with a start offset", () => {
    const words = new Uint32Array(randomBytes(4 * 48, 3).buffer);
    for (let start = 0; start <= 5; start += 5) {
      for (let count = 0; count <= 40; count++) {
        xxh64U32(words, start, count);
        const got = (BigInt(out.hi) << 32n) | BigInt(out.lo);
        const bytes = new Uint8Array(words.buffer, 4 * start, 4 * count);
        expect(got, `start ${start} count ${count}`).toBe(h64Raw(bytes, 0n));
      }
    }
  });

  it("xxh64Pair(a, b) = xxh64(LE64(a) ‖ LE64(b))", () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: U64_MASK }), fc.bigInt({ min: 0n, max: U64_MASK }), (a, b) => {
        xxh64Pair(Number(a & 0xffffffffn), Number(a >> 32n), Number(b & 0xffffffffn), Number(b >> 32n));
        expect((BigInt(out.hi) << 32n) | BigInt(out.lo)).toBe(h64Raw(concat(le64(a), le64(b)), 0n));
      }),
      { numRuns: 300 },
    );
  });

  it("xxh64StripesLane = xxh64(LE bytes of 8·k words ‖ LE64(lane))", () => {
    const words = new Uint32Array(randomBytes(4 * 64, 11).buffer);
    for (const [start, stripes] of [
      [0, 0],
      [0, 1],
      [0, 2],
      [3, 2],
      [8, 5],
    ] as const) {
      const lane = 0xfedcba9876543210n;
      xxh64StripesLane(words, start, stripes, 0x76543210, 0xfedcba98);
      const bytes = new Uint8Array(words.buffer, 4 * start, 32 * stripes);
      const expected = h64Raw(concat(bytes, le64(lane)), 0n);
      expect((BigInt(out.hi) << 32n) | BigInt(out.lo), `start ${start} stripes ${stripes}`).toBe(expected);
    }
  });
});

describe("hex helpers", () => {
  it("toHex prints hi first, 16 lowercase digits; fromHex inverts it", () => {
    expect(toHex(0xdeadbeef, 0x1)).toBe("00000001deadbeef");
    expect(fromHex("00000001DEADBEEF")).toEqual({ lo: 0xdeadbeef, hi: 1 });
    expect(fromHex(toHex(0xffffffff, 0x80000000))).toEqual({ lo: 0xffffffff, hi: 0x80000000 });
  });

  it("fromHex rejects anything but exactly 16 hex digits", () => {
    for (const bad of ["", "abc", "0x0123456789abcd", "0123456789abcdef0", "0123456789abcdeg", " 123456789abcdef"]) {
      expect(() => fromHex(bad), JSON.stringify(bad)).toThrow(/exactly 16 hex digits/);
    }
  });

  it("xxh64BigInt takes the seed mod 2^64", () => {
    const bytes = randomBytes(40, 2);
    expect(xxh64BigInt(bytes, -1n)).toBe(h64Raw(bytes, U64_MASK));
  });
});

describe("rootHash", () => {
  it("is xxh64(empty) when model and salt are both empty", () => {
    expect(toHex(rootHash().lo, rootHash().hi)).toBe("ef46db3751d8e999");
    expect(rootHash("", "")).toEqual(rootHash());
  });

  it("hashes model + NUL + salt, the missing one being empty", () => {
    expect(asBigInt(rootHash("m"))).toBe(h64Raw(utf8.encode("m\0"), 0n));
    expect(asBigInt(rootHash(undefined, "s"))).toBe(h64Raw(utf8.encode("\0s"), 0n));
    expect(asBigInt(rootHash("m", "s"))).toBe(h64Raw(utf8.encode("m\0s"), 0n));
  });
});

describe("chained block hashing equals the BigInt oracle", () => {
  const tokenId = fc.integer({ min: 0, max: 0xffffffff });

  it("property: tokens, block sizes 1..64, model and salt", () => {
    fc.assert(
      fc.property(
        fc.array(tokenId, { maxLength: 400 }),
        fc.integer({ min: 1, max: 64 }),
        fc.string({ unit: "grapheme", maxLength: 20 }),
        fc.string({ unit: "grapheme", maxLength: 20 }),
        (tokens, blockSize, model, salt) => {
          const root = rootHash(model, salt);
          expect(asBigInt(root)).toBe(oracleRoot(model, salt));
          const expected = oracleTokens(tokens, blockSize, oracleRoot(model, salt));
          expect(pairsToHex(hashTokens(tokens, blockSize, root))).toEqual(expected);
          expect(pairsToHex(hashTokens(Uint32Array.from(tokens), blockSize, root))).toEqual(expected);
        },
      ),
      { numRuns: 300 },
    );
  });

  it("property: text bytes, model and salt", () => {
    fc.assert(
      fc.property(
        fc.string({ unit: "grapheme", maxLength: 300 }),
        fc.string({ maxLength: 10 }),
        fc.string({ maxLength: 10 }),
        (text, model, salt) => {
          const bytes = utf8.encode(text);
          const expected = oracleText(bytes, oracleRoot(model, salt));
          expect(pairsToHex(hashText(bytes, rootHash(model, salt)))).toEqual(expected);
        },
      ),
      { numRuns: 300 },
    );
  });

  it("text at a byteOffset that is not a multiple of 4 (copied, not viewed)", () => {
    const backing = randomBytes(64 * 5 + 3, 31);
    for (const shift of [1, 2, 3]) {
      const bytes = backing.subarray(shift, shift + 64 * 4 + 10);
      expect(pairsToHex(hashText(bytes, rootHash("m")))).toEqual(oracleText(bytes, oracleRoot("m", "")));
    }
  });

  it("at the largest block size, 4096, over several blocks", () => {
    const tokens = Array.from(randomBytes(4 * 3 * 4096 + 100, 77).subarray(0, 3 * 4096 + 25), (b, i) => b * 65537 + i);
    expect(pairsToHex(hashTokens(tokens, 4096, rootHash("m", "s")))).toEqual(
      oracleTokens(tokens, 4096, oracleRoot("m", "s")),
    );
  });

  it("fills a caller's outPairs and returns a view of exactly 2·nBlocks values", () => {
    const tokens = Array.from({ length: 50 }, (_, i) => i);
    const outPairs = new Uint32Array(10).fill(0xaaaaaaaa);
    const got = hashTokens(tokens, 16, rootHash(), outPairs);
    expect(got.length).toBe(6);
    expect(got.buffer).toBe(outPairs.buffer);
    expect(pairsToHex(got)).toEqual(oracleTokens(tokens, 16, oracleRoot("", "")));
    expect(outPairs[6]).toBe(0xaaaaaaaa);
    expect(() => hashTokens(tokens, 16, rootHash(), new Uint32Array(5))).toThrow(/outPairs/);
  });
});

describe("block boundaries and validation", () => {
  it("ignores a partial trailing token block", () => {
    const tokens = Array.from({ length: 48 }, (_, i) => i * 1009);
    const root = rootHash("m");
    const full = pairsToHex(hashTokens(tokens, 16, root));
    expect(full.length).toBe(3);
    for (let extra = 1; extra < 16; extra++) {
      const longer = tokens.concat(Array.from({ length: extra }, (_, i) => 7 + i));
      expect(pairsToHex(hashTokens(longer, 16, root)), `extra ${extra}`).toEqual(full);
    }
    expect(blockCount(63, 16)).toBe(3);
  });

  it("ignores a partial trailing text block", () => {
    const bytes = randomBytes(128 + 63, 4);
    const root = rootHash();
    expect(pairsToHex(hashText(bytes, root))).toEqual(pairsToHex(hashText(bytes.subarray(0, 128), root)));
    expect(hashText(bytes.subarray(0, 63), root).length).toBe(0);
  });

  it("throws on a bad blockSize, naming the parameter and the value", () => {
    for (const bad of [0, -1, 4097, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() => hashTokens([1, 2, 3], bad, rootHash()), String(bad)).toThrow(/blockSize.*got/);
      expect(() => blockCount(10, bad), String(bad)).toThrow(/blockSize/);
    }
    expect(() => hashTokens([1], 4097, rootHash())).toThrow(/4097/);
  });

  it("throws on a token id that is not a u32", () => {
    for (const bad of [-1, 2 ** 32, 1.5, Number.NaN]) {
      expect(() => hashTokens([1, bad], 1, rootHash()), String(bad)).toThrow(/token id at index 1/);
    }
  });
});
