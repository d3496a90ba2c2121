// The guarded search (issue 11): a learned table that is never worse than the rule it replaces.
//
// Every cluster starts at `rule` (value 2: the table's fallback rule decides its requests, Dynamo's isl_bounding by
// default), so the starting table routes exactly as the rule does. A cluster moves off `rule`, to local (0) or
// remote (1), only when that move shows a gain beyond noise:
//
//   1. enough requests: the cluster held at least `minRequests` requests in the current table's run;
//   2. a significant paired gain: every table runs on the same arrivals (common random numbers: the simulator is
//      deterministic), so request i's SLO outcome under the candidate and under the current table form a pair.
//      With B = requests that meet the SLO only under the candidate and W = only under the current table, McNemar's
//      one-sided test accepts when (B − W) / √(B + W) ≥ z. A pass tries 2 moves per cluster, so z is Bonferroni's
//      for a 5% family-wise error over the 16 moves of K = 8: z = Φ⁻¹(1 − 0.05/16) = 2.74. Pairs are taken over
//      the whole workload, because a cluster's move changes the queues every other request sees;
//   3. reward "both" (the default): the candidate's P90 TTFT and P90 TPOT are each at most (1 + latencySlack) × the
//      all-rule table's, so the table never buys attainment with either latency. Reward "paper" drops this check and
//      keeps the paper's end-to-end attainment alone;
//   4. replication (with `heldOut`): the test in 2 controls noise within one set of arrivals, not the shift between
//      sets, so a move that passes is run again on held-out arrivals (disjoint from the search's and from the
//      evaluation's) and taken only if it gains there too: McNemar at z ≥ 1.645 (one test per surviving move), a
//      higher attainment, and the latency check of 3 against the all-rule table on those arrivals.
//
// Of a cluster's two moves, the one with the larger B − W that passes is taken; passes over the clusters (largest
// first) repeat until one accepts nothing or the round budget is spent. Before them, with `fallbacks`, the all-rule
// table under each candidate fallback rule is tested the same way against the default (Dynamo's isl_bounding).
// After them, under reward "both", the lexicographic tie-break: latency moves (any cluster to either other value)
// that keep attainment (no fewer requests met, B ≥ W) and lower the P90s' ratios to the rule's (the larger one by
// ≥ latencyGain, or the sum with the larger no higher), on the search's arrivals and again on the held-out ones.
//
// Out-of-distribution bounds come from the training features: per cluster, the `oodQuantile` quantile of its
// training requests' scores (kmeans: squared standardized distance, upper quantile; gmm: log-likelihood, lower).

import { quantile, type RequestRecord, type Slo } from "../sim/metrics.js";
import { CLUSTER_LOCAL, CLUSTER_REMOTE, CLUSTER_RULE, DEFAULT_FALLBACK } from "../table/table.js";
import type { Fallback, Table } from "../table/table.js";
import { evaluateAll, onceEach, type Environment, type Evaluation, type SearchStep } from "./environment.js";
import { BONFERRONI_Z, FALLBACK_Z, pairedGain, pooledGain, REPLICATION_Z } from "./paired-gain.js";

export { BONFERRONI_Z, FALLBACK_Z, pairedGain, REPLICATION_Z } from "./paired-gain.js";

export { guardCounts } from "./guard-counts.js";

export type RewardForm = "paper" | "both";
export const REWARD_FORMS: readonly RewardForm[] = ["paper", "both"];

/** Makes the table with these cluster values (and fallback rule, where the search tries one other than the default). */
export type GuardedTableMaker = (values: number[], fallback?: Fallback) => Table;

