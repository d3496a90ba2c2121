// The paper's bit search (seeds 000/001): one bit per cluster from SLO feedback, by per-cluster scanning (cluster k
// local, then remote, the others fixed; keep the better for cluster k), then epsilon-greedy refinement of the whole
// table until it stops improving. Every candidate table is evaluated on the same arrivals (common random numbers: the
// simulator is deterministic), so noise does not decide. Also the exhaustive search, its yardstick.

import { Rng } from "../sim/rng.js";
import type { Table } from "../table/table.js";
import type { Environment, Evaluation, SearchStep } from "./environment.js";
import type { TrainOptions } from "./train-options.js";

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
