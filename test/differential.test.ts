// WASM core = TypeScript reference, on randomized inputs (fast-check): hashes, index contents under LRU
// pressure, prefix matches, worker choice, features and decisions for every policy kind.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { Kind, Role, type Engine, Flag, DECISION_SLOTS } from "../src/contract/core-api.js";
import { createCore, instantiateCore } from "../src/core/core.js";
import { ReferenceEngine } from "../src/reference/engine.js";
import { stageTable } from "../src/table/staging.js";
import { ruleTable } from "../src/table/rule-table.js";
import type { Table } from "../src/table/table.js";
import { validateTable } from "../src/table/validate.js";
import { coreModule, kmeansTable, PROVENANCE } from "./helpers.js";

const CONFIG = { maxWorkers: 130, maxInputBytes: 1 << 16, indexBlocks: 4096 };

function pair(): [Engine, Engine] {
  return [createCore(instantiateCore(coreModule("debug")), CONFIG), new ReferenceEngine(CONFIG)];
}

function both<T>(engines: [Engine, Engine], f: (e: Engine) => T): [T, T] {
  return [f(engines[0]), f(engines[1])];
}

/** Calls f on both engines; both must throw the same error code, or both succeed with equal results. */
function same<T>(engines: [Engine, Engine], f: (e: Engine) => T): T | undefined {
  const run = (e: Engine): { ok: T } | { code: unknown } => {
    try {
      return { ok: f(e) };
    } catch (err) {
      return { code: (err as { code?: number }).code ?? String(err) };
    }
  };
  const [a, b] = both(engines, run);
  expect(a).toEqual(b);
  return "ok" in a ? a.ok : undefined;
}

const gmmTable = (k: number, seed: number): Table => {
  const rnd = mulberry(seed);
  const centroids = Array.from({ length: k }, () => Array.from({ length: 4 }, () => rnd() * 4 - 2));
  const variances = Array.from({ length: k }, () => Array.from({ length: 4 }, () => 0.1 + rnd() * 2));
  const raw = Array.from({ length: k }, () => 0.1 + rnd());
  const sum = raw.reduce((s, x) => s + x, 0);
  const weights = raw.map((w) => w / sum);
  const fix = 1 - weights.slice(1).reduce((s, x) => s + x, 0);
  weights[0] = fix;
  return validateTable({
    format: "dolphin-routing.table",
    version: 1,
    kind: "gmm",
    features: ["isl", "eff_P", "eff_D", "osl_hat"],
    scaler: { mean: [7, 6, 6, 5], std: [2, 2.5, 2.5, 1] },
    centroids,
    variances,
    weights,
    bits: centroids.map((_, i) => i % 2),
    provenance: PROVENANCE,
    checksum: "xxh64:0000000000000000",
  });
};

