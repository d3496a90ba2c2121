// The serving drift guard (src/router/drift-guard.ts) on synthetic outcomes: its statistic, its window, its control arm,
// and the hysteresis: a cluster that got worse than its rule reverts, a noisy but equal one and a clean one do not.
import { describe, expect, it } from "vitest";
import {
  ClusterMonitor,
  controlLeadZ,
  DRIFT_DEFAULTS,
  DriftGuard,
  learnedArmWorse,
  meetsSlo,
  validateDriftOptions,
  type DriftEvent,
  type DriftGuardOptions,
} from "../src/router/drift-guard.js";
import { Rng } from "../src/sim/rng.js";
import { encodeTable } from "../src/table/codec.js";
import { ruleTable } from "../src/table/rule-table.js";
import type { Table } from "../src/table/table.js";
import { kmeansTable, routerOn } from "./helpers.js";

const WORKERS = [
  { id: "prefill-a", role: "prefill" as const },
  { id: "decode-a", role: "decode" as const },
];
const prompt = (n: number): number[] => Array.from({ length: n }, (_, i) => (i * 7919) % 50000);
/** The scaler's mean is log1p(64) on every feature, so 64 tokens (no cache hit) standardize to 0: cluster 0, inside. */
const IN_CLUSTER_0 = { tokens: prompt(64), oslHat: 64 };
/** Nearest to cluster 0 but beyond its bound: (log1p(16) − log1p(64)) / 2 ≈ −0.67 on each feature, squared sum 1.8. */
const BEYOND_CLUSTER_0 = { tokens: prompt(16), oslHat: 16 };
const SLO = { ttft_ms: 2000, tpot_ms: 50 };
const OPTIONS = { windowS: 600, minSamples: 50, zRevert: 3, minGap: 0.02, controlShare: 0.05 };

/** Cluster 0 local, cluster 1 remote; the fallback rule sends everything remote, so its decisions are told apart. */
function learnedTable(extra: Partial<Table> = {}): Table {
  return kmeansTable(
    [
      [0, 0, 0, 0],
      [3, 3, 3, 3],
    ],
    [0, 1],
    {
      version: 2,
      scaler: { mean: Array(4).fill(Math.log1p(64)), std: Array(4).fill(2) },
      fallback: { kind: "always-remote", params: {} },
      ood_bound: [0.5, 1e9],
      slo: SLO,
      ...extra,
    },
  );
}

/** Routes `n` requests into cluster 0, 100 ms apart, each arm meeting the SLO with its own probability. */
function run(
  guard: DriftGuard,
  n: number,
  p: { learned: number; control: number },
  clock: { nowMs: number },
  rng: Rng,
): void {
  for (let i = 0; i < n; i++) {
    clock.nowMs += 100;
    const { ticket } = guard.route(IN_CLUSTER_0, clock.nowMs);
    if (!ticket) continue;
    const met = rng.next() < p[ticket.arm];
    guard.observe(ticket, { e2eMs: met ? 500 : 60_000, outputTokens: 10 }, clock.nowMs);
  }
}

function setUp(engine: "wasm" | "reference", options: DriftGuardOptions = {}) {
  const router = routerOn(engine, learnedTable(), { workers: WORKERS }, "release");
  const guard = new DriftGuard(router, { ...OPTIONS, ...options });
  const clock = { nowMs: 0 };
  const events: Array<DriftEvent & { atMs: number }> = [];
  guard.onEvent = (e) => events.push({ ...e, atMs: clock.nowMs });
  return { router, guard, events, clock, rng: new Rng(42, 1) };
}

