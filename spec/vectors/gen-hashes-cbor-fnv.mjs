// Generates spec/vectors/hashes-cbor-fnv.json: cross-language known answers for llm-d's block-hash scheme
// (llm-d-kv-cache v0.9.0, pkg/kvcache/kvblock/token_processor.go, "cbor-fnv"), the core's hash scheme 1. The scheme is
// written out here in BigInt with explicit CBOR bytes, independent of assembly/ and src/; test/peers-hashes.test.ts
// checks every case against llm-d's own Go code. Run: node spec/vectors/gen-hashes-cbor-fnv.mjs

import { writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

const utf8 = new TextEncoder();
const LCG_VOCAB = 152064;
const LIST_ALL_UP_TO = 1500;

const description = [
  "llm-d's cbor-fnv block hashing (llm-d-kv-cache v0.9.0 TokenProcessor) known answers for dolphin-routing's hash",
  "scheme 1. FNV(b) is FNV-1a 64 over the bytes b (offset basis cbf29ce484222325, prime 100000001b3).",
  "CBOR(x) is x's canonical CBOR (RFC 8949 preferred serialization: shortest-form heads): a u64 is major type 0, a",
  "token list an array (major 4) of u64s, a string major 3 with its UTF-8 bytes, null f6.",
  "init = FNV(UTF-8 hash_seed); root h_0 = FNV(CBOR([init, null, model])); for each full block of block_size",
  "token ids, h_i = FNV(CBOR([h_{i-1}, [ids of block i], null])). A trailing partial block is not hashed.",
  "Hashes are 16 lowercase hex digits of the u64, most significant first. Inputs: 'tokens' lists ids, or",
  "'tokens_formula' {kind:'lcg', n, seed}: x = seed; repeat n times { x = (x * 1103515245 + 12345) mod 2^31;",
  "emit x mod 152064 } ('tokens_first' lists the first 8 ids). Outputs: 'root', and 'hashes' (every h_i, i >= 1); when",
  "there are more than 1500, 'hashes_head' lists the first 4 and 'hash_last' the last; 'hash_count' always.",
].join(" ");

const M64 = (1n << 64n) - 1n;

function fnv(bytes) {
  let h = 0xcbf29ce484222325n;
  for (const b of bytes) h = ((h ^ BigInt(b)) * 0x100000001b3n) & M64;
  return h;
}

/** A CBOR head: major type `major` and argument `v`, shortest form. */
function head(major, v) {
  const m = major << 5;
  if (v < 24n) return [m | Number(v)];
  const width = v < 256n ? 1 : v < 65536n ? 2 : v < 1n << 32n ? 4 : 8;
  const out = [m | { 1: 24, 2: 25, 4: 26, 8: 27 }[width]];
  for (let i = width - 1; i >= 0; i--) out.push(Number((v >> BigInt(8 * i)) & 0xffn));
  return out;
}

const NULL = [0xf6];
const uint = (v) => head(0, BigInt(v));
const text = (s) => {
  const b = [...utf8.encode(s)];
  return [...head(3, BigInt(b.length)), ...b];
};
const array = (items) => [...head(4, BigInt(items.length)), ...items.flat()];

function hashes(tokens, blockSize, model, seed) {
  const root = fnv(array([uint(fnv(utf8.encode(seed))), NULL, text(model)]));
  const out = [];
  let h = root;
  for (let i = 0; i + blockSize <= tokens.length; i += blockSize) {
    h = fnv(array([uint(h), array(tokens.slice(i, i + blockSize).map(uint)), NULL]));
    out.push(h);
  }
  return { root, out };
}

function lcgTokens({ n, seed }) {
  const tokens = new Array(n);
  let x = BigInt(seed);
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245n + 12345n) % 2147483648n;
    tokens[i] = Number(x % BigInt(LCG_VOCAB));
  }
  return tokens;
}

