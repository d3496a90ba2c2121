// The fidelity study's simulated side (src/serve/vllm/fidelity.ts runs the real one): each workload fitted to the
// tiny model's context, its training and evaluation arrivals (disjoint), the saturated rate on the calibrated
// cluster, the policies' tables (the rules, and a table learned in the simulator), and a figure set of one run,
// real or simulated, computed the same way for both.

import { readFileSync } from "node:fs";
import { train } from "../../learn/train.js";
import { SimEnvironment } from "../../learn/sim-environment.js";
import { contextScale, fitToContext, type ContextFit } from "../../sim/context-fit.js";
import { meetsE2e, parseSlo, quantile, type Slo } from "../../sim/metrics.js";
import { resolveCluster } from "../../sim/run.js";
import { findSaturatedScale } from "../../sim/saturation.js";
import type { SimConfig } from "../../sim/sim-config.js";
import { parseSplit } from "../../sim/split.js";
import { simulate } from "../../sim/simulator.js";
import type { Workload } from "../../sim/types.js";
import { isGenerator, splitInTime, withLoad } from "../../sim/workload.js";
import { loadWorkload } from "../../sim/workload-files.js";
import { ruleTableFor } from "../../sim/rule-table.js";
import { FEATURE_NAMES, type Table } from "../../table/table.js";
import { ENGINE_CONTEXT } from "./engines.js";

export const FIDELITY_SPLIT = "1P1D";
export const RULE_POLICIES = ["always-local", "always-remote", "dynamo-isl"] as const;
/** The learned table's name in the study's rows. */
export const LEARNED = "learned (sim)";
export type FidelityPolicy = (typeof RULE_POLICIES)[number] | typeof LEARNED;

export interface PlanOptions {
  /** a cluster file (a calibrated one: src/cli/calibrate.ts) and its link (default the file's `<name>-nixl`) */
  cluster: string;
  link?: string;
  slo: string;
  /** requests per evaluation run */
  requests: number;
  /** requests the table is learned on (a draw or a part disjoint from the evaluation's) */
  trainRequests: number;
  maxOutputTokens: number;
  seed: number;
  /** multiples of the saturated rate the runs are at */
  rates: number[];
  policies: FidelityPolicy[];
  maxRounds: number;
  module?: WebAssembly.Module;
  progress?: (line: string) => void;
}

/** One workload's plan: its arrivals (fitted to the context) and the simulator's saturated rate. */
export interface WorkloadPlan {
  name: string;
  /** the prompts' scale factor (contextScale) */
  promptScale: number;
  /** the training arrivals (the learned table's; disjoint from the evaluation's) */
  train: Workload;
  /** the training arrivals' first `requests`: the saturation probes' */
  probe: Workload;
  /** the evaluation's arrivals, at their own rate (each run rescales them) */
  evaluation: Workload;
  saturatedRps: number;
  /** (scale, attainment) probes of the saturation search, dynamo-isl on the calibrated simulator */
  probes: [number, number][];
}

export interface LearnedTable {
  table: Table;
  rounds: number;
  trainReward: number;
  bits: string;
  rps: number;
}

/** The study's cluster: the calibrated preset, its measured link, 1P1D, the SLO. */
export function fidelityBase(o: Pick<PlanOptions, "cluster" | "link" | "slo" | "module">): Omit<SimConfig, "table"> {
  const link = o.link ?? linkOf(o.cluster);
  const { preset, link: l } = resolveCluster(o.cluster, link);
  return {
    preset,
    link: l,
    split: parseSplit(FIDELITY_SPLIT),
    slo: parseSlo(o.slo),
    ...(o.module ? { module: o.module } : {}),
  };
}

/** A calibrated file's own link (`<preset>-nixl`), when it has one. */
function linkOf(cluster: string): string | undefined {
  try {
    const { links } = JSON.parse(readFileSync(cluster, "utf8")) as { links?: Record<string, unknown> };
    return Object.keys(links ?? {}).find((n) => n.endsWith("-nixl"));
  } catch {
    return undefined;
  }
}

/**
 * Training and evaluation arrivals that share no request: a generator drawn at seed s (training) and s + 1
 * (evaluation); a trace split in time (the first half trains, the evaluation is the start of the second half).
 */
function parts(workload: string, o: PlanOptions): { train: Workload; eval: Workload } {
  if (isGenerator(workload))
    return {
      train: loadWorkload(workload, "auto", { seed: o.seed, requests: o.trainRequests }),
      eval: loadWorkload(workload, "auto", { seed: o.seed + 1, requests: o.requests }),
    };
  const halves = splitInTime(loadWorkload(workload, "auto", { seed: o.seed }));
  const head = (w: Workload, n: number): Workload => ({ ...w, requests: w.requests.slice(0, n) });
  return { train: head(halves.train, o.trainRequests), eval: head(halves.eval, o.requests) };
}