describe("drift guard statistic", () => {
  it("gives the pooled one-sided two-proportion z of the control's lead", () => {
    // p̂ = 0.85, SE = √(0.85 · 0.15 · 2/100) = 0.0505: z = 0.10 / 0.0505 = 1.980
    expect(controlLeadZ({ requests: 100, met: 80 }, { requests: 100, met: 90 })).toBeCloseTo(1.98, 2);
    expect(controlLeadZ({ requests: 100, met: 90 }, { requests: 100, met: 80 })).toBeCloseTo(-1.98, 2);
  });

  it("is 0 when an arm is empty or every request met (or missed) the SLO", () => {
    expect(controlLeadZ({ requests: 0, met: 0 }, { requests: 50, met: 50 })).toBe(0);
    expect(controlLeadZ({ requests: 80, met: 80 }, { requests: 50, met: 50 })).toBe(0);
    expect(controlLeadZ({ requests: 80, met: 0 }, { requests: 50, met: 0 })).toBe(0);
  });

  it("reverts only with enough samples in both arms, a lead of at least minGap and z ≥ zRevert", () => {
    const o = { minSamples: 50, minGap: 0.02, zRevert: 3 };
    const worse = { requests: 1000, met: 800 };
    expect(learnedArmWorse(worse, { requests: 100, met: 98 }, o)).toBe(true); // z ≈ 4.6
    expect(learnedArmWorse(worse, { requests: 49, met: 49 }, o)).toBe(false); // too few controls
    expect(learnedArmWorse({ requests: 40, met: 0 }, { requests: 100, met: 100 }, o)).toBe(false); // too few learned
    expect(learnedArmWorse(worse, { requests: 100, met: 90 }, o)).toBe(false); // z ≈ 2.4 < 3
    // a lead of 1 point on a million requests is significant but below minGap
    expect(learnedArmWorse({ requests: 1e6, met: 0.9e6 }, { requests: 1e6, met: 0.91e6 }, o)).toBe(false);
  });

  it("judges an outcome by the learner's end-to-end budget: TTFT SLO + (osl − 1) × TPOT SLO", () => {
    expect(meetsSlo(SLO, { e2eMs: 2000 + 9 * 50, outputTokens: 10 })).toBe(true);
    expect(meetsSlo(SLO, { e2eMs: 2000 + 9 * 50 + 1, outputTokens: 10 })).toBe(false);
    expect(meetsSlo(SLO, { e2eMs: 2000, outputTokens: 0 })).toBe(true);
    expect(meetsSlo(SLO, { failed: true })).toBe(false);
  });

  it("rejects bad options by name", () => {
    const router = routerOn("reference", learnedTable(), { workers: WORKERS });
    expect(() => new DriftGuard(router, { seed: 1.5 })).toThrow(/seed must be a safe integer/);
    expect(() => new DriftGuard(router, { controlShare: 0.7 })).toThrow(/controlShare must be a number in \[0, 0.5\]/);
    expect(() => new DriftGuard(router, { minSamples: 0 })).toThrow(/minSamples must be an integer ≥ 1, got 0/);
    expect(() => new DriftGuard(router, { windowS: 0 })).toThrow(/windowS/);
  });
});

/**
 * One cluster's monitor fed `rate` requests a second for `hours`, a `share` of them control, each arm meeting the SLO
 * with its own probability; the time of the first revert in seconds, or null.
 */
function simulateCluster(o: {
  learned: number;
  control: number;
  hours: number;
  rate?: number;
  seed?: number;
  options?: DriftGuardOptions;
}): number | null {
  const options = validateDriftOptions(o.options ?? {});
  const m = new ClusterMonitor(options);
  const rng = new Rng(o.seed ?? 1, 2);
  const rate = o.rate ?? 10;
  for (let i = 0; i < o.hours * 3600 * rate; i++) {
    const nowMs = (i * 1000) / rate;
    const which = rng.next() < options.controlShare ? "control" : "learned";
    if (m.record(which, rng.next() < o[which], nowMs)?.type === "revert") return nowMs / 1000;
  }
  return null;
}

