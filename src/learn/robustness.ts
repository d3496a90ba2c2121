// `dolphin ablate --study robustness` (issue 11, item 5): does a learned table stay safe on workloads it never saw?
// A table is learned on each workload family and evaluated on every family (its own included, on other arrivals), at
// the evaluation family's saturated load, against every baseline on the same arrivals. Two tables per family: the
// paper's pure one (`--reward paper`, no guard) and the guarded one (`dolphin train`'s default, src/learn/guard.ts),
// the guarded one twice: alone, and "served" (routed through the drift guard and its mix-shift guard, as `dolphin
// serve` routes it).
// Each cell gives dolphin's attainment against the best baseline (points) and its P90 TTFT and P90 TPOT against
// Dynamo's rule (dynamo-isl), and checks the matrix targets. Every figure is simulated.
//
// The setting is the issue's: h100-8b, 2P2D, SLO 2,000 ms TTFT / 50 ms TPOT, K = 8. Families are loaded exactly as
// `dolphin train` and `dolphin eval` load them (src/learn/job.ts): a generator is drawn with seed s to train and s + 1
// to evaluate; a trace or lengths file is split in time (first half to train, second half to evaluate), a lengths
// file with its Poisson arrivals at the CLI's default rate (the saturated load rescales them anyway).

import { packageFile } from "../core/package-root.js";
import type { PolicyOutcome } from "../report/eval-output.js";
import { isGenerator } from "../sim/workload.js";
import type { Table } from "../table/table.js";
import { guardCounts } from "./guard.js";
import { evalJob, evalRecords, setup, trainJob, type JobOptions } from "./job.js";
import { BASELINE_NAMES } from "./policies.js";
import { evalWithDriftGuard } from "./served-eval.js";

/** One workload family: a generator name or a file shipped in data/, and how many requests each part gets. */
export interface Family {
  name: string;
  /** a generator name, or a path relative to the package root */
  workload: string;
  /** requests in the training part and (as many) in the evaluation part */
  requests: number;
  /** what it stands for, for the docs */
  about: string;
}

// Request counts keep the whole matrix to a few minutes on 2 cores: the heavy families (long prompts) get fewer, the
// light ones more. At most 1,500 per part, because the saturated-load search probes with the first 1,500 requests
// (src/sim/saturation.ts): a larger evaluation part would run at a load found on a shorter one.
export const ROBUSTNESS_FAMILIES: readonly Family[] = [
  { name: "hybrid", workload: "hybrid", requests: 500, about: "the paper's mix: ArXiv, L-Eval, HumanEval thirds" },
  { name: "leval", workload: "leval", requests: 500, about: "long shared documents + questions (RAG-like)" },
  { name: "humaneval", workload: "humaneval", requests: 1500, about: "short code-completion prompts" },
  { name: "multiturn", workload: "multiturn", requests: 1000, about: "WildChat-like sessions, growing prefixes" },
  {
    name: "mooncake",
    workload: "data/traces/mooncake_conversation_dev.jsonl",
    requests: 500,
    about: "Mooncake conversation trace (dev)",
  },
  { name: "azure", workload: "data/traces/azure2023_conv.csv", requests: 1500, about: "Azure 2023 conversation trace" },
  {
    name: "sharegpt",
    workload: "data/lengths/lengths_sharegpt_8k_filtered_stats_llama2_tokenizer.csv",
    requests: 1500,
    about: "ShareGPT lengths, Poisson arrivals",
  },
  {
    name: "arxiv-sum",
    workload: "data/lengths/lengths_arxiv_summarization_stats_llama2_tokenizer_filtered_v2.csv",
    requests: 1500,
    about: "ArXiv summarization lengths, Poisson arrivals",
  },
  {
    name: "bwb",
    workload: "data/lengths/lengths_bwb_stats_llama2_tokenizer_filtered_v2.csv",
    requests: 1500,
    about: "BWB translation lengths, Poisson arrivals",
  },
];

/** The setting, used where the command line does not say otherwise. */
export const ROBUSTNESS_DEFAULTS = { cluster: "h100-8b", split: "2P2D", slo: "2000,50", k: 8 } as const;

