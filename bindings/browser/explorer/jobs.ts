// The policy explorer's jobs: evaluate every policy on the same simulated arrivals and train a table, as `dolphin
// eval` and `dolphin train` do (src/learn/job.ts), but with the workload given as a generator name or a file's text
// rather than a path, so that a page can run them. Browser-safe: only src/sim and src/learn's browser-safe parts.
// Same steps, same order, same seeds as job.ts, so the page's figures equal the CLI's for the same inputs
// (test/explorer-jobs.test.ts checks it against evalJob).

import type { EvalLoad, EvalOutput, PolicyOutcome } from "../../../src/eval-output.js";
import { BASELINE_NAMES, buildPpdTable, POLICY_NAMES, type PolicyName } from "../../../src/learn/policies.js";
import { SimEnvironment, train, type SearchStep } from "../../../src/learn/train.js";
import { parseSlo } from "../../../src/sim/metrics.js";
import { DEFAULT_PRESET, LINKS, resolvePreset } from "../../../src/sim/perf.js";
import { ruleTableFor } from "../../../src/sim/rule-table.js";
import { atScale, scaleForLoad } from "../../../src/sim/saturation.js";
import { parseSplit, simulate, type SimConfig } from "../../../src/sim/simulator.js";
import type { Workload } from "../../../src/sim/types.js";
import {
  generate,
  isGenerator,
  parseLoad,
  parseWorkload,
  splitInTime,
  type WorkloadFormat,
} from "../../../src/sim/workload.js";
import { encodeTable, type Table } from "../../../src/table.js";

/** A workload: a generator by name, or a dropped file's text (parsed by the CLI's parsers). */
export type WorkloadSource = { generator: string } | { file: string; text: string; format?: WorkloadFormat };

export interface ExplorerSetup {
  workload: WorkloadSource;
  /** model preset name (default h20-72b) */
  cluster?: string;
  split: string;
  /** SLO preset or "ttft_ms,tpot_ms" */
  slo?: string;
  /** saturated, trace, xS or R (requests/s); default saturated, as the CLI's jobs */
  load?: string;
  seed?: number;
  /** requests per part (generators) or a cap on the file */
  requests?: number;
}

/** The baselines the CLI's `dolphin eval` runs when no table is given (src/cli/eval.ts). */
export const BASELINES: readonly PolicyName[] = BASELINE_NAMES;

export type Progress = (line: string) => void;

interface Prepared {
  base: Omit<SimConfig, "table">;
  train: Workload;
  eval: Workload;
  scale: number;
  loadSpec: string;
}

function parts(o: ExplorerSetup): { train: Workload; eval: Workload } {
  const seed = o.seed ?? 1;
  const src = o.workload;
  if ("generator" in src) {
    if (!isGenerator(src.generator)) throw new Error(`workload: unknown generator ${JSON.stringify(src.generator)}`);
    const n = o.requests ?? 2000;
    return {
      train: generate(src.generator, { seed, requests: n }),
      eval: generate(src.generator, { seed: seed + 1, requests: n }),
    };
  }
  // A trace is split in time, first half to train, second to evaluate, as job.ts's workloadParts does.
  const all = parseWorkload(src.text, src.file, src.format ?? "auto", {
    seed,
    ...(o.requests !== undefined ? { requests: o.requests } : {}),
  });
  return splitInTime(all);
}

function prepare(o: ExplorerSetup, module: WebAssembly.Module | undefined, progress: Progress): Prepared {
  const preset = resolvePreset(o.cluster ?? DEFAULT_PRESET);
  const base: Omit<SimConfig, "table"> = {
    preset,
    link: LINKS["ib-ndr"],
    split: parseSplit(o.split),
    slo: parseSlo(o.slo ?? "default"),
    ...(module ? { module } : {}),
  };
  const p = parts(o);
  const loadSpec = o.load ?? "saturated";
  const load = parseLoad(loadSpec);
  if (load.kind === "saturated")
    progress(`finding the saturated load of ${p.train.name} on ${preset.name} ${o.split}…`);
  return { base, ...p, scale: scaleForLoad(load, p.train, base), loadSpec };
}

/** Per-policy points for the charts: sorted TTFT and TPOT (for CDFs), and (prompt tokens, TTFT, path) per request. */
export interface PolicyPoints {
  ttftSorted: number[];
  tpotSorted: number[];
  scatter: { promptTokens: number[]; ttftMs: number[]; remote: number[] };
}

export interface EvalResult {
  output: EvalOutput<EvalLoad>;
  points: Record<string, PolicyPoints>;
  /** wall time of each policy's simulation, in ms (the page shows it; the speed test compares it with Node's) */
  simulateMs: Record<string, number>;
}

/** At most this many points per chart series: enough for a smooth CDF, small enough to post to the page. */
const MAX_POINTS = 1000;

