// A simulation routed through the serving drift guard (src/router/drift-guard.ts) with its mix-shift guard, so a
// study shows what `dolphin serve` would do with a table over a run (`dolphin eval --drift-guard`). Each request is
// routed by the guard (its control coin, the variants it stages in the core) and each finished or rejected request's
// outcome is reported to it at its simulated finish time, as the proxy reports an answer when it closes. Without
// this file's hook the simulator routes exactly as before (Simulation.routeHook is null).

import {
  DriftGuard,
  type DriftEvent,
  type DriftGuardOptions,
  type DriftTicket,
  type MixHandOverOptions,
  type MixShiftEvent,
} from "../router/drift-guard.js";
import type { SimConfig, SimResult } from "./sim-config.js";
import { Simulation } from "./simulator.js";
import type { Workload } from "./types.js";

export interface GuardTimelineEntry {
  type: DriftEvent["type"] | `mix-${MixShiftEvent["type"]}`;
  /** -1 for the mix-shift guard's alarm and clear */
  cluster: number;
  /** simulated seconds since the first arrival */
  atS: number;
  /** PSI (mix events) or the control's lead z (cluster events) */
  value: number;
}

export interface DriftGuardReport {
  options: Required<DriftGuardOptions>;
  /** false when the table had no training shares (no cluster_share and none given) or no learned cluster */
  mixGuard: boolean;
  reverts: number;
  reenables: number;
  handovers: number;
  handbacks: number;
  mixAlarms: number;
  /** per revert, seconds from the first arrival, and from the cluster's hand-over when it was handed over first */
  timeToRevertS: { cluster: number; sinceStartS: number; sinceHandoverS: number | null }[];
  /** decisions of learned clusters by who made them: the learned value (reason `cluster`: the handed-over
   *  clusters' probes too), the rule (control draws, reverted, handed over) */
  routed: { learned: number; control: number; reverted: number; handedOver: number };
  /** clusters still reverted and still handed over at the end of the run */
  revertedAtEnd: number[];
  handedOverAtEnd: number[];
  timeline: GuardTimelineEntry[];
}

/** Runs a workload through a fresh simulated cluster whose requests are routed through a DriftGuard. */
export function simulateWithDriftGuard(
  workload: Workload,
  config: SimConfig,
  options: DriftGuardOptions = {},
  mix: MixHandOverOptions | false = {},
): { result: SimResult; guard: DriftGuardReport } {
  const sim = new Simulation(config);
  const guard = new DriftGuard(sim.router, options, mix);
  const t0 = workload.requests.reduce((m, r) => Math.min(m, r.arrivalMs), Infinity);
  const atS = (): number => (sim.queue.nowMs - (Number.isFinite(t0) ? t0 : 0)) / 1000;
  const timeline: GuardTimelineEntry[] = [];
  const handedOverAt = new Map<number, number>();
  const timeToRevertS: DriftGuardReport["timeToRevertS"] = [];
  guard.onEvent = (e) => {
    timeline.push({ type: e.type, cluster: e.cluster, atS: atS(), value: e.z });
    if (e.type === "handover") handedOverAt.set(e.cluster, atS());
    if (e.type === "revert") {
      const since = handedOverAt.get(e.cluster);
      timeToRevertS.push({
        cluster: e.cluster,
        sinceStartS: atS(),
        sinceHandoverS: since === undefined ? null : atS() - since,
      });
    }
    if (e.type !== "handover") handedOverAt.delete(e.cluster);
  };
  guard.onMixShift = (e) => timeline.push({ type: `mix-${e.type}`, cluster: -1, atS: atS(), value: e.psi });
  const tickets = new Map<number, DriftTicket>();
  let learned = 0;
  sim.routeHook = {
    route(r, request, nowMs) {
      const { decision, ticket } = guard.route(request, nowMs);
      if (decision.reason === "cluster") learned++;
      if (ticket) tickets.set(r.id, ticket);
      return decision;
    },
    ended(r, record, nowMs) {
      const ticket = tickets.get(r.id);
      if (!ticket) return;
      tickets.delete(r.id);
      guard.observe(
        ticket,
        record.failed ? { failed: true } : { e2eMs: record.e2eMs, outputTokens: r.outputTokens },
        nowMs,
      );
    },
  };
  const result = sim.run(workload);
  const status = guard.status(sim.queue.nowMs);
  const sum = (f: (c: (typeof status)[number]) => number): number => status.reduce((a, c) => a + f(c), 0);
  return {
    result,
    guard: {
      options: { ...guard.options },
      mixGuard: guard.mixStatus() !== null,
      reverts: sum((c) => c.reverts),
      reenables: sum((c) => c.reenables),
      handovers: sum((c) => c.handovers),
      handbacks: sum((c) => c.handbacks),
      mixAlarms: guard.mixStatus()?.alarms ?? 0,
      timeToRevertS,
      routed: {
        learned,
        control: sum((c) => c.controlRouted),
        reverted: sum((c) => c.revertedRouted),
        handedOver: sum((c) => c.handedOverRouted),
      },
      revertedAtEnd: status.filter((c) => c.reverted).map((c) => c.cluster),
      handedOverAtEnd: status.filter((c) => c.handedOver).map((c) => c.cluster),
      timeline,
    },
  };
}