/** The "must hold" targets for every train → eval pair. */
export const TARGETS = {
  /** attainment may trail the best baseline by at most this many points */
  attainmentPts: 0.5,
  /** P90 TTFT and P90 TPOT may exceed Dynamo's by at most this fraction */
  latency: 0.02,
} as const;

/** Each search's round budget (one round = one simulation of the training part), as the main job's guarded table. */
export const ROBUSTNESS_ROUNDS = 40;

/** The tables learned per family: the paper's pure one and the guarded one. */
export const TABLE_FORMS = ["pure", "guarded"] as const;
export type TableForm = (typeof TABLE_FORMS)[number];

/**
 * A cell's form: a table alone (pure, guarded), or "served": the guarded table routed as `dolphin serve` routes it,
 * through the drift guard and its mix-shift guard at their defaults (src/learn/served-eval.ts), which hand the learned
 * clusters to the rule when the traffic's make-up departs from the training's.
 */
export const CELL_FORMS = [...TABLE_FORMS, "served"] as const;
export type CellForm = (typeof CELL_FORMS)[number];

export interface RobustnessOptions extends Omit<JobOptions, "workload" | "format" | "load"> {
  /** family names to use (default: all of ROBUSTNESS_FAMILIES) */
  families?: string[];
  k?: number;
  maxRounds?: number;
}

/** What a study's cell says of dolphin against dynamo-isl and the best rule (the robustness study, the load sweep). */
export interface CellFigures {
  /** the evaluation's request rate */
  rps: number;
  requests: number;
  slo_attainment: number;
  ttft_p90_ms: number;
  tpot_p90_ms: number;
  dynamo_isl: { slo_attainment: number; ttft_p90_ms: number; tpot_p90_ms: number };
  /** dolphin's attainment minus the best baseline's, in points */
  attainment_vs_best_pts: number;
  /** dolphin's P90 over Dynamo's, minus 1 */
  ttft_vs_dynamo: number;
  tpot_vs_dynamo: number;
  meets: { attainment: boolean; ttft: boolean; tpot: boolean };
}

/** One train → eval cell of one table form (rps: the evaluation family's saturated load). */
export interface RobustnessCell extends CellFigures {
  study: "robustness";
  variant: string;
  table: CellForm;
  train: string;
  eval: string;
  best_baseline: { names: string[]; slo_attainment: number };
  /** share of dolphin's requests prefilled on their decode worker */
  local_fraction: number;
  /** guarded tables: how many evaluation requests a learned cluster, a rule cluster and the out-of-distribution
   *  bound decided (what `npm start` reports), to tell where a miss comes from */
  decided_by?: { cluster: number; ruleCluster: number; outOfDistribution: number };
  /** issue 24's latency reference (latencyReference) and the targets checked against it */
  latency_reference: LatencyReference;
  meets_ref: CellFigures["meets"];
  /** served cells: what the guards did over the run */
  guard?: { mix_alarms: number; handovers: number; handbacks: number; reverts: number; routed: Record<string, number> };
  [k: string]: unknown;
}

/** The families a name list selects, in the list's order; an unknown name is an error naming the known ones. */
export function selectFamilies(names?: string[]): Family[] {
  if (names === undefined) return [...ROBUSTNESS_FAMILIES];
  return names.map((n) => {
    const f = ROBUSTNESS_FAMILIES.find((x) => x.name === n);
    if (!f)
      throw new Error(
        `unknown workload family ${JSON.stringify(n)}; known: ${ROBUSTNESS_FAMILIES.map((x) => x.name).join(", ")}`,
      );
    return f;
  });
}

/** The job options that load a family as `dolphin train`/`eval` would (`requests` overrides the family's count). */
export function familyJob(f: Family, o: RobustnessOptions): JobOptions {
  const perPart = o.requests ?? f.requests;
  const generated = isGenerator(f.workload);
  return {
    ...o,
    workload: generated ? f.workload : packageFile(f.workload),
    format: "auto",
    load: undefined, // the family's own saturated load, found by `setup`, unless the caller passes one
    // a generator draws `requests` per part; a file is capped at `requests` in all, then split in two halves
    requests: generated ? perPart : 2 * perPart,
  };
}

