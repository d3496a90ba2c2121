// The fidelity study's verdicts and tables: per run, the real repeats' median and spread, whether they agree among
// themselves, and issue 25's fidelity target (simulated P50 and P90 TTFT and TPOT within ±20% of the real median,
// attainment within ±5 points); per rate, whether the simulator ranks the policies in the real order.

import type { FidelityResult, FidelityRun } from "./fidelity.js";
import { FIGURE_KEYS, type Figures } from "./fidelity-plan.js";

/** Real repeats agree when every latency figure is within ±10% of its median and attainment within ±5 points. */
export const REPEAT_AGREEMENT = { latency: 0.1, attainmentPoints: 0.05 } as const;
/** Issue 25's fidelity target. */
export const FIDELITY_TARGET = { latency: 0.2, attainmentPoints: 0.05 } as const;

type Key = (typeof FIGURE_KEYS)[number];
const LATENCY_KEYS = FIGURE_KEYS.filter((k) => k !== "attainment");

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  return n === 0 ? NaN : n % 2 ? s[(n - 1) / 2]! : (s[n / 2 - 1]! + s[n / 2]!) / 2;
}

export interface RunVerdict {
  median: Record<Key, number>;
  /** latency: the largest |repeat / median − 1|; attainment: the largest |repeat − median| (points as a fraction) */
  spread: Record<Key, number>;
  repeatsAgree: boolean;
  /** simulated against the real median: latency as a ratio − 1, attainment as a difference */
  error: Record<Key, number>;
  targetMet: boolean;
}

export function verdictOf(run: Pick<FidelityRun, "real" | "simulated">): RunVerdict {
  const med = {} as Record<Key, number>;
  const spread = {} as Record<Key, number>;
  const error = {} as Record<Key, number>;
  for (const k of FIGURE_KEYS) {
    const xs = run.real.map((f: Figures) => f[k]);
    const m = median(xs);
    med[k] = m;
    const sim = run.simulated[k];
    if (k === "attainment") {
      spread[k] = Math.max(...xs.map((x) => Math.abs(x - m)));
      error[k] = sim - m;
    } else {
      spread[k] = Math.max(...xs.map((x) => (m > 0 ? Math.abs(x / m - 1) : x === m ? 0 : Infinity)));
      error[k] = m > 0 ? sim / m - 1 : sim === m ? 0 : Infinity;
    }
  }
  const within = (v: Record<Key, number>, t: { latency: number; attainmentPoints: number }) =>
    Math.abs(v.attainment) <= t.attainmentPoints + 1e-9 && LATENCY_KEYS.every((k) => Math.abs(v[k]) <= t.latency);
  return {
    median: med,
    spread,
    repeatsAgree: within(spread, REPEAT_AGREEMENT),
    error,
    targetMet: within(error, FIDELITY_TARGET),
  };
}

/**
 * Policies best first by attainment, then P90 TTFT; policies whose attainment is equal and P90 TTFT within 5% are
 * tied (written `a = b`): the simulator often gives every policy 100%, and an order among ties would be arbitrary.
 */
function ranked(runs: FidelityRun[], figure: (r: FidelityRun) => Figures | Record<Key, number>): string[] {
  const sorted = [...runs].sort(
    (a, b) => figure(b).attainment - figure(a).attainment || figure(a).ttftP90 - figure(b).ttftP90,
  );
  const groups: string[][] = [];
  for (const [i, r] of sorted.entries()) {
    const prev = sorted[i - 1];
    const tied =
      prev !== undefined &&
      figure(prev).attainment === figure(r).attainment &&
      figure(r).ttftP90 <= 1.05 * figure(prev).ttftP90;
    if (tied) groups.at(-1)!.push(r.policy);
    else groups.push([r.policy]);
  }
  return groups.map((g) => g.sort().join(" = "));
}

export interface RankVerdict {
  workload: string;
  factor: number;
  real: string[];
  simulated: string[];
  same: boolean;
}

/** Per workload and rate: the policies ranked by the real medians and by the simulator. */
export function rankings(runs: FidelityRun[]): RankVerdict[] {
  const groups = new Map<string, FidelityRun[]>();
  for (const r of runs) {
    const k = `${r.workload}\0${r.factor}`;
    groups.set(k, [...(groups.get(k) ?? []), r]);
  }
  return [...groups.values()].map((g) => {
    const real = ranked(g, (r) => verdictOf(r).median);
    const simulated = ranked(g, (r) => r.simulated);
    return { workload: g[0]!.workload, factor: g[0]!.factor, real, simulated, same: real.join() === simulated.join() };
  });
}

const pct = (x: number) => (Number.isFinite(x) ? `${(100 * x).toFixed(1)}%` : "–");
const ms = (x: number, d = 0) => (Number.isFinite(x) ? x.toFixed(d) : "–");
const signed = (x: number) => (Number.isFinite(x) ? `${x >= 0 ? "+" : ""}${(100 * x).toFixed(0)}%` : "–");

/** The study as markdown: the saturation found, one row per run, and the rankings. */
export function fidelityMarkdown(r: FidelityResult): string {
  const out: string[] = [
    `Cluster file ${r.cluster}; SLO ${r.slo} (TTFT ms, TPOT ms, end to end); 1P1D.`,
    "",
    "| workload | prompts × | simulated saturated req/s | real saturated req/s | learned table |",
    "|---|---|---|---|---|",
  ];
  for (const w of r.workloads)
    out.push(
      `| ${w.name} | ${w.promptScale.toFixed(3)} | ${w.simSaturatedRps.toFixed(2)} | ${w.realSaturatedRps.toFixed(2)} | ` +
        `${w.learned ? `${w.learned.bits} (${w.learned.rounds} rounds)` : "–"} |`,
    );
  out.push(
    "",
    "Real: median of the repeats (± the largest deviation from it: points for attainment, % for latencies); simulated: the same arrivals.",
    "",
    "| workload | rate | policy | attainment real | sim | TTFT P50 real | sim | TTFT P90 real | sim | TPOT P50 real | sim | TPOT P90 real | sim | repeats agree | target met |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
  );
  for (const run of r.runs) {
    const v = verdictOf(run);
    const lat = (k: Exclude<Key, "attainment">, d: number) =>
      `${ms(v.median[k], d)} ±${ms(100 * v.spread[k])}% | ${ms(run.simulated[k], d)} (${signed(v.error[k])})`;
    out.push(
      `| ${run.workload.split(" (")[0]} | ${run.factor}× (${run.rps.toFixed(1)}/s) | ${run.policy} | ` +
        `${pct(v.median.attainment)} ±${ms(100 * v.spread.attainment)} | ${pct(run.simulated.attainment)} | ` +
        `${lat("ttftP50", 0)} | ${lat("ttftP90", 0)} | ${lat("tpotP50", 1)} | ${lat("tpotP90", 1)} | ` +
        `${v.repeatsAgree ? "yes" : "no"} | ${v.targetMet ? "yes" : "no"} |`,
    );
  }
  out.push(
    "",
    "| workload | rate | ranked by the real runs | ranked by the simulator | same |",
    "|---|---|---|---|---|",
  );
  for (const k of rankings(r.runs))
    out.push(
      `| ${k.workload.split(" (")[0]} | ${k.factor}× | ${k.real.join(" > ")} | ${k.simulated.join(" > ")} | ${k.same ? "yes" : "no"} |`,
    );
  return out.join("\n");
}
