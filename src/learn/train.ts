// The learner (seeds 000/001): log the four features of a training run, learn the output-length classifier,
// cluster the standardized log1p features (k-means or a Gaussian mixture), then search one bit per cluster from SLO
// feedback: per-cluster scanning (cluster k local, then remote, the others fixed; keep the better for cluster k),
// then epsilon-greedy refinement of the whole table until it stops improving. Every candidate table is evaluated on
// the same arrivals (common random numbers: the simulator is deterministic), so noise does not decide.
// The search talks to an Environment; the simulator is the first one, a live cluster can be another.

import { Rng } from "../sim/rng.js";
import { attainmentByCluster, meetsE2e, type RequestRecord, type Slo } from "../sim/metrics.js";
import { classOf, simulate, type OslPredictor, type SimConfig } from "../sim/simulator.js";
import type { SimRequest, Workload } from "../sim/types.js";
import { FEATURE_NAMES, ruleTable, validateTable, type FeatureName, type Table } from "../table.js";
import { fitGmm, fitKMeans, fitScaler, standardize } from "./cluster.js";
import { noisyOslPredictor, predictOslClass, trainOslClassifier, type OslSample, type OslTraining } from "./osl.js";

/** Where the search gets its reward: run a candidate table, report per-cluster SLO attainment. */
export interface Environment {
  evaluate(table: Table): Evaluation;
  readonly evaluations: number;
}

export interface Evaluation {
  /** SLO attainment (end to end) over all requests: the search's reward */
  reward: number;
  /** per cluster: requests and how many met the SLO */
  byCluster: Map<number, { requests: number; met: number }>;
  records: RequestRecord[];
}

/** The simulated cluster as the environment: one fixed workload (the same arrivals for every table). */
export class SimEnvironment implements Environment {
  evaluations = 0;
  constructor(
    readonly workload: Workload,
    readonly base: Omit<SimConfig, "table">,
  ) {}

  evaluate(table: Table): Evaluation {
    this.evaluations++;
    const r = simulate(this.workload, { ...this.base, table });
    return { reward: r.summary.slo_attainment, byCluster: attainmentByCluster(r.records, this.base.slo), records: r.records };
  }
}

export type OslMode = "model" | "oracle" | { noisy: number };

export interface TrainOptions {
  k?: number;
  algo?: "kmeans" | "gmm";
  seed?: number;
  /** features to cluster on; default all four (drop osl_hat for the ablation) */
  features?: FeatureName[];
  /** per-cluster scanning before the refinement (the paper's scan initialization) */
  scanInit?: boolean;
  epsilon?: number;
  /** refinement stops after this many rounds without improvement */
  patience?: number;
  maxRounds?: number;
  osl?: OslMode;
  /** what the table says about itself */
  provenance?: { workload: string; split?: string; notes?: string };
  onProgress?: (step: SearchStep, total: { rounds: number; best: number }) => void;
}

export interface SearchStep {
  round: number;
  phase: "init" | "scan" | "refine";
  bits: number[];
  reward: number;
  accepted: boolean;
}

export interface TrainResult {
  table: Table;
  log: SearchStep[];
  rounds: number;
  bestReward: number;
  /** the round at which the best table was first evaluated */
  bestRound: number;
  osl: OslTraining | null;
  clusterSizes: number[];
  featureRun: { policy: string; requests: number };
}

const PLACEHOLDER_CHECKSUM = "xxh64:0000000000000000";

/** The session's previous output for each request (a feature of the output-length classifier). */
function previousOutputs(requests: SimRequest[]): Map<number, number> {
  const last = new Map<number, number>();
  const out = new Map<number, number>();
  for (const r of requests) {
    if (r.session === undefined) continue;
    const prev = last.get(r.session);
    if (prev !== undefined) out.set(r.id, prev);
    last.set(r.session, r.outputTokens);
  }
  return out;
}

/** Everything before the search: features, classifier, clusters, the table maker and the initial bits. */
export interface Prepared {
  makeTable: (bits: number[]) => Table;
  initial: number[];
  /** the environment the search runs in (with the output-length predictor of the chosen mode) */
  env: Environment;
  osl: OslTraining;
  clusterSizes: number[];
  loggedRequests: number;
}

