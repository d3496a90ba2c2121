// The latency figures the loopback benchmarks report: quantiles of samples in ms, rounded to the microsecond
// (quantile() is the simulator's, the same interpolation everywhere a figure is compared), their differences,
// and the median of several runs' figures.

import { quantile } from "../src/sim/metrics.js";

export interface Quantiles {
  p50: number;
  p99: number;
}

export interface Latency {
  p50: number;
  p99: number;
  max: number;
}

export const r3 = (x: number): number => Math.round(x * 1000) / 1000;

export function quantiles(values: number[]): Quantiles {
  const s = [...values].sort((a, b) => a - b);
  return { p50: r3(quantile(s, 0.5)), p99: r3(quantile(s, 0.99)) };
}

/** p50, p99 and the worst of `ms`; null when there is none. */
export function latency(ms: number[]): Latency | null {
  if (ms.length === 0) return null;
  const s = [...ms].sort((a, b) => a - b);
  return { p50: r3(quantile(s, 0.5)), p99: r3(quantile(s, 0.99)), max: r3(s[s.length - 1]!) };
}

export const minus = (a: Quantiles, b: Quantiles): Quantiles => ({ p50: r3(a.p50 - b.p50), p99: r3(a.p99 - b.p99) });

/** The median of an odd count, the mean of the two middle values of an even one. */
export function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return r3(s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2);
}