/** a / b − 1: dolphin's figure relative to a rule's (∞ where the rule's is 0 and dolphin's is not). */
export const relativeTo = (a: number, b: number): number => (b > 0 ? a / b - 1 : a > 0 ? Infinity : 0);

/** Of the rules' outcomes: dynamo-isl's, the best attainment and every rule reaching it (`what` names the rules). */
export function bestOfRules(
  rules: Record<string, PolicyOutcome>,
  what: string,
): { dynamo: PolicyOutcome; best: number; names: string[] } {
  const dynamo = rules["dynamo-isl"];
  if (!dynamo) throw new Error(`${what} must include dynamo-isl`);
  const best = Math.max(...Object.values(rules).map((p) => p.slo_attainment));
  const names = Object.entries(rules)
    .filter(([, p]) => p.slo_attainment === best)
    .map(([n]) => n);
  return { dynamo, best, names };
}

/** The P90s a cell's latency targets are measured against under issue 24's reading (header comment). */
export interface LatencyReference {
  ttft_p90_ms: number;
  tpot_p90_ms: number;
  rule: string;
}

/**
 * Issue 24's latency reference: dynamo-isl's P90s, or, where another rule's attainment beats dynamo-isl's by more
 * than the attainment margin, the larger of dynamo-isl's and that best rule's (matching a load-reactive rule may cost
 * what that rule costs on the latency it trades, never more).
 */
export function latencyReference(
  rules: Record<string, PolicyOutcome>,
  what: string,
  of: ReturnType<typeof bestOfRules> = bestOfRules(rules, what),
): LatencyReference {
  const { dynamo: y, best, names } = of;
  const beats = 100 * (best - y.slo_attainment) > TARGETS.attainmentPts;
  const other = beats ? rules[names[0]!]! : y;
  return {
    ttft_p90_ms: Math.max(y.ttft_ms.p90, other.ttft_ms.p90),
    tpot_p90_ms: Math.max(y.tpot_ms.p90, other.tpot_ms.p90),
    rule: beats ? `max(dynamo-isl, ${names[0]})` : "dynamo-isl",
  };
}

/** Whether a ratio minus 1, rounded to the 0.1% the tables print, is within the latency target. */
export const withinLatency = (relative: number): boolean => Math.round(1000 * relative) / 1000 <= TARGETS.latency;

/** Dolphin's outcome on one evaluation family against its baselines, as a cell with the targets checked. */
export function compareCell(
  d: PolicyOutcome,
  baselines: Record<string, PolicyOutcome>,
  meta: { table: CellForm; train: string; eval: string; rps: number; requests: number },
): RobustnessCell {
  const rulesBest = bestOfRules(baselines, "robustness: the baselines");
  const { dynamo: y, best, names } = rulesBest;
  const vs = relativeTo;
  const attainmentPts = 100 * (d.slo_attainment - best);
  const ttft = vs(d.ttft_ms.p90, y.ttft_ms.p90);
  const tpot = vs(d.tpot_ms.p90, y.tpot_ms.p90);
  const ref = latencyReference(baselines, "robustness: the baselines", rulesBest);
  const attainment = Math.round(10 * attainmentPts) / 10 >= -TARGETS.attainmentPts;
  return {
    study: "robustness",
    variant: `${meta.table}: ${meta.train} → ${meta.eval}`,
    ...meta,
    slo_attainment: d.slo_attainment,
    ttft_p90_ms: d.ttft_ms.p90,
    tpot_p90_ms: d.tpot_ms.p90,
    dynamo_isl: { slo_attainment: y.slo_attainment, ttft_p90_ms: y.ttft_ms.p90, tpot_p90_ms: y.tpot_ms.p90 },
    best_baseline: { names, slo_attainment: best },
    attainment_vs_best_pts: attainmentPts,
    ttft_vs_dynamo: ttft,
    tpot_vs_dynamo: tpot,
    local_fraction: d.local_fraction,
    // rounded to the 0.1 point and 0.1% the matrix prints, so a cell marked as a miss reads as one
    meets: { attainment, ttft: withinLatency(ttft), tpot: withinLatency(tpot) },
    latency_reference: ref,
    meets_ref: {
      attainment,
      ttft: withinLatency(vs(d.ttft_ms.p90, ref.ttft_p90_ms)),
      tpot: withinLatency(vs(d.tpot_ms.p90, ref.tpot_p90_ms)),
    },
  };
}

