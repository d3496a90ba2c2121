// Generates spec/vectors/hashes.json: cross-language known answers for chained block hashing.
// Expected values come ONLY from xxhash-wasm's h64Raw (an xxh64 independent of src/reference/), with the scheme
// written out here in BigInt and explicit byte concatenation. Run: node spec/vectors/gen-hashes.mjs

import { writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import xxhash from "xxhash-wasm";

const { h64Raw } = await xxhash();
const utf8 = new TextEncoder();

const LCG_VOCAB = 152064;
const LIST_ALL_UP_TO = 1500; // longer hash lists are abbreviated to head + last + count

const description = [
  "Chained block hashing known answers for dolphin-routing (llm-d approximate prefix scheme). All xxh64 calls use seed 0;",
  "hashes are 16 lowercase hex digits of the u64, most significant first; LE64(x) is the 8 little-endian bytes of x.",
  "root: h_0 = xxh64(UTF-8(model + '\\0' + salt)); when model and salt are both empty h_0 = xxh64(empty) = ef46db3751d8e999.",
  "mode 'tokens': full blocks of block_size u32 token ids; c_i = xxh64(LE32 bytes of the block's ids);",
  "h_i = xxh64(LE64(c_i) || LE64(h_{i-1})) (16 bytes). mode 'text': full blocks of 64 UTF-8 bytes (block_bytes);",
  "h_i = xxh64(block's 64 bytes || LE64(h_{i-1})) (72 bytes). A trailing partial block is not hashed.",
  "Inputs: 'tokens' lists ids; or 'tokens_formula' {kind:'lcg', n, seed}: x = seed; repeat n times",
  "{ x = (x * 1103515245 + 12345) mod 2^31; emit x mod 152064 } ('tokens_first' lists the first 8 ids to check an",
  "expansion). 'text' is the string; or 'text_formula' {kind:'repeat', unit, count}: unit repeated count times;",
  "'text_bytes' is the UTF-8 length. Outputs: 'hashes' lists every h_i (i >= 1); when there are more than 1500,",
  "'hashes_head' lists the first 4 and 'hash_last' the last. 'hash_count' is always the number of full blocks.",
].join(" ");

// ---------------------------------------------------------------------------------------------------------------
// Scheme, straightforwardly.

function hex(h) {
  return h.toString(16).padStart(16, "0");
}

function le64(h) {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setBigUint64(0, h, true);
  return b;
}

function concat(a, b) {
  const c = new Uint8Array(a.length + b.length);
  c.set(a, 0);
  c.set(b, a.length);
  return c;
}

function root(model, salt) {
  return h64Raw(model === "" && salt === "" ? new Uint8Array(0) : utf8.encode(`${model}\0${salt}`), 0n);
}

function tokenHashes(tokens, blockSize, h) {
  const hashes = [];
  for (let i = 0; i + blockSize <= tokens.length; i += blockSize) {
    const block = new Uint8Array(4 * blockSize);
    const view = new DataView(block.buffer);
    for (let j = 0; j < blockSize; j++) view.setUint32(4 * j, tokens[i + j], true);
    const c = h64Raw(block, 0n);
    h = h64Raw(concat(le64(c), le64(h)), 0n);
    hashes.push(h);
  }
  return hashes;
}

function textHashes(bytes, h) {
  const hashes = [];
  for (let i = 0; i + 64 <= bytes.length; i += 64) {
    h = h64Raw(concat(bytes.subarray(i, i + 64), le64(h)), 0n);
    hashes.push(h);
  }
  return hashes;
}

// Formulas: BigInt so the arithmetic is exactly the documented one.
function lcgTokens({ n, seed }) {
  const tokens = new Array(n);
  let x = BigInt(seed);
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245n + 12345n) % 2147483648n;
    tokens[i] = Number(x % BigInt(LCG_VOCAB));
  }
  return tokens;
}

// ---------------------------------------------------------------------------------------------------------------
// Cases.

function withHashes(c, hashes) {
  const hexes = hashes.map(hex);
  if (hexes.length > LIST_ALL_UP_TO) {
    c.hashes_head = hexes.slice(0, 4);
    c.hash_last = hexes[hexes.length - 1];
  } else {
    c.hashes = hexes;
  }
  c.hash_count = hexes.length;
  return c;
}

function tokensCase(name, blockSize, model, salt, tokensOrFormula) {
  const c = { name, mode: "tokens", block_size: blockSize, model, salt };
  let tokens;
  if (Array.isArray(tokensOrFormula)) {
    tokens = tokensOrFormula;
    c.tokens = tokens;
  } else {
    tokens = lcgTokens(tokensOrFormula);
    c.tokens_formula = tokensOrFormula;
    c.tokens_first = tokens.slice(0, 8);
  }
  const h0 = root(model, salt);
  c.root = hex(h0);
  return withHashes(c, tokenHashes(tokens, blockSize, h0));
}

