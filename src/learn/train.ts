// The learner (seeds 000/001): log the four features of a training run, learn the output-length classifier,
// cluster the standardized log1p features (k-means or a Gaussian mixture), then search one bit per cluster from SLO
// feedback: per-cluster scanning (cluster k local, then remote, the others fixed; keep the better for cluster k),
// then epsilon-greedy refinement of the whole table until it stops improving. Every candidate table is evaluated on
// the same arrivals (common random numbers: the simulator is deterministic), so noise does not decide.
// The search talks to an Environment; the simulator is one, a live cluster (src/serve/tune.ts) another.

import { Rng } from "../sim/rng.js";
import { attainmentByCluster, meetsE2e, type RequestRecord, type Slo } from "../sim/metrics.js";
import { classOf, simulate, type OslPredictor, type SimConfig } from "../sim/simulator.js";
import type { SimRequest, Workload } from "../sim/types.js";
import { versionNeeded } from "../table/codec.js";
import { ruleTable } from "../table/rule-table.js";
import {
  CLUSTER_RULE,
  DEFAULT_FALLBACK,
  FEATURE_NAMES,
  type Fallback,
  type FeatureName,
  type Table,
} from "../table/table.js";
import { validateTable } from "../table/validate.js";
import { evaluateAll, onceEach, type Environment, type Evaluation, type SearchStep } from "./environment.js";
import { fitGmm, fitKMeans, fitScaler, standardize } from "./cluster.js";
import {
  latencyConstrained,
  oodBounds,
  searchGuarded,
  type GuardOptions,
  type GuardedSearch,
  type GuardedTableMaker,
  type RewardForm,
} from "./guard.js";
import { noisyOslPredictor, predictOslClass, trainOslClassifier, type OslSample, type OslTraining } from "./osl.js";

/** An environment the learner also logs features in and names in its tables: what `prepare` needs. */
export interface LearningEnvironment extends Environment {
  /** Runs the workload under the environment's reference routing and reports each request's features. */
  logFeatures(): Promise<FeatureLog>;
  /**
   * The same environment with the router's output-length predictor replaced (the oracle and noisy ablations);
   * absent where the router's predictor cannot be replaced (a live cluster runs its table's model).
   */
  withOslPredictor?(predictor: OslPredictor): Environment;
  /** what the tables learned here say about their origin */
  readonly describe: { tool: string; workload: string; slo: Slo };
}

/** One request of the feature-logging run: the router's features and where the reference routing sent it. */
export interface LoggedRequest {
  isl: number;
  effP: number;
  effD: number;
  path: "local" | "remote";
  /** what the output-length classifier learns from; absent where outputs are not observed (a live cluster) */
  osl?: OslSample;
}

export interface FeatureLog {
  /** the routing the features were logged under ("dynamo-isl", "the proxy's current table") */
  policy: string;
  requests: LoggedRequest[];
}

/** The simulated cluster as the environment: one fixed workload (the same arrivals for every table). */
export class SimEnvironment implements LearningEnvironment {
  evaluations = 0;
  constructor(
    readonly workload: Workload,
    readonly base: Omit<SimConfig, "table">,
  ) {}

  get describe(): LearningEnvironment["describe"] {
    return { tool: "dolphin-routing train", workload: this.workload.name, slo: this.base.slo };
  }

  async evaluate(table: Table): Promise<Evaluation> {
    this.evaluations++;
    const r = simulate(this.workload, { ...this.base, table });
    return {
      reward: r.summary.slo_attainment,
      byCluster: attainmentByCluster(r.records, this.base.slo),
      records: r.records,
    };
  }

  /**
   * Features as the core computes them, from a run under the rule people use today (Dynamo's), true output lengths.
   * Run once per workload and cluster (the paper's search and the guarded one log the same run); callers only read it.
   */
  logFeatures(): Promise<FeatureLog> {
    let byCluster = featureLogs.get(this.workload);
    if (!byCluster) featureLogs.set(this.workload, (byCluster = new Map()));
    // the run's routing and predictor are fixed (below), so the rest of the configuration names it
    const { module: _module, osl: _osl, ...cluster } = this.base;
    const key = JSON.stringify(cluster);
    let log = byCluster.get(key);
    if (!log) {
      log = this.runFeatureLog();
      byCluster.set(key, log);
      log.catch(() => byCluster.delete(key)); // a failed run is not remembered
    }
    return log;
  }

