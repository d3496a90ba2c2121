// What a search runs its candidate tables in: the Environment (the simulator, src/learn/sim-environment.ts, or a
// live cluster, src/serve/tune.ts), what one run reports (Evaluation), a search's log line (SearchStep), and the two
// ways of running candidates that every search shares. Its own file, so the plain search (bit-search.ts) and the
// guarded one (guard.ts) both import it and neither imports the other.

import type { RequestRecord } from "../sim/metrics.js";
import type { Table } from "../table/table.js";

/**
 * Where the search gets its reward. Asynchronous, so a live cluster (src/serve/tune.ts) is an environment like the
 * simulator, and `prepare` and `searchBits` are the same for both.
 */
export interface Environment {
  /** Runs a candidate table and reports per-cluster SLO attainment. */
  evaluate(table: Table): Promise<Evaluation>;
  /**
   * Runs independent candidates at once where the environment can (a worker pool, src/learn/pool.ts); results in
   * the tables' order, each the same as `evaluate` gives. Absent: the search evaluates them in turn.
   */
  evaluateMany?(tables: Table[]): Promise<Evaluation[]>;
  /**
   * How many evaluations the environment runs at once (a pool's size). Above one, a search starts the table it will
   * most likely evaluate next beside the current one; absent or one: every evaluation runs when it is asked for.
   */
  readonly concurrency?: number;
  readonly evaluations: number;
}

/** Evaluates independent candidates: together where the environment can, otherwise one after another. */
export async function evaluateAll(env: Environment, tables: Table[]): Promise<Evaluation[]> {
  if (env.evaluateMany) return env.evaluateMany(tables);
  const out: Evaluation[] = [];
  for (const t of tables) out.push(await env.evaluate(t));
  return out;
}

/**
 * The environment with each distinct table evaluated once: for one search, or the searches of one `train` call (the
 * proposal search and the guarded one), whose tables differ only in their values and fallback (one makeTable); the
 * simulator gives the same run for the same table.
 */
export function onceEach(env: Environment): Environment {
  const runs = new Map<string, Promise<Evaluation>>();
  const key = (t: Table): string => JSON.stringify([t.bits, t.fallback ?? null]);
  return {
    get evaluations() {
      return env.evaluations;
    },
    get concurrency() {
      return env.concurrency;
    },
    evaluate(t: Table): Promise<Evaluation> {
      const k = key(t);
      let run = runs.get(k);
      if (!run) runs.set(k, (run = env.evaluate(t)));
      return run;
    },
    async evaluateMany(tables: Table[]): Promise<Evaluation[]> {
      const keys = tables.map(key);
      const fresh = tables.filter((_, i) => !runs.has(keys[i]!) && keys.indexOf(keys[i]!) === i);
      if (fresh.length > 0) {
        const evals = evaluateAll(env, fresh);
        fresh.forEach((t, i) =>
          runs.set(
            key(t),
            evals.then((e) => e[i]!),
          ),
        );
      }
      return Promise.all(keys.map((k) => runs.get(k)!));
    },
  };
}

export interface Evaluation {
  /** SLO attainment (end to end) over all requests: the search's reward */
  reward: number;
  /** per cluster: requests and how many met the SLO */
  byCluster: Map<number, { requests: number; met: number }>;
  records: RequestRecord[];
}

export interface SearchStep {
  round: number;
  phase: "init" | "scan" | "refine";
  bits: number[];
  reward: number;
  accepted: boolean;
}
