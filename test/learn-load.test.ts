// The learned policy and the load (issue 24): the simulator records the load each request was decided at, the
// guarded search writes per-cluster load bounds (the highest load of the final table's runs) and cluster shares,
// a table trained at one load hands a heavier load's requests to the rule, the rate profiles keep the requests, and
// the load-sweep study's cells. Small simulated clusters; figures are simulated.
import { describe, expect, it } from "vitest";
import { guardParts, profiledShared, scaledShared, setup, trainJob, workloadParts } from "../src/learn/job.js";
import { familyJob, selectFamilies } from "../src/learn/robustness.js";
import { clusterShare, guardRules, loadBounds, loadReactiveFallbacks, routedSizes } from "../src/learn/load-bounds.js";
import { DECODE_BUSY_SHARE, PREFILL_BUSY_STEPS, ruleTableFor } from "../src/sim/rule-table.js";
import {
  loadDecisions,
  loadSweepMarkdown,
  runLoadSweep,
  sweepCell,
  SWEEP_LOADS,
  type SweepCell,
} from "../src/learn/load-sweep.js";
import type { PolicyOutcome } from "../src/report/eval-output.js";
import { kvCapacityTokens, PRESETS } from "../src/sim/model-presets.js";
import { rateMultiplier, withRateProfile } from "../src/sim/rate-profile.js";
import { simulate } from "../src/sim/simulator.js";
import type { RequestRecord } from "../src/sim/metrics.js";
import { decodeTable } from "../src/table/codec.js";
import type { Table } from "../src/table/table.js";
import { SimEnvironment } from "../src/learn/sim-environment.js";
import type { Workload } from "../src/sim/types.js";
import { coreModule } from "./helpers.js";

const JOB = {
  workload: "hybrid",
  split: "1P1D",
  slo: "taichi-a",
  cluster: "h100-8b",
  requests: 150,
  module: coreModule("release"),
};

describe("rate profiles", () => {
  const w = workloadParts({ workload: "hybrid", requests: 400 }).train;

  it("keep the requests and their order, and change only the gaps", () => {
    expect(withRateProfile(w, "flat")).toBe(w);
    for (const p of ["ramp", "steps"] as const) {
      const r = withRateProfile(w, p);
      expect(r.requests.map((x) => x.id)).toEqual(w.requests.map((x) => x.id));
      expect(r.requests.map((x) => x.promptTokens)).toEqual(w.requests.map((x) => x.promptTokens));
      for (let i = 1; i < r.requests.length; i++)
        expect(r.requests[i]!.arrivalMs).toBeGreaterThanOrEqual(r.requests[i - 1]!.arrivalMs);
    }
  });

  it("run from 0.5x to 2x: the last quarter's rate about four times the first's", () => {
    expect(rateMultiplier("ramp", 0)).toBeCloseTo(0.5, 12);
    expect(rateMultiplier("ramp", 1)).toBeCloseTo(2, 12);
    expect([0, 0.3, 0.6, 0.9].map((u) => rateMultiplier("steps", u))).toEqual([0.5, 1, 1.5, 2]);
    const r = withRateProfile(w, "steps").requests;
    const n = r.length;
    const rate = (a: number, b: number): number => (b - a) / ((r[b]!.arrivalMs - r[a]!.arrivalMs) / 1000);
    const ratio = rate(Math.floor(0.75 * n), n - 1) / rate(0, Math.floor(0.25 * n) - 1);
    expect(ratio).toBeGreaterThan(2.5);
    expect(ratio).toBeLessThan(6);
  });
});

describe("load bounds and cluster shares", () => {
  const rec = (cluster: number, prefill: number | null, decode: number): RequestRecord =>
    ({ cluster, load: { prefill, decode }, failed: false }) as RequestRecord;

  it("take the highest load per cluster over every run; a cluster that never had a prefill worker gets prefill 0", () => {
    const b = loadBounds(
      [
        [rec(0, 10, 100), rec(0, null, 300), rec(1, null, 50)],
        [rec(0, 40, 200), rec(2, 5, 7), rec(-1, 999, 999)],
      ],
      4,
    );
    expect(b).toEqual({ prefill: [40, 0, 5, 0], decode: [300, 50, 7, 0] });
    expect(() => loadBounds([], 2, 0)).toThrow(/quantile/);
  });

  it("shares sum to 1", () => {
    const s = clusterShare([1, 2, 3, 7]);
    expect(s.reduce((a, x) => a + x, 0)).toBeCloseTo(1, 12);
    expect(s[3]).toBeCloseTo(7 / 13, 12);
  });

  it("the load-reactive fallbacks carry the preset's token budget and KV capacity", () => {
    const p = PRESETS["h100-8b"];
    const f = loadReactiveFallbacks(p);
    expect(f.map((x) => x.kind)).toEqual(["dynamo-isl-or-load", "dynamo-legacy", "dynamo-load"]);
    expect(f[0]!.params).toEqual({
      max_local_prefill_tokens: 2048,
      max_local_prefill_ratio: 0.7,
      prefill_busy_tokens: PREFILL_BUSY_STEPS * p.maxNumBatchedTokens,
      decode_busy_tokens: Math.round(DECODE_BUSY_SHARE * kvCapacityTokens(p)),
    });
    expect(f[2]!.params["max_num_batched_tokens"]).toBe(p.maxNumBatchedTokens);
  });

  it("the guarded search starts from isl_or_load and tries isl_bounding and the other load rules in its place", () => {
    const g = guardRules(PRESETS["h100-8b"]);
    expect(g.start.kind).toBe("dynamo-isl-or-load");
    expect(g.fallbacks.map((x) => x.kind)).toEqual(["dynamo-isl", "dynamo-legacy", "dynamo-load"]);
  });
});

