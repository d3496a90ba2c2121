// `dolphin ablate --study fidelity`: the calibrated simulator against real vLLM (issue 25, outcome 2). Two engines
// started once (1P1D: P0 on core 0, D0 on core 1) with the proxy in front (precise mode, drift guard off so a table's
// bits alone route), calibrated first unless a cluster file is given; per workload (fitted to the tiny model's
// context), the real saturated rate found with a short probe of dynamo-isl; then at each rate, each repeat, each
// policy: the run's arrivals replayed for real through the proxy (src/serve/tune.ts's replayer: token prompts, a fresh
// salt per run so caches start cold as the simulator's do, the workload's own arrival times) and the same arrivals
// simulated with the calibrated cluster file. Policies alternate within a repeat so the machine's drift falls on all.

import { mkdirSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { clusterFromFile } from "../../sim/cluster-file.js";
import { SATURATION_ATTAINMENT } from "../../sim/saturation.js";
import type { SimConfig } from "../../sim/sim-config.js";
import type { Workload } from "../../sim/types.js";
import { withLoad } from "../../sim/workload.js";
import { ruleTable } from "../../table/rule-table.js";
import type { Table } from "../../table/table.js";
import { startProxy, type RunningProxy } from "../proxy.js";
import { decisionsFor, putTable, replay } from "../tune.js";
import { calibrate, clusterFileOf, GRIDS, modelFacts } from "./calibrate.js";
import { engineSpecs, proxyConfigFor } from "./cluster.js";
import { SERVED_MODEL, startEngines, stopEngines, type VllmEngine } from "./engines.js";
import { vllmInstall } from "./install.js";
import {
  fidelityBase,
  figuresOf,
  FIDELITY_SPLIT,
  learnTable,
  LEARNED,
  planWorkload,
  ruleTables,
  simulatedRun,
  type LearnedTable,
  type Figures,
  type FidelityPolicy,
  type PlanOptions,
  type RunRequest,
  type WorkloadPlan,
} from "./fidelity-plan.js";

export interface FidelityOptions extends Omit<PlanOptions, "cluster"> {
  workloads: string[];
  repeats: number;
  /** a calibrated cluster file; absent: the engines are calibrated first (`calibrationGrid`) into `calibrationOut` */
  cluster?: string;
  calibrationGrid: "small" | "full";
  calibrationOut: string;
  /** real saturation probes (bisection steps after the bracket) */
  probeSteps: number;
}

/** One run: a policy at a rate on a workload, its real repeats and its simulation. */
export interface FidelityRun {
  workload: string;
  factor: number;
  rps: number;
  policy: FidelityPolicy;
  requests: number;
  real: Figures[];
  simulated: Figures;
}

export interface FidelityResult {
  cluster: string;
  slo: string;
  workloads: {
    name: string;
    promptScale: number;
    simSaturatedRps: number;
    realSaturatedRps: number;
    realProbes: [number, number][];
    learned?: Omit<LearnedTable, "table">;
  }[];
  runs: FidelityRun[];
  /** the engines' process ids and ports (all stopped when the study returns) */
  engines: { id: string; pid: number | null; port: number }[];
  seconds: number;
}

const ADMIN_TOKEN = "fidelity-study";
const PAUSE_MS = 300;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Engines, then the proxy; both closed (engines stopped as process groups) whatever happens. */
export async function runFidelity(o: FidelityOptions, emit?: (run: FidelityRun) => void): Promise<FidelityResult> {
  const t0 = performance.now();
  const say = o.progress ?? (() => undefined);
  let engines: VllmEngine[] = [];
  let proxy: RunningProxy | undefined;
  let interrupted = false;
  const stop = () => {
    interrupted = true;
    void stopEngines(engines);
  };
  process.once("SIGINT", stop);
  try {
    say(`starting vLLM ${vllmInstall().version} engines (${FIDELITY_SPLIT}); each takes 30–60 s to start`);
    engines = await startEngines(engineSpecs(FIDELITY_SPLIT), { progress: say });
    const engineIds = engines.map((e) => ({ id: e.id, pid: e.pid(), port: e.port }));
    const cluster = o.cluster ?? (await calibrateInto(engines, o, say));
    proxy = await startProxy(
      { ...proxyConfigFor(engines, { port: 0, adminToken: ADMIN_TOKEN }), drift: { enabled: false } },
      { ...(o.module ? { module: o.module } : {}), log: () => undefined },
    );
    const base = fidelityBase({ ...o, cluster });
    const live = { proxyUrl: proxy.url, adminToken: ADMIN_TOKEN };
    const result: FidelityResult = { cluster, slo: o.slo, workloads: [], runs: [], engines: engineIds, seconds: 0 };
    let salt = 1;
    const realRun = async (arrivals: Workload, table: Table): Promise<RunRequest[]> => {
      if (interrupted) throw new Error("interrupted (SIGINT): the engines are stopped");
      await putTable(live, table);
      const outcomes = await replay({
        ...live,
        model: SERVED_MODEL,
        workload: arrivals,
        rate: arrivals.rate,
        slo: base.slo,
        prompts: "tokens",
        salt: salt++,
        timing: "arrivals",
        maxOutputTokens: o.maxOutputTokens,
      });
      const decisions = await decisionsFor(live, new Set(outcomes.map((x) => x.id)));
      await sleep(PAUSE_MS);
      return outcomes.map((x) => ({
        ttftMs: x.ttftMs,
        tpotMs: x.tpotMs,
        e2eMs: x.e2eMs,
        outputTokens: x.outputTokens,
        failed: !x.ok,
        path: (decisions.get(x.id)?.path as "local" | "remote" | undefined) ?? null,
      }));
    };
    for (const workload of o.workloads) {
      const plan = planWorkload(workload, { ...o, cluster }, base);
      // warm-up (eager PyTorch pays once per new shape): both paths, discarded
      for (const p of ["always-local", "always-remote"] as const) await realRun(plan.probe, ruleTable(p));
      const sat = await realSaturation(plan, base, o, (w) => realRun(w, ruleTable("dynamo-isl")), say);
      const tables = new Map([...ruleTables(base)].filter(([p]) => o.policies.includes(p)));
      let learned: LearnedTable | undefined;
      if (o.policies.includes(LEARNED)) {
        learned = await learnTable(plan, sat.rps, { ...o, cluster }, base);
        tables.set(LEARNED, learned.table);
      }
      result.workloads.push({
        name: plan.name,
        promptScale: plan.promptScale,
        simSaturatedRps: plan.saturatedRps,
        realSaturatedRps: sat.rps,
        realProbes: sat.probes,
        ...(learned
          ? {
              learned: {
                rounds: learned.rounds,
                trainReward: learned.trainReward,
                bits: learned.bits,
                rps: learned.rps,
              },
            }
          : {}),
      });
      for (const factor of o.rates) {
        const arrivals = withLoad(plan.evaluation, { kind: "rate", rps: sat.rps * factor });
        const runs = [...tables].map(([policy, table]) => ({
          workload: plan.name,
          factor,
          rps: arrivals.rate,
          policy,
          requests: arrivals.requests.length,
          real: [] as Figures[],
          simulated: figuresOf(simulatedRun(arrivals, table, base), base.slo),
          table,
        }));
        for (let rep = 0; rep < o.repeats; rep++)
          for (const run of runs) {
            run.real.push(figuresOf(await realRun(arrivals, run.table), base.slo));
            say(
              `  ${factor}× (${arrivals.rate.toFixed(2)} req/s) ${run.policy} repeat ${rep + 1}: ${line(run.real.at(-1)!)}; simulated ${line(run.simulated)}`,
            );
          }
        for (const { table: _, ...run } of runs) {
          result.runs.push(run);
          emit?.(run);
        }
      }
    }
    result.seconds = (performance.now() - t0) / 1000;
    return result;
  } finally {
    process.off("SIGINT", stop);
    await proxy?.close().catch(() => undefined);
    await stopEngines(engines);
  }
}

const line = (f: Figures): string =>
  `att ${(100 * f.attainment).toFixed(0)}%, TTFT ${f.ttftP50.toFixed(0)}/${f.ttftP90.toFixed(0)} ms, TPOT ${f.tpotP50.toFixed(1)}/${f.tpotP90.toFixed(1)} ms, local ${(100 * f.localFraction).toFixed(0)}%`;

/** Calibrates the running engines (steps on D0, transfers from P0) and writes the cluster file. */
async function calibrateInto(engines: VllmEngine[], o: FidelityOptions, say: (l: string) => void): Promise<string> {
  const modelDir = vllmInstall().model;
  say(`calibrating (${o.calibrationGrid} grid) into ${o.calibrationOut}`);
  const c = await calibrate(
    {
      stepUrl: engines[1]!.url,
      prefillUrl: engines[0]!.url,
      model: SERVED_MODEL,
      ...modelFacts(modelDir),
      maxNumBatchedTokens: 2048,
      maxNumSeqs: 128,
    },
    GRIDS[o.calibrationGrid],
    (l) => say(`  ${l}`),
  );
  const file = clusterFileOf(c, "calibrated", {
    tool: "dolphin ablate --study fidelity",
    measured_at: new Date().toISOString(),
    engine: `vLLM ${vllmInstall().version} (CPU), ${FIDELITY_SPLIT}, pinned as dolphin serve --vllm`,
    model: modelDir,
    grid: o.calibrationGrid,
  });
  const text = JSON.stringify(file, null, 2) + "\n";
  clusterFromFile(text, o.calibrationOut);
  mkdirSync(dirname(o.calibrationOut), { recursive: true });
  writeFileSync(o.calibrationOut, text);
  say(`calibrated: worst point ${(100 * Math.max(c.step.maxAbsError, c.transfer?.maxAbsError ?? 0)).toFixed(0)}%`);
  return o.calibrationOut;
}

/**
 * The real saturated rate: dynamo-isl's real attainment on the training arrivals' first `requests` (disjoint from the
 * evaluation's), from the simulator's saturated rate halved (or doubled) until the 90% line is bracketed, then
 * `probeSteps` bisection steps in log scale. Short probes on a noisy machine: a figure to within a few tens of %.
 */
async function realSaturation(
  plan: WorkloadPlan,
  base: Omit<SimConfig, "table">,
  o: FidelityOptions,
  run: (w: Workload) => Promise<RunRequest[]>,
  say: (l: string) => void,
): Promise<{ rps: number; probes: [number, number][] }> {
  const probes: [number, number][] = [];
  const probe = async (rps: number): Promise<boolean> => {
    const a = figuresOf(await run(withLoad(plan.probe, { kind: "rate", rps })), base.slo).attainment;
    probes.push([rps, a]);
    say(`  real saturation probe: dynamo-isl at ${rps.toFixed(2)} req/s → ${(100 * a).toFixed(0)}%`);
    return a >= SATURATION_ATTAINMENT;
  };
  let lo: number;
  let hi: number;
  const start = plan.saturatedRps;
  if (await probe(start)) {
    [lo, hi] = [start, start * 2];
    while (hi < start * 16 && (await probe(hi))) [lo, hi] = [hi, hi * 2];
  } else {
    [lo, hi] = [start / 2, start];
    while (lo > start / 256 && !(await probe(lo))) [lo, hi] = [lo / 2, lo];
  }
  for (let i = 0; i < o.probeSteps; i++) {
    const mid = Math.sqrt(lo * hi);
    if (await probe(mid)) lo = mid;
    else hi = mid;
  }
  say(`${plan.name}: real saturated rate ${lo.toFixed(2)} req/s (the simulator's ${start.toFixed(2)})`);
  return { rps: lo, probes };
}
