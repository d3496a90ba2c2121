// Our llm-d-cbor-fnv block hashes against llm-d's own Go code (llm-d-kv-cache v0.9.0's
// kvblock.TokenProcessor, through the harness in bench/peers/llmd): every case of
// spec/vectors/hashes-cbor-fnv.json and 200 seeded prompts (block sizes, hash seeds, model names, token ids of every
// CBOR width), bit for bit, from a Router on the core.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { callPeer } from "../bench/peers/harness.js";
import { pairsToHex } from "../src/hashing/hashes.js";
import { splitmix32 } from "../src/hashing/splitmix.js";
import { ruleTable } from "../src/table/rule-table.js";
import { routerOn } from "./helpers.js";
import { caseTokens, type TokensCase } from "./vectors-expand.js";

interface Prompt {
  tokens: number[];
  block_size: number;
  hash_seed: string;
  model: string;
}

function ours(p: Prompt): string[] {
  const r = routerOn("wasm", ruleTable("always-remote"), {
    workers: [{ id: "d", role: "decode" }],
    hashScheme: "llm-d-cbor-fnv",
    hashSeed: p.hash_seed,
    model: p.model,
    blockSize: p.block_size,
    maxWorkers: 1,
    capacityBlocks: 16,
    indexBlocks: 16,
  });
  return pairsToHex(r.hash({ tokens: p.tokens }));
}

function llmd(prompts: Prompt[]): string[][] {
  const { answers } = callPeer<{ answers: { hashes: string[] }[] }>("llmd", { op: "hash", cases: prompts });
  return answers.map((a) => a.hashes.map((h) => BigInt(h).toString(16).padStart(16, "0")));
}

function seeded(seed: number, n: number): Prompt[] {
  let s = seed >>> 0;
  const u = (): number => (s = splitmix32(s)) / 2 ** 32;
  const int = (lo: number, hi: number): number => lo + Math.floor(u() * (hi - lo + 1));
  const widths = [24, 256, 65536, 2 ** 32];
  const models = ["", "m", "Qwen/Qwen2.5-72B-Instruct", "modèle/日本語", "x".repeat(int(20, 300))];
  return Array.from({ length: n }, () => {
    const width = widths[int(0, 3)]!;
    return {
      tokens: Array.from({ length: int(0, 3000) }, () => Math.floor(u() * width)),
      block_size: [1, 16, 16, 23, 24, 64, 255, 256][int(0, 7)]!,
      hash_seed: ["", "0", "42", String(int(0, 2 ** 31))][int(0, 3)]!,
      model: models[int(0, models.length - 1)]!,
    };
  });
}

describe("llm-d-cbor-fnv against llm-d-kv-cache v0.9.0's token processor", () => {
  it("every vector case, bit for bit", () => {
    const vectors = JSON.parse(
      readFileSync(new URL("../spec/vectors/hashes-cbor-fnv.json", import.meta.url), "utf8"),
    ) as { cases: (Omit<TokensCase, "mode" | "salt"> & { hash_seed: string })[] };
    const prompts = vectors.cases.map((c) => ({
      tokens: Array.from(caseTokens(c)),
      block_size: c.block_size,
      hash_seed: c.hash_seed,
      model: c.model,
    }));
    const theirs = llmd(prompts);
    prompts.forEach((p, i) => expect(ours(p), vectors.cases[i]!.name).toEqual(theirs[i]));
    expect(theirs.some((h) => h.length > 1000)).toBe(true);
  });

  it("200 seeded prompts, bit for bit", () => {
    const prompts = seeded(26, 200);
    const theirs = llmd(prompts);
    prompts.forEach((p, i) => expect(ours(p), `prompt ${i}`).toEqual(theirs[i]));
    expect(theirs.filter((h) => h.length > 0).length).toBeGreaterThan(150);
  });
});
