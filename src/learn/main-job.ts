// The main job (`npm start`): learn DolphinRouting tables on the default setting (the hybrid workload on h20-72b,
// splits 3P1D and 2P2D, the paper's setting), evaluate them against every baseline on other arrivals of the same
// workload at the saturated load, print the side-by-side table with the paper's published deltas beside ours, and
// write the tables, the evaluation JSON and the report into out/. The cluster is simulated.

import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { EvalLoad, EvalOutput } from "../eval-output.js";
import { PAPER_DELTAS } from "../report.js";
import { writeReport } from "../report-files.js";
import { CLUSTER_RULE, decodeTable } from "../table.js";
import { guardCounts, type GuardMove } from "./guard.js";
import { evalJob, evalRecords, setup, trainJob } from "./job.js";

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
 * The main job in independent parts, per split: the saturated load ("scale"), then, at that load, the paper's
 * table with every policy's evaluation ("paper") and the guarded table with its own ("guarded").
 */
export type MainJobPart =
  | { kind: "scale"; common: MainJobCommon }
  | { kind: "paper"; common: MainJobCommon; scale: number }
  | { kind: "guarded"; common: MainJobCommon; scale: number; proposal: Uint8Array };

interface PaperPart {
  bytes: Uint8Array;
  rounds: number;
  wallS: number;
  oslHeldOut: number;
  oslMajority: number;
  ev: EvalOutput<EvalLoad>;
}

interface GuardedPart {
  bytes: Uint8Array;
  values: number[];
  /** the fallback rule's kind */
  fallback: string;
  /** the moves taken, in words (describeMoves) */
  moves: string;
  rejectedOnHeldOut: number;
  rounds: number;
  dolphin: PolicySummary;
  counts: ReturnType<typeof guardCounts>;
}

type PolicySummary = EvalOutput["policies"][string];

/** Runs the main job's parts: in order in this thread, or elsewhere (a worker pool). */
export interface PartRunner {
  run(part: MainJobPart): Promise<unknown>;
}

/** One part of the main job, with the compiled core and a progress sink (in this thread or a worker's). */
export async function runMainJobPart(
  part: MainJobPart,
  module: WebAssembly.Module,
  progress: (line: string, done: boolean) => void,
): Promise<number | PaperPart | GuardedPart> {
  const common = { ...part.common, module, progress };
  if (part.kind === "scale") return setup(common).scale;
  if (part.kind === "paper") {
    const trained = await trainJob({ ...common, scale: part.scale });
    // evaluate at the load the table was learned at (found once, on the training part)
    const ev = evalJob({ ...common, table: trained.table, load: `x${trained.scale}` });
    ev.load.spec = "saturated";
    return {
      bytes: trained.bytes,
      rounds: trained.result.rounds,
      wallS: trained.wallS,
      oslHeldOut: trained.result.osl?.accuracy.heldOut ?? NaN,
      oslMajority: trained.result.osl?.accuracy.majorityBaseline ?? NaN,
      ev,
    };
  }
  // the guarded table (issue 11): starts at Dynamo's rule, moves a cluster (or, as one group move, the whole table
  // just learned, passed here as its bytes: same clusters) only on a significant paired gain that replicates on
  // held-out arrivals
  const load = `x${part.scale}`;
  const guarded = await trainJob({
    ...common,
    load,
    reward: "both",
    guard: { proposals: [decodeTable(part.proposal)] },
    maxRounds: GUARDED_ROUNDS,
  });
  const gev = evalJob({ ...common, table: guarded.table, load, policies: ["dolphin"] });
  return {
    bytes: guarded.bytes,
    values: guarded.table.bits ?? [],
    fallback: guarded.table.fallback?.kind ?? "dynamo-isl",
    moves: describeMoves(guarded.result.guarded?.moves ?? []),
    rejectedOnHeldOut: guarded.result.guarded?.rejectedOnHeldOut ?? 0,
    rounds: guarded.result.rounds,
    dolphin: gev.policies["dolphin"]!,
    counts: guardCounts(guarded.table, evalRecords({ ...common, table: guarded.table, load })),
  };
}