export interface GuardOptions {
  /** a cluster moves off `rule` only with at least this many requests in the run (default 30) */
  minRequests?: number;
  /** McNemar's one-sided critical value (default 2.74: 5% family-wise over 16 moves, Bonferroni) */
  z?: number;
  /** "both" (default): also keep P90 TTFT and P90 TPOT within latencySlack of the rule's; "paper": attainment alone */
  reward?: RewardForm;
  /** allowed relative P90 excess over the all-rule table under reward "both" (default 0.02) */
  latencySlack?: number;
  /**
   * Held-out arrivals (disjoint from the search's, never the evaluation's): a move that passes on the search's
   * arrivals is taken only if it replicates here too (McNemar at `heldOutZ`, a higher attainment, and under reward
   * "both" the latency check against the all-rule table's on these arrivals). Absent: no replication check.
   */
  heldOut?: Environment;
  /** the held-out replication's critical value (default 1.645: one-sided 5%) */
  heldOutZ?: number;
  /**
   * The fallback rule the search starts from: the all-rule table's rule, the one every later test is against
   * (default DEFAULT_FALLBACK, Dynamo's isl_bounding).
   */
  start?: Fallback;
  /**
   * Fallback rules to try before any cluster moves: the all-rule table under each, accepted over the default by the
   * same test as a move (paired gain, latency check against the default rule's, replication). Default: none.
   */
  fallbacks?: Fallback[];
  /**
   * A fallback candidate's latency check: "rule" (default) as a move's, P90s within latencySlack of the default
   * rule's; "own": none (it becomes the rule that decides; matching a load-reactive rule may cost the latency it
   * trades, issue 24), and the later moves' checks are then against the all-rule table under the chosen fallback.
   */
  fallbackLatency?: "rule" | "own";
  /**
   * Whole tables to try as one group move from the all-rule table (e.g. the paper's search's table on the same
   * clusters), tested as a move is: clusters that only gain together, which single moves from the rule cannot find.
   * A promise when the tables are still being learned (the main job learns the paper's table meanwhile): the search
   * waits for it only when it reaches the group moves.
   */
  proposals?: number[][] | Promise<number[][]>;
  /**
   * Under reward "both", after the attainment moves: latency moves, the lexicographic tie-break (header comment).
   * Default true.
   */
  latencyMoves?: boolean;
  /** the relative drop of the P90 ratios to the rule's (the larger, or the sum) a latency move needs (default 0.01) */
  latencyGain?: number;
  maxRounds?: number;
  onProgress?: (step: SearchStep, total: { rounds: number; best: number }) => void;
}

export interface GuardMove {
  /** "fallback": the fallback rule changed; "group": a whole proposed table; "cluster": one cluster on attainment;
   *  "latency": one cluster on the latency tie-break (attainment kept, not raised: its statistic may be 0) */
  kind: "fallback" | "group" | "cluster" | "latency";
  cluster: number;
  value: number;
  improved: number;
  worsened: number;
  statistic: number;
}

export interface GuardedSearch {
  values: number[];
  /** the fallback rule the table carries (DEFAULT_FALLBACK unless the search found a better one) */
  fallback: Fallback;
  reward: number;
  /** the all-rule table's reward (default fallback): the floor the search never goes below */
  ruleReward: number;
  log: SearchStep[];
  /** each accepted move: what kind, its cluster and new value (−1 for the fallback and group moves), B, W, statistic */
  moves: GuardMove[];
  /** moves that passed on the search's arrivals and failed to replicate on the held-out ones */
  rejectedOnHeldOut: number;
}

/** P90 of TTFT and of TPOT over the requests that finished. */
export function p90Latencies(records: RequestRecord[]): { ttft: number; tpot: number } {
  const ok = records.filter((r) => !r.failed);
  const sorted = (f: (r: RequestRecord) => number): number[] => ok.map(f).sort((a, b) => a - b);
  return {
    ttft: quantile(
      sorted((r) => r.ttftMs),
      0.9,
    ),
    tpot: quantile(
      sorted((r) => r.tpotMs),
      0.9,
    ),
  };
}

/**
 * The environment with reward "both"'s constraint folded into its reward, for a search that proposes tables to the
 * guard: a table whose P90 TTFT or P90 TPOT exceeds (1 + slack) × the all-rule table's scores its attainment − 1.
 * The all-rule table runs beside the first candidates (each reward waits for it), not before them.
 */
