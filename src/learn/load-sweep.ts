// `dolphin ablate --study load-sweep` (issue 24): does one learned table hold at every load? Per workload family, a
// guarded table is learned once (`dolphin train`'s default: its search's arrivals on the family's load profile,
// disjoint from the evaluation's), then evaluated on the family's evaluation arrivals at 0.25×, 0.5×, 1×, 1.5× and
// 2× of the family's saturated rate and on a rate ramp (0.5× to 2× within the run), against every rule on the same
// arrivals. Each cell checks the issue's sweep targets. Every figure is simulated.
//
// Targets (issue 24): attainment ≥ the best rule's − 0.5 point; P90 TTFT and P90 TPOT each ≤ 2% above dynamo-isl's,
// or, where another rule's attainment beats dynamo-isl's by more than 0.5 point, ≤ 2% above the larger of
// dynamo-isl's and that best rule's. PPD's table is built once per family at its saturated load (as an operator
// would build it once), not per cell.

import type { PolicyOutcome } from "../report/eval-output.js";
import { simulate } from "../sim/simulator.js";
import { ruleTableFor, type RuleKind } from "../sim/rule-table.js";
import { withRateProfile, type LoadProfile } from "../sim/rate-profile.js";
import type { Table } from "../table/table.js";
import type { RequestRecord } from "../sim/metrics.js";
import { evaluationSets, meanOutcome } from "./eval-sets.js";
import { guardCounts } from "./guard-counts.js";
import { scaledShared, setup, trainJob, type ProfileOn } from "./job.js";
import { BASELINE_NAMES, buildPpdTable, evaluatePolicies, policyOutcome, type PolicyName } from "./policies.js";
import {
  bestOfRules,
  familyJob,
  latencyReference,
  type LatencyReference,
  ROBUSTNESS_DEFAULTS,
  relativeTo,
  ROBUSTNESS_ROUNDS,
  selectFamilies,
  TARGETS,
  withinLatency,
  type CellFigures,
  type RobustnessOptions,
} from "./robustness.js";

/** The loads of the sweep, as multiples of the family's saturated rate; "ramp" is 0.5× to 2× within the run. */
export const SWEEP_LOADS = [0.25, 0.5, 1, 1.5, 2, "ramp"] as const;
export type SweepLoad = (typeof SWEEP_LOADS)[number];

/** `--quick`: two families, fewer requests and rounds (a test's run, not a result). */
export const QUICK = { families: ["hybrid", "humaneval"], requests: 200, maxRounds: 12 } as const;

export interface SweepOptions extends RobustnessOptions {
  /** the training's load profile and which arrivals follow it (default: `dolphin train`'s) */
  loadProfile?: LoadProfile;
  loadProfileOn?: ProfileOn;
  /** the guarded search's fallback latency check (GuardOptions.fallbackLatency) */
  fallbackLatency?: "rule" | "own";
  /** evaluation arrival sets per cell, figures averaged over them (src/learn/eval-sets.ts; default EVAL_SETS) */
  evalSets?: number;
  quick?: boolean;
}

/** Evaluation sets per cell by default: three (a trace has one: its arrivals are its own). */
export const EVAL_SETS = 3;

export interface SweepCell extends CellFigures {
  study: "load-sweep";
  variant: string;
  family: string;
  load: SweepLoad;
  best_rule: { names: string[]; slo_attainment: number };
  /** every rule's figures on the same arrivals */
  rules: Record<string, { slo_attainment: number; ttft_p90_ms: number; tpot_p90_ms: number }>;
  /** the P90s the latency targets are measured against (dynamo-isl's, or the larger with the best rule's) */
  latency_reference: LatencyReference;
  /** dolphin's requests a learned cluster decided, and those its load bound sent to the fallback rule */
  decided_by: { learned: number; loadOutOfRange: number };
  table: { bits: string; fallback: string };
  /** how many evaluation sets the figures are averaged over, and dolphin's margin to the best rule on each alone */
  eval_sets: number;
  attainment_vs_best_pts_by_set: number[];
  [k: string]: unknown;
}