const hex = (h) => h.toString(16).padStart(16, "0");

function tokensCase(name, blockSize, model, hashSeed, tokensOrFormula) {
  const c = { name, block_size: blockSize, model, hash_seed: hashSeed };
  let tokens;
  if (Array.isArray(tokensOrFormula)) {
    tokens = tokensOrFormula;
    c.tokens = tokens;
  } else {
    tokens = lcgTokens(tokensOrFormula);
    c.tokens_formula = tokensOrFormula;
    c.tokens_first = tokens.slice(0, 8);
  }
  const { root, out } = hashes(tokens, blockSize, model, hashSeed);
  c.root = hex(root);
  const hexes = out.map(hex);
  if (hexes.length > LIST_ALL_UP_TO) {
    c.hashes_head = hexes.slice(0, 4);
    c.hash_last = hexes[hexes.length - 1];
  } else c.hashes = hexes;
  c.hash_count = hexes.length;
  return c;
}

const seq = (n, f) => Array.from({ length: n }, (_, i) => f(i));
const MODEL = "meta-llama/Llama-3.1-8B-Instruct";

const cases = [
  tokensCase("empty", 16, "", "", []),
  tokensCase("one token, no full block", 16, "", "", [42]),
  tokensCase(
    "exactly one block",
    16,
    "",
    "",
    seq(16, (i) => 1000 + i),
  ),
  tokensCase(
    "every token-id width (0, 23, 24, 255, 256, 65535, 65536, 2^32-1)",
    8,
    "",
    "",
    [0, 23, 24, 255, 256, 65535, 65536, 0xffffffff, 1, 2, 3, 4, 5, 6, 7, 8],
  ),
  tokensCase(
    "block_size 1",
    1,
    "",
    "",
    seq(10, (i) => i * 7919),
  ),
  tokensCase(
    "block_size 23 (the last one-byte array head)",
    23,
    "",
    "",
    seq(46, (i) => i * 31 + 5),
  ),
  tokensCase(
    "block_size 24 (a two-byte array head)",
    24,
    "",
    "",
    seq(48, (i) => i * 131),
  ),
  tokensCase("block_size 256 (a three-byte array head)", 256, "", "", { kind: "lcg", n: 600, seed: 5 }),
  tokensCase(
    "partial trailing block ignored",
    16,
    "",
    "",
    seq(53, (i) => (i * 2654435761) % 152064),
  ),
  tokensCase(
    "model name",
    16,
    MODEL,
    "",
    seq(32, (i) => 128000 + i),
  ),
  tokensCase(
    "hash seed (PYTHONHASHSEED)",
    16,
    MODEL,
    "42",
    seq(32, (i) => 128000 + i),
  ),
  tokensCase(
    "non-ASCII model name",
    16,
    "modèle-ß/日本語",
    "12345",
    seq(20, (i) => i),
  ),
  tokensCase(
    "model name of 300 bytes (two-byte string head)",
    16,
    "m".repeat(300),
    "",
    seq(16, (i) => i),
  ),
  tokensCase("many blocks (1000 tokens, bs 16)", 16, "", "", { kind: "lcg", n: 1000, seed: 7 }),
  tokensCase("block_size 4096 (maximum)", 4096, "", "", { kind: "lcg", n: 10000, seed: 3 }),
  tokensCase("larger than a 64 KiB page (20000 tokens, bs 16)", 16, MODEL, "", { kind: "lcg", n: 20000, seed: 1 }),
  tokensCase("long, abbreviated (100000 tokens, bs 16)", 16, MODEL, "7", { kind: "lcg", n: 100000, seed: 4 }),
];

const out = fileURLToPath(new URL("hashes-cbor-fnv.json", import.meta.url));
writeFileSync(out, JSON.stringify({ description, scheme: "llm-d-cbor-fnv", cases }, null, 2) + "\n");
console.log(`wrote ${out}: ${cases.length} cases`);
