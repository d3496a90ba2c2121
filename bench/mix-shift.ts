// The mix-shift guard's measurement (src/router/mix-guard.ts, docs/serving.md "Mix-shift guard"): its false-alarm
// rate on held-out traffic of the family a table was learned on, and its detection on the other families.
//
// For each robustness family (src/learn/robustness.ts, the setting: h100-8b 2P2D, SLO 2000/50 ms, K = 8) a
// guarded table is learned at the family's saturated load (`dolphin train`'s default search) and its training
// shares taken from the clustering (the table's cluster_share where it has one). Then the table routes, in the
// simulator, every family's evaluation arrivals at that family's saturated load and, for its own family, more
// held-out arrivals (a generator: four more seeds; a file: the requests after the ones train and eval use). Each
// run's decisions, in arrival order, are cut in windows of W: PSI of every sliding window (one look per decision,
// as the guard looks) and of disjoint windows. Every figure is simulated.
//
//   dolphin bench mix-shift [--families a,b] [--windows 100,200,400] [--psi 0.75] [--seed 11] [--out file.jsonl]

import { writeFileSync } from "node:fs";
import { loadCoreModule } from "../src/core/core-file.js";
import { setup, trainJob, workloadParts } from "../src/learn/job.js";
import {
  familyJob,
  ROBUSTNESS_DEFAULTS,
  ROBUSTNESS_ROUNDS,
  selectFamilies,
  type Family,
} from "../src/learn/robustness.js";
import { populationStabilityIndex } from "../src/router/mix-guard.js";
import { atScale } from "../src/sim/saturation.js";
import { simulate } from "../src/sim/simulator.js";
import type { Workload } from "../src/sim/types.js";
import { isGenerator } from "../src/sim/workload.js";
import { loadWorkload } from "../src/sim/workload-files.js";
import type { Table } from "../src/table/table.js";

/** χ²(7) at 0.99: the nominal 1% critical value of a chi-square over K = 8 clusters, were requests independent. */
const CHI2_7_99 = 18.475;

function chiSquare(counts: ArrayLike<number>, shares: readonly number[]): number {
  let n = 0;
  for (let c = 0; c < shares.length; c++) n += counts[c]!;
  let x = 0;
  for (let c = 0; c < shares.length; c++) {
    const e = Math.max(n * shares[c]!, 0.5);
    x += (counts[c]! - e) ** 2 / e;
  }
  return x;
}

interface WindowStats {
  window: number;
  looks: number;
  looksAlarmed: number;
  disjoint: number;
  disjointAlarmed: number;
  /** looks whose chi-square passes its nominal 1% value (K = 8 only) */
  chi2Nominal: number;
  psiMax: number;
  psiP99: number;
  psiMedian: number;
  /** decisions before the first look at or above the threshold (null: none) */
  firstAlarmAt: number | null;
  psis: number[];
}

export interface MixShiftOptions {
  /** robustness families (default: all nine) */
  families?: string[];
  /** window lengths in decisions (default 100, 200, 400) */
  windows?: number[];
  /** the PSI alarm threshold (default 0.75, the guard's) */
  psi?: number;
  seed?: number;
  /** where to write one JSON line per (table, traffic, part, window) */
  out?: string;
}

