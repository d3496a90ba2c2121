// The guarded search (src/learn/guard.ts): starts at the rule, moves a cluster only on a significant paired gain,
// writes out-of-distribution bounds from the training features. Small simulated clusters; figures are simulated.
import { describe, expect, it } from "vitest";
import { latencyConstrained, oodBounds, pairedGain, searchGuarded } from "../src/learn/guard.js";
import { trainJob } from "../src/learn/job.js";
import type { Environment, Evaluation } from "../src/learn/environment.js";
import type { RequestRecord } from "../src/sim/metrics.js";
import { decodeTable } from "../src/table/codec.js";
import type { Fallback, Table } from "../src/table/table.js";
import { coreModule, kmeansTable } from "./helpers.js";

const SLO = { ttftMs: 1000, tpotMs: 50 };

/** A request that meets (or misses) the SLO, in `cluster`. */
function rec(id: number, cluster: number, met: boolean): RequestRecord {
  return {
    id,
    arrivalMs: id,
    promptTokens: 100,
    outputTokens: 10,
    turn: 1,
    path: "local",
    decodeWorker: "d",
    prefillWorker: null,
    cluster,
    features: { isl: 100, effP: 100, effD: 100, oslHat: 10 },
    oslClass: -1,
    prefixReuse: 0,
    prefixHitTokens: 0,
    decodeHitTokens: 0,
    ttftMs: met ? 100 : 5000,
    tpotMs: 10,
    e2eMs: met ? 200 : 6000,
    finishMs: 0,
    kvBytes: 0,
    failed: false,
  };
}

/** Cluster c's requests meet the SLO with probability `rates[c][value]` (value 0 local, 1 remote, 2 rule). */
class PairedEnv implements Environment {
  evaluations = 0;
  constructor(
    private readonly perCluster: number,
    private readonly rates: number[][],
    /** another set of arrivals: other draws for the same requests */
    private readonly arrivals = 0,
    /** the rule's rate in every cluster when the table's fallback is isl_bounding at 4096 tokens */
    private readonly rate4096?: number,
  ) {}
  async evaluate(t: Table): Promise<Evaluation> {
    this.evaluations++;
    const records: RequestRecord[] = [];
    t.bits!.forEach((v, c) => {
      for (let i = 0; i < this.perCluster; i++) {
        const id = c * 10_000 + i;
        // the same draw for every table with the same value (common random numbers); the values' draws differ, so
        // a move both helps and hurts some requests, as real moves do
        const u = (((id * 7 + v + this.arrivals * 131) * 2654435761) >>> 0) / 2 ** 32;
        const ruleRate = v === 2 && t.fallback?.params["max_local_prefill_tokens"] === 4096 ? this.rate4096 : undefined;
        records.push(rec(id, c, u < (ruleRate ?? this.rates[c]![v]!)));
      }
    });
    const byCluster = new Map<number, { requests: number; met: number }>();
    for (const r of records) {
      const s = byCluster.get(r.cluster) ?? { requests: 0, met: 0 };
      s.requests++;
      if (r.e2eMs < 1000) s.met++;
      byCluster.set(r.cluster, s);
    }
    const met = records.filter((r) => r.e2eMs < 1000).length;
    return { reward: met / records.length, byCluster, records };
  }
}

const makeTable = (values: number[], fallback?: Fallback): Table =>
  kmeansTable(
    values.map((_, i) => [i, 0, 0, 0]),
    values,
    { version: 2, ...(fallback ? { fallback } : {}) },
  );

/** Every request meets the SLO whatever the table; a cluster sent remote has P90 TPOT 8 ms instead of 10. */
class LatencyEnv implements Environment {
  evaluations = 0;
  async evaluate(t: Table): Promise<Evaluation> {
    this.evaluations++;
    const records = t.bits!.flatMap((v, c) =>
      Array.from({ length: 100 }, (_, i) => ({ ...rec(c * 10_000 + i, c, true), tpotMs: v === 1 ? 8 : 10 })),
    );
    const byCluster = new Map(t.bits!.map((_, c) => [c, { requests: 100, met: 100 }] as const));
    return { reward: 1, byCluster, records };
  }
}

