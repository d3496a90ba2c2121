// The learner: the search, the output-length classifier (trained in TS, evaluated in the core), tables it writes,
// PPD's builder and the evaluation's shape. Simulated clusters are small here; the figures are in docs/results.md.
import { describe, expect, it } from "vitest";
import {
  learnOslClasses,
  noisyOslPredictor,
  predictOslClass,
  trainOslClassifier,
  type OslSample,
} from "../src/learn/osl.js";
import { buildPpdTable, POLICY_NAMES } from "../src/learn/policies.js";
import { evalJob, trainJob, workloadParts } from "../src/learn/job.js";
import { exhaustive, searchBits } from "../src/learn/bit-search.js";
import type { Environment, Evaluation } from "../src/learn/environment.js";
import type { FeatureLog, LearningEnvironment } from "../src/learn/learning-environment.js";
import { prepare } from "../src/learn/prepare.js";
import { train } from "../src/learn/train.js";
import { PRESETS } from "../src/sim/model-presets.js";
import { SLO_PRESETS } from "../src/sim/metrics.js";
import { parseSplit } from "../src/sim/split.js";
import { generate } from "../src/sim/generators.js";
import { decodeTable, encodeTable } from "../src/table/codec.js";
import type { Table } from "../src/table/table.js";
import { validateTable } from "../src/table/validate.js";
import { coreModule, kmeansTable, routerOn } from "./helpers.js";

/** An environment with a known reward landscape: clusters interact (pairs 0–1 and 2–3 prefer agreeing bits). */
class FakeEnv implements Environment {
  evaluations = 0;
  readonly seen = new Set<string>();
  constructor(private readonly target: number[]) {}
  async evaluate(t: Table): Promise<Evaluation> {
    this.evaluations++;
    const bits = t.bits!;
    this.seen.add(bits.join(""));
    const byCluster = new Map<number, { requests: number; met: number }>();
    let total = 0;
    bits.forEach((b, c) => {
      let met = b === this.target[c] ? 90 : 40;
      if (c < 4 && bits[c ^ 1] === b) met += 5;
      byCluster.set(c, { requests: 100, met });
      total += met;
    });
    return { reward: total / (100 * bits.length), byCluster, records: [] };
  }
}

const makeTable = (bits: number[]): Table =>
  kmeansTable(
    bits.map((_, i) => [i, 0, 0, 0]),
    bits,
  );

describe("search", () => {
  it("reaches the exhaustive optimum of a K = 8 landscape from a bad start, evaluating no table twice", async () => {
    const target = [1, 0, 1, 1, 0, 0, 1, 0];
    const env = new FakeEnv(target);
    const r = await searchBits(env, makeTable, [0, 1, 0, 0, 1, 1, 0, 1], { seed: 3 });
    const best = await exhaustive(new FakeEnv(target), makeTable, 8);
    expect(r.best).toEqual(target);
    expect(r.bestReward).toBeCloseTo(best.bestReward, 12);
    expect(env.evaluations).toBe(env.seen.size);
    expect(r.log.length).toBeLessThanOrEqual(30);
    expect(r.log[0]!.phase).toBe("init");
    expect(r.log.filter((s) => s.phase === "scan").length).toBeGreaterThan(0);
  });

  it("without scanning, refines from the start table alone and still improves it", async () => {
    const env = new FakeEnv([1, 1, 1, 1, 0, 0, 0, 0]);
    const r = await searchBits(env, makeTable, [0, 0, 0, 0, 1, 1, 1, 1], { seed: 1, scanInit: false });
    expect(r.log.some((s) => s.phase === "scan")).toBe(false);
    expect(r.bestReward).toBeGreaterThan(r.log[0]!.reward);
  });

  it("with a look-ahead (an environment that runs two at once) evaluates the same tables in the same order", async () => {
    /** FakeEnv that reports two evaluations at once and answers them in a scrambled order */
    class TwoAtOnce extends FakeEnv {
      readonly concurrency = 2;
      started = 0;
      running = 0;
      mostAtOnce = 0;
      override async evaluate(t: Table): Promise<Evaluation> {
        this.started++;
        this.mostAtOnce = Math.max(this.mostAtOnce, ++this.running);
        const e = await super.evaluate(t);
        await new Promise((r) => setTimeout(r, (this.started * 7) % 5));
        this.running--;
        return e;
      }
    }
    for (const [target, initial, seed] of [
      [[1, 0, 1, 1, 0, 0, 1, 0], [0, 1, 0, 0, 1, 1, 0, 1], 3],
      [[1, 1, 1, 1, 0, 0, 0, 0], [0, 0, 0, 0, 1, 1, 1, 1], 1],
      [[0, 1, 1, 0, 1, 0, 0, 1], [0, 1, 1, 0, 1, 0, 0, 0], 7],
    ] as const) {
      const serial = await searchBits(new FakeEnv([...target]), makeTable, [...initial], { seed, epsilon: 0.5 });
      const ahead = new TwoAtOnce([...target]);
      const r = await searchBits(ahead, makeTable, [...initial], { seed, epsilon: 0.5 });
      expect(r).toEqual(serial);
      expect(ahead.mostAtOnce).toBeGreaterThanOrEqual(2); // it did look ahead
    }
  });

  it("stops at the round limit", async () => {
    const r = await searchBits(new FakeEnv([1, 0, 1, 0, 1, 0, 1, 0]), makeTable, [0, 0, 0, 0, 0, 0, 0, 0], {
      maxRounds: 5,
    });
    expect(r.log.length).toBeLessThanOrEqual(5);
  });
});