/** Logs the features of a run under Dynamo's rule, learns the classifier and the clusters. */
export function prepare(env: SimEnvironment, opts: TrainOptions = {}): Prepared {
  const k = opts.k ?? 8;
  const seed = opts.seed ?? 1;
  const features = opts.features ?? [...FEATURE_NAMES];
  const oslMode = opts.osl ?? "model";

  // 1. features as the core computes them, from a run under the rule people use today
  const logged = simulate(env.workload, { ...env.base, table: ruleTable("dynamo-isl"), osl: "oracle" }).records.filter((r) => !r.failed);
  const prev = previousOutputs(env.workload.requests);
  const samples: OslSample[] = logged.map((r) => ({
    isl: r.features.isl, reuse: r.prefixReuse, turn: r.turn, prevOutput: prev.get(r.id) ?? 0, maxTokens: 0, outputTokens: r.outputTokens,
  }));

  // 2. the output-length classifier
  const osl = trainOslClassifier(samples, { seed });
  const oslHat = (i: number): number => {
    const s = samples[i]!;
    if (oslMode === "model") return osl.classes.representative[predictOslClass(osl.model, s)]!;
    return osl.classes.representative[classOf(s.outputTokens, osl.classes.thresholds)]!; // oracle, and noisy(p)'s view on average
  };
  const rows = logged.map((r, i) => {
    const all: Record<FeatureName, number> = { isl: r.features.isl, eff_P: r.features.effP, eff_D: r.features.effD, osl_hat: oslHat(i) };
    return features.map((f) => all[f]);
  });

  // 3. clusters
  const scaler = fitScaler(rows);
  const z = standardize(rows, scaler);
  const algo = opts.algo ?? "kmeans";
  const model = algo === "kmeans" ? fitKMeans(z, k, { seed }) : fitGmm(z, k, { seed });
  const assignments = model.assignments;
  const clusterSizes = new Array<number>(k).fill(0);
  for (const a of assignments) clusterSizes[a]!++;
  // initial bits: what Dynamo did to most of each cluster's requests
  const remoteVotes = new Array<number>(k).fill(0);
  logged.forEach((r, i) => {
    if (r.path === "remote") remoteVotes[assignments[i]!]!++;
  });
  const initial = clusterSizes.map((n, c) => (remoteVotes[c]! * 2 >= n ? 1 : 0));

  const makeTable = (bits: number[]): Table =>
    validateTable({
      format: "dolphin-routing.table", version: 1, kind: algo, features, scaler,
      centroids: model.kind === "kmeans" ? model.centroids : model.means,
      ...(model.kind === "gmm" ? { variances: model.variances, weights: model.weights } : {}),
      bits,
      osl_classes: osl.classes,
      ...(oslMode === "model" ? { osl_model: osl.model } : {}),
      ...(opts.provenance?.split ? { split: opts.provenance.split } : {}),
      slo: { ttft_ms: env.base.slo.ttftMs, tpot_ms: env.base.slo.tpotMs },
      provenance: {
        tool: "dolphin-routing train", created: new Date().toISOString(), workload: opts.provenance?.workload ?? env.workload.name, seed,
        notes: opts.provenance?.notes ?? `${algo} K=${k} over ${features.join(", ")}; osl ${typeof oslMode === "string" ? oslMode : `noisy(${oslMode.noisy})`}`,
      },
      checksum: PLACEHOLDER_CHECKSUM,
    });

  // the environment sees the predictor this mode stands for
  const envFor = oslMode === "model" ? env : new SimEnvironment(env.workload, { ...env.base, osl: predictorFor(oslMode, osl, seed) });

  return { makeTable, initial, env: envFor, osl, clusterSizes, loggedRequests: logged.length };
}

/** Learns a routing table for `env`'s workload. */
export function train(env: SimEnvironment, opts: TrainOptions = {}): TrainResult {
  const p = prepare(env, opts);
  const search = searchBits(p.env, p.makeTable, p.initial, { ...opts, seed: opts.seed ?? 1 });
  return {
    table: p.makeTable(search.best),
    log: search.log,
    rounds: search.log.length,
    bestReward: search.bestReward,
    bestRound: search.bestRound,
    osl: p.osl,
    clusterSizes: p.clusterSizes,
    featureRun: { policy: "dynamo-isl", requests: p.loggedRequests },
  };
}

function predictorFor(mode: OslMode, osl: OslTraining, seed: number): OslPredictor {
  if (mode === "model") return "model";
  if (mode === "oracle") return "oracle";
  return noisyOslPredictor(osl.classes, mode.noisy, seed);
}

export interface SearchResult {
  best: number[];
  bestReward: number;
  bestRound: number;
  log: SearchStep[];
}

