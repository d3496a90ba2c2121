// The learner's jobs as the CLI runs them: train a table, evaluate every policy on the same arrivals, and the main
// job (`npm start`). Training and evaluation never see the same requests: a generator is drawn with seed s for
// training and s + 1 for evaluation; a trace file is split in time, the first half to train, the second to evaluate.

import type { RewardForm } from "./guard.js";
import { parseSlo, type RequestRecord } from "../sim/metrics.js";
import { resolveCluster } from "../sim/run.js";
import { atScale, scaleForLoad, type Saturation } from "../sim/saturation.js";
import { parseSplit } from "../sim/split.js";
import { simulate } from "../sim/simulator.js";
import type { SimConfig, SimResult } from "../sim/sim-config.js";
import type { Workload } from "../sim/types.js";
import { GENERATORS, parseLoad, splitInTime, type Load, type WorkloadFormat } from "../sim/workload.js";
import { loadWorkload } from "../sim/workload-files.js";
import { encodeTable } from "../table/codec.js";
import type { FeatureName, Table } from "../table/table.js";
import { ruleTableFor } from "../sim/rule-table.js";
import { buildPpdTable, evaluatePolicies, POLICY_NAMES, type PolicyName } from "./policies.js";
import type { EvalLoad, EvalOutput } from "../report/eval-output.js";
import { noisyOslPredictor } from "./osl.js";
import { SimEnvironment } from "./sim-environment.js";
import { guardRules } from "./load-bounds.js";
import { withRateProfile, type LoadProfile } from "../sim/rate-profile.js";
import { train, type TrainResult } from "./train.js";
import type { GuardTraining, OslMode } from "./train-options.js";

export interface JobOptions {
  workload: string;
  format?: WorkloadFormat;
  cluster?: string;
  link?: string;
  split: string;
  slo: string;
  seed?: number;
  /** requests per part (generators) or a cap on the trace */
  requests?: number;
  load?: string;
  module?: WebAssembly.Module;
  /** the load scale when the caller already found it (`load` still names how: the main job finds it once a split) */
  scale?: number;
  /** progress lines (to stderr) */
  progress?: (line: string, done: boolean) => void;
}

export interface Parts {
  train: Workload;
  eval: Workload;
}

/**
 * A generated workload, drawn once per (generator, seed, count) among the last few asked for: a job asks for the
 * same draws many times (its training, evaluation and held-out parts, per split), and the simulator reuses what it
 * derived from the same requests (their block ids). Workloads are never changed after they are made.
 */
function generated(name: string, seed: number, requests: number): Workload {
  const key = `${name}\0${seed}\0${requests}`;
  let w = drawn.get(key);
  if (w)
    drawn.delete(key); // re-entered below as the most recent
  else w = loadWorkload(name, "auto", { seed, requests });
  drawn.set(key, w);
  if (drawn.size > DRAWS_KEPT) drawn.delete(drawn.keys().next().value!);
  return w;
}
const drawn = new Map<string, Workload>();
/** the main job uses three draws (training, evaluation, held-out); a few more for other jobs in one process */
const DRAWS_KEPT = 8;

/** A workload at a load scale, the same object for the same workload and scale (see `generated`). */
export function scaledShared(w: Workload, scale: number): Workload {
  let byScale = scaledCopies.get(w);
  if (!byScale) scaledCopies.set(w, (byScale = new Map()));
  let scaled = byScale.get(scale);
  if (!scaled) byScale.set(scale, (scaled = atScale(w, scale)));
  return scaled;
}
const scaledCopies = new WeakMap<Workload, Map<number, Workload>>();

/** A workload under a load profile, the same object for the same workload and profile (see `scaledShared`). */
export function profiledShared(w: Workload, profile: LoadProfile): Workload {
  if (profile === "flat") return w;
  let byProfile = profiledCopies.get(w);
  if (!byProfile) profiledCopies.set(w, (byProfile = new Map()));
  let p = byProfile.get(profile);
  if (!p) byProfile.set(profile, (p = withRateProfile(w, profile)));
  return p;
}
const profiledCopies = new WeakMap<Workload, Map<LoadProfile, Workload>>();