describe("prepare on an environment that observes no output lengths (a live cluster)", () => {
  /** Two well-separated groups of requests, the long ones sent remote by the reference routing. */
  class NoOslEnv extends FakeEnv implements LearningEnvironment {
    readonly describe = { tool: "test env", workload: "two groups", slo: { ttftMs: 1000, tpotMs: 50 } };
    async logFeatures(): Promise<FeatureLog> {
      const requests = Array.from({ length: 40 }, (_, i) => {
        const long = i % 2 === 1;
        return {
          isl: long ? 8000 + i : 100 + i,
          effP: long ? 7000 : 90,
          effD: long ? 7000 : 90,
          path: long ? ("remote" as const) : ("local" as const),
        };
      });
      return { policy: "a test rule", requests };
    }
  }

  it("clusters on isl, eff_P, eff_D, writes no output-length classes, and starts from the reference's vote", async () => {
    const p = await prepare(new NoOslEnv([0, 1]), { k: 2, seed: 1 });
    expect(p.osl).toBeNull();
    expect(p.featureRun).toEqual({ policy: "a test rule", requests: 40 });
    const t = p.makeTable(p.initial);
    expect(t.features).toEqual(["isl", "eff_P", "eff_D"]);
    expect(t.osl_classes).toBeUndefined();
    expect(t.provenance?.tool).toBe("test env");
    expect([...p.initial].sort()).toEqual([0, 1]);
  });

  it("runs the same search as train and refuses osl_hat it cannot compute", async () => {
    const r = await train(new NoOslEnv([1, 0]), { k: 2, seed: 1 });
    expect(r.log.length).toBeGreaterThan(0);
    expect(r.osl).toBeNull();
    await expect(prepare(new NoOslEnv([0, 1]), { k: 2, features: ["isl", "osl_hat"] })).rejects.toThrow(
      /osl_hat needs output lengths/,
    );
  });
});

