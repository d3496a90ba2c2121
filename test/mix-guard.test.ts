// The mix-shift guard (src/router/mix-guard.ts): its statistic, its window and hysteresis, that it alarms on a
// shifted mix, and that it stays quiet on held-out traffic of the family a table's clusters were learned on.
import { describe, expect, it } from "vitest";
import { prepare } from "../src/learn/prepare.js";
import { SimEnvironment } from "../src/learn/sim-environment.js";
import { MIX_DEFAULTS, MixGuard, populationStabilityIndex, validateMixOptions } from "../src/router/mix-guard.js";
import { parseSlo } from "../src/sim/metrics.js";
import { PRESETS } from "../src/sim/model-presets.js";
import { Rng } from "../src/sim/rng.js";
import { atScale } from "../src/sim/saturation.js";
import { parseSplit } from "../src/sim/split.js";
import { simulate } from "../src/sim/simulator.js";
import type { Workload } from "../src/sim/types.js";
import { loadWorkload } from "../src/sim/workload-files.js";
import type { Table } from "../src/table/table.js";

const SHARES = [0.3, 0.2, 0.15, 0.1, 0.1, 0.08, 0.05, 0.02];

/** `n` clusters drawn independently from `shares` (seeded). */
function draws(shares: number[], n: number, seed: number): number[] {
  const rng = new Rng(seed, 7);
  return Array.from({ length: n }, () => {
    let u = rng.next();
    for (let c = 0; c < shares.length; c++) if ((u -= shares[c]!) < 0) return c;
    return shares.length - 1;
  });
}

/** Feeds clusters to a guard; the decision indices (1-based) at which it alarmed and cleared. */
function feed(guard: MixGuard, clusters: number[]): { alarms: number[]; clears: number[] } {
  const alarms: number[] = [];
  const clears: number[] = [];
  clusters.forEach((c, i) => {
    const change = guard.observe(c);
    if (change === "alarm") alarms.push(i + 1);
    if (change === "clear") clears.push(i + 1);
  });
  return { alarms, clears };
}

describe("population stability index", () => {
  it("is 0 for a window with the training shares and grows with the shift", () => {
    expect(populationStabilityIndex([30, 20, 15, 10, 10, 8, 5, 2], SHARES)).toBeCloseTo(0, 12);
    const small = populationStabilityIndex([35, 15, 15, 10, 10, 8, 5, 2], SHARES);
    const large = populationStabilityIndex([60, 0, 0, 10, 10, 8, 10, 2], SHARES);
    expect(small).toBeGreaterThan(0);
    expect(large).toBeGreaterThan(small);
  });

  it("matches a hand computation with half a request per cluster on both sides", () => {
    // two clusters, training 50/50, window 20/0: q = (20.5, 0.5)/21, p = (10.5, 10.5)/21
    const q = [20.5 / 21, 0.5 / 21];
    const expected = (q[0]! - 0.5) * Math.log(q[0]! / 0.5) + (q[1]! - 0.5) * Math.log(q[1]! / 0.5);
    expect(populationStabilityIndex([20, 0], [0.5, 0.5])).toBeCloseTo(expected, 12);
    expect(expected).toBeCloseTo(1.77, 2);
  });
});

describe("mix guard window and hysteresis", () => {
  it("alarms once the window is full of a shifted mix, and clears when the mix is back", () => {
    const guard = new MixGuard(SHARES, { window: 200 });
    const shifted = draws([0.05, 0.05, 0.05, 0.1, 0.1, 0.15, 0.2, 0.3], 400, 1);
    const back = draws(SHARES, 600, 2);
    const { alarms, clears } = feed(guard, [...shifted, ...back]);
    expect(alarms).toEqual([200]); // the first full window; no second alarm while it holds
    expect(clears).toHaveLength(1);
    expect(clears[0]!).toBeGreaterThan(400);
    expect(guard.alarm).toBe(false);
    expect(guard.alarms).toBe(1);
  });

  it("does not look before the window is full", () => {
    const guard = new MixGuard(SHARES, { window: 50 });
    expect(feed(guard, Array(49).fill(7)).alarms).toEqual([]);
    expect(guard.status()).toMatchObject({ psi: null, alarm: false, decisions: 49 });
    expect(guard.observe(7)).toBe("alarm");
  });

  it("never alarms at the defaults on independent draws from the training shares (100,000 decisions, 3 seeds)", () => {
    for (const seed of [1, 2, 3]) {
      const guard = new MixGuard(SHARES);
      expect(feed(guard, draws(SHARES, 100_000, seed)).alarms).toEqual([]);
    }
  });

  it("ignores clusters outside the table and rejects bad options and shares by name", () => {
    const guard = new MixGuard([0.5, 0.5], { window: 20 });
    expect(guard.observe(-1)).toBeNull();
    expect(guard.observe(2)).toBeNull();
    expect(guard.status().decisions).toBe(0);
    expect(() => new MixGuard(SHARES, { window: 10 })).toThrow(/window must be an integer ≥ 20/);
    expect(() => new MixGuard(SHARES, { psiAlarm: 0.2, psiClear: 0.3 })).toThrow(/psiClear/);
    expect(() => new MixGuard([0.5, 0.6])).toThrow(/sum to 1/);
    expect(validateMixOptions({ psiAlarm: 1 })).toEqual({ window: MIX_DEFAULTS.window, psiAlarm: 1, psiClear: 0.5 });
  });
});

// A real family: k-means clusters learned as `dolphin train` learns them (src/learn/prepare.ts), on h100-8b 2P2D.
const BASE = { preset: PRESETS["h100-8b"]!, split: parseSplit("2P2D"), slo: parseSlo("2000,50") };
const SCALE = 4; // a busy cluster, as near saturation as the training in bench/mix-shift.ts, without its search

async function learnedClusters(workload: Workload): Promise<{ table: Table; shares: number[] }> {
  const p = await prepare(new SimEnvironment(workload, BASE), { k: 8, seed: 11 });
  const n = p.clusterSizes.reduce((a, b) => a + b, 0);
  return { table: p.makeTable(p.initial), shares: p.clusterSizes.map((s) => s / n) };
}

function clustersOf(w: Workload, table: Table): number[] {
  const records = simulate(w, { ...BASE, table }).records;
  return records.filter((r) => r.cluster >= 0).map((r) => r.cluster);
}

describe("mix guard on simulated traffic (seeded, deterministic)", () => {
  it("stays quiet on held-out arrivals of the training family and alarms on another family", async () => {
    const train = atScale(loadWorkload("humaneval", "auto", { seed: 11, requests: 1000 }), SCALE);
    const { table, shares } = await learnedClusters(train);
    for (const seed of [12, 13]) {
      const heldOut = atScale(loadWorkload("humaneval", "auto", { seed, requests: 1000 }), SCALE);
      const guard = new MixGuard(shares);
      expect(feed(guard, clustersOf(heldOut, table)).alarms).toEqual([]);
      expect(guard.status().psi!).toBeLessThan(MIX_DEFAULTS.psiAlarm / 2);
    }
    const other = atScale(loadWorkload("hybrid", "auto", { seed: 12, requests: 400 }), SCALE);
    const guard = new MixGuard(shares);
    expect(feed(guard, clustersOf(other, table)).alarms).toEqual([MIX_DEFAULTS.window]);
  }, 60_000);
});