export async function latencyConstrained(
  env: Environment,
  allRule: Table,
  slack = 0.02,
): Promise<Environment & { readonly evaluations: number }> {
  const rule = env.evaluate(allRule).then((e) => p90Latencies(e.records));
  rule.catch(() => undefined); // awaited by every evaluation below, which reports its failure
  const constrain = (e: Evaluation, r: { ttft: number; tpot: number }): Evaluation => {
    const p = p90Latencies(e.records);
    const within = p.ttft <= r.ttft * (1 + slack) && p.tpot <= r.tpot * (1 + slack);
    return within ? e : { ...e, reward: e.reward - 1 };
  };
  return {
    get evaluations() {
      return env.evaluations;
    },
    get concurrency() {
      return env.concurrency;
    },
    async evaluate(t: Table): Promise<Evaluation> {
      const [e, r] = await Promise.all([env.evaluate(t), rule]);
      return constrain(e, r);
    },
    async evaluateMany(tables: Table[]): Promise<Evaluation[]> {
      const [es, r] = await Promise.all([evaluateAll(env, tables), rule]);
      return es.map((e) => constrain(e, r));
    },
  };
}

/** Starts every cluster at `rule`; moves a cluster off it only on a significant paired gain (header comment). */
export async function searchGuarded(
  searchEnv: Environment,
  makeTable: GuardedTableMaker,
  k: number,
  slo: Slo,
  opts: GuardOptions = {},
): Promise<GuardedSearch> {
  const minRequests = opts.minRequests ?? 30;
  const z = opts.z ?? BONFERRONI_Z;
  const heldOutZ = opts.heldOutZ ?? REPLICATION_Z;
  const reward = opts.reward ?? "both";
  const slack = opts.latencySlack ?? 0.02;
  const maxRounds = opts.maxRounds ?? 80;
  // a candidate can come back (the latency moves revisit the last pass's cluster moves): each is run once
  const env = onceEach(searchEnv);
  const log: SearchStep[] = [];
  const record = (values: number[], phase: SearchStep["phase"], e: Evaluation): Evaluation => {
    const step: SearchStep = { round: log.length + 1, phase, bits: [...values], reward: e.reward, accepted: false };
    log.push(step);
    opts.onProgress?.(step, {
      rounds: log.length,
      best: Math.max(e.reward, ...log.map((s) => (s.accepted ? s.reward : 0))),
    });
    return e;
  };
  const tableOf = (values: number[], fallback: Fallback): Table =>
    makeTable(values, fallback === DEFAULT_FALLBACK ? undefined : fallback);
  const evaluate = async (values: number[], fallback: Fallback, phase: SearchStep["phase"]): Promise<Evaluation> =>
    record(values, phase, await env.evaluate(tableOf(values, fallback)));
  // where the environment runs several evaluations at once, the latency moves start the next cluster's runs early
  const lookAhead = (searchEnv.concurrency ?? 1) > 1;
  const startEarly = (cand: number[]): void => {
    env.evaluate(tableOf(cand, fallback)).catch(() => undefined); // a run asked for later reports its own failure
  };
  const heldOut = opts.heldOut && onceEach(opts.heldOut);
  const evaluateHeldOut = (values: number[], fallback: Fallback): Promise<Evaluation> =>
    heldOut!.evaluate(tableOf(values, fallback));

  let values = new Array<number>(k).fill(CLUSTER_RULE);
  let fallback = opts.start ?? DEFAULT_FALLBACK;
  // the all-rule table on both arrivals: independent runs, so asked for together (side by side on a pool)
  const [init, initHeld] = await Promise.all([
    env.evaluate(tableOf(values, fallback)),
    heldOut ? evaluateHeldOut(values, fallback) : null,
  ]);
  let current = record(values, "init", init);
  log[0]!.accepted = true;
  const ruleReward = current.reward;
  let ruleLatency = p90Latencies(current.records);
  let currentHeld = initHeld;
  let ruleLatencyHeld = currentHeld ? p90Latencies(currentHeld.records) : null;
  const moves: GuardedSearch["moves"] = [];
  let rejectedOnHeldOut = 0;
  const withinLatency = (e: Evaluation, rule: { ttft: number; tpot: number }): boolean => {
    if (reward === "paper") return true;
    const p = p90Latencies(e.records);
    return p.ttft <= rule.ttft * (1 + slack) && p.tpot <= rule.tpot * (1 + slack);
  };
  const passes = (e: Evaluation, gain: ReturnType<typeof pairedGain>, latency = true): boolean =>
    gain.statistic >= z && e.reward > current.reward && (!latency || withinLatency(e, ruleLatency));
  /** the held-out check of a move that passed on the search's arrivals: its held-out run, or null if it fails */
  const replicates = async (
    cand: number[],
    candFallback: Fallback,
    latency = true,
  ): Promise<Evaluation | null | undefined> => {
    if (!heldOut || !currentHeld) return undefined;
    const h = await evaluateHeldOut(cand, candFallback);
    const gain = pairedGain(h.records, currentHeld.records, slo);
    const within = !latency || withinLatency(h, ruleLatencyHeld!);
    const ok = gain.statistic >= heldOutZ && h.reward > currentHeld.reward && within;
    if (!ok) rejectedOnHeldOut++;
    return ok ? h : null;
  };
  const markAccepted = (): void => {
    for (let i = log.length - 1; i >= 0; i--)
      if (log[i]!.bits.join("") === values.join("") && log[i]!.reward === current.reward) {
        log[i]!.accepted = true;
        return;
      }
  };

  // the fallback rule: the all-rule table under each candidate. Without held-out arrivals, taken over the default on
  // the same test as a move. With them (the default: a ramp of 0.5–2× the search's load), on both sets together: a
  // fallback decides wherever the table has not earned a value, so it is chosen over the loads the two sets span, not
  // at the search's one load, and at either one the all-rule table often meets the SLO for nearly every request, so
  // neither alone shows a gain. Taken: the largest paired gain over both sets' requests at FALLBACK_Z (Bonferroni over
  // the candidates), no loss on either set (B ≥ W on each), and the latency check of fallbackLatency on both.
  if (opts.fallbacks?.length) {
    let pick: { fallback: Fallback; e: Evaluation; h: Evaluation | null; gain: ReturnType<typeof pairedGain> } | null =
      null;
    const ownLatency = opts.fallbackLatency === "own";
    const tried = opts.fallbacks.slice(0, Math.max(0, maxRounds - log.length)); // independent: run side by side
    const tables = tried.map((f) => tableOf(values, f));
    const runs = await evaluateAll(env, tables);
    const held = heldOut && currentHeld ? await Promise.all(tried.map((f) => evaluateHeldOut(values, f))) : null;
    for (const [i, f] of tried.entries()) {
      const e = record(values, "scan", runs[i]!);
      const onSearch = pairedGain(e.records, current.records, slo);
      const h = held?.[i] ?? null;
      const onHeld = h ? pairedGain(h.records, currentHeld!.records, slo) : null;
      const gain = onHeld ? pooledGain(onSearch, onHeld) : onSearch;
      const ok = onHeld
        ? gain.statistic >= FALLBACK_Z &&
          onSearch.improved >= onSearch.worsened &&
          onHeld.improved >= onHeld.worsened &&
          (ownLatency || (withinLatency(e, ruleLatency) && withinLatency(h!, ruleLatencyHeld!)))
        : passes(e, gain, !ownLatency);
      if (!ok && onHeld) rejectedOnHeldOut++;
      const better = !pick || gain.improved - gain.worsened > pick.gain.improved - pick.gain.worsened;
      if (ok && better) pick = { fallback: f, e, h, gain };
    }
    // without held-out arrivals the pick still replicates nowhere (replicates returns undefined): as a move's
    const h = pick && !pick.h ? await replicates(values, pick.fallback, !ownLatency) : pick?.h;
    if (pick && h !== null) {
      fallback = pick.fallback;
      current = pick.e;
      if (h) currentHeld = h;
      if (ownLatency) ruleLatency = p90Latencies(current.records);
      if (ownLatency && h) ruleLatencyHeld = p90Latencies(h.records);
      markAccepted();
      moves.push({ kind: "fallback", cluster: -1, value: -1, ...pick.gain });
    }
  }

  // the latency tie-break: the P90 ratios to the all-rule table's on the same arrivals, the larger one first, then
  // their sum (so a move that lowers one and leaves the other counts too)
  const latencyScore = (e: Evaluation, rule: { ttft: number; tpot: number }): { max: number; sum: number } => {
    const p = p90Latencies(e.records);
    return { max: Math.max(p.ttft / rule.ttft, p.tpot / rule.tpot), sum: p.ttft / rule.ttft + p.tpot / rule.tpot };
  };
  const latencyGain = opts.latencyGain ?? 0.01;
  /** lower by `margin` (relative): the larger ratio, or the sum with the larger ratio no higher */
  const lowers = (a: { max: number; sum: number }, b: { max: number; sum: number }, margin: number): boolean =>
    a.max < b.max * (1 - margin) || (a.max <= b.max && a.sum < b.sum * (1 - margin));
  /** a latency move's candidates for cluster c: its two other values */
  const latencyCandidates = (c: number): number[][] =>
    [CLUSTER_LOCAL, CLUSTER_REMOTE, CLUSTER_RULE]
      .filter((value) => value !== values[c])
      .map((value) => values.map((v, i) => (i === c ? value : v)));
  const latencyPhase = async (): Promise<boolean> => {
    let any = false;
    for (let c = 0; c < k; c++) {
      if ((current.byCluster.get(c)?.requests ?? 0) < minRequests) continue;
      if (log.length + 2 > maxRounds) break;
      const now = latencyScore(current, ruleLatency);
      let pick: {
        values: number[];
        e: Evaluation;
        score: ReturnType<typeof latencyScore>;
        gain: ReturnType<typeof pairedGain>;
      } | null = null;
      // the cluster's other values are independent candidates: evaluated together, logged in order
      const cands = latencyCandidates(c);
      // the look-ahead: the next cluster's candidates, which the pass evaluates next if this cluster does not move
      // (the usual outcome); it only starts their runs early (src/learn/bit-search.ts, searchBits)
      const next = Array.from({ length: k - c - 1 }, (_, i) => c + 1 + i).find(
        (n) => (current.byCluster.get(n)?.requests ?? 0) >= minRequests,
      );
      if (lookAhead && next !== undefined && log.length + 4 <= maxRounds)
        for (const cand of latencyCandidates(next)) startEarly(cand);
      const evals = await evaluateAll(
        env,
        cands.map((v) => tableOf(v, fallback)),
      );
      for (const [i, cand] of cands.entries()) {
        const e = record(cand, "refine", evals[i]!);
        const gain = pairedGain(e.records, current.records, slo);
        const score = latencyScore(e, ruleLatency);
        const keeps = e.reward >= current.reward && gain.improved >= gain.worsened && withinLatency(e, ruleLatency);
        if (keeps && lowers(score, now, latencyGain) && (!pick || lowers(score, pick.score, 0)))
          pick = { values: cand, e, score, gain };
      }
      if (!pick) continue;
      if (heldOut && currentHeld) {
        const h = await evaluateHeldOut(pick.values, fallback);
        const gain = pairedGain(h.records, currentHeld.records, slo);
        const ok =
          h.reward >= currentHeld.reward &&
          gain.improved >= gain.worsened &&
          lowers(latencyScore(h, ruleLatencyHeld!), latencyScore(currentHeld, ruleLatencyHeld!), 0) &&
          withinLatency(h, ruleLatencyHeld!);
        if (!ok) {
          rejectedOnHeldOut++;
          continue;
        }
        currentHeld = h;
      }
      values = pick.values;
      current = pick.e;
      markAccepted();
      moves.push({ kind: "latency", cluster: c, value: values[c]!, ...pick.gain });
      any = true;
    }
    return any;
  };

  // group moves: whole proposed tables, each tested against the current one as a single move is
  for (const proposal of (await opts.proposals) ?? []) {
    if (proposal.length !== k)
      throw new RangeError(`searchGuarded: a proposal has ${proposal.length} values, K = ${k}`);
    if (log.length + 1 > maxRounds || proposal.join("") === values.join("")) continue;
    const e = await evaluate(proposal, fallback, "scan");
    const gain = pairedGain(e.records, current.records, slo);
    if (!passes(e, gain)) continue;
    const h = await replicates(proposal, fallback);
    if (h === null) continue;
    values = [...proposal];
    current = e;
    if (h) currentHeld = h;
    markAccepted();
    moves.push({ kind: "group", cluster: -1, value: -1, ...gain });
  }

  let accepted = true;
  while (accepted && log.length < maxRounds) {
    accepted = false;
    const order = Array.from({ length: k }, (_, c) => c)
      .filter((c) => values[c] === CLUSTER_RULE && (current.byCluster.get(c)?.requests ?? 0) >= minRequests)
      .sort((a, b) => (current.byCluster.get(b)?.requests ?? 0) - (current.byCluster.get(a)?.requests ?? 0));
    for (const c of order) {
      if (log.length + 2 > maxRounds) break;
      let pick: { values: number[]; e: Evaluation; gain: ReturnType<typeof pairedGain>; value: number } | null = null;
      // the cluster's two moves are independent: evaluated together (in parallel on a pool), logged in order
      const moveValues = [CLUSTER_LOCAL, CLUSTER_REMOTE];
      const cands = moveValues.map((value) => values.map((v, i) => (i === c ? value : v)));
      const evals = await evaluateAll(
        env,
        cands.map((v) => tableOf(v, fallback)),
      );
      for (const [i, value] of moveValues.entries()) {
        const cand = cands[i]!;
        const e = record(cand, "scan", evals[i]!);
        const gain = pairedGain(e.records, current.records, slo);
        if (passes(e, gain) && (!pick || gain.improved - gain.worsened > pick.gain.improved - pick.gain.worsened)) {
          pick = { values: cand, e, gain, value };
        }
      }
      if (!pick) continue;
      const h = await replicates(pick.values, fallback);
      if (h === null) continue;
      values = pick.values;
      current = pick.e;
      if (h) currentHeld = h;
      markAccepted();
      moves.push({ kind: "cluster", cluster: c, value: pick.value, ...pick.gain });
      accepted = true;
    }
  }
  if (reward === "both" && (opts.latencyMoves ?? true)) while (log.length + 2 <= maxRounds && (await latencyPhase()));
  return { values, fallback, reward: current.reward, ruleReward, log, moves, rejectedOnHeldOut };
}

