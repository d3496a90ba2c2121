// The Router API as users touch it: cache-aware choices, the index, tables, explain, input forms.
import { describe, expect, it } from "vitest";
import { Router } from "../bindings/node/index.js";
import { Slot } from "../src/contract/core-api.js";
import { hashTokens, pairsToBigInts, pairsToHex, rootHash } from "../src/hashing/hashes.js";
import { encodeTable } from "../src/table/codec.js";
import { ruleTable } from "../src/table/rule-table.js";
import { kmeansTable, routerOn } from "./helpers.js";

const WORKERS = [
  { id: "prefill-a", role: "prefill" as const },
  { id: "prefill-b", role: "prefill" as const },
  { id: "decode-a", role: "decode" as const },
  { id: "decode-b", role: "decode" as const },
];
const prompt = (n: number, salt = 0): number[] => Array.from({ length: n }, (_, i) => (i * 7919 + salt) % 50000);

for (const engine of ["wasm", "reference"] as const) {
  describe(`Router (${engine} engine)`, () => {
    it("sends a request to the decode worker that caches its prefix, and counts the hit in eff_D", () => {
      const r = routerOn(engine, ruleTable("dynamo-isl"), { workers: WORKERS });
      const tokens = prompt(4000);
      r.index.store("decode-b", r.hash({ tokens: tokens.slice(0, 3200) }));
      const d = r.route({ tokens });
      expect(d.decodeWorker).toBe("decode-b");
      expect(d.matchedBlocks.decode).toBe(200);
      expect(d.features).toEqual({ isl: 4000, effP: 4000, effD: 800, oslHat: 0 });
      // Dynamo isl_bounding: eff_D 800 < 2048 and 800/4000 < 0.7 → local
      expect(d.path).toBe("local");
      expect(d.blocks).toBe(250);
    });

    it("lets load outweigh a cache hit, Dynamo-style", () => {
      const r = routerOn(engine, ruleTable("always-remote"), { workers: WORKERS });
      const tokens = prompt(1600);
      r.index.store("prefill-a", r.hash({ tokens }));
      expect(r.route({ tokens }).prefillWorker).toBe("prefill-a");
      r.setLoad("prefill-a", { activePrefillTokens: 5000 });
      expect(r.route({ tokens }).prefillWorker).toBe("prefill-b");
    });

    it("records its own decisions when asked, so a repeated prompt hits", () => {
      const r = routerOn(engine, ruleTable("always-remote"), { workers: WORKERS, recordDecisions: true });
      const tokens = prompt(800);
      const first = r.route({ tokens });
      expect(first.matchedBlocks).toEqual({ decode: 0, prefill: 0 });
      const second = r.route({ tokens });
      expect(second.decodeWorker).toBe(first.decodeWorker);
      expect(second.matchedBlocks).toEqual({ decode: 50, prefill: 50 });
      expect(r.index.count(first.decodeWorker)).toBe(50);
    });

    it("forgets removed and cleared blocks, and evicts the least recently used beyond capacity", () => {
      const r = routerOn(engine, ruleTable("always-local"), { workers: WORKERS, capacityBlocks: 100 });
      const a = r.hash({ tokens: prompt(1600, 1) }); // 100 blocks
      const b = r.hash({ tokens: prompt(800, 2) }); // 50 blocks
      r.index.store("decode-a", a);
      expect(r.index.match(a)["decode-a"]).toBe(100);
      r.index.store("decode-a", b); // evicts a's 50 oldest blocks: its prefix is gone
      expect(r.index.count("decode-a")).toBe(100);
      expect(r.index.match(a)["decode-a"]).toBe(0);
      expect(r.index.match(b)["decode-a"]).toBe(50);
      r.index.remove("decode-a", b.subarray(2 * 10, 2 * 11)); // drop block 10
      expect(r.index.match(b)["decode-a"]).toBe(10);
      r.index.clear("decode-a");
      expect(r.index.count("decode-a")).toBe(0);
    });

    it("reuses a removed worker's slot without its old cache", () => {
      const r = routerOn(engine, ruleTable("always-local"), { workers: WORKERS });
      const h = r.hash({ tokens: prompt(320) });
      r.index.store("decode-a", h);
      r.removeWorker("decode-a");
      expect(() => r.index.count("decode-a")).toThrow(/unknown worker "decode-a"/);
      r.addWorker({ id: "decode-c", role: "decode" });
      expect(r.index.count("decode-c")).toBe(0);
      expect(r.route({ tokens: prompt(320) }).decodeWorker).toBe("decode-c");
      expect(r.workerIds).toEqual(["prefill-a", "prefill-b", "decode-c", "decode-b"]);
    });

    it("accepts hashes as pairs, hex, bigint (signed, as vLLM publishes them) and BigUint64Array alike", () => {
      const r = routerOn(engine, ruleTable("always-local"), { workers: WORKERS });
      const pairs = r.hash({ tokens: prompt(160) });
      const big = pairsToBigInts(pairs);
      r.index.store("decode-a", pairsToHex(pairs));
      r.index.store(
        "decode-b",
        big.map((b) => BigInt.asIntN(64, b)),
      );
      r.index.store("prefill-a", BigUint64Array.from(big));
      expect(r.index.match(pairs)).toEqual({ "prefill-a": 10, "prefill-b": 0, "decode-a": 10, "decode-b": 10 });
    });

    it("hashes with the model and salt root, matching the reference scheme", () => {
      const r = routerOn(engine, ruleTable("always-local"), {
        workers: WORKERS,
        model: "qwen-72b",
        salt: "tenant-1",
        blockSize: 32,
      });
      const tokens = Uint32Array.from(prompt(1000));
      expect(Array.from(r.hash({ tokens }))).toEqual(
        Array.from(hashTokens(tokens, 32, rootHash("qwen-72b", "tenant-1"))),
      );
    });

    it("routes text in 64-byte blocks, estimating 4 bytes per token", () => {
      const r = routerOn(engine, ruleTable("dynamo-isl"), { workers: WORKERS });
      const text = "You are a helpful assistant. ".repeat(100); // 2,900 bytes, 45 full blocks
      r.index.store("decode-a", r.hash({ text: text.slice(0, 640) }));
      const d = r.route({ text });
      expect(d.blocks).toBe(45);
      expect(d.decodeWorker).toBe("decode-a");
      expect(d.features.isl).toBe(725);
      expect(d.features.effD).toBe(725 - 10 * 16);
    });

    it("routes precomputed block hashes with a given prompt length (traces)", () => {
      const r = routerOn(engine, ruleTable("dynamo-isl"), { workers: WORKERS, blockSize: 512 });
      const hashes = ["0000000000000001", "0000000000000002", "0000000000000003"];
      r.index.store("decode-b", hashes.slice(0, 2));
      const d = r.route({ blockHashes: hashes, promptTokens: 1400 });
      expect(d.decodeWorker).toBe("decode-b");
      expect(d.features.effD).toBe(1400 - 1024);
    });

    it("maps an output-length class to its representative length", () => {
      const t = kmeansTable(
        [
          [0, 0, 0, 0],
          [1, 1, 1, 1],
        ],
        [0, 1],
        {
          osl_classes: { names: ["short", "medium", "long"], thresholds: [128, 1024], representative: [60, 400, 2000] },
        },
      );
      const r = routerOn(engine, t, { workers: WORKERS });
      expect(r.route({ tokens: prompt(100), oslClass: "long" }).features.oslHat).toBe(2000);
      expect(r.route({ tokens: prompt(100), oslClass: 0 }).features.oslHat).toBe(60);
      expect(() => r.route({ tokens: prompt(100), oslClass: "huge" })).toThrow(
        /unknown oslClass "huge" \(table classes: short, medium, long\)/,
      );
    });

    it("explains a decision: standardized features, a score per cluster, the bit and why", () => {
      const t = kmeansTable(
        [
          [-1, -1, -1, -1],
          [0.5, 0.5, 0.5, 0.5],
          [2, 2, 2, 2],
        ],
        [0, 1, 1],
      );
      const r = routerOn(engine, t, { workers: WORKERS });
      const e = r.explain({ tokens: prompt(2000), oslHat: 500 });
      // scaler mean 7, std 2: (log1p(2000) − 7) / 2
      expect(e.standardized[0]).toBeCloseTo((Math.log1p(2000) - 7) / 2, 12);
      expect(e.standardized[3]).toBeCloseTo((Math.log1p(500) - 7) / 2, 12);
      expect(e.scores).toHaveLength(3);
      const best = e.scores.indexOf(Math.min(...e.scores));
      expect(e.decision.cluster).toBe(best);
      expect(e.decision.bit).toBe(e.bits[best]);
      expect(e.why).toMatch(new RegExp(`cluster ${best} .*bit is ${e.bits[best]}`));
      // explaining does not record anything
      expect(r.index.count(e.decision.decodeWorker)).toBe(0);
    });

    it("routes a rule cluster by the fallback rule and says why (table version 2)", () => {
      // one cluster, valued 2: the default fallback (dynamo-isl 2048 / 0.7) decides every request
      const t = kmeansTable([[0, 0, 0, 0]], [2], { version: 2 });
      const r = routerOn(engine, t, { workers: WORKERS });
      const long = r.explain({ tokens: prompt(4000), oslHat: 500 });
      expect(long.decision).toMatchObject({ reason: "rule-fallback", cluster: 0, bit: 1, path: "remote" });
      expect(long.why).toMatch(/^cluster 0 → rule → remote because eff_D 4000 ≥ 2048 \(dynamo-isl\)/);
      const short = r.explain({ tokens: prompt(100), oslHat: 500 });
      expect(short.decision).toMatchObject({ reason: "rule-fallback", bit: 1 }); // eff_D/isl = 1 ≥ 0.7
      expect(short.why).toMatch(/because eff_D\/isl 1\.000 ≥ 0\.7/);
      // a fallback of another kind
      r.setTable(encodeTable({ ...t, fallback: { kind: "always-local", params: {} } }));
      expect(r.explain({ tokens: prompt(4000), oslHat: 500 }).why).toMatch(
        /→ rule → local because always-local always does/,
      );
    });

    it("routes requests beyond a cluster's bound by the fallback rule, as out of distribution", () => {
      // cluster 0 local with a tight bound; cluster 1 remote without a real bound
      const t = kmeansTable(
        [
          [0, 0, 0, 0],
          [3, 3, 3, 3],
        ],
        [0, 1],
        { version: 2, ood_bound: [0.5, 1e9], fallback: { kind: "always-remote", params: {} } },
      );
      const r = routerOn(engine, t, { workers: WORKERS });
      const near = r.route({ tokens: prompt(1096), oslHat: 1096 }); // log1p(1096) ≈ 7: z ≈ 0 on every feature
      expect(near).toMatchObject({ reason: "cluster", cluster: 0, bit: 0 });
      const far = r.explain({ tokens: prompt(40), oslHat: 40 }); // z ≈ −1.66: nearest is still cluster 0, beyond 0.5
      expect(far.decision).toMatchObject({ reason: "out-of-distribution", cluster: 0, bit: 1, path: "remote" });
      expect(far.why).toMatch(
        /^cluster 0 is out of distribution \(squared distance [\d.]+ > bound 0\.5\) → rule → remote because always-remote always does/,
      );
    });

    it("swaps tables atomically: a bad table leaves the old one routing", () => {
      const r = routerOn(engine, ruleTable("always-local"), { workers: WORKERS });
      r.setTable(encodeTable(ruleTable("always-remote")));
      expect(r.route({ tokens: prompt(64) }).path).toBe("remote");
      const bad = encodeTable(ruleTable("always-local"));
      const at = Buffer.from(bad).indexOf("(rule)") + 1;
      bad[at] = bad[at]! ^ 1; // provenance.workload "(rule)" becomes "(sule)"
      expect(() => r.setTable(bad)).toThrow(/table: checksum/);
      expect(r.route({ tokens: prompt(64) }).path).toBe("remote");
      expect(r.table.kind).toBe("always-remote");
    });

    it("reads table files with the engine's own decoder (the core's, in WebAssembly)", () => {
      const bytes = encodeTable(ruleTable("always-remote"));
      const truncated = bytes.subarray(0, bytes.length - 3);
      // the core words a corrupt file its own way; the reference engine says what msgpackr says
      const wording =
        engine === "wasm"
          ? /table: \(bytes\): truncated or corrupt msgpack .*Unexpected end of MessagePack data/
          : /table: \(bytes\): truncated or corrupt msgpack/;
      expect(() => routerOn(engine, truncated, { workers: WORKERS })).toThrow(wording);
      const r = routerOn(engine, bytes, { workers: WORKERS });
      expect(r.table.kind).toBe("always-remote");
      expect(r.route({ tokens: prompt(64) }).path).toBe("remote");
    });

    it("routes locally when the policy says remote but no prefill worker exists, and says so", () => {
      const r = routerOn(engine, ruleTable("always-remote"), { workers: [{ id: "d", role: "decode" }] });
      const d = r.route({ tokens: prompt(64) });
      expect([d.path, d.bit, d.reason, d.prefillWorker]).toEqual(["local", 1, "no-prefill-worker", null]);
    });

    it("applies PPD: first turn remote, later turns by grid cell, on the session's decode worker", () => {
      const bits = [0, 1, 2].map((c) =>
        Array.from({ length: 9 }, () => Array.from({ length: 10 }, () => (c === 2 ? 1 : 0))),
      );
      const r = routerOn(engine, ruleTable("ppd", { bits }), { workers: WORKERS });
      expect(r.route({ tokens: prompt(300), oslHat: 100, turn: 1 })).toMatchObject({
        path: "remote",
        reason: "first-turn",
      });
      const small = r.route({
        tokens: prompt(300),
        oslHat: 100,
        turn: 2,
        contextTokens: 200,
        decodeWorker: "decode-b",
      });
      expect([small.path, small.decodeWorker]).toEqual(["local", "decode-b"]);
      expect(r.route({ tokens: prompt(300), oslHat: 100, turn: 3, contextTokens: 9000 }).path).toBe("remote");
    });
  });
}

describe("runtime entries", () => {
  it("Router.load finds the core through the Node entry", async () => {
    const r = await Router.load(encodeTable(ruleTable("dynamo-legacy")), { workers: WORKERS });
    expect(r.engine.name).toBe("wasm");
    expect(r.route({ tokens: prompt(3000) }).path).toBe("remote");
    r.setSignals({ prefillQueue: 2 });
    expect(r.route({ tokens: prompt(3000) }).path).toBe("local");
  });

  it("exposes the decision record layout the bindings share", () => {
    expect(Slot).toMatchObject({ path: 0, decode: 3, prefill: 4, cluster: 5, isl: 6, effP: 7, effD: 8, oslHat: 9 });
  });
});
