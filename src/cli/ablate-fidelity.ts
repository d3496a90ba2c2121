// `dolphin ablate --study fidelity`: the options of the one study that runs on real engines (src/serve/vllm/fidelity.ts).
// An ablate study rather than a bench: it trains a table and compares policies across loads as the other studies do,
// and what it measures is the simulator's predictions, not the speed of a built artifact.

import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { packageFile } from "../core/package-root.js";
import { parseSlo } from "../sim/metrics.js";
import { runFidelity, type FidelityOptions, type FidelityResult } from "../serve/vllm/fidelity.js";
import { LEARNED, RULE_POLICIES, type FidelityPolicy } from "../serve/vllm/fidelity-plan.js";
import { fidelityMarkdown } from "../serve/vllm/fidelity-report.js";
import { intOption, UsageError, type Values } from "./args.js";

/** The Mooncake dev trace shipped in data/ (the study's second workload). */
const MOONCAKE_DEV = packageFile("data", "traces", "mooncake_conversation_dev.jsonl");

/** The SLO of the tiny model on this machine's engines: a 4k-token prefill is ~90 ms, a decode step ~3–6 ms. */
export const FIDELITY_SLO = "150,15";

export const FIDELITY_USAGE = `dolphin ablate --study fidelity [--quick] [--cluster FILE [--link NAME]] [--workloads a,b]
              [--requests N] [--repeats N] [--slo T,P] [--max-output-tokens N] [--seed N]
              [--calibration-out FILE] [--out FILE.json] [--json]
dolphin ablate --study fidelity --from FILE.json     (the tables again from a study's --out)

fidelity: measured on real vLLM (CPU build, tiny model: npm run setup installs it). Starts 1P1D (P0 on core 0, D0 on
core 1) once with dolphin serve's proxy in front, calibrates them (dolphin calibrate's full grid, written to
--calibration-out, default out/fidelity-calibrated.json) unless --cluster gives a calibrated file, and for each
workload (default hybrid and the Mooncake dev trace, prompts scaled so prompt + output fit the 4,096-token context,
shared prefixes kept in proportion; outputs capped at --max-output-tokens, default 32) finds the real saturated rate
with short probes of dynamo-isl (from the calibrated simulator's), learns a table in the simulator at it on arrivals
disjoint from the evaluation's, then replays the evaluation's --requests (default 80) for real at 0.5×, 1× and 1.5× of
it under always-local, always-remote, dynamo-isl and the learned table, --repeats times (default 3, policies
alternating), and simulates the same arrivals with the calibrated file. Prints per run the real median (and spread)
against the simulated attainment and P50/P90 TTFT and TPOT, the issue's fidelity target per run (±20%, ±5 points) and
the policies' ranking per rate; --out writes the JSON. --quick: one workload, one rate, two policies, one repeat,
8 requests, the small calibration grid (a test, not a result). About 15 minutes in full.`;

export async function runFidelityStudy(v: Values): Promise<number> {
  if (v["from"] !== undefined) {
    // the tables again from a study's --out, without running it
    const saved = JSON.parse(readFileSync(String(v["from"]), "utf8")) as FidelityResult;
    process.stdout.write(fidelityMarkdown(saved) + "\n");
    return 0;
  }
  const quick = Boolean(v["quick"]);
  const cluster = v["cluster"] !== undefined ? String(v["cluster"]) : undefined;
  if (cluster !== undefined && !existsSync(cluster)) throw new UsageError(`--cluster: no file ${cluster}`);
  const slo = String(v["slo"] ?? FIDELITY_SLO);
  try {
    parseSlo(slo);
  } catch (e) {
    throw new UsageError(`--slo: ${(e as Error).message}`);
  }
  const workloads =
    v["workloads"] !== undefined
      ? String(v["workloads"])
          .split(",")
          .map((s) => s.trim())
          .filter(Boolean)
      : quick
        ? ["hybrid"]
        : ["hybrid", MOONCAKE_DEV];
  const policies: FidelityPolicy[] = quick ? ["always-local", "always-remote"] : [...RULE_POLICIES, LEARNED];
  const say = (line: string): void => void process.stderr.write(`dolphin ablate fidelity: ${line}\n`);
  const o: FidelityOptions = {
    workloads,
    policies,
    ...(cluster !== undefined ? { cluster } : {}),
    ...(v["link"] !== undefined ? { link: String(v["link"]) } : {}),
    slo,
    requests: intOption(v["requests"], "requests", 2, 1000, quick ? 8 : 80),
    trainRequests: 400,
    repeats: intOption(v["repeats"], "repeats", 1, 20, quick ? 1 : 3),
    rates: quick ? [1] : [0.5, 1, 1.5],
    maxOutputTokens: intOption(v["max-output-tokens"], "max-output-tokens", 1, 1024, quick ? 8 : 32),
    seed: intOption(v["seed"], "seed", 0, 2 ** 31, 1),
    maxRounds: quick ? 5 : 30,
    probeSteps: quick ? 0 : 2,
    calibrationGrid: quick ? "small" : "full",
    calibrationOut: String(v["calibration-out"] ?? "out/fidelity-calibrated.json"),
    progress: say,
  };
  const result = await runFidelity(o, (run) => {
    if (v["json"]) process.stdout.write(JSON.stringify(run) + "\n");
  });
  if (v["out"] !== undefined) {
    const out = String(v["out"]);
    mkdirSync(dirname(out), { recursive: true });
    writeFileSync(out, JSON.stringify(result, null, 2) + "\n");
  }
  if (v["json"]) process.stdout.write(JSON.stringify({ summary: { ...result, runs: undefined } }) + "\n");
  else process.stdout.write(fidelityMarkdown(result) + "\n");
  say(`done in ${result.seconds.toFixed(0)} s; engines stopped`);
  return 0;
}
