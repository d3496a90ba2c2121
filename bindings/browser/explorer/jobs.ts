// The policy explorer's jobs: evaluate every policy on the same simulated arrivals and train a table, as `dolphin
// eval` and `dolphin train` do (src/learn/job.ts), but with the workload given as a generator name or a file's text
// rather than a path, so that a page can run them. Browser-safe: only src/sim and src/learn's browser-safe parts.
// Same steps, same order, same seeds as job.ts, so the page's figures equal the CLI's for the same inputs
// (test/explorer-jobs.test.ts checks it against evalJob).

import type { EvalLoad, EvalOutput, PolicyOutcome } from "../../../src/report/eval-output.js";
import { BASELINE_NAMES, buildPpdTable, POLICY_NAMES, type PolicyName } from "../../../src/learn/policies.js";
import type { RewardForm } from "../../../src/learn/guard.js";
import type { SearchStep } from "../../../src/learn/environment.js";
import { SimEnvironment } from "../../../src/learn/sim-environment.js";
import { train } from "../../../src/learn/train.js";
import { parseSlo, type RequestRecord } from "../../../src/sim/metrics.js";
import { clusterFromFile } from "../../../src/sim/cluster-file.js";
import { DEFAULT_PRESET, resolvePreset, type ModelPreset } from "../../../src/sim/model-presets.js";
import { LINKS, resolveLink, type LinkPreset } from "../../../src/sim/kv-transfer.js";
import { ruleTableFor } from "../../../src/sim/rule-table.js";
import { atScale, scaleForLoad } from "../../../src/sim/saturation.js";
import { parseSplit } from "../../../src/sim/split.js";
import { simulate } from "../../../src/sim/simulator.js";
import type { SimConfig, SimResult } from "../../../src/sim/sim-config.js";
import type { Workload } from "../../../src/sim/types.js";
import { generate } from "../../../src/sim/generators.js";
import { parseWorkload } from "../../../src/sim/traces.js";
import { isGenerator, parseLoad, splitInTime, type WorkloadFormat } from "../../../src/sim/workload.js";
import { encodeTable } from "../../../src/table/codec.js";
import type { Table } from "../../../src/table/table.js";
import { clusterMap, type ClusterMapView } from "./cluster-map.js";

/** A workload: a generator by name, or a dropped file's text (parsed by the CLI's parsers). */
export type WorkloadSource = { generator: string } | { file: string; text: string; format?: WorkloadFormat };

