// The main job (`npm start`): learn DolphinRouting tables on the default setting (the hybrid workload on h20-72b,
// splits 3P1D and 2P2D, the paper's setting), evaluate them against every baseline on other arrivals of the same
// workload at the saturated load, print the side-by-side table with the paper's published deltas beside ours, and
// write the tables, the evaluation JSON and the report into out/. The cluster is simulated.

import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { EvalOutput } from "../report/eval-output.js";
import { PAPER_DELTAS } from "../report/paper.js";
import { writeReport } from "../report/report-files.js";
import type { SimConfig } from "../sim/sim-config.js";
import type { Workload } from "../sim/types.js";
import { decodeTable } from "../table/codec.js";
import { CLUSTER_RULE, type Table } from "../table/table.js";
import { guardCounts, type GuardMove } from "./guard.js";
import { evalJob, evalRun, setup, trainJob, type TrainJobResult } from "./job.js";
import { policyOutcome, POLICY_NAMES, type PolicyName } from "./policies.js";
import type { SimEnvironment } from "./sim-environment.js";

export interface MainJobOptions {
  module: WebAssembly.Module;
  outDir: string;
  splits?: string[];
  workload?: string;
  cluster?: string;
  slo?: string;
  requests?: number;
  seed?: number;
  progress: (line: string, done: boolean) => void;
  print: (text: string) => void;
  /**
   * Where the job's parts run (src/learn/pool.ts runs them on worker threads, several at once); absent: one after
   * another in this thread. The printed figures and written files are the same either way.
   */
  parts?: PartRunner;
}

/** the guarded search's round budget in the main job (each round is one simulation of the training part) */
const GUARDED_ROUNDS = 40;

/** "the learned table as one group move, 1 cluster move, 0 latency moves" */
function describeMoves(moves: GuardMove[]): string {
  const n = (kind: GuardMove["kind"]): number => moves.filter((m) => m.kind === kind).length;
  return [
    n("fallback") ? "a new fallback rule" : "",
    n("group") ? "the learned table as one group move" : "",
    `${n("cluster")} cluster move${n("cluster") === 1 ? "" : "s"}`,
    `${n("latency")} latency move${n("latency") === 1 ? "" : "s"}`,
  ]
    .filter(Boolean)
    .join(", ");
}

const pct = (x: number): string => `${x >= 0 ? "+" : "−"}${Math.abs(100 * x).toFixed(1)}%`;

/** The options every part of the main job shares: plain data, so a part can run on a worker thread. */
export interface MainJobCommon {
  workload: string;
  split: string;
  slo: string;
  seed: number;
  requests: number;
  cluster?: string;
}

/**
 * The main job's simulations outside its searches, per split: the saturated load ("scale"), then, at that load, each
 * policy's evaluation ("policy": the baselines at once, dolphin once its table is learned) and the guarded table's
 * ("guarded-eval"). The searches themselves run where the job runs and evaluate their candidates through
 * PartRunner.environment (on a pool: one task per candidate, so the splits' searches and evaluations interleave).
 */
export type MainJobPart =
  | { kind: "scale"; common: MainJobCommon }
  | { kind: "policy"; common: MainJobCommon; scale: number; policy: PolicyName; table?: Table }
  | { kind: "guarded-eval"; common: MainJobCommon; scale: number; table: Table };

type PolicyEval = ReturnType<typeof evalJob>;
type PolicySummary = EvalOutput["policies"][string];

interface GuardedEval {
  dolphin: PolicySummary;
  counts: ReturnType<typeof guardCounts>;
}

/** Runs the main job's parts: in this thread, or elsewhere (a worker pool, src/learn/pool.ts). */
export interface PartRunner {
  run(part: MainJobPart): Promise<unknown>;
  /** where the searches evaluate their candidates; absent: in this thread, in turn (SimEnvironment) */
  environment?: (workload: Workload, base: Omit<SimConfig, "table">) => SimEnvironment;
}

/** One part of the main job, with the compiled core and a progress sink (in this thread or a worker's). */
export async function runMainJobPart(
  part: MainJobPart,
  module: WebAssembly.Module,
  progress: (line: string, done: boolean) => void,
): Promise<number | PolicyEval | GuardedEval> {
  switch (part.kind) {
    case "scale":
      return setup({ ...part.common, module, progress }).scale;
    case "policy":
      // without progress lines: the job says once that the policies are being evaluated
      return evalJob({
        ...part.common,
        module,
        load: `x${part.scale}`,
        policies: [part.policy],
        ...(part.table ? { table: part.table } : {}),
      });
    case "guarded-eval": {
      // one run gives both the figures `dolphin eval` would print and the records guardCounts reads
      const run = evalRun({ ...part.common, module, table: part.table, load: `x${part.scale}` });
      return { dolphin: policyOutcome(run.summary), counts: guardCounts(part.table, run.records) };
    }
  }
}

