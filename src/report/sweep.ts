// A load sweep: results of one workload, cluster and split at several loads (checkSweep), each placed on the load
// axis (sweepPoints: req/s, the load scale, a number in the spec, or the order given), and the order its policies
// are listed in (policyNames). The markdown table and the attainment-vs-load chart share them.

import { ReportError, type EvalOutput } from "./eval-output.js";
import { isPlainObject } from "../contract/values.js";
import { describeLoad, fmt } from "./numbers.js";

export interface SweepPoint {
  r: EvalOutput;
  x: number;
  label: string;
  axis: string;
}

/** Every result of a sweep must share workload, cluster and split. */
export function checkSweep(sweep: EvalOutput[], source = "sweep"): void {
  const first = sweep[0];
  if (!first) throw new ReportError(`${source}: a load sweep needs at least one result`);
  sweep.forEach((r, i) => {
    for (const k of ["workload", "cluster", "split"] as const) {
      if (r[k] !== first[k]) {
        throw new ReportError(
          `${source}[${i}]: ${k}: expected "${first[k]}" like the first result of the sweep, got "${r[k]}"`,
        );
      }
    }
  });
}

/** The x of each sweep point: req/s when every result has load.rps, else the load scale, else a number in the load spec, else the order. */
export function sweepPoints(sweep: EvalOutput[]): SweepPoint[] {
  checkSweep(sweep);
  const get = (r: EvalOutput, k: string): number | undefined => {
    const l = r.load;
    const v = isPlainObject(l) ? l[k] : undefined;
    return typeof v === "number" && Number.isFinite(v) ? v : undefined;
  };
  const fromSpec = (r: EvalOutput): number | undefined => {
    const s =
      typeof r.load === "number"
        ? String(r.load)
        : typeof r.load === "string"
          ? r.load
          : isPlainObject(r.load) && typeof r.load["spec"] === "string"
            ? r.load["spec"]
            : "";
    const m = /^\s*x?\s*(\d+(?:\.\d+)?)\s*x?\s*$/i.exec(s);
    return m ? Number(m[1]) : undefined;
  };
  const pick = (
    f: (r: EvalOutput) => number | undefined,
    axis: string,
    label: (v: number) => string,
  ): SweepPoint[] | null => {
    const xs = sweep.map(f);
    if (!xs.every((v): v is number => v !== undefined)) return null;
    return sweep.map((r, i) => ({ r, x: xs[i]!, label: label(xs[i]!), axis })).sort((a, b) => a.x - b.x);
  };
  return (
    pick(
      (r) => get(r, "rps"),
      "arrival rate (req/s)",
      (v) => `${fmt(v, 2)} req/s`,
    ) ??
    pick(
      (r) => get(r, "scale"),
      "load scale (× the workload's rate)",
      (v) => `×${fmt(v, 2)}`,
    ) ??
    pick(fromSpec, "load", (v) => String(v)) ??
    sweep.map((r, i) => ({ r, x: i, label: describeLoad(r.load), axis: "load (as given)" }))
  );
}

/** Policy names across a sweep, best SLO attainment at the highest load first (the legend reads like the lines end). */
export function policyNames(sweep: EvalOutput[]): string[] {
  const all = new Set<string>();
  for (const r of sweep) for (const n of Object.keys(r.policies)) all.add(n);
  const points = sweepPoints(sweep);
  const last = (n: string): number => {
    for (let i = points.length - 1; i >= 0; i--) {
      const p = points[i]!.r.policies[n];
      if (p) return p.slo_attainment;
    }
    return -1;
  };
  return [...all].sort((a, b) => last(b) - last(a) || (a < b ? -1 : a > b ? 1 : 0));
}