describe("a guarded table trained at one load (flat, x1)", () => {
  const trained = trainJob({ ...JOB, k: 4, load: "x1", reward: "both", loadProfile: "flat" });

  it("is version 3 with load bounds and cluster shares, and tried the load-reactive fallbacks first", async () => {
    const r = await trained;
    const t = decodeTable(r.bytes);
    expect(t.version).toBe(3);
    expect(t.load_bound!.prefill).toHaveLength(4);
    expect(t.load_bound!.decode).toHaveLength(4);
    expect(t.cluster_share!.reduce((a, x) => a + x, 0)).toBeCloseTo(1, 6);
    // the all-rule table under isl_or_load, then under each other fallback candidate
    expect(r.result.log.slice(0, 4).map((s) => s.bits.join(""))).toEqual(["2222", "2222", "2222", "2222"]);
  });

  it("bounds each cluster by the highest load of the final table's runs on the search's and held-out arrivals", async () => {
    const r = await trained;
    const t = decodeTable(r.bytes);
    const { load_bound: _b, cluster_share: _s, ...rest } = t;
    const tested = { ...rest, version: 2 } as Table;
    const parts = guardParts(JOB, workloadParts(JOB));
    const cfg = setup({ ...JOB, load: "x1" }).base;
    const runs = [parts.train, parts.eval].map(
      (w) => simulate(profiledShared(scaledShared(w, r.scale), "flat"), { ...cfg, table: tested }).records,
    );
    expect(runs[0]!.every((x) => x.failed || x.load !== undefined)).toBe(true);
    expect(t.load_bound).toEqual(loadBounds(runs, 4));
    // the shares are those of the clusters the core assigned on the search's arrivals under that table
    expect(t.cluster_share).toEqual(clusterShare(routedSizes(runs[0]!, 4)));
    // the bounded table decides the search's own arrivals exactly as the table the search tested
    const bounded = simulate(scaledShared(parts.train, r.scale), { ...cfg, table: t }).records;
    expect(bounded.map((x) => x.path)).toEqual(runs[0]!.map((x) => x.path));
  });

  it("routes a heavier load's requests of a learned cluster by the rule", async () => {
    const r = await trained;
    const t = decodeTable(r.bytes);
    // every cluster learned as local: without the bounds, only the out-of-distribution requests could go remote
    const local = { ...t, bits: t.bits!.map(() => 0) };
    const { load_bound: _b, ...unbounded } = local;
    const heavy = scaledShared(workloadParts(JOB).eval, 3 * r.scale);
    const cfg = setup({ ...JOB, load: "x1" }).base;
    const withBounds = simulate(heavy, { ...cfg, table: local }).records;
    const without = simulate(heavy, { ...cfg, table: { ...unbounded } as Table }).records;
    const beyond = loadDecisions(local, withBounds).loadOutOfRange;
    expect(beyond).toBeGreaterThan(0);
    const remote = (rs: RequestRecord[]): number => rs.filter((x) => !x.failed && x.path === "remote").length;
    expect(remote(withBounds)).toBeGreaterThan(remote(without));
  });
});

describe("Dynamo's isl_or_load (dynamo-isl-or-load) follows the load", () => {
  const cfg = setup({ ...JOB, load: "x1" }).base;
  const w = workloadParts(JOB).eval;
  const run = (scale: number, kind: "dynamo-isl" | "dynamo-isl-or-load"): RequestRecord[] =>
    simulate(scaledShared(w, scale), { ...cfg, table: ruleTableFor(kind, cfg.preset) }).records;
  const paths = (rs: RequestRecord[]): string => rs.map((x) => x.path[0]).join("");

  it("decides as isl_bounding while neither worker is busy, and keeps more prefills local once the prefill worker is", () => {
    const light = 0.05;
    expect(paths(run(light, "dynamo-isl-or-load"))).toEqual(paths(run(light, "dynamo-isl")));
    const local = (rs: RequestRecord[]): number => rs.filter((x) => !x.failed && x.path === "local").length;
    expect(local(run(4, "dynamo-isl-or-load"))).toBeGreaterThan(local(run(4, "dynamo-isl")));
  });
});

