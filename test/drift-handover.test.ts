// The drift guard's hand-over (src/router/drift-guard.ts, drift-monitor.ts): a mix-shift alarm hands every learned
// cluster to the rule, the coin's share still probing the learned value, until the arms give evidence: back to the
// learned value when the probe does at least as well as the rule, reverted when it does worse.
import { describe, expect, it } from "vitest";
import { DriftGuard, type DriftEvent, type MixHandOverOptions, type MixShiftEvent } from "../src/router/drift-guard.js";
import { Rng } from "../src/sim/rng.js";
import type { Table } from "../src/table/table.js";
import { kmeansTable, routerOn } from "./helpers.js";

const WORKERS = [
  { id: "prefill-a", role: "prefill" as const },
  { id: "decode-a", role: "decode" as const },
];
const prompt = (n: number): number[] => Array.from({ length: n }, (_, i) => (i * 7919) % 50000);
/** 64 tokens (no cache hit) standardize to 0 on every feature: cluster 0, inside its bound. */
const IN_CLUSTER_0 = { tokens: prompt(64), oslHat: 64 };
const SLO = { ttft_ms: 2000, tpot_ms: 50 };
/** Fast enough for a test: a fifth of the requests probe, 20 per arm decide, a revert after 10 s of being worse. */
const OPTIONS = { controlShare: 0.2, minSamples: 20, revertAfterS: 10, windowS: 600 };
const MIX: MixHandOverOptions = { window: 20 };

/** Cluster 0 local, cluster 1 remote, trained on half and half; the fallback rule sends everything remote. */
function table(extra: Partial<Table> = {}): Table {
  return kmeansTable(
    [
      [0, 0, 0, 0],
      [3, 3, 3, 3],
    ],
    [0, 1],
    {
      version: 3,
      scaler: { mean: Array(4).fill(Math.log1p(64)), std: Array(4).fill(2) },
      fallback: { kind: "always-remote", params: {} },
      ood_bound: [0.5, 1e9],
      slo: SLO,
      cluster_share: [0.5, 0.5],
      ...extra,
    },
  );
}

function setUp(engine: "wasm" | "reference", t: Table = table(), mix: MixHandOverOptions | false = MIX) {
  const router = routerOn(engine, t, { workers: WORKERS }, "release");
  const guard = new DriftGuard(router, OPTIONS, mix);
  const clock = { nowMs: 0 };
  const events: Array<DriftEvent & { atMs: number }> = [];
  const mixEvents: MixShiftEvent[] = [];
  guard.onEvent = (e) => events.push({ ...e, atMs: clock.nowMs });
  guard.onMixShift = (e) => mixEvents.push(e);
  return { guard, clock, events, mixEvents, rng: new Rng(7, 3) };
}

/** Routes `n` requests into cluster 0, 100 ms apart, each arm meeting the SLO with its probability; their paths. */
function run(
  s: ReturnType<typeof setUp>,
  n: number,
  p: { learned: number; control: number } | null,
): { local: number; remote: number } {
  const paths = { local: 0, remote: 0 };
  for (let i = 0; i < n; i++) {
    s.clock.nowMs += 100;
    const { decision, ticket } = s.guard.route(IN_CLUSTER_0, s.clock.nowMs);
    paths[decision.path]++;
    if (!ticket || !p) continue; // p null: no outcome is reported
    const met = s.rng.next() < p[ticket.arm];
    s.guard.observe(ticket, { e2eMs: met ? 500 : 60_000, outputTokens: 10 }, s.clock.nowMs);
  }
  return paths;
}