  /** The feature-logging run itself (a pool runs it on a worker: src/learn/pool.ts). */
  protected async runFeatureLog(): Promise<FeatureLog> {
    const logged = simulate(this.workload, {
      ...this.base,
      table: ruleTable("dynamo-isl"),
      osl: "oracle",
    }).records.filter((r) => !r.failed);
    const prev = previousOutputs(this.workload.requests);
    return {
      policy: "dynamo-isl",
      requests: logged.map((r) => ({
        isl: r.features.isl,
        effP: r.features.effP,
        effD: r.features.effD,
        path: r.path,
        osl: {
          isl: r.features.isl,
          reuse: r.prefixReuse,
          turn: r.turn,
          prevOutput: prev.get(r.id) ?? 0,
          maxTokens: 0,
          outputTokens: r.outputTokens,
        },
      })),
    };
  }

  withOslPredictor(predictor: OslPredictor): SimEnvironment {
    return new SimEnvironment(this.workload, { ...this.base, osl: predictor });
  }
}

/** Feature logs by workload, then by cluster configuration (SimEnvironment.logFeatures). */
const featureLogs = new WeakMap<Workload, Map<string, Promise<FeatureLog>>>();

/** The guarded search's settings as `train` takes them (GuardOptions, with held-out arrivals and proposed tables). */
export type GuardTraining = Omit<GuardOptions, "heldOut" | "proposals"> & {
  oodQuantile?: number;
  /** held-out arrivals for the replication check (GuardOptions.heldOut), given the chosen output-length predictor */
  heldOut?: Environment & Pick<LearningEnvironment, "withOslPredictor">;
  /**
   * Tables proposed to the guard as group moves (GuardOptions.proposals): used where their clusters are the ones
   * learned here (same features, scaler and centroids). Absent: the paper's search proposes one, run under reward
   * "both"'s latency constraint for `proposalRounds` rounds (default 40; 0: no proposal). A promise: the tables are
   * still being learned, and the search waits for them only when it reaches its group moves.
   */
  proposals?: Table[] | Promise<Table[]>;
  proposalRounds?: number;
};

export type OslMode = "model" | "oracle" | { noisy: number };

export interface TrainOptions {
  k?: number;
  algo?: "kmeans" | "gmm";
  seed?: number;
  /** features to cluster on; default all four (drop osl_hat for the ablation), three where outputs are not observed */
  features?: FeatureName[];
  /** per-cluster scanning before the refinement (the paper's scan initialization) */
  scanInit?: boolean;
  epsilon?: number;
  /** refinement stops after this many rounds without improvement */
  patience?: number;
  maxRounds?: number;
  osl?: OslMode;
  /**
   * The guarded search (src/learn/guard.ts): every cluster starts at `rule` and moves off it only on a significant
   * paired gain; the table carries out-of-distribution bounds. Absent: the paper's unguarded bit search.
   */
  guard?: GuardTraining;
  /** what the table says about itself */
  provenance?: { workload: string; split?: string; notes?: string };
  onProgress?: (step: SearchStep, total: { rounds: number; best: number }) => void;
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
  /** the guarded search's outcome (with `guard`) */
  guarded?: GuardedSearch;
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
  /** a table with these cluster values (0 local, 1 remote, 2 rule: with `guard`, plus the out-of-distribution bounds)
   *  and, where given, this fallback rule (absent: the default, Dynamo's isl_bounding) */
  makeTable: GuardedTableMaker;
  initial: number[];
  /** the environment the search runs in (with the output-length predictor of the chosen mode) */
  env: Environment;
  /** another environment (the guard's held-out arrivals) with the same output-length predictor */
  withPredictor: (e: Environment & Pick<LearningEnvironment, "withOslPredictor">) => Environment;
  /** null where the environment observes no output lengths (a live cluster) */
  osl: OslTraining | null;
  clusterSizes: number[];
  /** the routing the features were logged under, and how many requests were logged */
  featureRun: { policy: string; requests: number };
}