function mulberry(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function tables(): Table[] {
  const rnd = mulberry(7);
  const km = (k: number, d: number) =>
    kmeansTable(
      Array.from({ length: k }, () => Array.from({ length: d }, () => rnd() * 4 - 2)),
      Array.from({ length: k }, () => (rnd() < 0.5 ? 0 : 1)),
    );
  const ppdBits = [0, 1, 2].map(() =>
    Array.from({ length: 9 }, () => Array.from({ length: 10 }, () => (rnd() < 0.5 ? 0 : 1))),
  );
  const withOsl = (t: Table): Table =>
    validateTable({
      ...t,
      osl_classes: { names: ["short", "medium", "long"], thresholds: [128, 1024], representative: [60, 400, 2000] },
      osl_model: {
        kind: "logistic",
        features: ["log_isl", "prefix_reuse", "log_turn", "log_prev_output", "log_max_tokens", "has_max_tokens"],
        mean: [7, 0.3, 0.8, 3, 4, 0.5],
        std: [2, 0.3, 0.5, 2, 3, 0.5],
        weights: [0, 1, 2].map(() => Array.from({ length: 6 }, () => rnd() * 2 - 1)),
        bias: [0.1, 0, -0.1],
      },
    });
  // table version 3: per-cluster load bounds within the loads the property sets (0–5000 prefill, 0–10000 decode)
  const withLoadBounds = (t: Table): Table => {
    const k = t.bits!.length;
    return validateTable({
      ...t,
      version: 3,
      fallback: { kind: "dynamo-load", params: { prefill_busy_threshold: 0.5, max_num_batched_tokens: 4096 } },
      load_bound: {
        prefill: Array.from({ length: k }, () => Math.round(rnd() * 5000)),
        decode: Array.from({ length: k }, () => Math.round(rnd() * 10000)),
      },
      cluster_share: Array.from({ length: k }, () => 1 / k),
    });
  };
  return [
    km(8, 4),
    withOsl(km(8, 4)),
    withLoadBounds(km(8, 4)),
    withLoadBounds(gmmTable(8, 3)),
    km(64, 4),
    km(3, 2),
    gmmTable(8, 3),
    gmmTable(32, 4),
    ruleTable("dynamo-isl"),
    ruleTable("dynamo-legacy"),
    ruleTable("trtllm"),
    ruleTable("llm-d", { non_cached_tokens: 64, prompt_tokens: 32 }),
    ruleTable("dynamo-load", { prefill_busy_threshold: 0.5, max_num_batched_tokens: 64 }),
    ruleTable("always-local"),
    ruleTable("always-remote"),
    ruleTable("ppd", { bits: ppdBits }),
  ];
}

describe("differential: wasm core = TypeScript reference", () => {
  it("hashes tokens and text identically for random inputs, block sizes and roots", () => {
    const engines = pair();
    fc.assert(
      fc.property(
        fc.array(fc.nat({ max: 0xffffffff }), { maxLength: 600 }),
        fc.integer({ min: 1, max: 80 }),
        fc.string({ maxLength: 12 }),
        fc.uint8Array({ maxLength: 700 }),
        (tokens, bs, model, bytes) => {
          same(engines, (e) => {
            e.setBlockSize(bs);
            e.setRoot(new TextEncoder().encode(model));
            return [Array.from(e.hashTokens(tokens)), Array.from(e.hashText(bytes))];
          });
        },
      ),
      { numRuns: 200 },
    );
  });

  it("keeps the same index (LRU eviction, removes, clears) and the same prefix matches", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            op: fc.constantFrom("store", "store", "store", "remove", "clear", "capacity", "match"),
            worker: fc.integer({ min: 0, max: 129 }),
            start: fc.integer({ min: 0, max: 40 }),
            len: fc.integer({ min: 0, max: 30 }),
            cap: fc.integer({ min: 0, max: 40 }),
          }),
          { maxLength: 60 },
        ),
        (ops) => {
          const engines = pair();
          // a pool of chained-looking hashes: block i of "prompt family" f
          const hashes = (start: number, len: number, family: number): Uint32Array => {
            const out = new Uint32Array(2 * len);
            for (let i = 0; i < len; i++) {
              out[2 * i] = Math.imul(start + i + 1, 2654435761) >>> 0;
              out[2 * i + 1] = family;
            }
            return out;
          };
          for (let w = 0; w < 130; w++)
            for (const e of engines) e.setWorker(w, w % 3 === 0 ? Role.prefill : Role.decode, 24);
          for (const o of ops) {
            const h = hashes(o.start, o.len, o.worker % 2);
            if (o.op === "store") same(engines, (e) => e.indexStore(o.worker, h));
            if (o.op === "remove") same(engines, (e) => e.indexRemove(o.worker, h));
            if (o.op === "clear") same(engines, (e) => e.indexClear(o.worker % 7 === 0 ? -1 : o.worker));
            if (o.op === "capacity") same(engines, (e) => e.setWorker(o.worker, Role.decode, o.cap));
            if (o.op === "match") same(engines, (e) => Array.from(e.match(hashes(0, 45, o.worker % 2))));
          }
          same(engines, (e) => Array.from({ length: 130 }, (_, w) => e.indexCount(w)));
          same(engines, (e) => [Array.from(e.match(hashes(0, 45, 0))), Array.from(e.match(hashes(0, 45, 1)))]);
        },
      ),
      { numRuns: 150 },
    );
  });

  for (const table of tables()) {
    it(`routes identically under the ${table.kind} table (K=${table.centroids?.length ?? "-"}${table.osl_model ? ", output-length model" : ""}${table.load_bound ? ", load bounds" : ""})`, () => {
      const engines = pair();
      const s = stageTable(table);
      same(engines, (e) => e.setTable(s.kind, s.k, s.dims, s.staged, s.oslAt));
      const roles = [Role.prefill, Role.decode, Role.decode, Role.both, Role.prefill, Role.decode];
      for (const e of engines) roles.forEach((r, w) => e.setWorker(w, r, 200));
      fc.assert(
        fc.property(
          fc.record({
            family: fc.integer({ min: 0, max: 3 }),
            len: fc.integer({ min: 0, max: 900 }),
            tail: fc.integer({ min: 0, max: 1000 }),
            osl: fc.integer({ min: 0, max: 4000 }),
            turn: fc.integer({ min: 0, max: 5 }),
            ctx: fc.oneof(fc.constant(-1), fc.integer({ min: 0, max: 10000 })),
            pinned: fc.constantFrom(-1, -1, -1, 1, 2, 3, 0),
            record: fc.boolean(),
            text: fc.boolean(),
            loads: fc.array(fc.tuple(fc.integer({ min: 0, max: 5000 }), fc.integer({ min: 0, max: 5000 })), {
              minLength: 6,
              maxLength: 6,
            }),
            equalLoads: fc.boolean(), // ties in worker cost must break the same way
            loadScale: fc.constantFrom(1, 1, 0, 0.5, 3), // set after the loads: every worker's cost floor follows
            queue: fc.integer({ min: 0, max: 4 }),
            qps: fc.double({ min: 0, max: 25, noNaN: true }),
          }),
          (q) => {
            // prompts share prefixes within a family
            const tokens = new Uint32Array(q.len);
            for (let i = 0; i < q.len; i++)
              tokens[i] = i < q.len - (q.tail % (q.len + 1)) ? q.family * 100000 + i : q.tail * 7 + i;
            for (const e of engines) {
              q.loads.forEach(([p, d], w) => (q.equalLoads ? e.setLoad(w, 0, 0) : e.setLoad(w, p, d)));
              e.setLoadScale(q.loadScale);
              e.setSignals(q.queue, q.qps);
            }
            const data = q.text ? new Uint8Array(tokens.buffer) : tokens;
            const input = {
              flags: (q.record ? Flag.record : 0) | (q.text ? Flag.text : 0),
              data,
              length: q.text ? data.length : q.len,
              promptTokens: 0,
              oslHat: table.osl_model && q.osl % 3 === 0 ? -1 : q.osl,
              turn: q.turn,
              pinnedDecode: q.pinned,
              contextTokens: q.ctx,
              prevOutputTokens: q.tail % 500,
              maxTokens: q.osl % 2 === 0 ? 0 : q.osl * 2,
            };
            same(engines, (e) => Array.from(e.route(input)));
            if (table.kind === "kmeans" || table.kind === "gmm")
              same(engines, (e) => Array.from(e.scores(table.centroids!.length)));
          },
        ),
        { numRuns: 300 },
      );
      // and the features-only entry
      fc.assert(
        fc.property(
          fc.integer({ min: 0, max: 200000 }),
          fc.double({ min: 0, max: 1, noNaN: true }),
          fc.double({ min: 0, max: 1, noNaN: true }),
          fc.integer({ min: 0, max: 8000 }),
          (isl, a, b, osl) => {
            same(engines, (e) =>
              Array.from(e.decideFeatures(isl, Math.floor(isl * a), Math.floor(isl * b), osl, 2, -1)),
            );
          },
        ),
        { numRuns: 300 },
      );
      expect(DECISION_SLOTS).toBe(20);
      expect(Kind.kmeans).toBe(1);
    });
  }
});
