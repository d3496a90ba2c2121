// `dolphin train`: learn a routing table on a simulated cluster and write it.

import { writeFileSync } from "node:fs";
import { REWARD_FORMS, type RewardForm } from "../learn/guard.js";
import { DEFAULT_LOAD_PROFILE, PROFILE_ON, trainJob, type ProfileOn } from "../learn/job.js";
import { LOAD_PROFILES, type LoadProfile } from "../sim/rate-profile.js";
import { FEATURE_NAMES, type FeatureName } from "../table/table.js";
import { defaultJobs, PooledSimEnvironment, pooledSaturation, WorkerPool } from "../learn/pool.js";
import { intOption, UsageError, type Command } from "./args.js";
import { jobOptions, jobOptionSpecs } from "./sim-options.js";

export const command: Command = {
  usage: `dolphin train --workload <name|file> [--format auto|mooncake|azure|lengths] [--cluster <preset|file>]
             --split <nPmD> [--slo <preset|ttft_ms,tpot_ms>] [--k 8] [--algo kmeans|gmm] [--seed N]
             [--load saturated|trace|xS|R] [--requests N] [--osl model|oracle|noisy:P] [--features isl,eff_P,eff_D,osl_hat]
             [--no-scan] [--reward both|paper] [--load-profile ramp|steps|flat] [--load-profile-on held-out|both]
             [--fallback-latency rule|own] [--jobs N] --out table.msgpack [--json]

Logs the four features under Dynamo's rule, learns the output-length classifier and the clusters, then searches one
bit per cluster (per-cluster scanning, then epsilon-greedy refinement) for the best end-to-end SLO attainment at the
given load (default: saturated). A generator's training arrivals use --seed; a trace trains on its first half.
Writes the table and prints a report of the search (--json: machine-readable, with the search log).

--reward both (the default) is the guarded search: every cluster starts at "rule" (the fallback rule decides: Dynamo's
isl_or_load, with the preset's prefill-busy line and decode-busy gate, unless a candidate below replaces it).
The paper's search (40 rounds, tables whose P90 TTFT or TPOT exceed the rule's by 2% scored down) proposes a table;
it, then each single cluster, moves off the rule only with at least 30 requests, McNemar's one-sided test on paired
per-request SLO outcomes (same arrivals; (B − W)/√(B + W) ≥ 2.74, Bonferroni over 16 moves), P90 TTFT and P90 TPOT
each within 2% of the rule's, and the same gain again on held-out arrivals (z ≥ 1.645; a generator's seed + 2, a
trace's training half split in time: search on the first quarter, re-check on the second). Then moves that keep
attainment and lower the P90s' ratios to the rule's. Requests beyond each cluster's training range (99th
percentile) go to the rule.
The guarded search's held-out arrivals (--load-profile-on both: its search arrivals too) follow --load-profile:
ramp (the default) raises the rate geometrically from 0.5× to 2× of the load within the run, steps holds 0.5×, 1×,
1.5×, 2× for a quarter of the requests each, flat keeps the load (the same requests either way), so a move is taken
only if it also gains across those loads. The fallback candidates dynamo-isl, dynamo-legacy and dynamo-load (with
the preset's token budget) are tried in isl_or_load's place on the search's and the held-out arrivals pooled (z ≥
2.13, B ≥ W on each set, the P90s within 2% of isl_or_load's on both; --fallback-latency own: on
attainment alone, then later moves are checked against that rule's P90s). The table (format version 3) carries per cluster
the highest prefill and decode load its requests were decided at in the final table's runs (load_bound: beyond it
the fallback rule decides) and the training requests' share per cluster (cluster_share).
--reward paper is the paper's pure form: one bit per cluster for end-to-end attainment alone, no guard.

--jobs N (default: the number of cores) runs the simulations on N worker threads, two or more at a time: the
saturated load's probes with the next probe the search will likely need; independent candidates side by side (the
guarded search's moves of one cluster, its runs on the held-out arrivals beside the training ones, the proposing
search beside the guarded one's first runs); and each search's round beside the table it evaluates next if this
round's is not kept. --jobs 1 runs them in turn in one thread. Each distinct table is simulated once per train run.
The searches evaluate the same tables in the same order for every N (a run started early that the search does not
take is dropped), and the simulator is deterministic, so the table is the same for every N.`,
  options: {
    ...jobOptionSpecs,
    k: { type: "string" },
    algo: { type: "string" },
    osl: { type: "string" },
    features: { type: "string" },
    "no-scan": { type: "boolean" },
    reward: { type: "string" },
    "load-profile": { type: "string" },
    "load-profile-on": { type: "string" },
    "fallback-latency": { type: "string" },
    out: { type: "string" },
    json: { type: "boolean" },
    jobs: { type: "string" },
  },
  async run(v) {
    if (!v["out"]) throw new UsageError("--out is required (where to write the table)");
    const algo = String(v["algo"] ?? "kmeans");
    if (algo !== "kmeans" && algo !== "gmm") throw new UsageError(`--algo must be kmeans or gmm, got ${algo}`);
    const reward = String(v["reward"] ?? "both");
    if (!(REWARD_FORMS as readonly string[]).includes(reward))
      throw new UsageError(`--reward must be ${REWARD_FORMS.join(" or ")}, got ${reward}`);
    const profile = String(v["load-profile"] ?? DEFAULT_LOAD_PROFILE);
    if (!(LOAD_PROFILES as readonly string[]).includes(profile))
      throw new UsageError(`--load-profile must be ${LOAD_PROFILES.join(", ")}, got ${profile}`);
    const on = String(v["load-profile-on"] ?? "held-out");
    if (!(PROFILE_ON as readonly string[]).includes(on))
      throw new UsageError(`--load-profile-on must be ${PROFILE_ON.join(" or ")}, got ${on}`);
    const fl = fallbackLatencyOption(v["fallback-latency"]);
    const options = jobOptions(v);
    const jobs = jobsOption(v["jobs"]);
    // one thread needs no pool: the search evaluates in turn, exactly as in the browser
    const pool = jobs > 1 ? new WorkerPool(jobs, options.module!) : null;
    const r = await trainJob({
      ...options,
      ...(pool
        ? {
            environment: (w, base) => new PooledSimEnvironment(pool, w, base),
            findSaturation: (w, base) => pooledSaturation(pool, w, base),
          }
        : {}),
      k: intOption(v["k"], "k", 1, 256, 8),
      algo,
      ...(v["osl"] !== undefined ? { osl: parseOsl(String(v["osl"])) } : {}),
      ...(v["features"] !== undefined ? { features: parseFeatures(String(v["features"])) } : {}),
      ...(v["no-scan"] ? { scanInit: false } : {}),
      reward: reward as RewardForm,
      loadProfile: profile as LoadProfile,
      loadProfileOn: on as ProfileOn,
      ...(fl ? { guard: { fallbackLatency: fl } } : {}),
    }).finally(() => pool?.close());
    writeFileSync(String(v["out"]), r.bytes);
    const report = {
      out: String(v["out"]),
      simulated: true,
      rounds: r.result.rounds,
      best_reward: r.result.bestReward,
      best_round: r.result.bestRound,
      bits: r.table.bits,
      cluster_sizes: r.result.clusterSizes,
      load: { scale: r.scale, rps: r.rps },
      osl_classifier: r.result.osl && {
        classes: r.result.osl.classes,
        accuracy: r.result.osl.accuracy,
        confusion: r.result.osl.confusion,
      },
      reward,
      ...(r.result.guarded
        ? {
            rule_reward: r.result.guarded.ruleReward,
            moves: r.result.guarded.moves,
            fallback: r.table.fallback?.kind ?? "dynamo-isl",
            load_profile: { profile, on },
            load_bound: (r.table as { load_bound?: unknown }).load_bound,
          }
        : {}),
      wall_s: r.wallS,
      log: r.result.log.map((x) => ({ round: x.round, phase: x.phase, table: x.bits.join(""), reward: x.reward })),
    };
    process.stdout.write(
      v["json"]
        ? JSON.stringify(report) + "\n"
        : `wrote ${report.out}: bits ${report.bits?.join("")} (0 = local, 1 = remote, 2 = rule), best simulated SLO attainment ${(100 * r.result.bestReward).toFixed(1)}% ` +
            `after ${r.result.rounds} rounds (first reached in round ${r.result.bestRound}); output-length classifier accuracy ` +
            `${(100 * (r.result.osl?.accuracy.heldOut ?? NaN)).toFixed(1)}% (majority class ${(100 * (r.result.osl?.accuracy.majorityBaseline ?? NaN)).toFixed(1)}%)\n`,
    );
    return 0;
  },
};