/** Scan, then epsilon-greedy refinement; each evaluation is one round. Memoized by bit string. */
export function searchBits(
  env: Environment, makeTable: (bits: number[]) => Table, initial: number[],
  opts: Pick<TrainOptions, "scanInit" | "epsilon" | "patience" | "maxRounds" | "seed" | "onProgress"> = {},
): SearchResult {
  const k = initial.length;
  const rng = new Rng(opts.seed ?? 1, 3);
  const memo = new Map<string, Evaluation>();
  const log: SearchStep[] = [];
  let best = [...initial];
  let bestEval: Evaluation;
  let bestRound = 0;
  const maxRounds = opts.maxRounds ?? 80;
  const evaluate = (bits: number[], phase: SearchStep["phase"]): Evaluation => {
    const key = bits.join("");
    let e = memo.get(key);
    if (!e) {
      e = env.evaluate(makeTable(bits));
      memo.set(key, e);
      const step: SearchStep = { round: log.length + 1, phase, bits: [...bits], reward: e.reward, accepted: false };
      log.push(step);
      opts.onProgress?.(step, { rounds: log.length, best: Math.max(e.reward, bestEval?.reward ?? 0) });
    }
    return e;
  };
  const accept = (bits: number[], e: Evaluation): void => {
    best = [...bits];
    bestEval = e;
    bestRound = log.findIndex((s) => s.bits.join("") === bits.join("")) + 1;
    const step = log[bestRound - 1];
    if (step) step.accepted = true;
  };
  bestEval = evaluate(best, "init");
  accept(best, bestEval);
  const clusterScore = (e: Evaluation, c: number): number => {
    const s = e.byCluster.get(c);
    return s && s.requests > 0 ? s.met / s.requests : 0;
  };

  // per-cluster scanning: cluster c local, then remote, the others fixed; keep the better for cluster c
  if (opts.scanInit ?? true) {
    for (let c = 0; c < k && log.length < maxRounds; c++) {
      const local = [...best];
      local[c] = 0;
      const remote = [...best];
      remote[c] = 1;
      const eL = evaluate(local, "scan");
      const eR = evaluate(remote, "scan");
      const sL = clusterScore(eL, c);
      const sR = clusterScore(eR, c);
      const pick = sL > sR || (sL === sR && eL.reward >= eR.reward) ? local : remote;
      accept(pick, pick === local ? eL : eR);
    }
  }

  // The scan keeps what is better for each cluster, which need not be better overall (clusters share workers and
  // caches); refinement starts from the best table evaluated so far.
  const bestSeen = (): number[] => {
    let top = log[0]!;
    for (const step of log) if (step.reward > top.reward) top = step;
    return top.bits;
  };
  {
    const b = bestSeen();
    accept(b, memo.get(b.join(""))!);
  }
  // epsilon-greedy refinement of the whole table: flip one bit (greedily the cluster doing worst, or at random with
  // probability epsilon); keep the flip if the overall reward improves; stop when no single flip improves any more
  const epsilon = opts.epsilon ?? 0.2;
  const patience = opts.patience ?? 2 * k;
  let stale = 0;
  while (log.length < maxRounds && stale < patience) {
    const untried = Array.from({ length: k }, (_, c) => c).filter((c) => {
      const b = [...best];
      b[c] = 1 - b[c]!;
      return !memo.has(b.join(""));
    });
    if (untried.length === 0) break; // a local optimum: every single flip has been evaluated
    let c: number;
    if (rng.next() < epsilon) c = untried[rng.int(untried.length)]!;
    else c = untried.reduce((a, b) => (clusterScore(bestEval, b) < clusterScore(bestEval, a) ? b : a));
    const cand = [...best];
    cand[c] = 1 - cand[c]!;
    const e = evaluate(cand, "refine");
    if (e.reward > bestEval.reward) {
      accept(cand, e);
      stale = 0;
    } else stale++;
  }
  return { best, bestReward: bestEval.reward, bestRound, log };
}

/** Evaluates every one of the 2^K tables (K ≤ 12): the search's yardstick. */
export function exhaustive(env: Environment, makeTable: (bits: number[]) => Table, k: number): { best: number[]; bestReward: number; rewards: number[] } {
  if (k > 12) throw new RangeError(`exhaustive: 2^${k} tables is too many`);
  const rewards: number[] = [];
  let best: number[] = [];
  let bestReward = -1;
  for (let m = 0; m < 1 << k; m++) {
    const bits = Array.from({ length: k }, (_, c) => (m >> c) & 1);
    const r = env.evaluate(makeTable(bits)).reward;
    rewards.push(r);
    if (r > bestReward) {
      bestReward = r;
      best = bits;
    }
  }
  return { best, bestReward, rewards };
}

/** Per-request E2E outcome helper for reports. */
export function attainment(records: RequestRecord[], slo: Slo): number {
  return records.length ? records.filter((r) => meetsE2e(r, slo)).length / records.length : 0;
}
