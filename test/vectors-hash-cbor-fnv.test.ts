// Replays llm-d's cbor-fnv vectors (spec/vectors/hashes-cbor-fnv.json, written out in BigInt by
// spec/vectors/gen-hashes-cbor-fnv.mjs) through the host-side hasher and a Router on either engine with
// hashScheme "llm-d-cbor-fnv"; and the scheme's edges: tokens only, no salt, the xxh64 chain still the default.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { cborFnvRoot, cborFnvTokens } from "../src/hashing/cbor-fnv.js";
import { pairsToHex, rootHash } from "../src/hashing/hashes.js";
import { toHex } from "../src/hashing/xxh64.js";
import type { RouterOptions } from "../src/router/types.js";
import { ruleTable } from "../src/table/rule-table.js";
import { routerOn } from "./helpers.js";
import { caseTokens, comparableHashes, type TokensCase } from "./vectors-expand.js";

interface CborFnvCase extends Omit<TokensCase, "mode" | "salt"> {
  hash_seed: string;
}

const vectors = JSON.parse(readFileSync(new URL("../spec/vectors/hashes-cbor-fnv.json", import.meta.url), "utf8")) as {
  scheme: string;
  cases: CborFnvCase[];
};

const utf8 = new TextEncoder();
const expected = (c: CborFnvCase) =>
  c.hashes !== undefined ? { hashes: c.hashes } : { hashes_head: c.hashes_head, hash_last: c.hash_last };

function router(engine: "wasm" | "reference", options: Partial<RouterOptions>) {
  return routerOn(engine, ruleTable("always-remote"), { workers: [{ id: "d", role: "decode" }], ...options });
}

describe("hashes-cbor-fnv.json vectors", () => {
  it("names the scheme it pins", () => expect(vectors.scheme).toBe("llm-d-cbor-fnv"));

  for (const c of vectors.cases) {
    it(`host hasher: ${c.name}`, () => {
      const root = cborFnvRoot(utf8.encode(c.hash_seed), utf8.encode(c.model));
      expect(toHex(root.lo, root.hi)).toBe(c.root);
      const hex = pairsToHex(cborFnvTokens(caseTokens(c), c.block_size, root));
      expect(hex.length).toBe(c.hash_count);
      expect(comparableHashes(hex)).toEqual(expected(c));
    });
    for (const engine of ["wasm", "reference"] as const) {
      it(`${engine} router: ${c.name}`, () => {
        const r = router(engine, {
          hashScheme: "llm-d-cbor-fnv",
          hashSeed: c.hash_seed,
          model: c.model,
          blockSize: c.block_size,
        });
        const hex = pairsToHex(r.hash({ tokens: caseTokens(c) }));
        expect(comparableHashes(hex)).toEqual(expected(c));
      });
    }
  }
});

describe("choosing the llm-d-cbor-fnv scheme", () => {
  const tokens = Uint32Array.from({ length: 64 }, (_, i) => i * 7);

  it("leaves the xxh64 chain the default", () => {
    const r = router("wasm", { model: "m" });
    const xxh = router("wasm", { model: "m", hashScheme: "xxh64-chain" });
    const fnv = router("wasm", { model: "m", hashScheme: "llm-d-cbor-fnv" });
    expect(pairsToHex(r.hash({ tokens }))).toEqual(pairsToHex(xxh.hash({ tokens })));
    expect(pairsToHex(r.hash({ tokens }))).not.toEqual(pairsToHex(fnv.hash({ tokens })));
    expect(rootHash("m")).not.toEqual(cborFnvRoot(new Uint8Array(), utf8.encode("m")));
  });

  for (const engine of ["wasm", "reference"] as const) {
    it(`${engine}: routes token prompts and refuses text, naming the scheme`, () => {
      const r = router(engine, { hashScheme: "llm-d-cbor-fnv" });
      expect(r.route({ tokens }).blocks).toBe(4);
      expect(() => r.route({ text: "x".repeat(200) })).toThrow(/text mode needs the xxh64-chain hash scheme/);
      expect(() => r.hash({ text: "x".repeat(200) })).toThrow(/text mode needs the xxh64-chain hash scheme/);
    });
  }

  it("refuses a salt, a hash seed without the scheme, and an unknown scheme", () => {
    expect(() => router("wasm", { hashScheme: "llm-d-cbor-fnv", salt: "s" })).toThrow(/no cache salt/);
    expect(() => router("wasm", { hashSeed: "42" })).toThrow(/hashSeed: only the llm-d-cbor-fnv/);
    expect(() => router("wasm", { hashScheme: "fnv" as "xxh64-chain" })).toThrow(/hashScheme: expected xxh64-chain/);
  });
});
