// Cache tiers (ABI 6): blocks a worker holds on its device or in a lower tier (CPU), their weights in the features
// and the worker cost, in the core and the reference alike, and the router's option and index calls.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { Flag, Role, Slot, type Engine } from "../src/contract/core-api.js";
import { ErrorCode } from "../src/contract/errors.js";
import { createCore, instantiateCore } from "../src/core/core.js";
import { ReferenceEngine } from "../src/reference/engine.js";
import { stageTable } from "../src/table/staging.js";
import { ruleTable } from "../src/table/rule-table.js";
import { coreModule, routerOn } from "./helpers.js";

const CONFIG = { maxWorkers: 70, maxInputBytes: 1 << 14, indexBlocks: 4096 };
const ENGINES = {
  wasm: (): Engine => createCore(instantiateCore(coreModule("debug")), CONFIG),
  reference: (): Engine => new ReferenceEngine(CONFIG),
};

/** n chained-looking block hashes of family f, from block `start`. */
function hashes(start: number, n: number, family = 1): Uint32Array {
  const out = new Uint32Array(2 * n);
  for (let i = 0; i < n; i++) {
    out[2 * i] = Math.imul(start + i + 1, 2654435761) >>> 0;
    out[2 * i + 1] = family;
  }
  return out;
}

/** Routes the first `blocks` hashes of family 1 as a hash-mode prompt of `isl` tokens (block size 16). */
function route(e: Engine, blocks: number, isl: number): Float64Array {
  return e.route({
    data: hashes(0, blocks),
    length: blocks,
    flags: Flag.hashes,
    promptTokens: isl,
    oslHat: 100,
    turn: 0,
    pinnedDecode: -1,
    contextTokens: -1,
    prevOutputTokens: 0,
    maxTokens: 0,
  });
}

function withTable(e: Engine): Engine {
  const s = stageTable(ruleTable("always-local"));
  e.setTable(s.kind, s.k, s.dims, s.staged, s.oslAt);
  return e;
}

for (const [name, make] of Object.entries(ENGINES)) {
  describe(`cache tiers (${name})`, () => {
    it("keeps a block while any tier holds it, and says which", () => {
      const e = make();
      e.setWorker(0, Role.decode, 10);
      const h = hashes(0, 1);
      e.indexStore(0, h, 1);
      expect([e.indexTiers(0, h), e.indexLowerCount(0), e.indexCount(0)]).toEqual([2, 1, 1]);
      e.indexStore(0, h); // the device too (a block brought back)
      expect([e.indexTiers(0, h), e.indexLowerCount(0), e.indexCount(0)]).toEqual([3, 0, 1]);
      e.indexRemove(0, h); // evicted from the device, still offloaded
      expect([e.indexTiers(0, h), e.indexLowerCount(0), Array.from(e.match(h))]).toEqual([2, 1, [1]]);
      e.indexRemove(0, h); // not on the device: nothing changes
      expect(e.indexTiers(0, h)).toBe(2);
      e.indexRemove(0, h, 1);
      expect([e.indexTiers(0, h), e.indexLowerCount(0), e.indexCount(0)]).toEqual([0, 0, 0]);
      expect(e.indexTiers(99, h)).toBe(-1);
    });

    it("counts lower-tier blocks at their weight in eff_D and in the cost, device blocks in full", () => {
      const e = withTable(make());
      e.setWorker(0, Role.decode, 50);
      e.indexStore(0, hashes(0, 2)); // blocks 0–1 on the device
      e.indexStore(0, hashes(2, 2), 1); // blocks 2–3 offloaded
      // 65 tokens: 4 cacheable blocks, (2 + 2 × 0.8) × 16 = 57.6 cached tokens
      let d = route(e, 4, 65);
      expect([d[Slot.matchedD], d[Slot.effD], d[Slot.costD]]).toEqual([4, 65 - 57.6, 65 - 57.6]);
      e.setTierWeight(1, 0); // offloaded blocks count for nothing
      d = route(e, 4, 65);
      expect([d[Slot.effD], d[Slot.costD]]).toEqual([65 - 32, 65 - 32]);
      e.setTierWeight(1, 1); // as good as the device
      d = route(e, 4, 65);
      expect(d[Slot.effD]).toBe(1);
    });

    it("prefers a device hit to a lower-tier hit, and a lower-tier hit to none", () => {
      const e = withTable(make());
      for (let w = 0; w < 3; w++) e.setWorker(w, Role.decode, 50);
      e.indexStore(0, hashes(0, 8, 2)); // another prompt: worker 0 holds something, but none of this one
      e.indexStore(1, hashes(0, 8), 1);
      expect(route(e, 8, 129)[Slot.decode]).toBe(1);
      e.indexStore(2, hashes(0, 8));
      expect(route(e, 8, 129)[Slot.decode]).toBe(2);
    });

    it("rejects a tier it does not know and a weight outside [0, 1] or a device weight other than 1", () => {
      const e = make();
      e.setWorker(0, Role.decode, 10);
      const code = (f: () => void): number | undefined => {
        try {
          f();
        } catch (err) {
          return (err as { code?: number }).code;
        }
        return undefined;
      };
      expect(code(() => e.indexStore(0, hashes(0, 1), 2))).toBe(ErrorCode.BAD_TIER);
      expect(code(() => e.indexRemove(0, hashes(0, 1), -1))).toBe(ErrorCode.BAD_TIER);
      expect(code(() => e.setTierWeight(1, 1.5))).toBe(ErrorCode.BAD_TIER_WEIGHT);
      expect(code(() => e.setTierWeight(1, Number.NaN))).toBe(ErrorCode.BAD_TIER_WEIGHT);
      expect(code(() => e.setTierWeight(0, 0.5))).toBe(ErrorCode.BAD_TIER_WEIGHT);
      expect(code(() => e.setTierWeight(2, 0.5))).toBe(ErrorCode.BAD_TIER);
    });
  });
}

