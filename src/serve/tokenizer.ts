// The emulated worker's tokenizer: deterministic, dependency-free, and the same in every process, so a router, a
// proxy and any number of workers agree on a prompt's token ids (and so on its prefix-cache block hashes) without
// sharing a vocabulary file. It is not a real model's tokenizer; its token counts are roughly those of a BPE
// tokenizer on English text (about 4 characters per token).
//
// encode(text):
//   1. Pre-split the text into pieces, left to right: a run of letters and digits (Unicode \p{L}, \p{M}, \p{N}),
//      a run of whitespace (\s), or any other single code point (punctuation, symbols, emoji).
//   2. A piece longer than 4 UTF-16 code units is cut into chunks of 4 (the last may be shorter); a cut never
//      splits a surrogate pair (that chunk ends one unit early).
//   3. Each chunk is one token: id = 1000 + (FNV-1a 32-bit of the chunk's UTF-8 bytes) mod 150000.
//   Ids 0..999 are reserved and never produced (no BOS/EOS is added); the vocabulary is 0..VOCAB_SIZE-1.
//   Example: encode("Hello, world!") = pieces "Hello" "," " " "world" "!" → chunks "Hell" "o" "," " " "worl" "d" "!".
//
// chatPrompt(messages): the chat template, per message `<|{role}|>\n{content}\n`, then `<|assistant|>\n` (the
//   generation prompt). Content is a string, or a list of parts whose `text` fields are concatenated (non-text
//   parts are ignored), or null (empty).
//
// Output: a worker emits output token k (0-based) of a request as OUTPUT_WORDS[(seed + k) mod 32], where the seed
//   is promptSeed(prompt token ids) (FNV-1a over the ids), and the token's id is encode(word)[0] (every word is one
//   token). decodeToken(id) gives " " + word for those ids and " tok{id}" for any other id, so a completion's text
//   is a deterministic run of words (" the cat sat …"). decodeToken is not an inverse of encode: the tokenizer is a
//   hash and loses the text.

export const VOCAB_SIZE = 151_000;
const FIRST_ID = 1000;
const ID_RANGE = 150_000;
const MAX_CHUNK = 4;

const PIECE = /[\p{L}\p{M}\p{N}]+|\s+|[^\p{L}\p{M}\p{N}\s]/gsu;
const utf8 = new TextEncoder();

/** FNV-1a, 32 bits, of some bytes. */
export function fnv1a32(bytes: Uint8Array): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < bytes.length; i++) {
    h ^= bytes[i]!;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

/** The id of one chunk of text (at most 4 UTF-16 units, from the pre-split). */
export function tokenId(chunk: string): number {
  return FIRST_ID + (fnv1a32(utf8.encode(chunk)) % ID_RANGE);
}

/** The chunks (token strings) of a text, in order. */
export function pieces(text: string): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(PIECE)) {
    const piece = m[0];
    let i = 0;
    while (i < piece.length) {
      let end = Math.min(piece.length, i + MAX_CHUNK);
      // never end a chunk between the halves of a surrogate pair
      if (end < piece.length && end - i > 1) {
        const c = piece.charCodeAt(end - 1);
        if (c >= 0xd800 && c <= 0xdbff) end--;
      }
      out.push(piece.slice(i, end));
      i = end;
    }
  }
  return out;
}

/** Token ids of a text. */
export function encode(text: string): number[] {
  return pieces(text).map(tokenId);
}

export interface ChatMessage {
  role: string;
  content?: string | null | readonly { type?: string; text?: string }[];
}

/** The text of a message's content: a string, the concatenated text parts of a list, or "" for null. */
export function messageText(content: ChatMessage["content"]): string {
  if (content === undefined || content === null) return "";
  if (typeof content === "string") return content;
  let s = "";
  for (const part of content) if (typeof part?.text === "string") s += part.text;
  return s;
}

/** The chat template: `<|role|>\n{content}\n` per message, then `<|assistant|>\n`. */
export function chatPrompt(messages: readonly ChatMessage[]): string {
  let s = "";
  for (const m of messages) s += `<|${m.role}|>\n${messageText(m.content)}\n`;
  return s + "<|assistant|>\n";
}

/** The words output tokens are drawn from (each is one token). */
export const OUTPUT_WORDS: readonly string[] = [
  "the",
  "cat",
  "sat",
  "on",
  "a",
  "mat",
  "and",
  "then",
  "it",
  "ran",
  "to",
  "see",
  "dog",
  "who",
  "was",
  "not",
  "very",
  "glad",
  "so",
  "they",
  "both",
  "went",
  "home",
  "for",
  "tea",
  "with",
  "milk",
  "in",
  "old",
  "blue",
  "cups",
  "too",
];

const WORD_IDS: readonly number[] = OUTPUT_WORDS.map(tokenId);
const WORD_OF = new Map<number, string>(WORD_IDS.map((id, i) => [id, OUTPUT_WORDS[i]!]));

/** A request's output seed: FNV-1a over its prompt token ids (as u32 little-endian bytes). */
export function promptSeed(tokens: ArrayLike<number>): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < tokens.length; i++) {
    let t = tokens[i]! >>> 0;
    for (let b = 0; b < 4; b++) {
      h ^= t & 0xff;
      h = Math.imul(h, 0x01000193) >>> 0;
      t >>>= 8;
    }
  }
  return h >>> 0;
}

/** Output token k (0-based) of a request with this seed. */
export function outputToken(seed: number, k: number): number {
  return WORD_IDS[(seed + k) % WORD_IDS.length]!;
}

/** The text of one output token: " word" for the output words, " tok{id}" for any other id. */
export function decodeToken(id: number): string {
  const w = WORD_OF.get(id);
  return w !== undefined ? ` ${w}` : ` tok${id}`;
}

/** The text of some token ids (decodeToken of each, concatenated). */
export function decode(ids: readonly number[]): string {
  let s = "";
  for (const id of ids) s += decodeToken(id);
  return s;
}