function thin<T>(xs: T[]): T[] {
  if (xs.length <= MAX_POINTS) return xs;
  const step = xs.length / MAX_POINTS;
  return Array.from({ length: MAX_POINTS }, (_, i) => xs[Math.floor(i * step)]!);
}

/**
 * Every policy on the evaluation arrivals: `dolphin eval --json` (evalJob then evaluatePolicies), keeping each run's
 * records for the charts. `table` adds the dolphin policy.
 */
export function evaluate(
  o: ExplorerSetup & { policies?: readonly PolicyName[]; table?: Table },
  module: WebAssembly.Module | undefined,
  progress: Progress = () => {},
): EvalResult {
  const s = prepare(o, module, progress);
  const names = o.policies ?? (o.table ? POLICY_NAMES : BASELINES);
  const tables: Partial<Record<PolicyName, Table>> = {};
  for (const p of names) {
    if (p === "dolphin") {
      if (!o.table) throw new Error("policy dolphin needs a table (train one, or open a .msgpack)");
      tables.dolphin = o.table;
    } else if (p === "ppd") {
      progress("building PPD's offline table (Algorithm 1) on the training part…");
      tables.ppd = buildPpdTable(atScale(s.train, s.scale), s.base).table;
    } else tables[p] = ruleTableFor(p, s.base.preset);
  }
  const w = atScale(s.eval, s.scale);
  const policies: Record<string, PolicyOutcome> = {};
  const points: Record<string, PolicyPoints> = {};
  const simulateMs: Record<string, number> = {};
  for (const [name, table] of Object.entries(tables)) {
    if (!table) continue;
    progress(`simulating ${name} on ${w.name} at ${w.rate.toFixed(2)} req/s…`);
    const t0 = performance.now();
    const r = simulate(w, { ...s.base, table });
    simulateMs[name] = performance.now() - t0;
    const m = r.summary;
    // the fields evaluatePolicies (src/learn/policies.ts) writes, in its order
    policies[name] = {
      slo_attainment: m.slo_attainment,
      slo_attainment_per_metric: m.slo_attainment_per_metric,
      ttft_ms: m.ttft_ms,
      tpot_ms: m.tpot_ms,
      e2e_ms: m.e2e_ms,
      throughput_tokens_per_s: m.throughput_tokens_per_s,
      local_fraction: m.local_fraction,
      failed: m.failed,
      kv_bytes_transferred: m.kv_bytes_transferred,
      prefix_hit_rate: m.prefix_hit_rate,
    };
    const ok = r.records.filter((x) => !x.failed);
    const sample = thin(ok);
    points[name] = {
      ttftSorted: thin(ok.map((x) => x.ttftMs).sort((a, b) => a - b)),
      tpotSorted: thin(ok.map((x) => x.tpotMs).sort((a, b) => a - b)),
      scatter: {
        promptTokens: sample.map((x) => x.promptTokens),
        ttftMs: sample.map((x) => x.ttftMs),
        remote: sample.map((x) => (x.path === "remote" ? 1 : 0)),
      },
    };
  }
  const output: EvalOutput<EvalLoad> = {
    workload: w.name,
    cluster: s.base.preset.name,
    split: o.split,
    slo: { ttft_ms: s.base.slo.ttftMs, tpot_ms: s.base.slo.tpotMs },
    load: { spec: s.loadSpec, scale: s.scale, rps: w.rate },
    requests: w.requests.length,
    simulated: true,
    policies,
  };
  return { output, points, simulateMs };
}

export interface TrainProgress {
  step: SearchStep;
  best: number;
}

/** `dolphin train` (trainJob): a K-means table learned on the training part, with every search step reported. */
export async function trainTable(
  o: ExplorerSetup & { k?: number },
  module: WebAssembly.Module | undefined,
  progress: Progress = () => {},
  onStep: (p: TrainProgress) => void = () => {},
): Promise<{ table: Table; bytes: Uint8Array; rounds: number; bestReward: number }> {
  const s = prepare(o, module, progress);
  const w = atScale(s.train, s.scale);
  progress(`learning a kmeans table, K = ${o.k ?? 8}, on ${w.name} at ${w.rate.toFixed(2)} req/s…`);
  const result = await train(new SimEnvironment(w, s.base), {
    k: o.k ?? 8,
    algo: "kmeans",
    seed: o.seed ?? 1,
    provenance: { workload: `${s.train.name} at ${w.rate.toFixed(3)} req/s (${s.loadSpec})`, split: o.split },
    onProgress: (step, total) => onStep({ step, best: total.best }),
  });
  return {
    table: result.table,
    bytes: encodeTable(result.table),
    rounds: result.rounds,
    bestReward: result.bestReward,
  };
}
