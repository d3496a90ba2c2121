// The simulator against what the field has measured (issue 3, "Fidelity, as tests"). Every figure is simulated.
import { describe, expect, it } from "vitest";
import { SLO_PRESETS, summarize, type RequestRecord } from "../src/sim/metrics.js";
import { LINKS } from "../src/sim/kv-transfer.js";
import { PRESETS } from "../src/sim/model-presets.js";
import { parseSplit } from "../src/sim/split.js";
import { simulate } from "../src/sim/simulator.js";
import type { SimConfig, SimResult } from "../src/sim/sim-config.js";
import type { SimRequest, Workload } from "../src/sim/types.js";
import { generate } from "../src/sim/generators.js";
import { withLoad } from "../src/sim/workload.js";
import { out as xx, xxh64Pair } from "../src/hashing/xxh64.js";
import { ruleTable } from "../src/table/rule-table.js";
import { coreModule } from "./helpers.js";

const module = coreModule("release");
const H100_8B = PRESETS["h100-8b"];

function run(w: Workload, split: string, table = ruleTable("always-local"), extra: Partial<SimConfig> = {}): SimResult {
  return simulate(w, {
    preset: H100_8B,
    split: parseSplit(split),
    slo: SLO_PRESETS["taichi-a"]!,
    table,
    module,
    ...extra,
  });
}

const ppdAllLocal = () =>
  ruleTable("ppd", { bits: [0, 1, 2].map(() => Array.from({ length: 9 }, () => Array(10).fill(0))) });