/** Runs the parts one after another in this thread, in the order asked for. */
function serialParts(module: WebAssembly.Module, progress: (line: string, done: boolean) => void): PartRunner {
  let tail: Promise<unknown> = Promise.resolve();
  return {
    run(part) {
      const next = tail.then(() => runMainJobPart(part, module, progress));
      tail = next.catch(() => undefined);
      return next;
    },
  };
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
  const runner = o.parts ?? serialParts(o.module, o.progress);
  mkdirSync(o.outDir, { recursive: true });
  const results: EvalOutput[] = [];
  o.print(
    `dolphin-routing main job: ${workload} on a SIMULATED ${o.cluster ?? "h20-72b"} cluster (no GPU here: every figure below comes from the calibrated simulator, ±25% step-time error).\n`,
  );
  // every part is asked for at once (a pool runs them side by side); the results are printed in the splits' order
  const pending = splits.map((split) => {
    const c = { ...common, split };
    const scale = runner.run({ kind: "scale", common: c }) as Promise<number>;
    const paper = scale.then((s) => runner.run({ kind: "paper", common: c, scale: s }) as Promise<PaperPart>);
    // the guarded search tries the paper's table as one group move, so it starts once that table exists
    const guarded = Promise.all([scale, paper]).then(
      ([s, p]) => runner.run({ kind: "guarded", common: c, scale: s, proposal: p.bytes }) as Promise<GuardedPart>,
    );
    return { split, paper, guarded };
  });
  // a failed part fails the job once, not again as an unhandled rejection of the parts not awaited yet
  for (const p of pending) {
    p.paper.catch(() => undefined);
    p.guarded.catch(() => undefined);
  }
  for (const { split, paper, guarded: guardedPart } of pending) {
    const trained = await paper;
    writeFileSync(join(o.outDir, `table-${workload}-${split}.msgpack`), trained.bytes);
    const ev = trained.ev;
    writeFileSync(join(o.outDir, `eval-${workload}-${split}.json`), JSON.stringify(ev, null, 2) + "\n");
    results.push(ev);
    const rows = Object.entries(ev.policies).sort((a, b) => b[1].slo_attainment - a[1].slo_attainment);
    const dyn = ev.policies["dynamo-isl"];
    const dol = ev.policies["dolphin"];
    o.print(
      [
        ``,
        `${split}: ${ev.requests} evaluation requests at ${ev.load.rps.toFixed(2)} req/s (saturated load), SLO ${ev.slo.ttft_ms} ms TTFT / ${ev.slo.tpot_ms} ms TPOT; table learned in ${trained.rounds} rounds (${trained.wallS.toFixed(1)} s), output-length classifier accuracy ${(100 * trained.oslHeldOut).toFixed(0)}% (majority class ${(100 * trained.oslMajority).toFixed(0)}%)`,
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
    writeFileSync(join(o.outDir, `table-${workload}-${split}-guarded.msgpack`), guarded.bytes);
    const g = guarded.dolphin;
    const counts = guarded.counts;
    const values = guarded.values;
    o.print(
      [
        `guarded table (${values.map((v) => "LR-"[v]).join("")}: L local, R remote, - rule; fallback ${guarded.fallback}): ${values.filter((v) => v !== CLUSTER_RULE).length} of ${values.length} clusters off the rule after ${guarded.moves} in ${guarded.rounds} rounds; ${guarded.rejectedOnHeldOut} moves significant on the training arrivals failed to replicate on held-out ones`,
        `${"dolphin-guard".padEnd(14)} ${(100 * g.slo_attainment).toFixed(1).padStart(7)}% ${g.ttft_ms.p90.toFixed(0).padStart(12)} ${g.tpot_ms.p90.toFixed(1).padStart(12)} ${(100 * g.local_fraction).toFixed(0).padStart(5)}%`,
        dyn
          ? `dolphin-guard vs dynamo-isl: P90 TTFT ${pct(g.ttft_ms.p90 / dyn.ttft_ms.p90 - 1)}, P90 TPOT ${pct(g.tpot_ms.p90 / dyn.tpot_ms.p90 - 1)}, SLO attainment ${((g.slo_attainment - dyn.slo_attainment) * 100).toFixed(1)} points`
          : "",
        `requests decided by: a learned cluster ${counts.cluster}, a rule cluster ${counts.ruleCluster}, the out-of-distribution guard ${counts.outOfDistribution}`,
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
