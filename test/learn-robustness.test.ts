// The robustness study (`dolphin ablate --study robustness`): its matrix's shape, that every figure in a cell is what
// `dolphin eval`'s own path gives for the same table, workload and load, and how a cell checks the issue's targets.
import { describe, expect, it } from "vitest";
import type { PolicyOutcome } from "../src/report/eval-output.js";
import { evalJob, setup, trainJob } from "../src/learn/job.js";
import { BASELINE_NAMES } from "../src/learn/policies.js";
import { evalWithDriftGuard } from "../src/learn/served-eval.js";
import {
  CELL_FORMS,
  compareCell,
  familyJob,
  robustnessMarkdown,
  runRobustness,
  selectFamilies,
  TABLE_FORMS,
  type RobustnessCell,
  type RobustnessOptions,
} from "../src/learn/robustness.js";
import { coreModule } from "./helpers.js";

describe("the robustness study, tiny (2 families, 80 requests per part)", () => {
  const o: RobustnessOptions = {
    families: ["hybrid", "sharegpt"],
    cluster: "h100-8b",
    split: "2P2D",
    slo: "2000,50",
    requests: 80,
    k: 4,
    maxRounds: 6,
    module: coreModule("release"),
  };
  const cells: RobustnessCell[] = [];
  const ran = runRobustness(o, (c) => cells.push(c));

  it("gives one cell per table form, training family and evaluation family", async () => {
    await ran;
    expect(cells).toHaveLength(CELL_FORMS.length * 2 * 2);
    const keys = cells.map((c) => `${c.table} ${c.train} ${c.eval}`).sort();
    expect(keys).toEqual(
      CELL_FORMS.flatMap((f) =>
        ["hybrid", "sharegpt"].flatMap((t) => ["hybrid", "sharegpt"].map((e) => `${f} ${t} ${e}`)),
      ).sort(),
    );
    const md = robustnessMarkdown(cells);
    for (const form of CELL_FORMS) expect(md).toContain(`**${form}** table`);
    expect(md.match(/^\| \*\*(hybrid|sharegpt)\*\* \|/gm)).toHaveLength(6); // 2 training rows per matrix
    expect(md).toContain("| train ↓ eval → | hybrid | sharegpt |");
  });

  it("takes every cell's figures from evaluation: the table retrained and evaluated the way `dolphin eval` does", async () => {
    await ran;
    const [hybrid, sharegpt] = selectFamilies(o.families);
    const loadOf = (f: typeof hybrid) => `x${setup(familyJob(f!, o)).scale}`;
    const trainLoad = loadOf(hybrid);
    for (const form of TABLE_FORMS) {
      const t = await trainJob({
        ...familyJob(hybrid!, o),
        load: trainLoad,
        k: 4,
        maxRounds: 6,
        reward: form === "pure" ? "paper" : "both",
      });
      for (const e of [hybrid!, sharegpt!]) {
        const load = loadOf(e);
        const d = evalJob({ ...familyJob(e, o), load, policies: ["dolphin"], table: t.table }).policies["dolphin"]!;
        const base = evalJob({ ...familyJob(e, o), load, policies: [...BASELINE_NAMES] }).policies;
        const cell = cells.find((c) => c.table === form && c.train === "hybrid" && c.eval === e.name)!;
        expect(cell.slo_attainment).toBe(d.slo_attainment);
        expect(cell.ttft_p90_ms).toBe(d.ttft_ms.p90);
        expect(cell.tpot_p90_ms).toBe(d.tpot_ms.p90);
        expect(cell.dynamo_isl.ttft_p90_ms).toBe(base["dynamo-isl"]!.ttft_ms.p90);
        expect(cell.best_baseline.slo_attainment).toBe(Math.max(...Object.values(base).map((p) => p.slo_attainment)));
        expect(cell.local_fraction).toBe(d.local_fraction);
        if (form === "guarded") {
          const n = cell.decided_by!;
          expect(n.cluster + n.ruleCluster + n.outOfDistribution).toBeLessThanOrEqual(cell.requests);
          // the served cell: the same table through the drift guard and its mix-shift guard, as `dolphin eval
          // --drift-guard` runs it
          const g = evalWithDriftGuard({ ...familyJob(e, o), load }, t.table, setup(familyJob(e, o)).scale);
          const served = cells.find((c) => c.table === "served" && c.train === "hybrid" && c.eval === e.name)!;
          expect(served.slo_attainment).toBe(g.outcome.slo_attainment);
          expect(served.ttft_p90_ms).toBe(g.outcome.ttft_ms.p90);
          expect(served.guard!.handovers).toBe(g.report.handovers);
          expect(served.guard!.mix_alarms).toBe(g.report.mixAlarms);
        } else expect(cell.decided_by).toBeUndefined();
        expect(cell.attainment_vs_best_pts).toBeCloseTo(
          100 * (d.slo_attainment - cell.best_baseline.slo_attainment),
          9,
        );
      }
    }
  });
});