/** The job's workload is a generator (its parts drawn per seed), not a file. */
export const isGenerated = (o: Pick<JobOptions, "workload" | "format">): boolean =>
  (GENERATORS as readonly string[]).includes(o.workload) && (o.format ?? "auto") === "auto";

/** Training and evaluation workloads that share no request. */
export function workloadParts(o: Pick<JobOptions, "workload" | "format" | "seed" | "requests">): Parts {
  const seed = o.seed ?? 1;
  if (isGenerated(o)) {
    const n = o.requests ?? 2000;
    const name = o.workload;
    return {
      train: generated(name, seed, n),
      // drawn when first read: `dolphin train` never reads it
      get eval() {
        return generated(name, seed + 1, n);
      },
    };
  }
  const all = loadWorkload(o.workload, o.format ?? "auto", {
    seed,
    ...(o.requests !== undefined ? { requests: o.requests } : {}),
  });
  return splitInTime(all);
}

export interface Setup {
  base: Omit<SimConfig, "table">;
  parts: Parts;
  /** load scale applied to both parts, relative to the training part's rate */
  scale: number;
  loadSpec: string;
}

/** The simulated cluster, the training and evaluation parts, and the load scale (found once when saturated). */
export function setup(o: JobOptions): Setup {
  const { base, parts, loadSpec, load } = setupParts(o);
  if (o.scale !== undefined) return { base, parts, scale: o.scale, loadSpec };
  return { base, parts, scale: scaleForLoad(load, parts.train, base), loadSpec };
}

/** How a job finds the saturated load elsewhere (src/learn/pool.ts: its probes on worker threads). */
export type SaturationFinder = (w: Workload, base: Omit<SimConfig, "table">) => Promise<Saturation>;

/** `setup`, with the saturated load found by `find` when given (the same scale as in this thread). */
async function setupWith(o: JobOptions, find: SaturationFinder | undefined): Promise<Setup> {
  const { base, parts, loadSpec, load } = setupParts(o);
  if (o.scale !== undefined) return { base, parts, scale: o.scale, loadSpec };
  if (load.kind !== "saturated" || !find)
    return { base, parts, scale: scaleForLoad(load, parts.train, base), loadSpec };
  return { base, parts, scale: (await find(parts.train, base)).scale, loadSpec };
}

/** Everything of `setup` but the scale: the cluster, the parts and the load asked for. */
function setupParts(o: JobOptions): Omit<Setup, "scale"> & { load: Load } {
  const { preset, link } = resolveCluster(o.cluster, o.link);
  const base: Omit<SimConfig, "table"> = {
    preset,
    link,
    split: parseSplit(o.split),
    slo: parseSlo(o.slo),
    ...(o.module ? { module: o.module } : {}),
  };
  const parts = workloadParts(o);
  const loadSpec = o.load ?? "saturated";
  const load = parseLoad(loadSpec);
  if (o.scale === undefined && load.kind === "saturated")
    o.progress?.(`finding the saturated load of ${parts.train.name} on ${preset.name} ${o.split}…`, false);
  return { base, parts, loadSpec, load };
}

/** The guarded search's load profile when none is given (chosen by measurement: docs/learning.md, "Load"). */
export const DEFAULT_LOAD_PROFILE: LoadProfile = "ramp";
/** Which of the guarded search's arrivals follow the load profile (docs/learning.md, "Load"). */
export type ProfileOn = "held-out" | "both";
export const PROFILE_ON: readonly ProfileOn[] = ["held-out", "both"];