describe("cache tiers: core = reference", () => {
  it("gives the same tiers, counts, costs and features after random stores and removals in both tiers", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            op: fc.constantFrom("store", "store", "remove", "clear", "weight"),
            tier: fc.constantFrom(0, 1, 1),
            worker: fc.integer({ min: 0, max: 69 }),
            start: fc.integer({ min: 0, max: 20 }),
            len: fc.integer({ min: 0, max: 12 }),
            weight: fc.constantFrom(0, 0.8, 0.5, 1, 0.3),
          }),
          { maxLength: 50 },
        ),
        fc.integer({ min: 0, max: 24 }),
        fc.integer({ min: 1, max: 420 }),
        // loads (some equal: cost ties), so that the cost walk's lower-bound shortcut is taken and passed
        fc.array(fc.constantFrom(0, 0, 16, 50, 100, 300), { minLength: 70, maxLength: 70 }),
        (ops, blocks, isl, loads) => {
          const engines = [withTable(ENGINES.wasm()), withTable(ENGINES.reference())];
          for (const e of engines)
            for (let w = 0; w < 70; w++) e.setWorker(w, w % 4 === 0 ? Role.prefill : Role.both, 16);
          for (const o of ops) {
            for (const e of engines) {
              const h = hashes(o.start, o.len);
              if (o.op === "store") e.indexStore(o.worker, h, o.tier);
              if (o.op === "remove") e.indexRemove(o.worker, h, o.tier);
              if (o.op === "clear") e.indexClear(o.worker);
              if (o.op === "weight") e.setTierWeight(1, o.weight);
            }
          }
          for (const e of engines) loads.forEach((l, w) => e.setLoad(w, l, (l * 7) % 40));
          const seen = engines.map((e) => ({
            decision: Array.from(route(e, blocks, isl)),
            tiers: Array.from({ length: 24 }, (_, i) => e.indexTiers(i % 70, hashes(i, 1))),
            lower: Array.from({ length: 70 }, (_, w) => e.indexLowerCount(w)),
            counts: Array.from({ length: 70 }, (_, w) => e.indexCount(w)),
          }));
          expect(seen[0]).toEqual(seen[1]);
        },
      ),
      { numRuns: 120 },
    );
  });
});

describe("cache tiers: the router", () => {
  it("takes per-tier weights and stores and removes by tier name", () => {
    const r = routerOn("wasm", ruleTable("always-local"), {
      workers: [{ id: "d", role: "decode" }],
      tierWeights: { CPU: 0.5 },
    });
    const tokens = Array.from({ length: 65 }, (_, i) => i);
    r.index.store("d", r.hash({ tokens }), "CPU");
    expect(r.route({ tokens, oslHat: 10 }).features.effD).toBe(65 - 32);
    expect(() => r.index.store("d", r.hash({ tokens }), "DISK" as never)).toThrow(
      'router: unknown tier "DISK" (tiers: GPU, CPU)',
    );
    expect(() =>
      routerOn("wasm", ruleTable("always-local"), { workers: [], tierWeights: { DISK: 0.5 } as never }),
    ).toThrow(/unknown tier "DISK"/);
  });
});