describe("drift guard hysteresis, one cluster (defaults: 5% control, 600 s window, z ≥ 3 held for 300 s)", () => {
  it("does not revert a noisy but equal cluster over simulated days at 10 requests/s", () => {
    for (const p of [0.9, 0.7]) {
      for (const seed of [1, 2]) expect(simulateCluster({ learned: p, control: p, hours: 24, seed })).toBeNull();
    }
  });

  it("does not revert a clean cluster, one that beats its rule", () => {
    expect(simulateCluster({ learned: 0.95, control: 0.9, hours: 24 })).toBeNull();
  });

  it("reverts within half an hour a cluster 11 points worse than its rule", () => {
    for (const seed of [1, 2, 3]) {
      const t = simulateCluster({ learned: 0.79, control: 0.9, hours: 2, seed });
      expect(t).not.toBeNull();
      expect(t!).toBeLessThan(1800);
      expect(t!).toBeGreaterThanOrEqual(DRIFT_DEFAULTS.revertAfterS); // never before the test has held that long
    }
  });

  it("does not revert on a breach shorter than revertAfterS, and reverts at once with revertAfterS 0", () => {
    const o = validateDriftOptions({ windowS: 20, minSamples: 10, revertAfterS: 60 });
    const m = new ClusterMonitor(o);
    // a control that always meets the SLO and a learned arm that meets it or not, one pair a second
    const feed = (fromS: number, pairs: number, learnedMet: boolean): Array<string | undefined> => {
      const changes = [];
      for (let i = 0; i < pairs; i++) {
        changes.push(m.record("control", true, (fromS + i) * 1000)?.type);
        changes.push(m.record("learned", learnedMet, (fromS + i + 0.5) * 1000)?.type);
      }
      return changes.filter(Boolean);
    };
    expect(feed(0, 40, false)).toEqual([]); // worse from t ≈ 10 s (10 of each) to 40 s: not 60 s
    expect(feed(40, 200, true)).toEqual([]); // recovered: the 20 s window forgets the bad stretch, the run is broken
    expect(feed(240, 100, false)).toEqual(["revert"]); // worse again, long enough
    expect(m.reverted).toBe(true);
    const immediate = new ClusterMonitor(validateDriftOptions({ minSamples: 10, revertAfterS: 0 }));
    for (let i = 0; i < 10; i++) {
      immediate.record("control", true, i);
      expect(immediate.record("learned", false, i)?.type ?? null).toBe(i === 9 ? "revert" : null);
    }
  });
});