describe("output-length classifier", () => {
  const samples = (n: number, seed: number): OslSample[] => {
    let x = seed;
    const rnd = () => (x = (Math.imul(x, 1103515245) + 12345) & 0x7fffffff) / 0x7fffffff;
    return Array.from({ length: n }, () => {
      const isl = Math.floor(100 + rnd() * 8000);
      const turn = 1 + Math.floor(rnd() * 3);
      // longer prompts get shorter answers (summaries), later turns longer ones, plus noise
      const out = Math.max(1, Math.round(600 - isl / 20 + 150 * turn + (rnd() - 0.5) * 200));
      return { isl, reuse: rnd(), turn, prevOutput: turn > 1 ? out : 0, maxTokens: 0, outputTokens: out };
    });
  };

  it("learns tertile classes with median representatives", () => {
    const c = learnOslClasses([1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(c.names).toEqual(["short", "medium", "long"]);
    expect(c.thresholds).toEqual([3, 6]);
    expect(c.representative).toEqual([2, 5, 8]);
  });

  it("predicts held-out classes far better than the majority class", () => {
    const t = trainOslClassifier(samples(3000, 5), { seed: 2 });
    expect(t.accuracy.heldOut).toBeGreaterThan(t.accuracy.majorityBaseline + 0.2);
    expect(t.confusion.flat().reduce((a, b) => a + b, 0)).toBe(t.samples.heldOut);
  });

  it("is evaluated by the core exactly as training predicts, on both engines", () => {
    const t = trainOslClassifier(samples(2000, 9), { seed: 1 });
    const table = validateTable({
      ...kmeansTable(
        [
          [0, 0, 0, 0],
          [1, 1, 1, 1],
        ],
        [0, 1],
      ),
      osl_classes: t.classes,
      osl_model: t.model,
    });
    for (const engine of ["wasm", "reference"] as const) {
      const r = routerOn(engine, decodeTable(encodeTable(table)), {
        workers: [
          { id: "p", role: "prefill" },
          { id: "d", role: "decode" },
        ],
      });
      for (const s of samples(200, 77)) {
        const tokens = Array.from({ length: s.isl }, (_, i) => i * 31 + s.turn);
        const d = r.route({ tokens, turn: s.turn, prevOutputTokens: s.prevOutput });
        const expected = predictOslClass(t.model, { ...s, reuse: d.reuse });
        expect(d.oslClass).toBe(expected);
        expect(d.features.oslHat).toBe(t.classes.representative[expected]);
      }
    }
  });

  it("noisy(p) keeps the true class at p = 0 and never at p = 1", () => {
    const classes = learnOslClasses([10, 20, 30, 40, 50, 60]);
    const req = (o: number) => ({
      id: 0,
      arrivalMs: 0,
      promptTokens: 10,
      outputTokens: o,
      blocks: new Uint32Array(0),
      turn: 1,
    });
    const exact = noisyOslPredictor(classes, 0, 1);
    const wrong = noisyOslPredictor(classes, 1, 1);
    for (const o of [10, 35, 60]) {
      const truth = classes.representative[o <= classes.thresholds[0]! ? 0 : o <= classes.thresholds[1]! ? 1 : 2];
      expect(exact(req(o))).toBe(truth);
      expect(wrong(req(o))).not.toBe(truth);
    }
  });
});

describe("training and evaluation on a simulated cluster", () => {
  const module = coreModule("release");
  const job = { workload: "hybrid", split: "1P1D", slo: "taichi-a", cluster: "h100-8b", requests: 150, module };

  it("keeps training and evaluation arrivals apart", () => {
    const p = workloadParts({ workload: "hybrid", requests: 100, seed: 4 });
    expect(p.train.requests).toHaveLength(100);
    expect(JSON.stringify(p.train.requests[0]!.blocks)).not.toBe(JSON.stringify(p.eval.requests[0]!.blocks));
  });

  it("writes a valid table whose clusters and bits route in the core, deterministically", async () => {
    const a = await trainJob({ ...job, k: 4, load: "x1" });
    const b = await trainJob({ ...job, k: 4, load: "x1" });
    const t = decodeTable(a.bytes);
    expect(t.kind).toBe("kmeans");
    expect(t.centroids).toHaveLength(4);
    expect(t.osl_model?.kind).toBe("logistic");
    expect(t.split).toBe("1P1D");
    expect(a.table.bits).toEqual(b.table.bits);
    expect(a.result.log.map((s) => s.reward)).toEqual(b.result.log.map((s) => s.reward));
    const r = routerOn("wasm", t, {
      workers: [
        { id: "p", role: "prefill" },
        { id: "d", role: "decode" },
      ],
    });
    expect(r.route({ tokens: Array.from({ length: 3000 }, (_, i) => i) }).cluster).not.toBeNull();
  });

  it("evaluates every policy on the same arrivals in the documented shape", async () => {
    const trained = await trainJob({ ...job, k: 2, load: "x1" });
    const out = evalJob({ ...job, load: "x1", table: trained.table });
    expect(Object.keys(out.policies).sort()).toEqual([...POLICY_NAMES].sort());
    expect(out.simulated).toBe(true);
    for (const p of Object.values(out.policies)) {
      expect(p.slo_attainment).toBeGreaterThanOrEqual(0);
      expect(p.slo_attainment).toBeLessThanOrEqual(1);
      for (const k of ["p50", "p90", "p99"] as const) expect(p.ttft_ms[k]).toBeGreaterThan(0);
      expect(p.failed).toBe(0);
    }
    expect(out.policies["always-local"]!.local_fraction).toBe(1);
    expect(out.policies["always-remote"]!.local_fraction).toBe(0);
  });

  it("builds PPD's table from measurements: multi-turn traffic gets local cells, single-turn none", () => {
    const base = { preset: PRESETS["h100-8b"], split: parseSplit("1P3D"), slo: SLO_PRESETS["taichi-a"]!, module };
    const multi = buildPpdTable(generate("multiturn", { seed: 3, requests: 500 }), base);
    expect(multi.samples).toBeGreaterThan(0);
    expect(multi.measuredLevels.length).toBeGreaterThan(0);
    const bits = (multi.table.params!["bits"] as number[][][]).flat(2);
    expect(bits).toContain(0);
    const single = buildPpdTable(generate("arxiv", { seed: 3, requests: 100 }), base);
    expect((single.table.params!["bits"] as number[][][]).flat(2).every((b) => b === 1)).toBe(true);
    expect(single.measuredLevels).toEqual([]);
  });
});