describe("simulator fidelity (simulated cluster)", () => {
  it("shows the seeds' SLO flip: aggregated 4R wins under taichi-a and loses under taichi-b at one load in 4–14 req/s", () => {
    const base = generate("arxiv", { seed: 1, requests: 600 });
    const found: number[] = [];
    const table: string[] = [];
    for (const rps of [4, 6, 8, 10, 12, 14]) {
      const w = withLoad(base, { kind: "rate", rps });
      const agg = run(w, "4R", ruleTable("always-local"));
      const dis = run(w, "2P2D", ruleTable("always-remote"));
      const att = (r: SimResult, slo: string) => summarize(r.records, SLO_PRESETS[slo]!).slo_attainment_per_metric;
      const [aA, aB, dA, dB] = [att(agg, "taichi-a"), att(agg, "taichi-b"), att(dis, "taichi-a"), att(dis, "taichi-b")];
      table.push(`${rps} req/s: 4R ${aA.toFixed(2)}/${aB.toFixed(2)}, 2P2D ${dA.toFixed(2)}/${dB.toFixed(2)}`);
      if (aA > dA && aB < dB) found.push(rps);
    }
    expect(found.length, table.join("\n")).toBeGreaterThan(0);
  });

  it("follows PPD's direction: turn-2+ TTFT is lower with local append-prefill than with every turn through prefill", () => {
    const w = generate("multiturn", { seed: 2, requests: 800 });
    const later = (r: SimResult) => {
      const t = r.records.filter((x) => x.turn >= 2 && !x.failed).map((x) => x.ttftMs);
      return t.reduce((s, x) => s + x, 0) / t.length;
    };
    expect(w.requests.filter((r) => r.turn >= 2).length).toBeGreaterThan(100);
    for (const split of ["1P3D", "2P2D", "3P1D"]) {
      const ppd = run(w, split, ppdAllLocal());
      const pd = run(w, split, ruleTable("always-remote"));
      expect(ppd.records.filter((r) => r.turn >= 2 && r.path === "local").length).toBeGreaterThan(0);
      expect(
        later(ppd),
        `${split}: local append ${later(ppd).toFixed(1)} ms vs remote ${later(pd).toFixed(1)} ms`,
      ).toBeLessThan(later(pd));
    }
  });

  it("slows a step with 200 decodes far more for a cold 1,024-token local prefill than for a 128-token append on a cached 2,048-token prefix", () => {
    // 200 running decodes at ~2.1k context on one instance (KV room for all: the test is about step time, not
    // memory); at t = 20 s, when all 200 are decoding, one more request prefills locally.
    const chain = (seed: number, tokens: number, prefix?: Uint32Array): Uint32Array => {
      const n = Math.floor(tokens / 16);
      const out = new Uint32Array(2 * n);
      let lo = 0,
        hi = 0;
      for (let i = 0; i < n; i++) {
        if (prefix && 2 * i < prefix.length) [lo, hi] = [prefix[2 * i]!, prefix[2 * i + 1]!];
        else {
          xxh64Pair(seed, i, lo, hi);
          [lo, hi] = [xx.lo, xx.hi];
        }
        out[2 * i] = lo;
        out[2 * i + 1] = hi;
      }
      return out;
    };
    const background: SimRequest[] = Array.from({ length: 200 }, (_, i) => ({
      id: i,
      arrivalMs: i * 0.001,
      promptTokens: i === 0 ? 2048 : 2100,
      outputTokens: 2000,
      blocks: chain(1000 + i, i === 0 ? 2048 : 2100),
      turn: 1,
    }));
    const extra = (promptTokens: number, blocks: Uint32Array): SimRequest => ({
      id: 200,
      arrivalMs: 20_000,
      promptTokens,
      outputTokens: 1,
      blocks,
      turn: 1,
    });
    const total = (r: SimResult) => r.records.slice(0, 200).reduce((s, x) => s + x.e2eMs, 0);
    const w = (x?: SimRequest): Workload => ({
      name: "interference",
      rate: 1,
      requests: x ? [...background, x] : background,
    });
    const roomy = { capacityBlocks: 100_000 };
    const alone = total(run(w(), "1R", ruleTable("always-local"), roomy));
    const cold = total(run(w(extra(1024, chain(7, 1024))), "1R", ruleTable("always-local"), roomy)) - alone;
    const withAppend = run(
      w(extra(2048 + 128, chain(0, 2048 + 128, background[0]!.blocks))),
      "1R",
      ruleTable("always-local"),
      roomy,
    );
    expect(withAppend.records[200]!.prefixHitTokens).toBe(2048);
    const append = total(withAppend) - alone;
    expect(append).toBeGreaterThan(0);
    expect(
      cold / append,
      `cold +${cold.toFixed(0)} ms, append +${append.toFixed(0)} ms summed over 200 decodes`,
    ).toBeGreaterThan(5);
  });

  it("raises always-remote TTFT monotonically as links slow, and leaves always-local unchanged", () => {
    const w = withLoad(generate("arxiv", { seed: 3, requests: 300 }), { kind: "rate", rps: 3 });
    const links = [LINKS.nvlink, LINKS["ib-ndr"], LINKS["ib-hdr"], LINKS["100gbe"]];
    const mean = (r: SimResult) => r.records.reduce((s, x) => s + x.ttftMs, 0) / r.records.length;
    const remote = links.map((link) => mean(run(w, "2P2D", ruleTable("always-remote"), { link })));
    for (let i = 1; i < remote.length; i++) expect(remote[i]!).toBeGreaterThan(remote[i - 1]!);
    const local = links.map((link) => JSON.stringify(run(w, "2P2D", ruleTable("always-local"), { link }).records));
    expect(new Set(local).size).toBe(1);
  });

  it("is deterministic: the same seed gives the same per-request results", () => {
    const a = run(generate("hybrid", { seed: 5, requests: 300 }), "2P2D", ruleTable("dynamo-isl"));
    const b = run(generate("hybrid", { seed: 5, requests: 300 }), "2P2D", ruleTable("dynamo-isl"));
    const c = run(generate("hybrid", { seed: 6, requests: 300 }), "2P2D", ruleTable("dynamo-isl"));
    const key = (r: RequestRecord[]) => JSON.stringify(r);
    expect(key(a.records)).toBe(key(b.records));
    expect(key(a.records)).not.toBe(key(c.records));
  });

  it("routes through the same core either engine runs, with identical results", () => {
    const w = generate("leval", { seed: 4, requests: 200 });
    const wasm = run(w, "2P2D", ruleTable("dynamo-isl"));
    const ts = simulate(w, {
      preset: H100_8B,
      split: parseSplit("2P2D"),
      slo: SLO_PRESETS["taichi-a"]!,
      table: ruleTable("dynamo-isl"),
    });
    expect(JSON.stringify(ts.records)).toBe(JSON.stringify(wasm.records));
    // L-Eval shares long documents: the router must see and use the cache
    expect(wasm.summary.prefix_hit_rate.decode + wasm.summary.prefix_hit_rate.prefill).toBeGreaterThan(0.5);
  });
});
