// Worker choice in the core keeps its role lists in order of cost floor (assembly/workers.ts) and stops at the
// first worker whose floor is above the best cost: the same choices as the reference's scan of every worker,
// under any sequence of role changes, loads (ties included), load scales and pinned or excluded workers.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { Role, Slot, type Engine } from "../src/contract/core-api.js";
import { createCore, instantiateCore } from "../src/core/core.js";
import { ReferenceEngine } from "../src/reference/engine.js";
import { stageTable } from "../src/table/staging.js";
import { coreModule, kmeansTable } from "./helpers.js";

const WORKERS = 150; // three groups of the index at maxWorkers 150
const CONFIG = { maxWorkers: WORKERS, maxInputBytes: 1 << 14, indexBlocks: 1 << 14 };

/** A prompt of 40 blocks whose first `depth` blocks worker-specific prefixes share. */
const tokens = Uint32Array.from({ length: 40 * 16 }, (_, i) => i * 7 + 3);

describe("worker choice: core (lists in floor order) = reference (every worker scored)", () => {
  it("chooses the same decode and prefill workers and costs after any role, load and scale changes", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            fc.record({
              op: fc.constant("role" as const),
              worker: fc.integer({ min: 0, max: WORKERS - 1 }),
              role: fc.constantFrom(Role.none, Role.prefill, Role.decode, Role.both),
            }),
            fc.record({
              op: fc.constant("load" as const),
              worker: fc.integer({ min: 0, max: WORKERS - 1 }),
              // few distinct values, so floors and costs tie often
              p: fc.constantFrom(0, 0, 16, 32, 640, 5000),
              d: fc.constantFrom(0, 0, 16, 32, 48, 5000),
            }),
            fc.record({ op: fc.constant("scale" as const), scale: fc.constantFrom(0, 0.5, 1, 1, 3) }),
            fc.record({
              op: fc.constant("route" as const),
              len: fc.oneof(fc.integer({ min: 0, max: tokens.length }), fc.constantFrom(16, 32, 48)),
              pinned: fc.constantFrom(-1, -1, -1, 0, 7, 149),
            }),
          ),
          { minLength: 1, maxLength: 80 },
        ),
        (ops) => {
          const engines: Engine[] = [
            createCore(instantiateCore(coreModule("debug")), CONFIG),
            new ReferenceEngine(CONFIG),
          ];
          const hashes = engines[1]!.hashTokens(tokens);
          const s = stageTable(
            kmeansTable(
              [
                [0, 0, 0, 0],
                [1, -1, 1, -1],
              ],
              [0, 1],
            ),
          );
          for (const e of engines) {
            e.setTable(s.kind, s.k, s.dims, s.staged, s.oslAt);
            for (let w = 0; w < WORKERS; w++) {
              e.setWorker(w, w % 3 === 0 ? Role.prefill : Role.decode, 64);
              e.indexStore(w, hashes.subarray(0, 2 * ((w * 7) % 41)));
            }
          }
          for (const o of ops) {
            const results = engines.map((e) => {
              try {
                if (o.op === "role") e.setWorker(o.worker, o.role, 64);
                else if (o.op === "load") e.setLoad(o.worker, o.p, o.d);
                else if (o.op === "scale") e.setLoadScale(o.scale);
                else
                  return Array.from(
                    e.route({
                      flags: 0,
                      data: tokens,
                      length: o.len,
                      promptTokens: 0,
                      oslHat: 200,
                      turn: 1,
                      pinnedDecode: o.pinned,
                      contextTokens: -1,
                      prevOutputTokens: 0,
                      maxTokens: 0,
                    }),
                  );
                return "ok";
              } catch (err) {
                return { code: (err as { code?: number }).code ?? String(err) };
              }
            });
            expect(results[0]).toEqual(results[1]);
          }
        },
      ),
      { numRuns: 120 },
    );
  });

  it("scores a worker whose floor equals the best cost: it may tie it with a lower id", () => {
    // a one-block prompt: worker 5 has floor 10 and nothing cached, cost 10 + 16 = 26; worker 2 has floor 26 and
    // the block cached, cost 26. The list visits 5 first (the lower floor); 2 ties it with the lower id and wins.
    const engines: Engine[] = [createCore(instantiateCore(coreModule("debug")), CONFIG), new ReferenceEngine(CONFIG)];
    const s = stageTable(
      kmeansTable(
        [
          [0, 0, 0, 0],
          [1, -1, 1, -1],
        ],
        [0, 1],
      ),
    );
    const decisions = engines.map((e) => {
      e.setTable(s.kind, s.k, s.dims, s.staged, s.oslAt);
      e.setWorker(2, Role.decode, 64);
      e.setWorker(5, Role.decode, 64);
      e.setLoad(5, 0, 10);
      e.setLoad(2, 0, 26);
      e.indexStore(2, e.hashTokens(tokens.subarray(0, 16)));
      const input = { flags: 0, data: tokens, length: 16, promptTokens: 0, oslHat: 200, turn: 1 };
      const rest = { pinnedDecode: -1, contextTokens: -1, prevOutputTokens: 0, maxTokens: 0 };
      return Array.from(e.route({ ...input, ...rest }));
    });
    expect(decisions[0]).toEqual(decisions[1]);
    expect(decisions[0]![Slot.decode]).toBe(2);
  });
});