/**
 * Per-cluster out-of-distribution bounds from the training rows (standardized): each row's score for the cluster
 * the core would pick, then the `q` quantile per cluster (kmeans: distance, upper; gmm: log-likelihood, lower).
 * A cluster no training row picks gets a bound that sends every request to the rule.
 */
export function oodBounds(
  z: number[][],
  model:
    | { kind: "kmeans"; centroids: number[][] }
    | { kind: "gmm"; means: number[][]; variances: number[][]; weights: number[] },
  q = 0.99,
): number[] {
  const centres = model.kind === "kmeans" ? model.centroids : model.means;
  const k = centres.length;
  const logConst =
    model.kind === "gmm"
      ? model.variances.map(
          (v, c) => Math.log(model.weights[c]!) - 0.5 * v.reduce((s, x) => s + Math.log(2 * Math.PI * x), 0),
        )
      : [];
  const scores: number[][] = Array.from({ length: k }, () => []);
  for (const x of z) {
    let best = 0;
    let bestScore = model.kind === "kmeans" ? Infinity : -Infinity;
    for (let c = 0; c < k; c++) {
      let s = 0;
      for (let j = 0; j < x.length; j++) {
        const d = x[j]! - centres[c]![j]!;
        s += model.kind === "kmeans" ? d * d : (d * d) / model.variances[c]![j]!;
      }
      const score = model.kind === "kmeans" ? s : logConst[c]! - 0.5 * s;
      if (model.kind === "kmeans" ? score < bestScore : score > bestScore) {
        bestScore = score;
        best = c;
      }
    }
    scores[best]!.push(bestScore);
  }
  return scores.map((s) => {
    if (s.length === 0) return model.kind === "kmeans" ? 0 : Number.MAX_VALUE;
    // the upper tail of distances; the lower tail of log-likelihoods as the same quantile of their negatives
    if (model.kind === "kmeans")
      return quantile(
        s.sort((a, b) => a - b),
        q,
      );
    return -quantile(
      s.map((x) => -x).sort((a, b) => a - b),
      q,
    );
  });
}