/** Runs the measurement (header comment): progress and one line per cell to `say`, the JSON lines to `o.out`. */
export async function runMixShiftBench(o: MixShiftOptions, say: (line: string) => void): Promise<string[]> {
  const windows = o.windows ?? [100, 200, 400];
  const psiAlarm = o.psi ?? 0.75;
  const seed = o.seed ?? 11;
  const module = loadCoreModule();
  const families = selectFamilies(o.families);
  const base = { ...ROBUSTNESS_DEFAULTS, seed, module };

  function windowStats(clusters: number[], shares: number[], w: number): WindowStats {
    const k = shares.length;
    const counts = new Float64Array(k);
    const psis: number[] = [];
    let chi = 0;
    let disjoint = 0;
    let disjointAlarmed = 0;
    let firstAlarmAt: number | null = null;
    clusters.forEach((c, i) => {
      counts[c]!++;
      if (i >= w) counts[clusters[i - w]!]!--;
      if (i + 1 < w) return;
      const p = populationStabilityIndex(counts, shares);
      psis.push(p);
      if (p >= psiAlarm && firstAlarmAt === null) firstAlarmAt = i + 1;
      if (k === 8 && chiSquare(counts, shares) >= CHI2_7_99) chi++;
      if ((i + 1) % w === 0) {
        disjoint++;
        if (p >= psiAlarm) disjointAlarmed++;
      }
    });
    const sorted = [...psis].sort((a, b) => a - b);
    const q = (f: number): number => sorted[Math.min(sorted.length - 1, Math.floor(f * sorted.length))] ?? NaN;
    return {
      window: w,
      looks: psis.length,
      looksAlarmed: psis.filter((p) => p >= psiAlarm).length,
      disjoint,
      disjointAlarmed,
      chi2Nominal: chi,
      psiMax: sorted.at(-1) ?? NaN,
      psiP99: q(0.99),
      psiMedian: q(0.5),
      firstAlarmAt,
      psis,
    };
  }

  /** The clusters a table gives a workload's requests in the simulator, in arrival order (-1 dropped). */
  function clustersOf(w: Workload, f: Family, table: Table, scale: number): number[] {
    const s = setup({ ...familyJob(f, base), scale });
    const recs = simulate(atScale(w, scale), { ...s.base, table }).records;
    return [...recs]
      .sort((a, b) => a.arrivalMs - b.arrivalMs || a.id - b.id)
      .map((r) => r.cluster)
      .filter((c) => c >= 0);
  }

  /** More held-out arrivals of a family: four more seeds of a generator; the file's requests after train and eval. */
  function extraHeldOut(f: Family): Workload[] {
    const job = familyJob(f, base);
    if (isGenerator(f.workload)) return [3, 4, 5, 6].map((d) => workloadParts({ ...job, seed: seed + d - 1 }).eval);
    const used = job.requests!;
    const all = loadWorkload(job.workload, "auto", { seed, requests: 3 * used });
    const reqs = all.requests.slice(used);
    const t0 = reqs[0]?.arrivalMs ?? 0;
    const requests = reqs.map((r, i) => ({ ...r, id: i, arrivalMs: r.arrivalMs - t0 }));
    const span = (requests.at(-1)?.arrivalMs ?? 0) / 1000;
    return requests.length > 0
      ? [{ name: `${all.name} (after)`, requests, rate: span > 0 ? (requests.length - 1) / span : all.rate }]
      : [];
  }

  const scales = new Map<string, number>();
  for (const f of families) {
    const s = setup(familyJob(f, base));
    scales.set(f.name, s.scale);
    say(`${f.name}: saturated at scale ${s.scale.toFixed(3)}`);
  }
  const lines: string[] = [];
  for (const t of families) {
    const trainScale = scales.get(t.name)!;
    const trained = await trainJob({
      ...familyJob(t, base),
      load: `x${trainScale}`,
      k: ROBUSTNESS_DEFAULTS.k,
      reward: "both",
      maxRounds: ROBUSTNESS_ROUNDS,
    });
    const table = trained.table;
    const given = table.cluster_share;
    const sizes = trained.result.clusterSizes;
    const total = sizes.reduce((a, b) => a + b, 0);
    const shares = given ?? sizes.map((n) => n / total);
    say(`${t.name}: table bits ${table.bits?.join("")}, shares ${shares.map((x) => x.toFixed(3)).join(" ")}`);
    for (const e of families) {
      const s = setup({ ...familyJob(e, base), scale: scales.get(e.name)! });
      const runs: { part: string; clusters: number[] }[] = [
        { part: "eval", clusters: clustersOf(s.parts.eval, e, table, scales.get(e.name)!) },
      ];
      if (e.name === t.name)
        for (const w of extraHeldOut(e))
          runs.push({ part: w.name, clusters: clustersOf(w, e, table, scales.get(e.name)!) });
      for (const run of runs)
        for (const w of windows) {
          const { psis: _, ...st } = windowStats(run.clusters, shares, w);
          const line = { train: t.name, eval: e.name, part: run.part, decisions: run.clusters.length, psiAlarm, ...st };
          lines.push(JSON.stringify(line));
          say(
            `${t.name} → ${e.name} [${run.part.slice(0, 24)}] W=${w}: looks ${st.looksAlarmed}/${st.looks} alarmed, ` +
              `disjoint ${st.disjointAlarmed}/${st.disjoint}, PSI median ${st.psiMedian.toFixed(3)} p99 ${st.psiP99.toFixed(3)} ` +
              `max ${st.psiMax.toFixed(3)}, χ² nominal-1% looks ${st.chi2Nominal}, first alarm ${st.firstAlarmAt ?? "–"}`,
          );
        }
    }
  }
  if (o.out) writeFileSync(o.out, lines.join("\n") + "\n");
  return lines;
}