describe("a robustness cell checks the issue's targets", () => {
  const outcome = (att: number, ttft: number, tpot: number): PolicyOutcome => ({
    slo_attainment: att,
    ttft_ms: { p50: ttft, p90: ttft, p99: ttft },
    tpot_ms: { p50: tpot, p90: tpot, p99: tpot },
    throughput_tokens_per_s: 0,
    local_fraction: 0,
    failed: 0,
  });
  const baselines = {
    "dynamo-isl": outcome(0.9, 1000, 20),
    trtllm: outcome(0.95, 900, 30),
    ppd: outcome(0.95, 800, 40),
  };
  const meta = { table: "guarded" as const, train: "a", eval: "b", rps: 1, requests: 10 };

  it.each([
    // attainment, P90 TTFT, P90 TPOT → meets attainment, ttft, tpot
    [0.945, 1020, 20.4, true, true, true], // exactly 0.5 point below the best, exactly +2%
    [0.944, 1021, 20.5, false, false, false], // 0.6 point below, +2.1%, +2.5%
    [0.99, 500, 10, true, true, true],
  ])("attainment %f, TTFT %f, TPOT %f", (att, ttft, tpot, mA, mT, mP) => {
    const c = compareCell(outcome(att, ttft, tpot), baselines, meta);
    expect(c.meets).toEqual({ attainment: mA, ttft: mT, tpot: mP });
    expect(c.best_baseline).toEqual({ names: ["trtllm", "ppd"], slo_attainment: 0.95 });
  });

  it("also checks issue 24's reading: where a rule beats dynamo-isl, its latency may be matched", () => {
    // trtllm beats dynamo-isl by 5 points: the reference is the larger of their P90s (TTFT 1000, TPOT 30)
    const c = compareCell(outcome(0.95, 1020, 30.6), baselines, meta);
    expect(c.latency_reference).toEqual({ ttft_p90_ms: 1000, tpot_p90_ms: 30, rule: "max(dynamo-isl, trtllm)" });
    expect(c.meets).toEqual({ attainment: true, ttft: true, tpot: false }); // +53% over dynamo-isl's TPOT
    expect(c.meets_ref).toEqual({ attainment: true, ttft: true, tpot: true }); // +2% over trtllm's
    expect(compareCell(outcome(0.95, 1020, 30.7), baselines, meta).meets_ref.tpot).toBe(false);
    // no rule beats dynamo-isl by more than 0.5 point: the reference is dynamo-isl's own
    const close = { "dynamo-isl": outcome(0.9, 1000, 20), trtllm: outcome(0.904, 900, 30) };
    const d = compareCell(outcome(0.9, 1000, 25), close, meta);
    expect(d.latency_reference.rule).toBe("dynamo-isl");
    expect(d.meets_ref.tpot).toBe(false);
  });

  it("needs dynamo-isl among the baselines", () => {
    expect(() => compareCell(outcome(1, 1, 1), { trtllm: outcome(1, 1, 1) }, meta)).toThrow(/dynamo-isl/);
  });

  it("names the known families when given an unknown one", () => {
    expect(() => selectFamilies(["hybrid", "nope"])).toThrow(/"nope".*known: hybrid, leval/);
  });
});
