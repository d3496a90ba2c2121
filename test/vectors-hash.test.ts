// Replays the cross-language chained-hashing vectors (spec/vectors/hashes.json, generated from xxhash-wasm by
// spec/vectors/gen-hashes.mjs) against the plain-TypeScript reference in src/reference/.

import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { hashText, hashTokens, pairsToHex, rootHash } from "../src/hashing/hashes.js";
import { toHex } from "../src/hashing/xxh64.js";
import {
  caseText,
  caseTokens,
  comparableHashes,
  expandTokens,
  type HashCase,
  type HashVectors,
} from "./vectors-expand.js";

const vectors = JSON.parse(
  readFileSync(new URL("../spec/vectors/hashes.json", import.meta.url), "utf8"),
) as HashVectors;

function expectedHashes(c: HashCase): { hashes?: string[]; hashes_head?: string[]; hash_last?: string } {
  return c.hashes !== undefined ? { hashes: c.hashes } : { hashes_head: c.hashes_head, hash_last: c.hash_last };
}

describe("hashes.json vectors", () => {
  it("has cases of both modes", () => {
    expect(vectors.cases.some((c) => c.mode === "tokens")).toBe(true);
    expect(vectors.cases.some((c) => c.mode === "text")).toBe(true);
  });

  it("expandTokens reproduces the listed first ids of every formula case", () => {
    for (const c of vectors.cases) {
      if (c.mode !== "tokens" || c.tokens_formula === undefined) continue;
      expect(Array.from(expandTokens(c.tokens_formula).subarray(0, 8)), c.name).toEqual(c.tokens_first);
    }
  });

  for (const c of vectors.cases) {
    it(`${c.mode}: ${c.name}`, () => {
      const root = rootHash(c.model, c.salt);
      expect(toHex(root.lo, root.hi)).toBe(c.root);
      let hex: string[];
      if (c.mode === "tokens") {
        hex = pairsToHex(hashTokens(caseTokens(c), c.block_size, root));
      } else {
        expect(c.block_bytes).toBe(64);
        const bytes = new TextEncoder().encode(caseText(c));
        expect(bytes.length).toBe(c.text_bytes);
        hex = pairsToHex(hashText(bytes, root));
      }
      expect(hex.length).toBe(c.hash_count);
      expect(comparableHashes(hex)).toEqual(expectedHashes(c));
    });
  }
});
