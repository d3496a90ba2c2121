// The index's summary slots name groups whose every member holds a block, members being the workers ever given a
// capacity (assembly/prefix-index/holders.ts growMembers): a group the cluster fills only partly gets summaries,
// and a group that gains a member is no longer full for the blocks its summaries name. Matches stay the reference's.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { Role, type Engine } from "../src/contract/core-api.js";
import { createCore, instantiateCore } from "../src/core/core.js";
import { ReferenceEngine } from "../src/reference/engine.js";
import { coreModule } from "./helpers.js";

// 300 worker slots: groups of 61 (ids 0–60, 61–121, …), so 70 workers fill group 0 and 9 of group 1
const CONFIG = { maxWorkers: 300, maxInputBytes: 1 << 14, indexBlocks: 1 << 15 };

function engines(): Engine[] {
  return [createCore(instantiateCore(coreModule("debug")), CONFIG), new ReferenceEngine(CONFIG)];
}

/** Block hashes of a prompt of `n` blocks (u32 pairs). */
function prompt(n: number): Uint32Array {
  return Uint32Array.from({ length: 2 * n }, (_, i) => (i & 1 ? 7 : Math.imul(i + 1, 2654435761) >>> 0));
}

describe("index: summaries over a group's members", () => {
  it("drops a group from its summaries when it gains a member that does not hold their blocks", () => {
    const [core, reference] = engines();
    const p = prompt(24);
    for (const e of [core!, reference!]) {
      for (let w = 0; w < 70; w++) e.setWorker(w, Role.decode, 64);
      for (let w = 0; w < 70; w++) e.indexStore(w, p); // groups 0 and 1 full for every block
      e.setWorker(75, Role.decode, 64); // group 1 gains a member
      e.indexStore(75, p.subarray(0, 2 * 10)); // which holds only the first 10 blocks
    }
    const m = core!.match(p);
    expect(Array.from(m)).toEqual(Array.from(reference!.match(p)));
    expect(m[75]).toBe(10);
    expect(m[69]).toBe(24);
  });

  it("matches like the reference as members join, store, evict and leave", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            op: fc.constantFrom("join", "store", "store", "store", "remove", "match"),
            worker: fc.integer({ min: 0, max: 299 }),
            len: fc.integer({ min: 0, max: 30 }),
            cap: fc.constantFrom(0, 8, 40, 40),
          }),
          { maxLength: 80 },
        ),
        (ops) => {
          const pair = engines();
          const p = prompt(30);
          // a first cluster spanning two groups, all holding the prompt: summaries from the start
          for (const e of pair) {
            for (let w = 0; w < 70; w++) e.setWorker(w, Role.decode, 40);
            for (let w = 0; w < 70; w++) e.indexStore(w, p);
          }
          for (const o of ops) {
            const results = pair.map((e) => {
              if (o.op === "join") e.setWorker(o.worker, o.cap === 0 ? Role.none : Role.decode, o.cap);
              if (o.op === "store") e.indexStore(o.worker, p.subarray(0, 2 * o.len));
              if (o.op === "remove") e.indexRemove(o.worker, p.subarray(2 * o.len, 2 * o.len + 2));
              return Array.from(e.match(p));
            });
            expect(results[0]).toEqual(results[1]);
          }
        },
      ),
      { numRuns: 60 },
    );
  });
});