describe("guarded search", () => {
  it("counts paired outcomes: B, W and McNemar's statistic", () => {
    const before = [rec(1, 0, true), rec(2, 0, false), rec(3, 0, false), rec(4, 0, true)];
    const after = [rec(1, 0, true), rec(2, 0, true), rec(3, 0, true), rec(4, 0, false)];
    expect(pairedGain(after, before, SLO)).toEqual({ improved: 2, worsened: 1, statistic: 1 / Math.sqrt(3) });
  });

  it("starts at the rule and moves only clusters with a significant gain and enough requests", async () => {
    // cluster 0: remote is much better; cluster 1: a gain within noise; cluster 2: large gain but too few requests
    const env = new PairedEnv(200, [
      [0.5, 0.9, 0.5],
      [0.5, 0.52, 0.5],
      [0.1, 0.9, 0.1],
    ]);
    const g = await searchGuarded(env, makeTable, 2, SLO, { reward: "paper" });
    expect(g.log[0]!.bits).toEqual([2, 2]);
    expect(g.values).toEqual([1, 2]);
    expect(g.reward).toBeGreaterThan(g.ruleReward);
    expect(g.moves).toHaveLength(1);
    expect(g.moves[0]!.statistic).toBeGreaterThanOrEqual(2.74);

    const few = new PairedEnv(20, [[0.1, 0.9, 0.1]]);
    const h = await searchGuarded(few, makeTable, 1, SLO, { reward: "paper" });
    expect(h.values).toEqual([2]); // 20 requests < 30: stays at the rule however large the gain looks
  });

  it("never ends below the all-rule table", async () => {
    const env = new PairedEnv(100, [
      [0.3, 0.2, 0.6],
      [0.5, 0.4, 0.7],
      [0.2, 0.1, 0.3],
    ]);
    const g = await searchGuarded(env, makeTable, 3, SLO);
    expect(g.values).toEqual([2, 2, 2]);
    expect(g.reward).toBe(g.ruleReward);
  });

  it("takes a move only if it replicates on held-out arrivals", async () => {
    const search = new PairedEnv(200, [[0.5, 0.9, 0.5]]);
    const noGain = new PairedEnv(200, [[0.5, 0.5, 0.5]], 1);
    const g = await searchGuarded(search, makeTable, 1, SLO, { reward: "paper", heldOut: noGain });
    expect(g.values).toEqual([2]); // significant on the search's arrivals, nothing on the held-out ones
    expect(g.rejectedOnHeldOut).toBeGreaterThanOrEqual(1);
    const sameGain = new PairedEnv(200, [[0.5, 0.9, 0.5]], 1);
    const h = await searchGuarded(search, makeTable, 1, SLO, { reward: "paper", heldOut: sameGain });
    expect(h.values).toEqual([1]);
    expect(h.rejectedOnHeldOut).toBe(0);
  });

  it("changes the fallback rule only on the same test as a move", async () => {
    const better: Fallback = {
      kind: "dynamo-isl",
      params: { max_local_prefill_tokens: 4096, max_local_prefill_ratio: 0.7 },
    };
    const env = new PairedEnv(200, [[0.5, 0.5, 0.5]], 0, 0.9);
    const g = await searchGuarded(env, makeTable, 1, SLO, { reward: "paper", fallbacks: [better] });
    expect(g.fallback).toEqual(better);
    expect(g.values).toEqual([2]);
    expect(g.moves[0]!.kind).toBe("fallback");
    expect(g.reward).toBeGreaterThan(g.ruleReward);
    const same = new PairedEnv(200, [[0.5, 0.5, 0.5]], 0, 0.52);
    const h = await searchGuarded(same, makeTable, 1, SLO, { reward: "paper", fallbacks: [better] });
    expect(h.fallback.params["max_local_prefill_tokens"]).toBe(2048); // a gain within noise keeps the default
  });

  it("breaks attainment ties by the larger P90 ratio to the rule's under reward both, not under paper", async () => {
    const both = await searchGuarded(new LatencyEnv(), makeTable, 1, SLO, { reward: "both" });
    expect(both.values).toEqual([1]); // same attainment, P90 TPOT 8 ms instead of the rule's 10
    expect(both.reward).toBe(both.ruleReward);
    const off = await searchGuarded(new LatencyEnv(), makeTable, 1, SLO, { reward: "both", latencyMoves: false });
    expect(off.values).toEqual([2]);
    const paper = await searchGuarded(new LatencyEnv(), makeTable, 1, SLO, { reward: "paper" });
    expect(paper.values).toEqual([2]);
  });

  it("tries a proposed table as one group move, on the same test", async () => {
    const env = new PairedEnv(200, [
      [0.5, 0.9, 0.5],
      [0.9, 0.5, 0.5],
    ]);
    const g = await searchGuarded(env, makeTable, 2, SLO, { reward: "paper", proposals: [[1, 0]] });
    expect(g.values).toEqual([1, 0]);
    expect(g.moves[0]!.kind).toBe("group");
    expect(g.moves[0]!.statistic).toBeGreaterThanOrEqual(2.74);
    const flat = new PairedEnv(200, [
      [0.5, 0.5, 0.5],
      [0.5, 0.5, 0.5],
    ]);
    const h = await searchGuarded(flat, makeTable, 2, SLO, { reward: "paper", proposals: [[1, 0]] });
    expect(h.values).toEqual([2, 2]); // no gain beyond noise: the proposal is not taken
    await expect(searchGuarded(env, makeTable, 2, SLO, { proposals: [[1]] })).rejects.toThrow(/K = 2/);
  });

  it("folds reward both's latency constraint into the reward a proposing search sees", async () => {
    const env = new LatencyEnv();
    const constrained = await latencyConstrained(env, makeTable([1]));
    expect((await constrained.evaluate(makeTable([1]))).reward).toBe(1);
    expect((await constrained.evaluate(makeTable([2]))).reward).toBe(0); // P90 TPOT 10 ms > 1.02 × 8 ms
    expect(constrained.evaluations).toBe(env.evaluations);
  });

  it("bounds each cluster by a quantile of its training scores (kmeans: distance; gmm: log-likelihood)", () => {
    const z = Array.from({ length: 100 }, (_, i) => [i / 100]).concat(
      Array.from({ length: 100 }, (_, i) => [10 + i / 100]),
    );
    const km = oodBounds(z, { kind: "kmeans", centroids: [[0], [10]] }, 0.99);
    expect(km[0]).toBeCloseTo(0.98 ** 2, 12); // nearest-rank 99th percentile of (i/100)²
    expect(km[1]).toBeCloseTo(0.98 ** 2, 12);
    const gm = oodBounds(z, { kind: "gmm", means: [[0], [10]], variances: [[1], [1]], weights: [0.5, 0.5] }, 0.99);
    // the lower tail, mirrored: nearest rank 99 of 100 from the top, i.e. x = 0.98 as for k-means
    expect(gm[0]).toBeCloseTo(Math.log(0.5) - 0.5 * Math.log(2 * Math.PI) - 0.5 * 0.98 ** 2, 9);
    expect(oodBounds([[0]], { kind: "kmeans", centroids: [[0], [5]] })).toEqual([0, 0]);
  });

  it("trains a version-3 table (load bounds) on a simulated cluster that routes in the core (reward both)", async () => {
    const job = {
      workload: "hybrid",
      split: "1P1D",
      slo: "taichi-a",
      cluster: "h100-8b",
      requests: 150,
      module: coreModule("release"),
    };
    const r = await trainJob({ ...job, k: 4, load: "x1", reward: "both" });
    const t = decodeTable(r.bytes);
    expect(t.version).toBe(3);
    expect(t.ood_bound).toHaveLength(4);
    expect(t.load_bound?.decode).toHaveLength(4);
    expect(r.result.guarded!.log[0]!.bits).toEqual([2, 2, 2, 2]);
    expect(r.result.bestReward).toBeGreaterThanOrEqual(r.result.guarded!.ruleReward);
    for (const m of r.result.guarded!.moves)
      if (m.kind === "latency") expect(m.improved).toBeGreaterThanOrEqual(m.worsened);
      else expect(m.statistic).toBeGreaterThanOrEqual(2.74);
  });
});
