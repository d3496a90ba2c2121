// The main job (`npm start`): learn DolphinRouting tables on the default setting (the hybrid workload on h20-72b,
// splits 3P1D and 2P2D, the paper's setting), evaluate them against every baseline on other arrivals of the same
// workload at the saturated load, print the side-by-side table with the paper's published deltas beside ours, and
// write the tables, the evaluation JSON and the report into out/. The cluster is simulated.

import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { EvalOutput } from "../eval-output.js";
import { PAPER_DELTAS } from "../report.js";
import { writeReport } from "../report-files.js";
import { CLUSTER_RULE } from "../table.js";
import { guardCounts, type GuardMove } from "./guard.js";
import { evalJob, evalRecords, trainJob } from "./job.js";

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

export async function runMainJob(o: MainJobOptions): Promise<number> {
  const t0 = performance.now();
  const splits = o.splits ?? ["3P1D", "2P2D"];
  const workload = o.workload ?? "hybrid";
  const common = {
    workload,
    split: "",
    slo: o.slo ?? "default",
    seed: o.seed ?? 1,
    requests: o.requests ?? 2000,
    module: o.module,
    ...(o.cluster !== undefined ? { cluster: o.cluster } : {}),
    progress: o.progress,
  };
  mkdirSync(o.outDir, { recursive: true });
  const results: EvalOutput[] = [];
  o.print(
    `dolphin-routing main job: ${workload} on a SIMULATED ${o.cluster ?? "h20-72b"} cluster (no GPU here: every figure below comes from the calibrated simulator, ±25% step-time error).\n`,
  );
  for (const split of splits) {
    const trained = await trainJob({ ...common, split });
    writeFileSync(join(o.outDir, `table-${workload}-${split}.msgpack`), trained.bytes);
    // evaluate at the load the table was learned at (found once, on the training part)
    const ev = evalJob({ ...common, split, table: trained.table, load: `x${trained.scale}` });
    ev.load.spec = "saturated";
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

    // the guarded table (issue 11): starts at Dynamo's rule, moves a cluster (or, as one group move, the whole table
    // just learned: same clusters) only on a significant paired gain that replicates on held-out arrivals
    const guarded = await trainJob({
      ...common,
      split,
      load: `x${trained.scale}`,
      reward: "both",
      guard: { proposals: [trained.table] },
      maxRounds: GUARDED_ROUNDS,
    });
    writeFileSync(join(o.outDir, `table-${workload}-${split}-guarded.msgpack`), guarded.bytes);
    const gev = evalJob({ ...common, split, table: guarded.table, load: `x${trained.scale}`, policies: ["dolphin"] });
    const g = gev.policies["dolphin"]!;
    const counts = guardCounts(
      guarded.table,
      evalRecords({ ...common, split, table: guarded.table, load: `x${trained.scale}` }),
    );
    const values = guarded.table.bits ?? [];
    o.print(
      [
        `guarded table (${values.map((v) => "LR-"[v]).join("")}: L local, R remote, - rule; fallback ${guarded.table.fallback?.kind ?? "dynamo-isl"}): ${values.filter((v) => v !== CLUSTER_RULE).length} of ${values.length} clusters off the rule after ${describeMoves(guarded.result.guarded?.moves ?? [])} in ${guarded.result.rounds} rounds; ${guarded.result.guarded?.rejectedOnHeldOut ?? 0} moves significant on the training arrivals failed to replicate on held-out ones`,
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
