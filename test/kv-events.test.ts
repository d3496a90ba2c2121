// vLLM's KV events: decoding every form vLLM sends, refusing malformed ones, and the simulator's events taking
// that path with identical results.
import fc from "fast-check";
import { Packr } from "msgpackr";
import { describe, expect, it } from "vitest";
import { applyEventBatch, decodeEventBatch, encodeEventBatch, KvEventError } from "../src/router/kv-events.js";
import { SLO_PRESETS } from "../src/sim/metrics.js";
import { PRESETS } from "../src/sim/model-presets.js";
import { parseSplit } from "../src/sim/split.js";
import { simulate } from "../src/sim/simulator.js";
import { generate } from "../src/sim/generators.js";
import { ruleTable } from "../src/table/rule-table.js";
import { coreModule, routerOn } from "./helpers.js";

const packr = new Packr({ useRecords: false, variableMapSize: true });

describe("vLLM KV events", () => {
  it("decodes array-like batches as vLLM's msgspec writes them, signed and unsigned hashes alike", () => {
    const payload = packr.pack([
      1700000000.5,
      [
        ["BlockStored", [1, -1, 2n ** 63n], null, [11, 12], 16, null, "GPU"],
        ["BlockRemoved", [1], "GPU"],
        ["AllBlocksCleared"],
      ],
      0,
    ]);
    const b = decodeEventBatch(payload);
    expect(b.ts).toBe(1700000000.5);
    expect(b.dataParallelRank).toBe(0);
    expect(b.events.map((e) => e.kind)).toEqual(["stored", "removed", "cleared"]);
    const stored = b.events[0]!;
    if (stored.kind !== "stored") throw new Error("not stored");
    expect(Array.from(stored.hashes)).toEqual([1, 0, 0xffffffff, 0xffffffff, 0, 0x80000000]);
    expect(stored.tokenIds).toEqual([11, 12]);
  });

  it("decodes map-shaped batches and bytes hashes (their low 64 bits)", () => {
    const hash = new Uint8Array(32);
    hash[31] = 7;
    hash[24] = 1;
    const b = decodeEventBatch(
      packr.pack({ ts: 3, events: [{ type: "BlockRemoved", block_hashes: [hash], medium: null }] }),
    );
    const e = b.events[0]!;
    if (e.kind !== "removed") throw new Error("not removed");
    expect(Array.from(e.hashes)).toEqual([7, 0x01000000]);
  });

  it("round-trips what it encodes and feeds a router's index", () => {
    const r = routerOn("wasm", ruleTable("always-local"), { workers: [{ id: "d", role: "decode" }] });
    const h = r.hash({ tokens: Array.from({ length: 64 }, (_, i) => i) });
    const payload = encodeEventBatch({
      ts: 1,
      dataParallelRank: null,
      events: [{ kind: "stored", hashes: h, parent: null, tokenIds: [], blockSize: 16, medium: "GPU" }],
    });
    applyEventBatch(r.index, "d", decodeEventBatch(payload));
    expect(r.index.count("d")).toBe(4);
    applyEventBatch(
      r.index,
      "d",
      decodeEventBatch(
        encodeEventBatch({
          ts: 2,
          dataParallelRank: null,
          events: [{ kind: "removed", hashes: h.subarray(2, 4), medium: null }],
        }),
      ),
    );
    expect(r.index.match(h)["d"]).toBe(1);
    // a CPU-tier store is indexed in its tier; a medium with no tier is not indexed
    applyEventBatch(
      r.index,
      "d",
      decodeEventBatch(packr.pack([3, [["BlockStored", [99], null, [], 16, null, "CPU"]]])),
    );
    expect(r.index.count("d")).toBe(4);
    expect(r.index.tiers("d", [99n])).toEqual(["CPU"]);
    expect(r.index.lowerCount("d")).toBe(1);
    applyEventBatch(
      r.index,
      "d",
      decodeEventBatch(packr.pack([4, [["BlockStored", [98], null, [], 16, null, "DISK"]]])),
    );
    expect(r.index.count("d")).toBe(4);
    applyEventBatch(r.index, "d", decodeEventBatch(packr.pack([5, [["BlockRemoved", [99], "cpu"]]])));
    expect(r.index.count("d")).toBe(3);
  });

  it("rejects malformed batches with KvEventError naming the place, whatever the bytes", () => {
    const bad: [unknown, RegExp][] = [
      [5, /expected an EventBatch/],
      [[1, "x"], /events: expected an array/],
      [[1, [["BlockShuffled", []]]], /events\[0\]: unknown event type "BlockShuffled"/],
      [[1, [["BlockStored", ["a"], null, [], 16]]], /events\[0\].block_hashes\[0\]: expected an integer/],
      [[1, [["BlockStored", [1], null, [], 0]]], /block_size: expected a positive integer/],
      [[1, [["BlockRemoved", [1.5]]]], /block_hashes\[0\]: expected an integer or bytes block hash/],
      [["t", []], /ts: expected a number/],
    ];
    for (const [v, msg] of bad) expect(() => decodeEventBatch(packr.pack(v))).toThrow(msg);
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), (bytes) => {
        try {
          decodeEventBatch(bytes);
        } catch (e) {
          expect(e).toBeInstanceOf(KvEventError);
        }
      }),
      { numRuns: 500 },
    );
  });

  it("gives the simulator identical results whether events are applied directly or travel as vLLM batches", () => {
    const w = generate("leval", { seed: 2, requests: 150 });
    const base = {
      preset: PRESETS["h100-8b"],
      split: parseSplit("2P2D"),
      slo: SLO_PRESETS["taichi-a"]!,
      table: ruleTable("dynamo-isl"),
      module: coreModule("release"),
    };
    const direct = simulate(w, base);
    const vllm = simulate(w, { ...base, kvEvents: "vllm" });
    expect(JSON.stringify(vllm.records)).toBe(JSON.stringify(direct.records));
    expect(direct.summary.prefix_hit_rate.decode + direct.summary.prefix_hit_rate.prefill).toBeGreaterThan(0.3);
  });

  it("gives the simulator identical results when it sends only the events that can change a match", () => {
    const w = generate("leval", { seed: 3, requests: 200 });
    for (const [split, extra] of [
      ["2P2D", {}],
      ["1R1P2D", { capacityBlocks: 2000 }], // evictions under pressure
      ["3P1D", { indexLagMs: 40 }], // the index sees the caches late: the other filter
      ["2P2D", { module: undefined }], // the reference engine
    ] as const) {
      const base = {
        preset: PRESETS["h100-8b"],
        split: parseSplit(split),
        slo: SLO_PRESETS["taichi-a"]!,
        table: ruleTable("dynamo-isl"),
        module: coreModule("release"),
        ...extra,
      };
      const needed = simulate(w, base);
      const all = simulate(w, { ...base, indexEvents: "all" });
      expect(JSON.stringify(needed.records), split).toBe(JSON.stringify(all.records));
      expect(needed.instances).toEqual(all.instances);
    }
  });
});