function textCase(name, model, salt, textOrFormula) {
  const c = { name, mode: "text", block_bytes: 64, model, salt };
  let text;
  if (typeof textOrFormula === "string") {
    text = textOrFormula;
    c.text = text;
  } else {
    text = textOrFormula.unit.repeat(textOrFormula.count);
    c.text_formula = textOrFormula;
  }
  const bytes = utf8.encode(text);
  c.text_bytes = bytes.length;
  const h0 = root(model, salt);
  c.root = hex(h0);
  return withHashes(c, textHashes(bytes, h0));
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
    "block_size 1",
    1,
    "",
    "",
    seq(10, (i) => i * 7919),
  ),
  tokensCase(
    "block_size 7 (odd word count: 4-byte tail step)",
    7,
    "",
    "",
    seq(21, (i) => i * 31 + 5),
  ),
  tokensCase(
    "block_size 8 (exactly one 32-byte stripe)",
    8,
    "",
    "",
    seq(24, (i) => i * 131),
  ),
  tokensCase(
    "block_size 9 (stripe + 4-byte tail)",
    9,
    "",
    "",
    seq(27, (i) => i * 17),
  ),
  tokensCase(
    "partial trailing block ignored",
    16,
    "",
    "",
    seq(53, (i) => (i * 2654435761) % 152064),
  ),
  tokensCase(
    "extreme token ids (0, 2^31, 2^32-1)",
    4,
    "",
    "",
    [0, 0xffffffff, 0x80000000, 0x7fffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0, 0, 0, 0],
  ),
  tokensCase("many blocks (1000 tokens, bs 16)", 16, "", "", { kind: "lcg", n: 1000, seed: 7 }),
  tokensCase("block_size 512 (Mooncake)", 512, "", "", { kind: "lcg", n: 5000, seed: 2 }),
  tokensCase("block_size 4096 (maximum)", 4096, "", "", { kind: "lcg", n: 10000, seed: 3 }),
  tokensCase("larger than a 64 KiB page (20000 tokens, bs 16)", 16, "", "", { kind: "lcg", n: 20000, seed: 1 }),
  tokensCase("long, abbreviated (100000 tokens, bs 16)", 16, MODEL, "tenant-a", { kind: "lcg", n: 100000, seed: 4 }),
  tokensCase(
    "model-only root",
    16,
    MODEL,
    "",
    seq(32, (i) => 128000 + i),
  ),
  tokensCase(
    "salt-only root",
    16,
    "",
    "tenant-a",
    seq(32, (i) => 128000 + i),
  ),
  tokensCase(
    "model and salt root",
    16,
    MODEL,
    "tenant-a",
    seq(32, (i) => 128000 + i),
  ),
  tokensCase(
    "one-character model (root of bytes 'm\\0')",
    16,
    "m",
    "",
    seq(16, (i) => i),
  ),
  tokensCase(
    "non-ASCII model and salt",
    16,
    "模型-ü",
    "🔑-salt",
    seq(16, (i) => i),
  ),
  textCase("text empty", "", "", ""),
  textCase("text 63 bytes, no full block", "", "", "a".repeat(63)),
  textCase("text exactly 64 bytes", "", "", "0123456789abcdef".repeat(4)),
  textCase(
    "text multi-block ASCII",
    "m",
    "s",
    "You are a helpful assistant. Answer the user's questions concisely and cite sources where possible. " +
      "The user asks: what is prefill/decode disaggregation?",
  ),
  textCase(
    "text multi-byte UTF-8 crossing block boundaries",
    MODEL,
    "",
    "系统提示：你是一个乐于助人的助手。🐬🚀 Répondez brièvement. 日本語のテキストも含みます。😀👍🏽 " +
      "Ελληνικά κείμενα και עברית. 中文与表情符号🎉交替出现，以跨越六十四字节的块边界。",
  ),
  textCase("text larger than a 64 KiB page", "", "tenant-b", {
    kind: "repeat",
    unit: "Dolphins route requests 🐬 to prefill/decode pools — 预填充与解码. ",
    count: 900,
  }),
];

const doc = { description, cases };
const path = fileURLToPath(new URL("./hashes.json", import.meta.url));
writeFileSync(path, JSON.stringify(doc, null, 1) + "\n");
console.log(`wrote ${cases.length} cases to ${path}`);