/** The policies' evaluations as one, as evalJob gives it for all of them (the policies in the order given). */
function mergeEvaluations(parts: PolicyEval[]): PolicyEval {
  const { policies: _policies, ppd: _ppd, ...meta } = parts[0]!;
  const policies = Object.assign({}, ...parts.map((p) => p.policies)) as PolicyEval["policies"];
  const ppd = parts.find((p) => p.ppd)?.ppd;
  return { ...meta, policies, ...(ppd ? { ppd } : {}) };
}

/** Runs each part in this thread when asked (the simulations are synchronous: one at a time). */
function inThreadParts(module: WebAssembly.Module, progress: (line: string, done: boolean) => void): PartRunner {
  return { run: (part) => runMainJobPart(part, module, progress) };
}

interface PaperResult {
  trained: TrainJobResult;
  ev: PolicyEval;
}

interface GuardedResult {
  trained: TrainJobResult;
  ev: GuardedEval;
}

/**
 * One split's work as promises, each started as soon as what it needs exists: the saturated load first; then the
 * baselines' evaluations, the paper's search and the guarded search side by side (the guarded one waits for the
 * paper's table only when it reaches its group move); dolphin's evaluations once their tables are learned.
 */
function splitJob(
  o: MainJobOptions,
  runner: PartRunner,
  common: MainJobCommon,
): { paper: Promise<PaperResult>; guarded: Promise<GuardedResult> } {
  const env = runner.environment ? { environment: runner.environment } : {};
  const job = { ...common, module: o.module, progress: o.progress, ...env };
  const scale = runner.run({ kind: "scale", common }) as Promise<number>;
  const paperTrained = scale.then((s) => trainJob({ ...job, scale: s }));
  const evaluations = POLICY_NAMES.map(
    (policy) =>
      (policy === "dolphin"
        ? paperTrained.then((t) => runner.run({ kind: "policy", common, scale: t.scale, policy, table: t.table }))
        : scale.then((s) => runner.run({ kind: "policy", common, scale: s, policy }))) as Promise<PolicyEval>,
  );
  void scale.then(() =>
    o.progress(`evaluating ${POLICY_NAMES.length} policies on the ${common.split} evaluation arrivals…`, false),
  );
  const paper = Promise.all([paperTrained, Promise.all(evaluations)]).then(([trained, evs]) => {
    const ev = mergeEvaluations(evs);
    ev.load.spec = "saturated";
    return { trained, ev };
  });
  // the guarded table (issue 11): starts at Dynamo's rule, moves a cluster (or, as one group move, the whole table
  // the paper's search learns, passed as its bytes: same clusters) only on a significant paired gain that
  // replicates on held-out arrivals
  const guardedTrained = scale.then((s) =>
    trainJob({
      ...job,
      load: `x${s}`,
      reward: "both",
      guard: { proposals: paperTrained.then((t) => [decodeTable(t.bytes)]) },
      maxRounds: GUARDED_ROUNDS,
    }),
  );
  const guarded = Promise.all([scale, guardedTrained]).then(async ([s, trained]) => {
    const ev = (await runner.run({ kind: "guarded-eval", common, scale: s, table: trained.table })) as GuardedEval;
    return { trained, ev };
  });
  return { paper, guarded };
}

