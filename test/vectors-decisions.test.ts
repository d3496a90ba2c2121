// Replays the cross-language decision vectors (spec/vectors/decisions.json, computed independently of src/ by
// spec/vectors/gen-decisions.mjs) against the WebAssembly core (debug and release builds) and the TypeScript
// reference, through the Router API. Exact for bits, clusters, reasons, workers, matched blocks, features and costs;
// the standardized features and per-cluster scores of learned tables within the file's documented tolerance.

import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { Reason, Slot } from "../src/contract/core-api.js";
import type { Router } from "../src/router/router.js";
import type { TierName } from "../src/router/types.js";
import { decodeTable } from "../src/table/codec.js";
import type { Table } from "../src/table/table.js";
import { routerOn } from "./helpers.js";
import { expandText, expandTokens, type LcgTokensFormula, type RepeatTextFormula } from "./vectors-expand.js";

interface Signals {
  prefill_queue: number;
  qps: number;
}

interface DecideCase {
  table: string;
  note?: string;
  isl: number;
  eff_P: number;
  eff_D: number;
  osl_hat: number;
  turn: number;
  context_tokens: number;
  signals: Signals;
  expected: { bit: number; cluster: number; reason: string };
  standardized?: number[];
  scores?: number[];
}

interface PromptSpec {
  tokens?: number[];
  tokens_formula?: LcgTokensFormula[];
  text?: string;
  text_formula?: RepeatTextFormula[];
}

interface RouteCase {
  name: string;
  type: string;
  table: string;
  block_size: number;
  model: string;
  salt: string;
  load_scale: number;
  workers: { id: string; role: "prefill" | "decode" | "both"; capacity_blocks: number }[];
  prompts: Record<string, PromptSpec>;
  /** a lower tier's weight by tier name (absent: the defaults) */
  tier_weights?: Partial<Record<TierName, number>>;
  /** each op stores (or, `remove`, removes) the prefix's blocks in `tier` (absent: GPU) */
  index: {
    worker: string;
    prompt: string;
    prefix_tokens?: number;
    prefix_bytes?: number;
    tier?: TierName;
    remove?: boolean;
  }[];
  loads: Record<string, { active_prefill_tokens: number; active_decode_tokens: number }>;
  signals: Signals;
  request: {
    prompt: string;
    prompt_tokens?: number;
    osl_hat: number;
    turn: number;
    decode_worker?: string;
    context_tokens: number;
  };
  expected: {
    path: "local" | "remote";
    bit: number;
    reason: string;
    decode_worker: string;
    prefill_worker: string | null;
    cluster: number | null;
    features: { isl: number; eff_P: number; eff_D: number; osl_hat: number };
    matched_blocks: { decode: number; prefill: number };
    blocks: number;
    cost: { decode: number; prefill: number };
    load: { prefill: number | null; decode: number };
  };
}

interface DecisionVectors {
  description: string;
  tolerance: { standardized: number; scores: number };
  decide: DecideCase[];
  route: RouteCase[];
}

const vectors = JSON.parse(
  readFileSync(new URL("../spec/vectors/decisions.json", import.meta.url), "utf8"),
) as DecisionVectors;
const manifest = JSON.parse(readFileSync(new URL("../spec/vectors/tables/manifest.json", import.meta.url), "utf8")) as {
  valid: { file: string; kind: string }[];
};

const tables = new Map<string, Table>();
function fixture(file: string): Table {
  let t = tables.get(file);
  if (!t) {
    t = decodeTable(readFileSync(new URL(`../spec/vectors/tables/${file}`, import.meta.url)));
    tables.set(file, t);
  }
  return t;
}

const ENGINES = [
  { name: "wasm (debug)", engine: "wasm", flavour: "debug" },
  { name: "wasm (release)", engine: "wasm", flavour: "release" },
  { name: "reference", engine: "reference", flavour: "debug" },
] as const;
type EngineSpec = (typeof ENGINES)[number];

// small routers: the vectors need few workers, short prompts and a small index
const SMALL = { maxWorkers: 16, maxPromptTokens: 1 << 16, indexBlocks: 1 << 14 };

function near(actual: number[], expected: number[], tol: number, what: string): void {
  expect(actual.length, `${what}: length`).toBe(expected.length);
  for (let i = 0; i < expected.length; i++) {
    const e = expected[i]!;
    const a = actual[i]!;
    if (!(Math.abs(a - e) <= tol * Math.max(1, Math.abs(e)))) {
      expect.fail(`${what}[${i}]: got ${a}, expected ${e} (tolerance ${tol} × max(1, |expected|))`);
    }
  }
}

function promptInput(p: PromptSpec): { tokens: Uint32Array } | { text: Uint8Array } {
  if (p.tokens !== undefined) return { tokens: Uint32Array.from(p.tokens) };
  if (p.tokens_formula !== undefined) {
    const parts = p.tokens_formula.map((f) => Array.from(expandTokens(f)));
    return { tokens: Uint32Array.from(parts.flat()) };
  }
  if (p.text !== undefined) return { text: new TextEncoder().encode(p.text) };
  if (p.text_formula !== undefined) return { text: new TextEncoder().encode(p.text_formula.map(expandText).join("")) };
  throw new Error("prompt without input");
}