function parseOsl(s: string): "model" | "oracle" | { noisy: number } {
  if (s === "model" || s === "oracle") return s;
  const m = /^noisy:([0-9.]+)$/.exec(s);
  const p = m ? Number(m[1]) : NaN;
  if (!(p >= 0 && p <= 1)) throw new UsageError(`--osl must be model, oracle or noisy:P with P in [0, 1], got ${s}`);
  return { noisy: p };
}

function parseFeatures(s: string): FeatureName[] {
  const names = s.split(",").map((x) => x.trim());
  for (const n of names)
    if (!(FEATURE_NAMES as readonly string[]).includes(n))
      throw new UsageError(`--features: unknown feature ${n} (known: ${FEATURE_NAMES.join(", ")})`);
  return names as FeatureName[];
}

/** --fallback-latency: how the guarded search checks a fallback candidate's latency (GuardOptions.fallbackLatency). */
export function fallbackLatencyOption(v: unknown): "rule" | "own" | undefined {
  if (v === undefined) return undefined;
  if (v === "rule" || v === "own") return v;
  throw new UsageError(`--fallback-latency must be rule or own, got ${String(v)}`);
}

/** --jobs: worker threads for the evaluations (default: every core this process may use). */
export function jobsOption(v: unknown): number {
  return intOption(v, "jobs", 1, 256, defaultJobs());
}