for (const engine of ["wasm", "reference"] as const) {
  describe(`drift guard on a router (${engine} engine)`, () => {
    it("routes about controlShare of a learned cluster's requests by the core's fallback rule, as its control", () => {
      const { guard, clock } = setUp(engine);
      let control = 0;
      const n = 4000;
      for (let i = 0; i < n; i++) {
        const { decision, ticket } = guard.route(IN_CLUSTER_0, (clock.nowMs += 10));
        expect(ticket?.cluster).toBe(0);
        if (ticket?.arm === "control") {
          control++;
          expect(decision).toMatchObject({ reason: "rule-fallback", path: "remote", cluster: 0 });
        } else expect(decision).toMatchObject({ reason: "cluster", path: "local", cluster: 0 });
      }
      // binomial(4000, 0.05): mean 200, sd 13.8
      expect(control).toBeGreaterThan(200 - 5 * 13.8);
      expect(control).toBeLessThan(200 + 5 * 13.8);
      expect(guard.status(clock.nowMs)[0]).toMatchObject({ controlRouted: control, revertedRouted: 0 });
    });

    it("reverts a cluster that does worse than its rule, logs one event, and routes it by the rule after", () => {
      const { guard, events, clock, rng, router } = setUp(engine);
      run(guard, 5000, { learned: 0.8, control: 0.97 }, clock, rng);
      expect(events).toHaveLength(1);
      expect(events[0]).toMatchObject({ type: "revert", cluster: 0, value: "local" });
      expect(events[0]!.z).toBeGreaterThanOrEqual(3);
      expect(events[0]!.control.requests).toBeGreaterThanOrEqual(50);
      const status = guard.status(clock.nowMs)[0]!;
      expect(status).toMatchObject({ reverted: true, reverts: 1 });
      // every later request of cluster 0 is routed by the fallback rule, without a ticket (no probing by default)
      for (let i = 0; i < 200; i++) {
        const { decision, ticket } = guard.route(IN_CLUSTER_0, (clock.nowMs += 100));
        expect(decision).toMatchObject({ reason: "rule-fallback", path: "remote" });
        expect(ticket).toBeNull();
      }
      expect(guard.status(clock.nowMs)[0]!.revertedRouted).toBeGreaterThanOrEqual(200);
      // cluster 1 is untouched; the Router still shows the table as deployed
      expect(router.table.bits).toEqual([0, 1]);
      expect(guard.status(clock.nowMs)[1]).toMatchObject({ reverted: false, value: "remote" });
    });

    // the long runs (tens of thousands of routed requests) are registered on the wasm engine only: the reference
    // engine gives the same decisions (the tests above) and would only make them slower
    if (engine === "wasm")
      it("keeps a cluster whose arms are noisy but equal, and one that beats its rule", () => {
        for (const p of [
          { learned: 0.9, control: 0.9 },
          { learned: 0.5, control: 0.5 },
          { learned: 0.97, control: 0.9 },
        ]) {
          const { guard, events, clock, rng } = setUp(engine);
          run(guard, 30_000, p, clock, rng); // 50 windows of 600 s, ~1,500 controls
          expect(events, JSON.stringify(p)).toEqual([]);
          expect(guard.status(clock.nowMs)[0]!.reverted).toBe(false);
        }
      });

    it("stays reverted until the next table swap (re-enabling off), which starts afresh", () => {
      const { guard, events, clock, rng, router } = setUp(engine);
      run(guard, 5000, { learned: 0.7, control: 0.97 }, clock, rng);
      expect(events.map((e) => e.type)).toEqual(["revert"]);
      run(guard, 20_000, { learned: 1, control: 0.5 }, clock, rng); // the learned value is never tried again
      expect(events.map((e) => e.type)).toEqual(["revert"]);
      router.setTable(encodeTable(learnedTable()));
      expect(guard.status(clock.nowMs)[0]).toMatchObject({ reverted: false, reverts: 0, controlRouted: 0 });
      expect(guard.route(IN_CLUSTER_0, clock.nowMs).decision.reason).not.toBe("out-of-distribution");
    });

    if (engine === "wasm")
      it("re-enables only after a probation with no dirty look, when the learned arm is no worse", () => {
        const { guard, events, clock, rng } = setUp(engine, { reenableAfterS: 1800 });
        run(guard, 5000, { learned: 0.7, control: 0.97 }, clock, rng);
        expect(events.map((e) => e.type)).toEqual(["revert"]);
        const revertedAt = clock.nowMs;
        // while reverted the coin probes the learned value: still worse, so no re-enable however long
        run(guard, 60_000, { learned: 0.7, control: 0.97 }, clock, rng);
        expect(events.map((e) => e.type)).toEqual(["revert"]);
        expect(clock.nowMs - revertedAt).toBeGreaterThan(1800_000);
        // recovered: re-enabled, but not before reenableAfterS of clean looks after the recovery began
        const recoveredAt = clock.nowMs;
        run(guard, 60_000, { learned: 0.97, control: 0.9 }, clock, rng);
        expect(events.map((e) => e.type)).toEqual(["revert", "reenable"]);
        expect(events[1]!.atMs - recoveredAt).toBeGreaterThanOrEqual(1800_000);
        expect(guard.status(clock.nowMs)[0]).toMatchObject({ reverted: false, reenables: 1 });
        // given back its learned value: cluster 0 routes local again, but for the control draws
        const reasons = Array.from({ length: 200 }, () => guard.route(IN_CLUSTER_0, clock.nowMs).decision.reason);
        expect(reasons.filter((r) => r === "cluster").length).toBeGreaterThan(170);
      });

    it("tells the out-of-distribution share per cluster, over the window", () => {
      const { guard, clock } = setUp(engine, { controlShare: 0 });
      for (let i = 0; i < 300; i++) guard.route(i % 3 === 0 ? BEYOND_CLUSTER_0 : IN_CLUSTER_0, (clock.nowMs += 100));
      const s = guard.status(clock.nowMs)[0]!;
      expect(s.decisions).toBe(300);
      expect(s.oodShare).toBeCloseTo(1 / 3, 10);
      // ten minutes later the window holds none of them
      expect(guard.status(clock.nowMs + 600_000)[0]).toMatchObject({ decisions: 0, oodShare: 0 });
    });

    it("stays out of the way of a rule table: no tickets, no status, the rule's own decisions", () => {
      const router = routerOn(engine, ruleTable("always-local"), { workers: WORKERS });
      const guard = new DriftGuard(router, { controlShare: 0.5 });
      for (let i = 0; i < 50; i++) {
        const { decision, ticket } = guard.route(IN_CLUSTER_0);
        expect(ticket).toBeNull();
        expect(decision.path).toBe("local");
      }
      expect(guard.status()).toEqual([]);
    });
  });
}

describe("drift guard window", () => {
  it("forgets outcomes older than the window, so an old bad stretch cannot revert a cluster later", () => {
    const { guard, events, clock, rng } = setUp("wasm", { minSamples: 200 });
    // a bad stretch too short to reach minSamples controls, then 20 minutes of nothing
    run(guard, 2000, { learned: 0.6, control: 1 }, clock, rng);
    expect(events).toEqual([]);
    clock.nowMs += 1_200_000;
    expect(guard.status(clock.nowMs)[0]).toMatchObject({
      learned: { requests: 0, met: 0, attainment: null },
      control: { requests: 0, met: 0, attainment: null },
    });
    run(guard, 3000, { learned: 0.9, control: 0.9 }, clock, rng);
    expect(events).toEqual([]);
  });
});