describe("the load profile's arrivals", () => {
  it("by default re-checks on a ramp and searches at the job's load; --load-profile-on both ramps both", async () => {
    for (const [on, searchRamped] of [
      ["held-out", false],
      ["both", true],
    ] as const) {
      const seen: Workload[] = [];
      await trainJob({
        ...JOB,
        k: 4,
        load: "x1",
        reward: "both",
        maxRounds: 4,
        loadProfileOn: on,
        environment: (w, base) => {
          seen.push(w);
          return new SimEnvironment(w, base);
        },
      });
      const parts = guardParts(JOB, workloadParts(JOB));
      expect(seen).toHaveLength(2);
      expect(seen[0]).toBe(searchRamped ? profiledShared(parts.train, "ramp") : parts.train);
      expect(seen[1]).toBe(profiledShared(parts.eval, "ramp"));
    }
  });
});

describe("the load-sweep study", () => {
  const outcome = (att: number, ttft: number, tpot: number): PolicyOutcome => ({
    slo_attainment: att,
    ttft_ms: { p50: ttft, p90: ttft, p99: ttft },
    tpot_ms: { p50: tpot, p90: tpot, p99: tpot },
    throughput_tokens_per_s: 0,
    local_fraction: 0,
    failed: 0,
  });
  const meta = {
    family: "f",
    load: 1 as const,
    rps: 1,
    requests: 10,
    decided_by: { learned: 0, loadOutOfRange: 0 },
    table: { bits: "", fallback: "" },
    eval_sets: 1,
    attainment_vs_best_pts_by_set: [],
  };

  it("measures latency against dynamo-isl, or the larger with a rule that beats it by more than 0.5 point", () => {
    const close = { "dynamo-isl": outcome(0.9, 1000, 20), "dynamo-legacy": outcome(0.904, 1500, 40) };
    expect(sweepCell(outcome(0.9, 1100, 20), close, meta).meets).toEqual({ attainment: true, ttft: false, tpot: true });
    const far = { "dynamo-isl": outcome(0.8, 1000, 20), "dynamo-legacy": outcome(0.9, 1500, 40) };
    const c = sweepCell(outcome(0.9, 1500, 40.8), far, meta);
    expect(c.meets).toEqual({ attainment: true, ttft: true, tpot: true });
    expect(c.latency_reference).toEqual({ ttft_p90_ms: 1500, tpot_p90_ms: 40, rule: "max(dynamo-isl, dynamo-legacy)" });
    expect(sweepCell(outcome(0.894, 1000, 20), far, meta).meets.attainment).toBe(false);
  });

  it("gives one cell per load, quick", async () => {
    const cells: SweepCell[] = [];
    await runLoadSweep(
      {
        families: ["hybrid"],
        cluster: "h100-8b",
        split: "2P2D",
        slo: "2000,50",
        requests: 80,
        k: 4,
        maxRounds: 6,
        quick: true,
        module: JOB.module,
      },
      (c) => cells.push(c),
    );
    expect(cells.map((c) => c.load)).toEqual([...SWEEP_LOADS]);
    for (const c of cells) {
      expect(c.study).toBe("load-sweep");
      expect(c.family).toBe("hybrid");
      expect(Object.keys(c.meets)).toEqual(["attainment", "ttft", "tpot"]);
      expect(c.best_rule.names.length).toBeGreaterThan(0);
      expect(c.table.bits).toHaveLength(4);
    }
    // the rates: 0.25x … 2x of the same saturated rate
    expect(cells[4]!.rps / cells[0]!.rps).toBeCloseTo(8, 6);
    const md = loadSweepMarkdown(cells);
    expect(md.split("\n").filter((l) => l.startsWith("| hybrid |"))).toHaveLength(6);
    expect(md).toMatch(/of 6 cells meet all three targets \(simulated\)\./);
    expect(cells.every((c) => c.eval_sets === 1)).toBe(true); // --quick: one set
  });

  it("averages a cell over evaluation sets: each policy's figures are the mean of its runs on each set", async () => {
    const cells: SweepCell[] = [];
    const o = {
      families: ["hybrid"],
      cluster: "h100-8b",
      split: "2P2D",
      slo: "2000,50",
      requests: 60,
      k: 4,
      maxRounds: 4,
      evalSets: 2,
      module: JOB.module,
    };
    await runLoadSweep(o, (c) => cells.push(c));
    const c = cells.find((x) => x.load === 1)!;
    expect(c.eval_sets).toBe(2);
    expect(c.attainment_vs_best_pts_by_set).toHaveLength(2);
    // dynamo-isl's mean over the family's evaluation part (seed 2) and the first extra set (seed 4)
    const job = familyJob(selectFamilies(["hybrid"])[0]!, o);
    const s = setup(job);
    const isl = ruleTableFor("dynamo-isl", s.base.preset);
    const att = [2, 4].map(
      (seed) =>
        simulate(scaledShared(workloadParts({ ...job, seed: seed - 1 }).eval, s.scale), { ...s.base, table: isl })
          .summary.slo_attainment,
    );
    expect(c.rules["dynamo-isl"]!.slo_attainment).toBeCloseTo((att[0]! + att[1]!) / 2, 12);
  });
});