export interface TrainJobOptions extends JobOptions {
  k?: number;
  algo?: "kmeans" | "gmm";
  osl?: OslMode;
  features?: FeatureName[];
  scanInit?: boolean;
  /** "both": the guarded search (src/learn/guard.ts); "paper": the paper's unguarded search for attainment alone */
  reward?: RewardForm;
  /**
   * How the guarded search's re-check arrivals load the cluster: `flat` at the job's load, `ramp` or `steps` 0.5× to
   * 2× of it within the run (src/sim/rate-profile.ts). Default DEFAULT_LOAD_PROFILE. Reward "paper" trains at the
   * job's load.
   */
  loadProfile?: LoadProfile;
  /** "held-out" (default): the search's own arrivals stay at the job's load, the held-out ones follow the profile;
   *  "both": the search's arrivals follow it too */
  loadProfileOn?: ProfileOn;
  /** the guarded search's settings (reward "both"); `holdOut: false` drops the held-out replication check */
  guard?: Omit<GuardTraining, "heldOut" | "reward" | "maxRounds" | "onProgress"> & { holdOut?: boolean };
  maxRounds?: number;
  /** where candidate tables are evaluated (src/learn/pool.ts: on worker threads); default SimEnvironment, in turn */
  environment?: (workload: Workload, base: Omit<SimConfig, "table">) => SimEnvironment;
  /** where the saturated load's probes run (src/learn/pool.ts); default in this thread, in turn */
  findSaturation?: SaturationFinder;
}

export interface TrainJobResult {
  table: Table;
  bytes: Uint8Array;
  result: TrainResult;
  scale: number;
  rps: number;
  wallS: number;
}

/**
 * The guarded search's arrivals: where it searches and where it re-checks each move (src/learn/guard.ts), both
 * disjoint from the evaluation part. A generator: the training draw (seed s) and another draw at seed s + 2 (s + 1
 * evaluates). A trace: its training half split in time again, the first quarter to search, the second to re-check.
 */
export function guardParts(o: Pick<JobOptions, "workload" | "format" | "seed" | "requests">, parts: Parts): Parts {
  const seed = o.seed ?? 1;
  if (isGenerated(o)) return { train: parts.train, eval: generated(o.workload, seed + 2, o.requests ?? 2000) };
  return splitInTime(parts.train);
}

const withoutHoldOut = (g: TrainJobOptions["guard"]): Omit<GuardTraining, "heldOut"> => {
  const { holdOut: _, ...rest } = g ?? {};
  return rest;
};

export async function trainJob(o: TrainJobOptions): Promise<TrainJobResult> {
  const t0 = performance.now();
  const guarded = o.reward === "both";
  const holdOut = guarded && (o.guard?.holdOut ?? true);
  const found = setupWith(o, o.findSaturation);
  // while the saturated load's probes run elsewhere (a pool), this thread draws a generator's held-out arrivals
  // (kept among the recent draws, so guardParts below finds them drawn; a trace's come from the loaded parts)
  if (holdOut && isGenerated(o)) guardParts(o, workloadParts(o));
  const s = await found;
  const searchParts = holdOut ? guardParts(o, s.parts) : null;
  const profile = guarded ? (o.loadProfile ?? DEFAULT_LOAD_PROFILE) : "flat";
  const arrivals = (part: Workload): Workload => profiledShared(scaledShared(part, s.scale), profile);
  const onBoth = (o.loadProfileOn ?? "held-out") === "both";
  const searchPart = searchParts?.train ?? s.parts.train;
  const w = onBoth ? arrivals(searchPart) : scaledShared(searchPart, s.scale);
  const rps = scaledShared(searchPart, s.scale).rate;
  const environment = o.environment ?? ((w: Workload, base: Omit<SimConfig, "table">) => new SimEnvironment(w, base));
  const env = environment(w, s.base);
  o.progress?.(
    `learning a ${o.algo ?? "kmeans"} table, K = ${o.k ?? 8}, on ${w.name} at ${w.rate.toFixed(2)} req/s…`,
    false,
  );
  const result = await train(env, {
    k: o.k ?? 8,
    algo: o.algo ?? "kmeans",
    seed: o.seed ?? 1,
    ...(o.osl !== undefined ? { osl: o.osl } : {}),
    ...(o.features ? { features: o.features } : {}),
    ...(o.scanInit !== undefined ? { scanInit: o.scanInit } : {}),
    ...(guarded
      ? {
          guard: {
            // Dynamo's isl_or_load decides first, the other rules are fallback candidates, unless the caller names its own
            ...guardRules(s.base.preset),
            ...withoutHoldOut(o.guard),
            reward: "both" as const,
            ...(searchParts ? { heldOut: environment(arrivals(searchParts.eval), s.base) } : {}),
          },
        }
      : {}),
    ...(o.maxRounds !== undefined ? { maxRounds: o.maxRounds } : {}),
    provenance: {
      workload: `${s.parts.train.name} at ${rps.toFixed(3)} req/s (${s.loadSpec}${profile === "flat" ? "" : `; ${onBoth ? "search and re-check" : "re-check"} ${profile} 0.5–2×`})`,
      split: o.split,
    },
    onProgress: (step, total) =>
      o.progress?.(
        `  round ${String(step.round).padStart(3)} ${step.phase.padEnd(6)} bits ${step.bits.join("")} reward ${(100 * step.reward).toFixed(1)}% (best ${(100 * total.best).toFixed(1)}%)`,
        false,
      ),
  });
  const bytes = encodeTable(result.table);
  o.progress?.(
    `  done: ${result.rounds} rounds, best reward ${(100 * result.bestReward).toFixed(1)}% first reached in round ${result.bestRound}`,
    true,
  );
  return { table: result.table, bytes, result, scale: s.scale, rps, wallS: (performance.now() - t0) / 1000 };
}