/** Logs the features of a run under the environment's reference routing, learns the classifier and the clusters. */
export async function prepare(env: LearningEnvironment, opts: TrainOptions = {}): Promise<Prepared> {
  const k = opts.k ?? 8;
  const seed = opts.seed ?? 1;
  const oslMode = opts.osl ?? "model";

  // 1. features as the core computes them, from a run under the environment's reference routing
  const log = await env.logFeatures();
  const logged = log.requests;
  if (logged.length < k)
    throw new Error(`train: only ${logged.length} requests logged under ${log.policy}; need at least K = ${k}`);
  const samples = logged.every((r) => r.osl !== undefined) ? logged.map((r) => r.osl!) : null;
  const features = opts.features ?? (samples ? [...FEATURE_NAMES] : FEATURE_NAMES.filter((f) => f !== "osl_hat"));
  if (!samples && features.includes("osl_hat"))
    throw new Error(`train: osl_hat needs output lengths, which ${env.describe.tool} does not observe`);

  // 2. the output-length classifier (where outputs are observed)
  const osl = samples ? trainOslClassifier(samples, { seed }) : null;
  const oslHat = (i: number): number => {
    if (!osl || !samples) return NaN; // not a feature without a classifier (checked above)
    const s = samples[i]!;
    if (oslMode === "model") return osl.classes.representative[predictOslClass(osl.model, s)]!;
    return osl.classes.representative[classOf(s.outputTokens, osl.classes.thresholds)]!; // oracle, and noisy(p)'s view on average
  };
  const rows = logged.map((r, i) => {
    const all: Record<FeatureName, number> = {
      isl: r.isl,
      eff_P: r.effP,
      eff_D: r.effD,
      osl_hat: features.includes("osl_hat") ? oslHat(i) : NaN,
    };
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
  // initial bits: what the reference routing did to most of each cluster's requests
  const remoteVotes = new Array<number>(k).fill(0);
  logged.forEach((r, i) => {
    if (r.path === "remote") remoteVotes[assignments[i]!]!++;
  });
  const initial = clusterSizes.map((n, c) => (remoteVotes[c]! * 2 >= n ? 1 : 0));

  const { tool, slo } = env.describe;
  const oslNote = osl ? `; osl ${typeof oslMode === "string" ? oslMode : `noisy(${oslMode.noisy})`}` : "";
  const oodBound = opts.guard ? oodBounds(z, model, opts.guard.oodQuantile ?? 0.99) : undefined;
  const makeTable = (bits: number[], fallback?: Fallback): Table =>
    validateTable({
      format: "dolphin-routing.table",
      version: versionNeeded({ bits, ood_bound: oodBound, fallback }),
      kind: algo,
      features,
      scaler,
      centroids: model.kind === "kmeans" ? model.centroids : model.means,
      ...(model.kind === "gmm" ? { variances: model.variances, weights: model.weights } : {}),
      bits,
      ...(fallback ? { fallback } : {}),
      ...(oodBound ? { ood_bound: oodBound } : {}),
      ...(osl ? { osl_classes: osl.classes } : {}),
      ...(osl && oslMode === "model" ? { osl_model: osl.model } : {}),
      ...(opts.provenance?.split ? { split: opts.provenance.split } : {}),
      slo: { ttft_ms: slo.ttftMs, tpot_ms: slo.tpotMs },
      provenance: {
        tool,
        created: new Date().toISOString(),
        workload: opts.provenance?.workload ?? env.describe.workload,
        seed,
        notes: opts.provenance?.notes ?? `${algo} K=${k} over ${features.join(", ")}${oslNote}`,
      },
      checksum: PLACEHOLDER_CHECKSUM,
    });

  // the environment (and the guard's held-out one) sees the predictor this mode stands for
  const withPredictor = (e: Environment & Pick<LearningEnvironment, "withOslPredictor">): Environment => {
    if (!osl || oslMode === "model") return e;
    if (!e.withOslPredictor)
      throw new Error(`train: ${env.describe.tool} cannot replace the router's output-length predictor`);
    return e.withOslPredictor(predictorFor(oslMode, osl, seed));
  };
  const envFor = withPredictor(env);

  return {
    makeTable,
    initial,
    env: envFor,
    withPredictor,
    osl,
    clusterSizes,
    featureRun: { policy: log.policy, requests: logged.length },
  };
}

/** Learns a routing table for `env`'s workload: `prepare`, then `searchBits`. */
export async function train(env: LearningEnvironment, opts: TrainOptions = {}): Promise<TrainResult> {
  const p = await prepare(env, opts);
  if (opts.guard) {
    const { proposals, proposalRounds, ...guard } = opts.guard;
    // one run per distinct table across the proposal search and the guarded one (they share makeTable): the all-rule
    // table, the proposed one and the latency moves' flips were each simulated twice
    const shared = onceEach(p.env);
    const g = await searchGuarded(shared, p.makeTable, p.initial.length, env.describe.slo, {
      ...guard,
      // given tables may still be being learned, and a proposal of the search's own is learned beside the guarded
      // search's first runs: the guarded search waits for them only when it reaches its group moves
      proposals: quietUntilAwaited(
        proposals !== undefined
          ? givenProposals(p, proposals)
          : searchedProposal(p, shared, proposalRounds ?? 40, guard.reward ?? "both", guard.latencySlack, opts),
      ),
      ...(opts.guard.heldOut ? { heldOut: p.withPredictor(opts.guard.heldOut) } : {}),
      maxRounds: opts.maxRounds,
      onProgress: opts.onProgress,
    });
    const bestRound = g.log.findIndex((s) => s.accepted && s.bits.join("") === g.values.join("")) + 1;
    return {
      table: p.makeTable(g.values, g.fallback === DEFAULT_FALLBACK ? undefined : g.fallback),
      log: g.log,
      rounds: g.log.length,
      bestReward: g.reward,
      bestRound,
      osl: p.osl,
      clusterSizes: p.clusterSizes,
      featureRun: p.featureRun,
      guarded: g,
    };
  }
  const search = await searchBits(p.env, p.makeTable, p.initial, { ...opts, seed: opts.seed ?? 1 });
  return {
    table: p.makeTable(search.best),
    log: search.log,
    rounds: search.log.length,
    bestReward: search.bestReward,
    bestRound: search.bestRound,
    osl: p.osl,
    clusterSizes: p.clusterSizes,
    featureRun: p.featureRun,
  };
}

/** A promise awaited later: its failure until then is not an unhandled rejection (whoever awaits it sees it). */
function quietUntilAwaited<T>(p: Promise<T>): Promise<T> {
  p.catch(() => undefined);
  return p;
}

/** The guard's group-move proposals from given tables: those whose clusters are these (once they are learned). */
async function givenProposals(p: Prepared, given: Table[] | Promise<Table[]>): Promise<number[][]> {
  const mine = p.makeTable(p.initial);
  const same = (t: Table): boolean =>
    JSON.stringify([t.kind, t.features, t.scaler, t.centroids]) ===
    JSON.stringify([mine.kind, mine.features, mine.scaler, mine.centroids]);
  return (await given).filter((t) => same(t) && t.bits).map((t) => [...t.bits!]);
}

/** The guard's group-move proposal of its own: the paper's search's table, under reward "both"'s constraint. */
async function searchedProposal(
  p: Prepared,
  env: Environment,
  rounds: number,
  reward: RewardForm,
  slack: number | undefined,
  opts: TrainOptions,
): Promise<number[][]> {
  if (rounds <= 0) return [];
  const allRule = p.makeTable(p.initial.map(() => CLUSTER_RULE));
  const searchEnv = reward === "both" ? await latencyConstrained(env, allRule, slack) : env;
  const s = await searchBits(searchEnv, p.makeTable, p.initial, { ...opts, maxRounds: rounds, seed: opts.seed ?? 1 });
  return [s.best];
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

/**
 * Scan, then epsilon-greedy refinement; each evaluation is one round. Memoized by bit string.
 *
 * Each round depends on the one before, so where the environment runs several evaluations at once (a pool,
 * src/learn/pool.ts), the search starts the table it will evaluate next if this round's table is not kept (the
 * usual outcome) beside this round's. That look-ahead only starts a run early: which tables the search evaluates,
 * in which order, and so the table it returns, are the same as evaluating one after another.
 */
export async function searchBits(
  env: Environment,
  makeTable: (bits: number[]) => Table,
  initial: number[],
  opts: Pick<TrainOptions, "scanInit" | "epsilon" | "patience" | "maxRounds" | "seed" | "onProgress"> = {},
): Promise<SearchResult> {
  const k = initial.length;
  const draws = new LookAheadDraws(new Rng(opts.seed ?? 1, 3));
  const memo = new Map<string, Evaluation>();
  const log: SearchStep[] = [];
  let best = [...initial];
  let bestEval: Evaluation;
  let bestRound = 0;
  const maxRounds = opts.maxRounds ?? 80;
  // runs started by a look-ahead, by bit string; a run the search then asks for is taken from here
  const started = new Map<string, Promise<Evaluation>>();
  const lookAhead = (env.concurrency ?? 1) > 1;
  const run = (bits: number[]): Promise<Evaluation> => {
    const key = bits.join("");
    let p = started.get(key);
    if (!p) {
      started.set(key, (p = env.evaluate(makeTable(bits))));
      p.catch(() => undefined); // a look-ahead the search never asks for must not fail the process
    }
    return p;
  };
  /** the look-ahead: starts the run of a table the search may ask for next (not yet evaluated, rounds left) */
  const startEarly = (bits: number[]): void => {
    if (lookAhead && log.length + 1 < maxRounds && !memo.has(bits.join(""))) void run(bits);
  };
  const evaluate = async (bits: number[], phase: SearchStep["phase"]): Promise<Evaluation> => {
    const key = bits.join("");
    let e = memo.get(key);
    if (!e) {
      e = await run(bits);
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
  const withBit = (bits: number[], c: number, value: number): number[] => bits.map((b, i) => (i === c ? value : b));
  const scanInit = opts.scanInit ?? true;
  if (scanInit && k > 0) startEarly(withBit(best, 0, 1 - best[0]!)); // the scan's first flip beside the initial table
  bestEval = await evaluate(best, "init");
  accept(best, bestEval);
  const clusterScore = (e: Evaluation, c: number): number => {
    const s = e.byCluster.get(c);
    return s && s.requests > 0 ? s.met / s.requests : 0;
  };

  // per-cluster scanning: cluster c local, then remote, the others fixed; keep the better for cluster c
  if (scanInit) {
    for (let c = 0; c < k && log.length < maxRounds; c++) {
      const local = withBit(best, c, 0);
      const remote = withBit(best, c, 1);
      // one of the two is the current table; the look-ahead: the next cluster's flip if this one keeps its value
      if (c + 1 < k) startEarly(withBit(best, c + 1, 1 - best[c + 1]!));
      const eL = await evaluate(local, "scan");
      const eR = await evaluate(remote, "scan");
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
  /** the cluster to flip among `untried`, from the next draws (`draw(i)`: the i-th of them) */
  const choose = (untried: number[], draw: (i: number) => number): { c: number; draws: number } => {
    if (draw(0) < epsilon) return { c: untried[Math.floor(draw(1) * untried.length)]!, draws: 2 };
    return { c: untried.reduce((a, b) => (clusterScore(bestEval, b) < clusterScore(bestEval, a) ? b : a)), draws: 1 };
  };
  let stale = 0;
  while (log.length < maxRounds && stale < patience) {
    const untried = Array.from({ length: k }, (_, c) => c).filter(
      (c) => !memo.has(withBit(best, c, 1 - best[c]!).join("")),
    );
    if (untried.length === 0) break; // a local optimum: every single flip has been evaluated
    const { c, draws: used } = choose(untried, (i) => draws.peek(i));
    draws.skip(used);
    const cand = withBit(best, c, 1 - best[c]!);
    // the look-ahead: the next round's flip if this one is not kept (same table, same scores, the next draws)
    const rest = untried.filter((u) => u !== c);
    if (rest.length > 0 && stale + 1 < patience) {
      const next = choose(rest, (i) => draws.peek(i)).c;
      startEarly(withBit(best, next, 1 - best[next]!));
    }
    const e = await evaluate(cand, "refine");
    if (e.reward > bestEval.reward) {
      accept(cand, e);
      stale = 0;
    } else stale++;
  }
  return { best, bestReward: bestEval.reward, bestRound, log };
}

/** A random stream that can be read ahead (the search's look-ahead) without changing what is drawn after. */
class LookAheadDraws {
  private readonly ahead: number[] = [];
  constructor(private readonly rng: Rng) {}
  /** the i-th draw from now, drawn (and kept) if need be */
  peek(i: number): number {
    while (this.ahead.length <= i) this.ahead.push(this.rng.next());
    return this.ahead[i]!;
  }
  /** uses up the next n draws */
  skip(n: number): void {
    this.peek(n - 1);
    this.ahead.splice(0, n);
  }
}

/** Evaluates every one of the 2^K tables (K ≤ 12): the search's yardstick. */
export async function exhaustive(
  env: Environment,
  makeTable: (bits: number[]) => Table,
  k: number,
): Promise<{ best: number[]; bestReward: number; rewards: number[] }> {
  if (k > 12) throw new RangeError(`exhaustive: 2^${k} tables is too many`);
  const rewards: number[] = [];
  let best: number[] = [];
  let bestReward = -1;
  for (let m = 0; m < 1 << k; m++) {
    const bits = Array.from({ length: k }, (_, c) => (m >> c) & 1);
    const r = (await env.evaluate(makeTable(bits))).reward;
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

// The search's environment lives in environment.ts (guard.ts shares it); its names stay importable from here.
export { evaluateAll, onceEach, type Environment, type Evaluation, type SearchStep } from "./environment.js";