for (const engine of ["wasm", "reference"] as const) {
  describe(`drift guard hand-over (${engine} engine)`, () => {
    it("hands every learned cluster to the rule when the mix departs, the probe share still trying the learned value", () => {
      const s = setUp(engine);
      run(s, 19, { learned: 1, control: 1 }); // the window is not full yet: nothing happens
      expect(s.mixEvents).toEqual([]);
      run(s, 1, { learned: 1, control: 1 }); // 20 requests all in cluster 0 against a 50/50 training mix
      expect(s.mixEvents).toMatchObject([{ type: "alarm", handedOver: [0, 1] }]);
      expect(s.mixEvents[0]!.psi).toBeGreaterThan(0.75);
      expect(s.events.map((e) => [e.type, e.cluster])).toEqual([
        ["handover", 0],
        ["handover", 1],
      ]);
      expect(s.guard.status().map((c) => c.handedOver)).toEqual([true, true]);
      // handed over: the rule (always-remote) routes most of cluster 0, the probe share (20%) its learned local
      const paths = run(s, 100, null); // no outcome reported: no evidence either way, it stays handed over
      expect(paths.local).toBeGreaterThan(5);
      expect(paths.local).toBeLessThan(40);
      expect(s.guard.mixStatus()).toMatchObject({ alarm: true, alarms: 1 });
      expect(s.guard.status()[0]!.handedOverRouted).toBe(paths.remote);
    });

    it("hands a cluster back once its probe does at least as well as the rule", () => {
      const s = setUp(engine);
      run(s, 20, { learned: 1, control: 1 });
      run(s, 400, { learned: 0.9, control: 0.9 });
      const back = s.events.filter((e) => e.type === "handback");
      expect(back.map((e) => e.cluster)).toEqual([0]);
      expect(back[0]!.learned.requests).toBeGreaterThanOrEqual(OPTIONS.minSamples);
      expect(back[0]!.control.requests).toBeGreaterThanOrEqual(OPTIONS.minSamples);
      expect(s.guard.status()[0]).toMatchObject({ handedOver: false, reverted: false, handovers: 1, handbacks: 1 });
      expect(s.guard.status()[1]).toMatchObject({ handedOver: true }); // no traffic, no evidence: still on the rule
      // learned again: the table's local, but for the control draws (the mix alarm still holds: no new hand-over)
      const paths = run(s, 200, { learned: 0.9, control: 0.9 });
      expect(paths.local).toBeGreaterThan(140);
      expect(s.events.filter((e) => e.type === "handover")).toHaveLength(2);
    });

    it("reverts a handed-over cluster whose probe does worse than the rule", () => {
      const s = setUp(engine);
      run(s, 20, { learned: 1, control: 1 });
      run(s, 2000, { learned: 0.3, control: 0.95 });
      expect(s.events.map((e) => e.type).filter((t) => t !== "handover")).toEqual(["revert"]);
      expect(s.guard.status()[0]).toMatchObject({ reverted: true, handedOver: false, reverts: 1, handbacks: 0 });
      const paths = run(s, 100, { learned: 0.3, control: 0.95 });
      expect(paths.local).toBe(0); // reverted, re-enabling off: every request by the rule
    });

    it("takes the training shares from the options for a table without cluster_share, and does nothing without", () => {
      const { cluster_share: _, ...older } = table();
      const without = setUp(engine, { ...older, version: 2 });
      run(without, 100, { learned: 1, control: 1 });
      expect(without.guard.mixStatus()).toBeNull();
      expect(without.mixEvents).toEqual([]);
      const given = setUp(engine, { ...older, version: 2 }, { ...MIX, clusterShare: [0.5, 0.5] });
      run(given, 20, { learned: 1, control: 1 });
      expect(given.mixEvents.map((e) => e.type)).toEqual(["alarm"]);
      const off = setUp(engine, table(), false);
      run(off, 100, { learned: 1, control: 1 });
      expect(off.guard.mixStatus()).toBeNull();
    });

    it("stays quiet while the mix is the training mix", () => {
      const s = setUp(engine, table({ cluster_share: [0.999, 0.001] }));
      run(s, 500, { learned: 0.9, control: 0.9 });
      expect(s.mixEvents).toEqual([]);
      expect(s.guard.mixStatus()).toMatchObject({ alarm: false, decisions: 20 });
    });
  });
}

describe("drift guard mix options", () => {
  it("rejects bad mix options and shares when the guard is made", () => {
    const router = routerOn("reference", table(), { workers: WORKERS });
    expect(() => new DriftGuard(router, {}, { window: 5 })).toThrow(/mix guard: window/);
    expect(() => new DriftGuard(router, {}, { clusterShare: [0.7, 0.7] })).toThrow(/sum to 1/);
  });
});

for (const engine of ["wasm", "reference"] as const) {
  describe(`drift guard arms under load bounds (${engine} engine)`, () => {
    it("judges the control arm only on loads the learned arm could have: beyond the bound neither arm gets a ticket", () => {
      const bounded = table({ load_bound: { prefill: [1e9, 1e9], decode: [100, 100] } });
      const router = routerOn(engine, bounded, { workers: WORKERS }, "release");
      const guard = new DriftGuard(router, { ...OPTIONS, controlShare: 0.5 }, false);
      const arms = (): { reasons: Set<string>; tickets: number } => {
        const reasons = new Set<string>();
        let tickets = 0;
        for (let i = 0; i < 200; i++) {
          const { decision, ticket } = guard.route(IN_CLUSTER_0, 100 * i);
          reasons.add(decision.reason);
          if (ticket) tickets++;
        }
        return { reasons, tickets };
      };
      router.setLoad("decode-a", { activeDecodeTokens: 1000 }); // above cluster 0's decode bound
      const busy = arms();
      // the learned arm's requests go to the rule as load-out-of-range, the control arm's as rule-fallback
      expect(busy.reasons).toEqual(new Set(["load-out-of-range", "rule-fallback"]));
      expect(busy.tickets).toBe(0);
      router.setLoad("decode-a", { activeDecodeTokens: 0 }); // within the bound: both arms are judged again
      const idle = arms();
      expect(idle.reasons).toEqual(new Set(["cluster", "rule-fallback"]));
      expect(idle.tickets).toBe(200);
    });
  });
}
