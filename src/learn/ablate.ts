// `dolphin ablate`: the paper's ablations and the questions it left open (seed 001), each a study that trains and
// evaluates on the simulated cluster and returns rows for docs/results.md. Every figure is simulated.

import { FEATURE_NAMES } from "../table/table.js";
import { atScale } from "../sim/saturation.js";
import { evalJob, setup, trainJob, type JobOptions, type TrainJobOptions } from "./job.js";
import { runRobustness } from "./robustness.js";
import { runLoadSweep, type SweepOptions } from "./load-sweep.js";
import { exhaustive, searchBits } from "./bit-search.js";
import { prepare } from "./prepare.js";
import { SimEnvironment } from "./sim-environment.js";

export const STUDIES = [
  "k",
  "scan",
  "osl-feature",
  "algo",
  "osl-noise",
  "load",
  "yardstick",
  "robustness",
  "load-sweep",
] as const;
export type Study = (typeof STUDIES)[number];

export interface AblationRow {
  study: Study;
  variant: string;
  rounds?: number;
  train_reward?: number;
  slo_attainment: number;
  ttft_p90_ms: number;
  tpot_p90_ms: number;
  /** dynamo-isl (Dynamo's rule) on the same arrivals, for reference */
  dynamo_isl?: { slo_attainment: number; ttft_p90_ms: number; tpot_p90_ms: number };
  [k: string]: unknown;
}

async function trainAndEval(o: TrainJobOptions, study: Study, variant: string): Promise<AblationRow> {
  const t = await trainJob(o);
  // evaluated at the load the table was learned at (not searched for again)
  const e = evalJob({
    ...o,
    load: `x${t.scale}`,
    policies: ["dolphin", "dynamo-isl"],
    table: t.table,
    ...(o.osl !== undefined ? { osl: o.osl } : {}),
  });
  const d = e.policies["dolphin"]!;
  const y = e.policies["dynamo-isl"]!;
  return {
    study,
    variant,
    rounds: t.result.rounds,
    best_round: t.result.bestRound,
    train_reward: t.result.bestReward,
    slo_attainment: d.slo_attainment,
    ttft_p90_ms: d.ttft_ms.p90,
    tpot_p90_ms: d.tpot_ms.p90,
    dynamo_isl: { slo_attainment: y.slo_attainment, ttft_p90_ms: y.ttft_ms.p90, tpot_p90_ms: y.tpot_ms.p90 },
  };
}

/** What a study runs on; the robustness study picks its own workloads and loads (src/learn/robustness.ts). */
export interface StudyOptions extends JobOptions {
  /** robustness: the workload families to train and evaluate on (default: all) */
  families?: string[];
  /** robustness: clusters per table (the other studies set K themselves) */
  k?: number;
  /** load-sweep: fewer families, requests and rounds (src/learn/load-sweep.ts, QUICK) */
  quick?: boolean;
  /** load-sweep: the training's load profile */
  loadProfile?: SweepOptions["loadProfile"];
  loadProfileOn?: SweepOptions["loadProfileOn"];
  fallbackLatency?: SweepOptions["fallbackLatency"];
}

