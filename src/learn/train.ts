// The learner (seeds 000/001): `prepare` (src/learn/prepare.ts: features, output-length classifier, clusters), then
// the paper's bit search (bit-search.ts) or, with `guard`, the guarded search (guard.ts), which takes the paper's
// search's table as a proposal. The search talks to an Environment; the simulator is one (sim-environment.ts), a live
// cluster (src/serve/tune.ts) another.

import { meetsE2e, type RequestRecord, type Slo } from "../sim/metrics.js";
import { CLUSTER_RULE, DEFAULT_FALLBACK, type Table } from "../table/table.js";
import { searchBits } from "./bit-search.js";
import { onceEach, type Environment, type SearchStep } from "./environment.js";
import { latencyConstrained, searchGuarded, type GuardedSearch, type RewardForm } from "./guard.js";
import type { LearningEnvironment } from "./learning-environment.js";
import type { OslTraining } from "./osl.js";
import { clusterShare, loadBounds, routedSizes, withLoadBounds } from "./load-bounds.js";
import { prepare, type Prepared } from "./prepare.js";
import type { TrainOptions } from "./train-options.js";

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

/** Learns a routing table for `env`'s workload: `prepare`, then `searchBits`. */
export async function train(env: LearningEnvironment, opts: TrainOptions = {}): Promise<TrainResult> {
  const p = await prepare(env, opts);
  if (opts.guard) {
    const { proposals, proposalRounds, loadBounds: bounded, loadQuantile, ...guard } = opts.guard;
    // one run per distinct table across the proposal search and the guarded one (they share makeTable): the all-rule
    // table, the proposed one and the latency moves' flips were each simulated twice
    const shared = onceEach(p.env);
    // the held-out runs kept too, so the final table's runs on both arrivals give the load bounds without a rerun
    const heldOut = opts.guard.heldOut ? onceEach(p.withPredictor(opts.guard.heldOut)) : undefined;
    const g = await searchGuarded(shared, p.makeTable, p.initial.length, env.describe.slo, {
      ...guard,
      // given tables may still be being learned, and a proposal of the search's own is learned beside the guarded
      // search's first runs: the guarded search waits for them only when it reaches its group moves
      proposals: quietUntilAwaited(
        proposals !== undefined
          ? givenProposals(p, proposals)
          : searchedProposal(p, shared, proposalRounds ?? 40, guard.reward ?? "both", guard.latencySlack, opts),
      ),
      ...(heldOut ? { heldOut } : {}),
      maxRounds: opts.maxRounds,
      onProgress: opts.onProgress,
    });
    const bestRound = g.log.findIndex((s) => s.accepted && s.bits.join("") === g.values.join("")) + 1;
    const tested = p.makeTable(g.values, g.fallback === DEFAULT_FALLBACK ? undefined : g.fallback);
    const runs = await Promise.all([shared, ...(heldOut ? [heldOut] : [])].map((e) => e.evaluate(tested)));
    const bound = loadBounds(
      runs.map((e) => e.records),
      p.initial.length,
      loadQuantile,
    );
    return {
      // the shares of the clusters the core assigned on the search's arrivals under this table: what a mix-shift
      // guard will compare the traffic with (the clustering's sizes come from Dynamo's routing and true outputs)
      table:
        (bounded ?? true)
          ? withLoadBounds(tested, bound, clusterShare(routedSizes(runs[0]!.records, p.initial.length)))
          : tested,
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

/** Per-request E2E outcome helper for reports. */
export function attainment(records: RequestRecord[], slo: Slo): number {
  return records.length ? records.filter((r) => meetsE2e(r, slo)).length / records.length : 0;
}