export async function runMainJob(o: MainJobOptions): Promise<number> {
  const t0 = performance.now();
  const splits = o.splits ?? ["3P1D", "2P2D"];
  const workload = o.workload ?? "hybrid";
  const common: MainJobCommon = {
    workload,
    split: "",
    slo: o.slo ?? "default",
    seed: o.seed ?? 1,
    requests: o.requests ?? 2000,
    ...(o.cluster !== undefined ? { cluster: o.cluster } : {}),
  };
  const runner = o.parts ?? inThreadParts(o.module, o.progress);
  mkdirSync(o.outDir, { recursive: true });
  const results: EvalOutput[] = [];
  o.print(
    `dolphin-routing main job: ${workload} on a SIMULATED ${o.cluster ?? "h20-72b"} cluster (no GPU here: every figure below comes from the calibrated simulator, ±25% step-time error).\n`,
  );
  // every split's work is asked for at once (a pool runs it side by side); the results are printed in the splits' order
  const pending = splits.map((split) => ({ split, ...splitJob(o, runner, { ...common, split }) }));
  // a failed part fails the job once, not again as an unhandled rejection of the parts not awaited yet
  for (const p of pending) {
    p.paper.catch(() => undefined);
    p.guarded.catch(() => undefined);
  }
  for (const { split, paper, guarded: guardedPart } of pending) {
    const { trained, ev } = await paper;
    writeFileSync(join(o.outDir, `table-${workload}-${split}.msgpack`), trained.bytes);
    writeFileSync(join(o.outDir, `eval-${workload}-${split}.json`), JSON.stringify(ev, null, 2) + "\n");
    results.push(ev);
    const rows = Object.entries(ev.policies).sort((a, b) => b[1].slo_attainment - a[1].slo_attainment);
    const dyn = ev.policies["dynamo-isl"];
    const dol = ev.policies["dolphin"];
    o.print(
      [
        ``,
        `${split}: ${ev.requests} evaluation requests at ${ev.load.rps.toFixed(2)} req/s (saturated load), SLO ${ev.slo.ttft_ms} ms TTFT / ${ev.slo.tpot_ms} ms TPOT; table learned in ${trained.result.rounds} rounds (${trained.wallS.toFixed(1)} s), output-length classifier accuracy ${(100 * (trained.result.osl?.accuracy.heldOut ?? NaN)).toFixed(0)}% (majority class ${(100 * (trained.result.osl?.accuracy.majorityBaseline ?? NaN)).toFixed(0)}%)`,
        `${"policy".padEnd(14)} ${"SLO att.".padStart(8)} ${"P90 TTFT ms".padStart(12)} ${"P90 TPOT ms".padStart(12)} ${"local".padStart(6)}`,
        ...rows.map(
          ([name, p]) =>
            `${name.padEnd(14)} ${(100 * p.slo_attainment).toFixed(1).padStart(7)}% ${p.ttft_ms.p90.toFixed(0).padStart(12)} ${p.tpot_ms.p90.toFixed(1).padStart(12)} ${(100 * p.local_fraction).toFixed(0).padStart(5)}%`,
        ),
        dol && dyn
          ? `dolphin vs dynamo-isl: P90 TTFT ${pct(dol.ttft_ms.p90 / dyn.ttft_ms.p90 - 1)}, P90 TPOT ${pct(dol.tpot_ms.p90 / dyn.tpot_ms.p90 - 1)}, SLO attainment ${((dol.slo_attainment - dyn.slo_attainment) * 100).toFixed(1)} points` +
            `   (paper, real H20 cluster: ${PAPER_DELTAS.hybrid.text})`
          : "",
      ].join("\n") + "\n",
    );

    const guarded = await guardedPart;
    writeFileSync(join(o.outDir, `table-${workload}-${split}-guarded.msgpack`), guarded.trained.bytes);
    const { dolphin: g, counts } = guarded.ev;
    const table = guarded.trained.table;
    const search = guarded.trained.result;
    const values = table.bits ?? [];
    o.print(
      [
        `guarded table (${values.map((v) => "LR-"[v]).join("")}: L local, R remote, - rule; fallback ${table.fallback?.kind ?? "dynamo-isl"}): ${values.filter((v) => v !== CLUSTER_RULE).length} of ${values.length} clusters off the rule after ${describeMoves(search.guarded?.moves ?? [])} in ${search.rounds} rounds; ${search.guarded?.rejectedOnHeldOut ?? 0} moves significant on the training arrivals failed to replicate on held-out ones`,
        `${"dolphin-guard".padEnd(14)} ${(100 * g.slo_attainment).toFixed(1).padStart(7)}% ${g.ttft_ms.p90.toFixed(0).padStart(12)} ${g.tpot_ms.p90.toFixed(1).padStart(12)} ${(100 * g.local_fraction).toFixed(0).padStart(5)}%`,
        dyn
          ? `dolphin-guard vs dynamo-isl: P90 TTFT ${pct(g.ttft_ms.p90 / dyn.ttft_ms.p90 - 1)}, P90 TPOT ${pct(g.tpot_ms.p90 / dyn.tpot_ms.p90 - 1)}, SLO attainment ${((g.slo_attainment - dyn.slo_attainment) * 100).toFixed(1)} points`
          : "",
        `requests decided by: a learned cluster ${counts.cluster}, a rule cluster ${counts.ruleCluster}, the out-of-distribution guard ${counts.outOfDistribution}, the load bounds ${counts.loadBound}`,
      ].join("\n") + "\n",
    );
  }
  const report = writeReport(results, [], o.outDir);
  o.print(
    `\nwrote ${o.outDir}/: ${splits.map((s) => `table-${workload}-${s}.msgpack`).join(", ")}, eval JSON, ${report.files.map((f) => f.split("/").pop()).join(", ")}` +
      ` (${((performance.now() - t0) / 1000).toFixed(0)} s)\n`,
  );
  return 0;
}