/** One table's run on the evaluation arrivals: its records (what `guardCounts` reads) and its summary. */
export function evalRun(o: JobOptions & { table: Table; load: string }): SimResult {
  const s = setup(o);
  return simulate(scaledShared(s.parts.eval, s.scale), { ...s.base, table: o.table });
}

/** Every request's record of one table on the evaluation arrivals (what `guardCounts` reads). */
export function evalRecords(o: JobOptions & { table: Table; load: string }): RequestRecord[] {
  return evalRun(o).records;
}

export interface EvalJobOptions extends JobOptions {
  policies?: PolicyName[];
  /** the learned table (required when policies include dolphin) */
  table?: Table;
  /** how dolphin's router learns output lengths (default: the table's model, or the oracle class without one) */
  osl?: OslMode;
}

export function evalJob(
  o: EvalJobOptions,
): EvalOutput<EvalLoad> & { ppd?: { measured_levels: number[]; samples: number } } {
  const s = setup(o);
  const policies = o.policies ?? [...POLICY_NAMES];
  const tables: Partial<Record<PolicyName, Table>> = {};
  let ppdInfo: { measured_levels: number[]; samples: number } | undefined;
  for (const p of policies) {
    if (p === "dolphin") {
      if (!o.table) throw new Error("eval: policy dolphin needs a table");
      tables.dolphin = o.table;
    } else if (p === "ppd") {
      o.progress?.("building PPD's offline table (Algorithm 1) on the training part…", false);
      const b = buildPpdTable(scaledShared(s.parts.train, s.scale), s.base);
      tables.ppd = b.table;
      ppdInfo = { measured_levels: b.measuredLevels, samples: b.samples };
    } else tables[p] = ruleTableFor(p, s.base.preset);
  }
  const w = scaledShared(s.parts.eval, s.scale);
  o.progress?.(`evaluating ${policies.length} policies on ${w.name} at ${w.rate.toFixed(2)} req/s…`, true);
  const classes = o.table?.osl_classes;
  const noisy =
    o.osl !== undefined && typeof o.osl === "object" && classes
      ? noisyOslPredictor(classes, o.osl.noisy, (o.seed ?? 1) + 1)
      : undefined;
  const out = evaluatePolicies(
    w,
    s.base,
    tables,
    { split: o.split, load: { spec: s.loadSpec, scale: s.scale, rps: w.rate } },
    noisy ? { dolphin: { osl: noisy } } : {},
  );
  return { ...out, ...(ppdInfo ? { ppd: ppdInfo } : {}) };
}
