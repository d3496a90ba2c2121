// `dolphin ablate`: the paper's ablations and its open questions, on the simulated cluster.

import {
  ablationMarkdown,
  runStudy,
  STUDIES,
  type AblationRow,
  type Study,
  type StudyOptions,
} from "../learn/ablate.js";
import {
  ROBUSTNESS_DEFAULTS,
  ROBUSTNESS_FAMILIES,
  ROBUSTNESS_ROUNDS,
  robustnessMarkdown,
  selectFamilies,
  type RobustnessCell,
} from "../learn/robustness.js";
import { EVAL_SETS, loadSweepMarkdown, QUICK, type SweepCell } from "../learn/load-sweep.js";
import { LOAD_PROFILES, type LoadProfile } from "../sim/rate-profile.js";
import { PROFILE_ON, type ProfileOn } from "../learn/job.js";
import { fallbackLatencyOption } from "./train.js";
import { intOption, UsageError, type Command, type Values } from "./args.js";
import { jobOptions, jobOptionSpecs } from "./sim-options.js";
import { FIDELITY_USAGE, runFidelityStudy } from "./ablate-fidelity.js";

export const command: Command = {
  usage: `dolphin ablate --study <${STUDIES.join("|")}|fidelity> --workload <name|file> --split <nPmD> [--cluster …] [--slo …]
              [--seed N] [--requests N] [--load …] [--json]
dolphin ablate --study robustness [--families a,b,…] [--cluster h100-8b] [--split 2P2D] [--slo 2000,50] [--k 8]
              [--seed N] [--requests N] [--json]
dolphin ablate --study load-sweep [--families a,b,…] [--quick] [--load-profile ramp|steps|flat]
              [--load-profile-on held-out|both] [--fallback-latency rule|own] [--eval-sets N] […as robustness]

Studies: k (K = 2, 4, 8, 16), scan (with and without scan initialization), osl-feature (with and without osl_hat),
algo (k-means vs GMM), osl-noise (classifier, oracle, noisy p = 0.2, 0.4), load (one table evaluated from 50% to
120% of saturation), yardstick (K = 8: all 256 tables vs the search). Prints a markdown table (--json: JSON lines).

robustness: learns a pure table (--reward paper) and a guarded one (the default) on each workload family
(${ROBUSTNESS_FAMILIES.map((f) => f.name).join(", ")}; --families picks some) and evaluates each
on every family at that family's saturated load against every baseline, the guarded one also "served" (through
dolphin serve's drift guard and mix-shift guard): dolphin's attainment vs the best baseline and its P90 TTFT and
TPOT vs dynamo-isl, with the issue's targets checked (≥ −0.5 points, ≤ +2%; also against issue 24's latency
reference: the larger of dynamo-isl's and a rule's that beats it by more than 0.5 point). The setting
defaults to the issue's (h100-8b, 2P2D, SLO 2000,50, K = 8; ${ROBUSTNESS_ROUNDS} search rounds at most); --requests
sets the requests per part of every family. Prints the matrices as markdown (--json: one JSON line per cell).
Every figure is simulated.

load-sweep: learns one guarded table per family (dolphin train's default, on arrivals disjoint from the
evaluation's) and evaluates it at 0.25×, 0.5×, 1×, 1.5×, 2× of the family's saturated rate and on a rate ramp
(0.5× to 2× within the run) against every rule: attainment vs the best rule, P90 TTFT and TPOT vs dynamo-isl, the
issue's sweep targets per cell and how many requests the load bounds sent to the rule. Each cell's figures are the
mean over --eval-sets evaluation arrival sets (default ${EVAL_SETS}: the evaluation part and other draws of the
family; a trace timed to the millisecond has one). --quick: ${QUICK.families.join(" and ")},
${QUICK.requests} requests per part, ${QUICK.maxRounds} rounds (a test, not a result). Every figure is simulated.

${FIDELITY_USAGE}`,
  options: {
    ...jobOptionSpecs,
    study: { type: "string" },
    families: { type: "string" },
    k: { type: "string" },
    quick: { type: "boolean" },
    "eval-sets": { type: "string" },
    "load-profile": { type: "string" },
    "load-profile-on": { type: "string" },
    "fallback-latency": { type: "string" },
    json: { type: "boolean" },
    workloads: { type: "string" },
    repeats: { type: "string" },
    "max-output-tokens": { type: "string" },
    "calibration-out": { type: "string" },
    out: { type: "string" },
    from: { type: "string" },
  },
  async run(v) {
    const study = String(v["study"] ?? "");
    if (study === "fidelity") return runFidelityStudy(v);
    if (!(STUDIES as readonly string[]).includes(study))
      throw new UsageError(`--study must be one of ${STUDIES.join(", ")}, fidelity`);
    const options =
      study === "robustness" ? robustnessOptions(v) : study === "load-sweep" ? sweepOptions(v) : jobOptions(v);
    const rows: AblationRow[] = [];
    await runStudy(study as Study, options, (row) => {
      rows.push(row);
      if (v["json"]) process.stdout.write(JSON.stringify(row) + "\n");
    });
    if (!v["json"])
      process.stdout.write(
        (study === "robustness"
          ? robustnessMarkdown(rows as RobustnessCell[])
          : study === "load-sweep"
            ? loadSweepMarkdown(rows as SweepCell[])
            : ablationMarkdown(rows)) + "\n",
      );
    return 0;
  },
};

