// The learner's scaling: requests' features (isl, eff_P, eff_D, osl_hat or a subset) are log1p'd and standardized
// (fitScaler, standardize) before they are clustered (src/learn/kmeans.ts, gmm.ts). The scaler goes into a table as
// docs/table-format.md describes, and standardize computes z as the core does, so a row is put in the cluster the
// core would put it in.

import { fail, flatten } from "./cluster-rows.js";

/** Smallest standard deviation fitScaler returns, so a constant column does not divide by zero (its z is then ~0). */
export const STD_FLOOR = 1e-6;

export interface Scaler {
  mean: number[];
  std: number[];
}

/** log1p, then the mean and population standard deviation of each column (std floored at STD_FLOOR = 1e-6, so a
 *  constant column does not divide by zero). Values must be finite and > −1. */
export function fitScaler(rows: number[][]): Scaler {
  const { x, n, d } = flatten("fitScaler", "rows", rows, Math.log1p);
  const mean = new Array<number>(d).fill(0);
  const std = new Array<number>(d).fill(0);
  for (let j = 0; j < d; j++) {
    let s = 0;
    for (let i = 0; i < n; i++) s += x[i * d + j]!; // bounded by n·d = x.length
    const m = s / n;
    let ss = 0;
    for (let i = 0; i < n; i++) {
      const e = x[i * d + j]! - m;
      ss += e * e;
    }
    mean[j] = m;
    std[j] = Math.max(Math.sqrt(ss / n), STD_FLOOR);
  }
  return { mean, std };
}

/** z = (log1p(x) − mean) / std per column, as the core computes it. */
export function standardize(rows: number[][], s: Scaler): number[][] {
  const { x, n, d } = flatten("standardize", "rows", rows, Math.log1p);
  if (s.mean.length !== d || s.std.length !== d) {
    fail("standardize", `scaler has ${s.mean.length} means and ${s.std.length} stds but rows have ${d} columns`);
  }
  const out: number[][] = [];
  for (let i = 0; i < n; i++) {
    const row = new Array<number>(d);
    for (let j = 0; j < d; j++) row[j] = (x[i * d + j]! - s.mean[j]!) / s.std[j]!;
    out.push(row);
  }
  return out;
}