/** The plan of one workload on the calibrated cluster. */
export function planWorkload(workload: string, o: PlanOptions, base: Omit<SimConfig, "table">): WorkloadPlan {
  const fit: ContextFit = { contextTokens: ENGINE_CONTEXT, maxOutputTokens: o.maxOutputTokens };
  const raw = parts(workload, o);
  const f = contextScale([raw.train, raw.eval], fit);
  const train = fitToContext(raw.train, f, fit);
  const evaluation = fitToContext(raw.eval, f, fit);
  // the saturated rate of runs as long as the evaluation's: the training arrivals' first `requests`
  const probe = { ...train, requests: train.requests.slice(0, o.requests) };
  const sat = findSaturatedScale(probe, base);
  const saturatedRps = probe.rate * sat.scale;
  o.progress?.(
    `${evaluation.name}: saturated at ${saturatedRps.toFixed(2)} req/s on the calibrated simulator (dynamo-isl, ${o.requests} requests)`,
  );
  return { name: evaluation.name, promptScale: f, train, probe, evaluation, saturatedRps, probes: sat.probes };
}

/** The rules' tables, on the calibrated preset. */
export const ruleTables = (base: Omit<SimConfig, "table">): Map<FidelityPolicy, Table> =>
  new Map(RULE_POLICIES.map((p) => [p, ruleTableFor(p, base.preset)]));

/**
 * A table learned in the simulator (the paper's search, K = 8) on the training arrivals at `rps`. Without osl_hat:
 * the proxy has no output-length model for live traffic (src/serve/tune.ts).
 */
export async function learnTable(
  plan: WorkloadPlan,
  rps: number,
  o: PlanOptions,
  base: Omit<SimConfig, "table">,
): Promise<LearnedTable> {
  const env = new SimEnvironment(withLoad(plan.train, { kind: "rate", rps }), base);
  const r = await train(env, {
    k: 8,
    seed: o.seed,
    maxRounds: o.maxRounds,
    features: FEATURE_NAMES.filter((x) => x !== "osl_hat"),
  });
  const bits = r.table.bits!.join("");
  o.progress?.(
    `  learned a table in the simulator at ${rps.toFixed(2)} req/s: bits ${bits}, ${r.rounds} rounds, training attainment ${(100 * r.bestReward).toFixed(1)}%`,
  );
  return { table: r.table, rounds: r.rounds, trainReward: r.bestReward, bits, rps };
}

/** One request of a run, real or simulated: what the figures are computed from. */
export interface RunRequest {
  ttftMs: number;
  tpotMs: number;
  e2eMs: number;
  outputTokens: number;
  failed: boolean;
  path: "local" | "remote" | null;
}

/** A run's figures: SLO attainment (end to end) and the P50/P90 of TTFT and TPOT over answered requests. */
export interface Figures {
  attainment: number;
  ttftP50: number;
  ttftP90: number;
  tpotP50: number;
  tpotP90: number;
  localFraction: number;
  failed: number;
}

export const FIGURE_KEYS = ["attainment", "ttftP50", "ttftP90", "tpotP50", "tpotP90"] as const;

export function figuresOf(requests: RunRequest[], slo: Slo): Figures {
  const done = requests.filter((r) => !r.failed);
  const sorted = (xs: number[]) => xs.sort((a, b) => a - b);
  const ttft = sorted(done.map((r) => r.ttftMs));
  const tpot = sorted(done.filter((r) => r.outputTokens > 1).map((r) => r.tpotMs));
  const met = requests.filter((r) => meetsE2e({ ...r } as Parameters<typeof meetsE2e>[0], slo)).length;
  return {
    attainment: requests.length ? met / requests.length : 0,
    ttftP50: quantile(ttft, 0.5),
    ttftP90: quantile(ttft, 0.9),
    tpotP50: quantile(tpot, 0.5),
    tpotP90: quantile(tpot, 0.9),
    localFraction: done.length ? done.filter((r) => r.path === "local").length / done.length : 0,
    failed: requests.length - done.length,
  };
}

/** The simulated run of a policy's table on a run's arrivals. */
export function simulatedRun(arrivals: Workload, table: Table, base: Omit<SimConfig, "table">): RunRequest[] {
  return simulate(arrivals, { ...base, table }).records.map((r) => ({
    ttftMs: r.ttftMs,
    tpotMs: r.tpotMs,
    e2eMs: r.e2eMs,
    outputTokens: r.outputTokens,
    failed: r.failed,
    path: r.path,
  }));
}