/**
 * Runs the study: for each evaluation family its saturated load (once) and every baseline on its evaluation
 * arrivals (once); for each training family and table form a table learned at the training family's saturated load,
 * then evaluated on every family. Emits one cell at a time, training family by training family.
 */
export async function runRobustness(o: RobustnessOptions, emit: (cell: RobustnessCell) => void): Promise<void> {
  const families = selectFamilies(o.families);
  const quiet = { ...o, progress: undefined };
  const say = (line: string): void => o.progress?.(line, true);
  const evals = new Map<
    string,
    { load: string; scale: number; rps: number; requests: number; baselines: Record<string, PolicyOutcome> }
  >();
  for (const f of families) {
    const job = familyJob(f, quiet);
    say(`robustness: ${f.name}: finding its saturated load on ${o.cluster ?? "?"} ${o.split}…`);
    const s = setup(job);
    const load = `x${s.scale}`;
    const b = evalJob({ ...job, load, policies: [...BASELINE_NAMES] });
    evals.set(f.name, { load, scale: s.scale, rps: b.load.rps, requests: b.requests, baselines: b.policies });
    const top = Math.max(...Object.values(b.policies).map((p) => p.slo_attainment));
    say(
      `robustness: ${f.name}: ${s.parts.train.requests.length} + ${b.requests} requests, saturated at ${b.load.rps.toFixed(2)} req/s; ` +
        `dynamo-isl ${(100 * b.policies["dynamo-isl"]!.slo_attainment).toFixed(1)}%, best baseline ${(100 * top).toFixed(1)}%`,
    );
  }
  let done = 0;
  const total = families.length * families.length * CELL_FORMS.length;
  for (const t of families) {
    const trainAt = evals.get(t.name)!.load;
    for (const form of TABLE_FORMS) {
      say(`robustness: learning the ${form} table on ${t.name}…`);
      const trained = await trainJob({
        ...familyJob(t, o),
        load: trainAt,
        k: o.k ?? ROBUSTNESS_DEFAULTS.k,
        reward: form === "pure" ? "paper" : "both",
        maxRounds: o.maxRounds ?? ROBUSTNESS_ROUNDS,
      });
      for (const e of families) {
        const ev = evals.get(e.name)!;
        const d = evalDolphin(e, quiet, ev.load, trained.table);
        const meta = { train: t.name, eval: e.name, rps: ev.rps, requests: ev.requests };
        const cell = compareCell(d, ev.baselines, { table: form, ...meta });
        if (form === "guarded")
          cell.decided_by = guardCounts(
            trained.table,
            evalRecords({ ...familyJob(e, quiet), load: ev.load, table: trained.table }),
          );
        const out = [cell];
        if (form === "guarded") {
          const g = evalWithDriftGuard({ ...familyJob(e, quiet), load: ev.load }, trained.table, ev.scale);
          const served = compareCell(g.outcome, ev.baselines, { table: "served", ...meta });
          const r = g.report;
          served.guard = {
            mix_alarms: r.mixAlarms,
            handovers: r.handovers,
            handbacks: r.handbacks,
            reverts: r.reverts,
            routed: r.routed,
          };
          out.push(served);
        }
        for (const c of out) {
          done++;
          say(
            `robustness [${done}/${total}] ${c.variant}: ${signed(c.attainment_vs_best_pts, 1)} pt vs best, ` +
              `P90 TTFT ${signedPct(c.ttft_vs_dynamo)}, P90 TPOT ${signedPct(c.tpot_vs_dynamo)} vs dynamo-isl`,
          );
          emit(c);
        }
      }
    }
  }
}