export async function runStudy(study: Study, o: StudyOptions, emit: (row: AblationRow) => void): Promise<void> {
  switch (study) {
    case "k":
      for (const k of [2, 4, 8, 16]) emit(await trainAndEval({ ...o, k }, study, `K=${k}`));
      return;
    case "scan":
      for (const scanInit of [true, false])
        emit(await trainAndEval({ ...o, scanInit }, study, scanInit ? "with scan" : "without scan"));
      return;
    case "osl-feature":
      emit(await trainAndEval(o, study, "with osl_hat"));
      emit(
        await trainAndEval({ ...o, features: FEATURE_NAMES.filter((f) => f !== "osl_hat") }, study, "without osl_hat"),
      );
      return;
    case "algo":
      for (const algo of ["kmeans", "gmm"] as const) emit(await trainAndEval({ ...o, algo }, study, algo));
      return;
    case "osl-noise":
      emit(await trainAndEval(o, study, "classifier (model)"));
      for (const p of [0, 0.2, 0.4])
        emit(
          await trainAndEval(
            { ...o, osl: p === 0 ? "oracle" : { noisy: p } },
            study,
            p === 0 ? "oracle class (p = 0)" : `noisy p = ${p}`,
          ),
        );
      return;
    case "load": {
      // one table learned at saturation, evaluated from 50% to 120% of it
      const t = await trainJob({ ...o, load: o.load ?? "saturated" });
      for (const f of [0.5, 0.75, 0.9, 1, 1.1, 1.2]) {
        const e = evalJob({
          ...o,
          load: `x${t.scale * f}`,
          policies: ["dolphin", "dynamo-isl", "dynamo-legacy", "always-remote"],
          table: t.table,
        });
        const d = e.policies["dolphin"]!;
        const y = e.policies["dynamo-isl"]!;
        emit({
          study,
          variant: `${Math.round(f * 100)}% of saturation (${e.load.rps.toFixed(2)} req/s)`,
          slo_attainment: d.slo_attainment,
          ttft_p90_ms: d.ttft_ms.p90,
          tpot_p90_ms: d.tpot_ms.p90,
          dynamo_isl: { slo_attainment: y.slo_attainment, ttft_p90_ms: y.ttft_ms.p90, tpot_p90_ms: y.tpot_ms.p90 },
          others: Object.fromEntries(Object.entries(e.policies).map(([n, p]) => [n, p.slo_attainment])),
        });
      }
      return;
    }
    case "yardstick": {
      // K = 8: evaluate all 256 tables once; how close does the search get, in how many rounds?
      const s = setup(o);
      const env = new SimEnvironment(atScale(s.parts.train, s.scale), s.base);
      const p = await prepare(env, { k: 8, seed: o.seed ?? 1 });
      const all = await exhaustive(p.env, p.makeTable, 8);
      const search = await searchBits(p.env, p.makeTable, p.initial, { seed: o.seed ?? 1 });
      const target = 0.98 * all.bestReward;
      const reached = search.log.findIndex((s) => s.reward >= target);
      const sorted = [...all.rewards].sort((a, b) => b - a);
      emit({
        study,
        variant: "K=8 search vs all 256 tables",
        slo_attainment: search.bestReward,
        ttft_p90_ms: NaN,
        tpot_p90_ms: NaN,
        exhaustive_best: all.bestReward,
        exhaustive_best_bits: all.best.join(""),
        search_best_bits: search.best.join(""),
        search_fraction_of_best: search.bestReward / all.bestReward,
        rounds: search.log.length,
        rounds_to_98pct: reached >= 0 ? reached + 1 : null,
        search_rank_among_256: sorted.findIndex((r) => r <= search.bestReward) + 1,
        median_table_reward: sorted[128],
      });
      return;
    }
    case "robustness":
      // every family's table on every family, pure and guarded, at the evaluation family's saturated load
      await runRobustness(o, emit);
      return;
    case "load-sweep":
      // one guarded table per family, evaluated at 0.25× to 2× of the family's saturated load and on a ramp
      await runLoadSweep(o, emit);
      return;
  }
}

/** A markdown table of rows of one study. */
export function ablationMarkdown(rows: AblationRow[]): string {
  const pct = (x: number | undefined) => (x === undefined || !Number.isFinite(x) ? "–" : `${(100 * x).toFixed(1)}%`);
  const ms = (x: number | undefined) => (x === undefined || !Number.isFinite(x) ? "–" : x.toFixed(0));
  const lines = [
    "| variant | rounds | train reward | SLO att. | P90 TTFT ms | P90 TPOT ms | dynamo-isl att. | dynamo-isl P90 TTFT | dynamo-isl P90 TPOT |",
    "|---|---|---|---|---|---|---|---|---|",
  ];
  for (const r of rows) {
    lines.push(
      `| ${r.variant} | ${r.rounds ?? "–"} | ${pct(r.train_reward)} | ${pct(r.slo_attainment)} | ${ms(r.ttft_p90_ms)} | ${ms(r.tpot_p90_ms)} | ` +
        `${pct(r.dynamo_isl?.slo_attainment)} | ${ms(r.dynamo_isl?.ttft_p90_ms)} | ${ms(r.dynamo_isl?.tpot_p90_ms)} |`,
    );
  }
  return lines.join("\n");
}
