// The simulator's prompt-wise interning (ChainedBlockIds) names blocks exactly as interning every hash does
// (BlockIds): the same hashes share an id and different hashes do not, on workloads whose prompts share prefixes.
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { resampleTrace } from "../bench/sim.js";
import { ChainedBlockIds } from "../src/sim/chained-ids.js";
import { BlockIds } from "../src/sim/block-ids.js";
import type { Workload } from "../src/sim/types.js";
import { generate } from "../src/sim/generators.js";
import { readMooncake } from "../src/sim/workload-files.js";

const TRACE = fileURLToPath(new URL("../data/traces/mooncake_conversation_dev.jsonl", import.meta.url));

/** Interns every prompt both ways and checks the ids are one renaming of the other. */
function expectSamePartition(w: Workload): void {
  const chained = new ChainedBlockIds();
  const each = new BlockIds();
  const rename = new Map<number, number>(); // chained id → per-hash id
  let blocks = 0;
  let wrong = 0; // blocks whose id is not the renaming of their per-hash id (checked without an expect per block)
  for (const r of w.requests) {
    const a = chained.intern(r.blocks);
    const b = each.intern(r.blocks);
    expect(a.length).toBe(r.blocks.length >>> 1);
    for (let i = 0; i < a.length; i++) {
      const seen = rename.get(a[i]!);
      if (seen === undefined) rename.set(a[i]!, b[i]!);
      else if (seen !== b[i]) wrong++;
    }
    const back = chained.pairs(a);
    for (let i = 0; i < back.length; i++) if (back[i] !== r.blocks[i]) wrong++;
    blocks += a.length;
  }
  expect(wrong).toBe(0);
  expect(chained.count).toBe(each.count); // one id per distinct hash, none twice
  expect(chained.count).toBeLessThan(blocks); // the workload did share prefixes
}

describe("ChainedBlockIds", () => {
  it("interns a multi-turn workload as interning every hash does", () => {
    expectSamePartition(generate("multiturn", { requests: 400, seed: 3 }));
  });

  it("interns the resampled Mooncake trace (salted copies, shared prefixes) as interning every hash does", () => {
    // 400 requests of the trace resampled to 1,500: four copies, three of them salted
    expectSamePartition(resampleTrace(readMooncake(TRACE, { requests: 400 }), 1500, 1));
  });

  it("finds a prefix that leaves one run for another, and gives a new suffix consecutive ids", () => {
    // chained pairs: prompt p's block i is (p-specific content, i) chained onto its prefix; spell them directly
    const ids = new ChainedBlockIds();
    const pair = (k: number) => [k, 0];
    const a = new Uint32Array([1, 2, 3, 4].flatMap(pair));
    const b = new Uint32Array([1, 2, 5, 6].flatMap(pair)); // leaves a's run after two blocks
    const c = new Uint32Array([1, 2, 5, 6, 7].flatMap(pair)); // a's run, then b's, then new
    expect(Array.from(ids.intern(a))).toEqual([0, 1, 2, 3]);
    expect(Array.from(ids.intern(b))).toEqual([0, 1, 4, 5]);
    expect(Array.from(ids.intern(c))).toEqual([0, 1, 4, 5, 6]);
    expect(Array.from(ids.intern(new Uint32Array(0)))).toEqual([]);
  });
});