describe("decisions.json vectors: shape", () => {
  it("covers every valid fixture table with 15–40 decide cases", () => {
    for (const { file } of manifest.valid) {
      const n = vectors.decide.filter((c) => c.table === file).length;
      expect(n, file).toBeGreaterThanOrEqual(15);
      expect(n, file).toBeLessThanOrEqual(40);
    }
  });

  it("has 10–60 route scenarios, vLLM's last-token rule and table version 3's load bounds among them", () => {
    expect(vectors.route.length).toBeGreaterThanOrEqual(10);
    expect(vectors.route.length).toBeLessThanOrEqual(60);
    expect(vectors.route.filter((c) => c.type === "last-token").length).toBeGreaterThanOrEqual(3);
    const load = vectors.route.filter((c) => c.type === "load-bound");
    expect(load.filter((c) => c.expected.reason === "load-out-of-range").length).toBeGreaterThanOrEqual(4);
    expect(load.filter((c) => c.expected.reason === "cluster").length).toBeGreaterThanOrEqual(4);
    expect(load.some((c) => c.expected.prefill_worker === null)).toBe(true);
  });

  it("learned cases carry standardized features and every cluster's score; rule cases carry none", () => {
    for (const c of vectors.decide) {
      const t = fixture(c.table);
      if (t.kind === "kmeans" || t.kind === "gmm") {
        expect(c.standardized?.length).toBe(t.features!.length);
        expect(c.scores?.length).toBe(t.centroids!.length);
      } else {
        expect(c.standardized).toBeUndefined();
        expect(c.scores).toBeUndefined();
      }
    }
  });
});

for (const spec of ENGINES) {
  describe(`decisions.json decide cases on ${spec.name}`, () => {
    const routers = new Map<string, Router>();
    const routerFor = (file: string): Router => {
      let r = routers.get(file);
      if (!r) {
        r = routerOn(spec.engine, fixture(file), { workers: [], ...SMALL }, spec.flavour);
        routers.set(file, r);
      }
      return r;
    };

    vectors.decide.forEach((c, i) => {
      const label =
        `#${i} ${c.table} isl ${c.isl} eff_P ${c.eff_P} eff_D ${c.eff_D} osl ${c.osl_hat} turn ${c.turn} ctx ${c.context_tokens}` +
        ` queue ${c.signals.prefill_queue} qps ${c.signals.qps}${c.note ? ` (${c.note})` : ""}`;
      it(label, () => {
        const router = routerFor(c.table);
        router.setSignals({ prefillQueue: c.signals.prefill_queue, qps: c.signals.qps });
        const d = router.engine.decideFeatures(c.isl, c.eff_P, c.eff_D, c.osl_hat, c.turn, c.context_tokens);
        const got = { bit: d[Slot.bit], cluster: d[Slot.cluster], reason: Reason[d[Slot.reason]!] };
        expect(got).toEqual(c.expected);
        expect(d[Slot.path]).toBe(c.expected.bit);
        expect([d[Slot.isl], d[Slot.effP], d[Slot.effD], d[Slot.oslHat]]).toEqual([c.isl, c.eff_P, c.eff_D, c.osl_hat]);
        if (c.standardized !== undefined && c.scores !== undefined) {
          // read the score slot before scores()/standardized(): both only read memory, but keep the order obvious
          const score = d[Slot.score]!;
          near(
            Array.from(router.engine.standardized(c.standardized.length)),
            c.standardized,
            vectors.tolerance.standardized,
            "standardized",
          );
          const scores = Array.from(router.engine.scores(c.scores.length));
          near(scores, c.scores, vectors.tolerance.scores, "scores");
          near([score], [c.scores[c.expected.cluster]!], vectors.tolerance.scores, "score of the winning cluster");
        }
      });
    });
  });

  describe(`decisions.json route cases on ${spec.name}`, () => {
    for (const c of vectors.route) {
      it(`${c.type}: ${c.name}`, () => {
        const router = routerOn(
          spec.engine,
          fixture(c.table),
          {
            workers: c.workers.map((w) => ({ id: w.id, role: w.role, capacityBlocks: w.capacity_blocks })),
            blockSize: c.block_size,
            model: c.model,
            salt: c.salt,
            loadScale: c.load_scale,
            ...(c.tier_weights ? { tierWeights: c.tier_weights } : {}),
            ...SMALL,
          },
          spec.flavour,
        );
        const prompts = Object.fromEntries(Object.entries(c.prompts).map(([name, p]) => [name, promptInput(p)]));
        for (const op of c.index) {
          const input = prompts[op.prompt]!;
          const hashes =
            "tokens" in input
              ? router.hash({ tokens: input.tokens.subarray(0, op.prefix_tokens) })
              : router.hash({ text: input.text.subarray(0, op.prefix_bytes) });
          if (op.remove) router.index.remove(op.worker, hashes, op.tier);
          else router.index.store(op.worker, hashes, op.tier);
        }
        for (const [id, load] of Object.entries(c.loads)) {
          router.setLoad(id, {
            activePrefillTokens: load.active_prefill_tokens,
            activeDecodeTokens: load.active_decode_tokens,
          });
        }
        router.setSignals({ prefillQueue: c.signals.prefill_queue, qps: c.signals.qps });
        const r = c.request;
        const d = router.route({
          ...prompts[r.prompt]!,
          ...(r.prompt_tokens !== undefined ? { promptTokens: r.prompt_tokens } : {}),
          oslHat: r.osl_hat,
          turn: r.turn,
          ...(r.decode_worker !== undefined ? { decodeWorker: r.decode_worker } : {}),
          contextTokens: r.context_tokens,
        });
        expect({
          path: d.path,
          bit: d.bit,
          reason: d.reason,
          decode_worker: d.decodeWorker,
          prefill_worker: d.prefillWorker,
          cluster: d.cluster,
          features: { isl: d.features.isl, eff_P: d.features.effP, eff_D: d.features.effD, osl_hat: d.features.oslHat },
          matched_blocks: d.matchedBlocks,
          blocks: d.blocks,
          cost: d.cost,
          load: d.load,
        }).toEqual(c.expected);
      });
    }
  });
}