/** The sweep's targets for one cell (header comment). */
export function sweepCell(
  d: PolicyOutcome,
  rules: Record<string, PolicyOutcome>,
  meta: Pick<
    SweepCell,
    "family" | "load" | "rps" | "requests" | "decided_by" | "table" | "eval_sets" | "attainment_vs_best_pts_by_set"
  >,
): SweepCell {
  const rulesBest = bestOfRules(rules, "load-sweep: the rules");
  const { dynamo: y, best, names } = rulesBest;
  const vs = relativeTo;
  const ref = latencyReference(rules, "load-sweep: the rules", rulesBest);
  const pts = 100 * (d.slo_attainment - best);
  return {
    study: "load-sweep",
    variant: `${meta.family} @ ${typeof meta.load === "number" ? `${meta.load}×` : "ramp 0.5–2×"}`,
    ...meta,
    slo_attainment: d.slo_attainment,
    ttft_p90_ms: d.ttft_ms.p90,
    tpot_p90_ms: d.tpot_ms.p90,
    dynamo_isl: { slo_attainment: y.slo_attainment, ttft_p90_ms: y.ttft_ms.p90, tpot_p90_ms: y.tpot_ms.p90 },
    best_rule: { names, slo_attainment: best },
    rules: Object.fromEntries(
      Object.entries(rules).map(([n, p]) => [
        n,
        { slo_attainment: p.slo_attainment, ttft_p90_ms: p.ttft_ms.p90, tpot_p90_ms: p.tpot_ms.p90 },
      ]),
    ),
    attainment_vs_best_pts: pts,
    ttft_vs_dynamo: vs(d.ttft_ms.p90, y.ttft_ms.p90),
    tpot_vs_dynamo: vs(d.tpot_ms.p90, y.tpot_ms.p90),
    latency_reference: ref,
    meets: {
      attainment: Math.round(10 * pts) / 10 >= -TARGETS.attainmentPts,
      ttft: withinLatency(vs(d.ttft_ms.p90, ref.ttft_p90_ms)),
      tpot: withinLatency(vs(d.tpot_ms.p90, ref.tpot_p90_ms)),
    },
  };
}

/** Of a learned table's run: requests a learned (0/1) cluster decided, and those its load bound sent to the rule
 *  (counted as the core decides: out of distribution first, then a rule cluster, then the load bound). */
export function loadDecisions(t: Table, records: RequestRecord[]): SweepCell["decided_by"] {
  const counts = guardCounts(t, records);
  return { learned: counts.cluster, loadOutOfRange: counts.loadBound };
}