/** Dolphin with a table on a family's evaluation arrivals at the given load: `dolphin eval`'s own path. */
function evalDolphin(f: Family, o: RobustnessOptions, load: string, table: Table): PolicyOutcome {
  return evalJob({ ...familyJob(f, o), load, policies: ["dolphin"], table }).policies["dolphin"]!;
}

// ---- the markdown writer ---------------------------------------------------------------------------------------

const signed = (x: number, digits: number): string =>
  !Number.isFinite(x) ? (x > 0 ? "+∞" : "–") : `${x >= 0 ? "+" : "−"}${Math.abs(x).toFixed(digits)}`;
const signedPct = (x: number): string => (!Number.isFinite(x) ? signed(x, 0) : `${signed(100 * x, 1)}%`);
const bold = (s: string, miss: boolean): string => (miss ? `**${s}**` : s);

/**
 * The matrices for docs/results.md: one per table form, a row per training family and a column per evaluation
 * family; each cell "attainment vs best baseline (pt) / P90 TTFT vs Dynamo / P90 TPOT vs Dynamo", a missed target in
 * bold. Then each form's misses counted.
 */
export function robustnessMarkdown(cells: RobustnessCell[]): string {
  const order = (key: "train" | "eval"): string[] => [...new Set(cells.map((c) => c[key]))];
  const trains = order("train");
  const evalsSeen = order("eval");
  const out: string[] = [];
  const firstOf = new Map(cells.map((c) => [c.eval, c] as const));
  out.push("| eval family | saturated load | requests | dynamo-isl att. | best baseline |", "|---|---|---|---|---|");
  for (const e of evalsSeen) {
    const c = firstOf.get(e)!;
    out.push(
      `| ${e} | ${c.rps.toFixed(2)} req/s | ${c.requests} | ${(100 * c.dynamo_isl.slo_attainment).toFixed(1)}% | ` +
        `${(100 * c.best_baseline.slo_attainment).toFixed(1)}% (${c.best_baseline.names.join(", ")}) |`,
    );
  }
  for (const form of CELL_FORMS) {
    const mine = cells.filter((c) => c.table === form);
    if (mine.length === 0) continue;
    out.push(
      "",
      `**${form}** table: attainment vs best baseline (pt) / P90 TTFT / P90 TPOT vs dynamo-isl; bold: a missed target`,
      "",
      `| train ↓ eval → | ${evalsSeen.join(" | ")} |`,
      `|---|${evalsSeen.map(() => "---").join("|")}|`,
    );
    for (const t of trains) {
      const row = evalsSeen.map((e) => {
        const c = mine.find((x) => x.train === t && x.eval === e);
        if (!c) return "–";
        return [
          bold(signed(c.attainment_vs_best_pts, 1), !c.meets.attainment),
          bold(signedPct(c.ttft_vs_dynamo), !c.meets.ttft),
          bold(signedPct(c.tpot_vs_dynamo), !c.meets.tpot),
        ].join(" / ");
      });
      out.push(`| **${t}** | ${row.join(" | ")} |`);
    }
    const miss = (k: keyof RobustnessCell["meets"]): number => mine.filter((c) => !c.meets[k]).length;
    const all = (m: RobustnessCell["meets"]): boolean => m.attainment && m.ttft && m.tpot;
    const clean = mine.filter((c) => all(c.meets)).length;
    const cleanRef = mine.filter((c) => all(c.meets_ref)).length;
    out.push(
      "",
      `${form}: ${clean} of ${mine.length} cells meet all three targets; attainment missed in ${miss("attainment")}, ` +
        `P90 TTFT in ${miss("ttft")}, P90 TPOT in ${miss("tpot")}. Against issue 24's latency reference (where a ` +
        `rule beats dynamo-isl by more than 0.5 point, the larger of its P90s and dynamo-isl's): ${cleanRef} of ${mine.length}.`,
    );
  }
  return out.join("\n");
}