/** The load sweep's options: the robustness study's, with --quick and the training's load profile. */
function sweepOptions(v: Values): StudyOptions {
  const profile = v["load-profile"] !== undefined ? String(v["load-profile"]) : undefined;
  if (profile !== undefined && !(LOAD_PROFILES as readonly string[]).includes(profile))
    throw new UsageError(`--load-profile must be ${LOAD_PROFILES.join(", ")}, got ${profile}`);
  const on = v["load-profile-on"] !== undefined ? String(v["load-profile-on"]) : undefined;
  if (on !== undefined && !(PROFILE_ON as readonly string[]).includes(on))
    throw new UsageError(`--load-profile-on must be ${PROFILE_ON.join(" or ")}, got ${on}`);
  const fl = fallbackLatencyOption(v["fallback-latency"]);
  return {
    ...robustnessOptions(v),
    ...(v["quick"] ? { quick: true } : {}),
    ...(profile ? { loadProfile: profile as LoadProfile } : {}),
    ...(on ? { loadProfileOn: on as ProfileOn } : {}),
    ...(fl ? { fallbackLatency: fl } : {}),
    ...(v["eval-sets"] !== undefined ? { evalSets: intOption(v["eval-sets"], "eval-sets", 1, 20, EVAL_SETS) } : {}),
  };
}

/** The robustness study's options: the setting unless overridden; workloads and loads are its own. */
function robustnessOptions(v: Values): StudyOptions {
  for (const name of ["workload", "format", "load"])
    if (v[name] !== undefined)
      throw new UsageError(`--study ${String(v["study"])} picks its own workloads and loads: drop --${name}`);
  let families: string[] | undefined;
  if (v["families"] !== undefined) {
    families = String(v["families"])
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean);
    try {
      selectFamilies(families);
    } catch (e) {
      throw new UsageError(`--families: ${(e as Error).message}`);
    }
    if (families.length === 0) throw new UsageError("--families: give at least one family");
  }
  const { cluster, split, slo } = ROBUSTNESS_DEFAULTS;
  return {
    // `workload` is required by the shared options; every family replaces it with its own
    ...jobOptions({ cluster, split, slo, ...v, workload: "(each family)" }),
    k: intOption(v["k"], "k", 1, 256, ROBUSTNESS_DEFAULTS.k),
    ...(families ? { families } : {}),
  };
}