export interface ExplorerSetup {
  workload: WorkloadSource;
  /** model preset name (default h20-72b); ignored when clusterFile is given */
  cluster?: string;
  /** a custom model: a cluster file's text defining exactly one preset (what `--cluster file.json` reads) */
  clusterFile?: { name: string; text: string };
  /** interconnect for KV transfers: ib-ndr (default), a built-in link or one the cluster file defines */
  link?: string;
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

/** A job's progress: what it is doing, and the share of the job done (0–1) where it can say. */
export type Progress = (line: string, fraction?: number) => void;

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

/** The model preset and link, as the CLI's resolveCluster reads --cluster (a name, or a cluster file) and --link. */
export function resolveExplorerCluster(o: Pick<ExplorerSetup, "cluster" | "clusterFile" | "link">): {
  preset: ModelPreset;
  link: LinkPreset;
} {
  if (o.clusterFile) {
    const { preset, links } = clusterFromFile(o.clusterFile.text, o.clusterFile.name);
    return { preset, link: o.link ? resolveLink(o.link, links) : LINKS["ib-ndr"] };
  }
  return { preset: resolvePreset(o.cluster ?? DEFAULT_PRESET), link: o.link ? resolveLink(o.link) : LINKS["ib-ndr"] };
}

function prepare(o: ExplorerSetup, module: WebAssembly.Module | undefined, progress: Progress): Prepared {
  const { preset, link } = resolveExplorerCluster(o);
  const base: Omit<SimConfig, "table"> = {
    preset,
    link,
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
  /** the table's cluster map over this run's requests (when a table was evaluated) */
  map?: ClusterMapView;
}

/** At most this many points per chart series: enough for a smooth CDF, small enough to post to the page. */
const MAX_POINTS = 1000;

export function thin<T>(xs: T[]): T[] {
  if (xs.length <= MAX_POINTS) return xs;
  const step = xs.length / MAX_POINTS;
  return Array.from({ length: MAX_POINTS }, (_, i) => xs[Math.floor(i * step)]!);
}

/** The policies a run compares: the baselines, and dolphin when a table is given (as `dolphin eval` chooses). */
function policyNames(o: { policies?: readonly PolicyName[]; table?: Table }): readonly PolicyName[] {
  return o.policies ?? (o.table ? POLICY_NAMES : BASELINES);
}

/** Each policy's table at one load: PPD's is built on the training part at that load, as evalJob builds it. */
function tablesAt(
  names: readonly PolicyName[],
  s: Prepared,
  scale: number,
  table: Table | undefined,
  progress: Progress,
): [PolicyName, Table][] {
  return names.map((p): [PolicyName, Table] => {
    if (p === "dolphin") {
      if (!table) throw new Error("policy dolphin needs a table (train one, or open a .msgpack)");
      return [p, table];
    }
    if (p === "ppd") {
      progress("building PPD's offline table (Algorithm 1) on the training part…");
      return [p, buildPpdTable(atScale(s.train, scale), s.base).table];
    }
    return [p, ruleTableFor(p, s.base.preset)];
  });
}

/** The fields evaluatePolicies (src/learn/policies.ts) writes, in its order. */
function outcomeOf(m: SimResult["summary"]): PolicyOutcome {
  return {
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
}

function pointsOf(records: RequestRecord[]): PolicyPoints {
  const ok = records.filter((x) => !x.failed);
  const sample = thin(ok);
  return {
    ttftSorted: thin(ok.map((x) => x.ttftMs).sort((a, b) => a - b)),
    tpotSorted: thin(ok.map((x) => x.tpotMs).sort((a, b) => a - b)),
    scatter: {
      promptTokens: sample.map((x) => x.promptTokens),
      ttftMs: sample.map((x) => x.ttftMs),
      remote: sample.map((x) => (x.path === "remote" ? 1 : 0)),
    },
  };
}

/**
 * Every policy on the evaluation arrivals: `dolphin eval --json` (evalJob then evaluatePolicies), keeping each run's
 * records for the charts. `table` adds the dolphin policy, and the result then carries its cluster map.
 */
export function evaluate(
  o: ExplorerSetup & { policies?: readonly PolicyName[]; table?: Table },
  module: WebAssembly.Module | undefined,
  progress: Progress = () => {},
): EvalResult {
  const s = prepare(o, module, progress);
  const tables = tablesAt(policyNames(o), s, s.scale, o.table, progress);
  const w = atScale(s.eval, s.scale);
  const policies: Record<string, PolicyOutcome> = {};
  const points: Record<string, PolicyPoints> = {};
  const simulateMs: Record<string, number> = {};
  let map: ClusterMapView | null = null;
  for (const [i, [name, table]] of tables.entries()) {
    progress(`simulating ${name} on ${w.name} at ${w.rate.toFixed(2)} req/s…`, i / tables.length);
    const t0 = performance.now();
    const r = simulate(w, { ...s.base, table });
    simulateMs[name] = performance.now() - t0;
    policies[name] = outcomeOf(r.summary);
    points[name] = pointsOf(r.records);
    if (name === "dolphin")
      map = clusterMap(table, r.records, s.base.slo, `the ${r.records.length} requests of ${w.name} (this run)`);
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
  return { output, points, simulateMs, ...(map ? { map } : {}) };
}

/** The loads a sweep visits, as multiples of the chosen load (saturated by default): a few points either side. */
export const SWEEP_FACTORS: readonly number[] = [0.5, 0.75, 1, 1.25, 1.5];

export interface SweepResult {
  workload: string;
  /** the load the factors multiply (its spec, and its scale of the workload's own rate) */
  load: { spec: string; scale: number };
  /** each point: its factor of that load, its scale of the workload's own rate (`--load x<scale>`), its req/s */
  points: { factor: number; scale: number; rps: number }[];
  /** per policy, SLO attainment at each point */
  attainment: Record<string, number[]>;
}

/**
 * Attainment of every policy against load: the evaluation at each of SWEEP_FACTORS × the chosen load. Each point
 * is exactly `evaluate` (and so `dolphin eval`) with load `x<scale>`.
 */
export function sweep(
  o: ExplorerSetup & { policies?: readonly PolicyName[]; table?: Table },
  module: WebAssembly.Module | undefined,
  progress: Progress = () => {},
): SweepResult {
  const s = prepare(o, module, progress);
  const names = policyNames(o);
  const attainment: Record<string, number[]> = Object.fromEntries(names.map((n) => [n, []]));
  const points: SweepResult["points"] = [];
  const total = SWEEP_FACTORS.length * names.length;
  SWEEP_FACTORS.forEach((factor, i) => {
    const scale = s.scale * factor;
    const w = atScale(s.eval, scale);
    points.push({ factor, scale, rps: w.rate });
    tablesAt(names, s, scale, o.table, () => {}).forEach(([name, table], j) => {
      progress(
        `load ${i + 1} of ${SWEEP_FACTORS.length} (${factor}× ${s.loadSpec}, ${w.rate.toFixed(2)} req/s): simulating ${name}…`,
        (i * names.length + j) / total,
      );
      attainment[name]!.push(simulate(w, { ...s.base, table }).summary.slo_attainment);
    });
  });
  return { workload: s.eval.name, load: { spec: s.loadSpec, scale: s.scale }, points, attainment };
}

export interface TrainProgress {
  step: SearchStep;
  best: number;
}

/** `dolphin train` (trainJob): a K-means table learned on the training part, with every search step reported, and
 *  its cluster map over the training requests (the table carries no training points: they are routed again). */
export async function trainTable(
  o: ExplorerSetup & { k?: number; reward?: RewardForm },
  module: WebAssembly.Module | undefined,
  progress: Progress = () => {},
  onStep: (p: TrainProgress) => void = () => {},
): Promise<{ table: Table; bytes: Uint8Array; rounds: number; bestReward: number; map: ClusterMapView | null }> {
  const s = prepare(o, module, progress);
  const w = atScale(s.train, s.scale);
  const reward = o.reward ?? "both"; // dolphin train's default: the guarded search
  progress(`learning a kmeans table, K = ${o.k ?? 8}, on ${w.name} at ${w.rate.toFixed(2)} req/s…`);
  const result = await train(new SimEnvironment(w, s.base), {
    k: o.k ?? 8,
    algo: "kmeans",
    seed: o.seed ?? 1,
    ...(reward === "both" ? { guard: { reward: "both" as const } } : {}),
    provenance: { workload: `${s.train.name} at ${w.rate.toFixed(3)} req/s (${s.loadSpec})`, split: o.split },
    onProgress: (step, total) => onStep({ step, best: total.best }),
  });
  progress("placing the training requests on the cluster map…");
  const records = simulate(w, { ...s.base, table: result.table }).records;
  return {
    table: result.table,
    bytes: encodeTable(result.table),
    rounds: result.rounds,
    bestReward: result.bestReward,
    map: clusterMap(result.table, records, s.base.slo, `the ${records.length} training requests of ${w.name}`),
  };
}