/** Runs the sweep, one cell at a time, family by family (header comment). */
export async function runLoadSweep(o: SweepOptions, emit: (cell: SweepCell) => void): Promise<void> {
  const quick = o.quick ? QUICK : undefined;
  const families = selectFamilies(o.families ?? (quick ? [...quick.families] : undefined));
  const say = (line: string): void => o.progress?.(line, true);
  const quiet = {
    ...o,
    progress: undefined,
    ...(quick && o.requests === undefined ? { requests: quick.requests } : {}),
  };
  for (const f of families) {
    const job = familyJob(f, quiet);
    say(`load-sweep: ${f.name}: finding its saturated load on ${o.cluster ?? "?"} ${o.split}…`);
    const s = setup(job);
    say(`load-sweep: ${f.name}: learning the guarded table…`);
    const trained = await trainJob({
      ...job,
      load: `x${s.scale}`,
      scale: s.scale,
      k: o.k ?? ROBUSTNESS_DEFAULTS.k,
      reward: "both",
      maxRounds: o.maxRounds ?? quick?.maxRounds ?? ROBUSTNESS_ROUNDS,
      ...(o.loadProfile ? { loadProfile: o.loadProfile } : {}),
      ...(o.loadProfileOn ? { loadProfileOn: o.loadProfileOn } : {}),
      ...(o.fallbackLatency ? { guard: { fallbackLatency: o.fallbackLatency } } : {}),
    });
    const table = trained.table;
    const ppd = buildPpdTable(scaledShared(s.parts.train, s.scale), s.base).table;
    const rules: Partial<Record<PolicyName, Table>> = {};
    for (const p of BASELINE_NAMES) rules[p] = p === "ppd" ? ppd : ruleTableFor(p as RuleKind, s.base.preset);
    const sets = evaluationSets(job, s.parts.eval, o.evalSets ?? (quick ? 1 : EVAL_SETS));
    for (const load of SWEEP_LOADS) {
      const runs = sets.map((set) => {
        const flat = scaledShared(set, s.scale * (typeof load === "number" ? load : 1));
        const w = load === "ramp" ? withRateProfile(flat, "ramp") : flat;
        const b = evaluatePolicies(w, s.base, rules, {
          split: o.split,
          load: { spec: String(load), scale: s.scale, rps: w.rate },
        });
        const run = simulate(w, { ...s.base, table });
        const d = policyOutcome(run.summary);
        return { w, rules: b.policies, d, decided: loadDecisions(table, run.records) };
      });
      const mean = (pick: (r: (typeof runs)[number]) => PolicyOutcome): PolicyOutcome => meanOutcome(runs.map(pick));
      const meanRules = Object.fromEntries(Object.keys(runs[0]!.rules).map((n) => [n, mean((r) => r.rules[n]!)]));
      const cell = sweepCell(
        mean((r) => r.d),
        meanRules,
        {
          family: f.name,
          load,
          rps: runs.reduce((x, r) => x + r.w.rate, 0) / runs.length,
          requests: runs[0]!.w.requests.length,
          decided_by: {
            learned: runs.reduce((x, r) => x + r.decided.learned, 0),
            loadOutOfRange: runs.reduce((x, r) => x + r.decided.loadOutOfRange, 0),
          },
          table: { bits: (table.bits ?? []).join(""), fallback: table.fallback?.kind ?? "dynamo-isl" },
          eval_sets: runs.length,
          attainment_vs_best_pts_by_set: runs.map(
            (r) => 100 * (r.d.slo_attainment - bestOfRules(r.rules, "load-sweep: the rules").best),
          ),
        },
      );
      const ok = cell.meets.attainment && cell.meets.ttft && cell.meets.tpot;
      say(
        `load-sweep ${cell.variant}: ${(100 * cell.slo_attainment).toFixed(1)}% vs best rule ` +
          `${(100 * cell.best_rule.slo_attainment).toFixed(1)}% (${cell.best_rule.names.join(", ")}), P90 TTFT ` +
          `${pct(cell.ttft_vs_dynamo)}, TPOT ${pct(cell.tpot_vs_dynamo)} vs dynamo-isl; ${ok ? "meets" : "misses"} the targets`,
      );
      emit(cell);
    }
  }
}

const pct = (x: number): string =>
  Number.isFinite(x) ? `${x >= 0 ? "+" : "−"}${Math.abs(100 * x).toFixed(1)}%` : x > 0 ? "+∞" : "–";

/** The sweep as markdown: a row per family and load; a missed target in bold; the cells meeting all three counted. */
export function loadSweepMarkdown(cells: SweepCell[]): string {
  const b = (s: string, miss: boolean): string => (miss ? `**${s}**` : s);
  const out = [
    "| family | load | req/s | dolphin att. | best rule | att. vs best (pt) | P90 TTFT vs isl | P90 TPOT vs isl | latency ref. | by bound | table |",
    "|---|---|---|---|---|---|---|---|---|---|---|",
  ];
  for (const c of cells) {
    const pts = c.attainment_vs_best_pts;
    out.push(
      `| ${c.family} | ${typeof c.load === "number" ? `${c.load}×` : "ramp"} | ${c.rps.toFixed(2)} | ${(100 * c.slo_attainment).toFixed(1)}% | ` +
        `${(100 * c.best_rule.slo_attainment).toFixed(1)}% (${c.best_rule.names.join(", ")}) | ` +
        `${b(`${pts >= 0 ? "+" : "−"}${Math.abs(pts).toFixed(1)}`, !c.meets.attainment)} | ${b(pct(c.ttft_vs_dynamo), !c.meets.ttft)} | ` +
        `${b(pct(c.tpot_vs_dynamo), !c.meets.tpot)} | ${c.latency_reference.rule} | ${c.decided_by.loadOutOfRange} of ${c.decided_by.learned + c.decided_by.loadOutOfRange} | ` +
        `\`${c.table.bits}\` / ${c.table.fallback} |`,
    );
  }
  const clean = cells.filter((c) => c.meets.attainment && c.meets.ttft && c.meets.tpot).length;
  out.push("", `${clean} of ${cells.length} cells meet all three targets (simulated).`);
  return out.join("\n");
}
