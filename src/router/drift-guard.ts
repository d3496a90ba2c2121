// The serving drift guard (issue 11, item 4): a learned table keeps checking, in production, that each of its learned
// clusters still does at least as well as the fallback rule it replaced, and reverts a cluster to the rule when it
// does not. Host-independent (no Node imports): `dolphin serve` wires it in (src/serve/proxy/routing.ts), and any
// host that routes through a Router can do the same.
//
// Control. Each request flips a seeded coin before it is routed: with probability `controlShare` it is routed on the
// *alternate* variant of the table, in which every learned cluster's value is `rule` (2). The core computes that
// decision (the fallback rule's, with the same features, workers and out-of-distribution bound), so the rule is never
// re-implemented here. The decision record says which arm a request fell in: reason `cluster` is the learned arm of
// its cluster, reason `rule-fallback` in a cluster whose table value is local/remote is its control arm;
// out-of-distribution requests go to the rule in both variants and count toward the cluster's OOD share only, and a
// request beyond its cluster's load bound (table version 3) is judged in neither arm: the learned variant sends it
// to the rule too (load-out-of-range), so the control arm must not count it either.
//
// Outcome. The host reports how each armed request ended; the guard judges it by the table's SLO with the learner's
// own reward (src/sim/metrics.ts meetsE2e, the paper's end-to-end attainment): met iff it did not fail and its
// end-to-end latency ≤ TTFT SLO + (output tokens − 1) × TPOT SLO.
//
// Statistic. Per cluster, over a sliding window of `windowS` seconds (kept in WINDOW_BUCKETS buckets): learned arm
// n_L requests, x_L met; control n_C, x_C. With p̂ = (x_L + x_C)/(n_L + n_C), the pooled one-sided two-proportion
// z-test of "the control meets the SLO more often" is z = (x_C/n_C − x_L/n_L) / √(p̂(1 − p̂)(1/n_L + 1/n_C)). The
// test finds the learned arm worse when n_L ≥ minSamples, n_C ≥ minSamples, the control leads by at least minGap
// (points of attainment, so a tiny but "significant" lead on huge counts does not count) and z ≥ zRevert (3: one-sided
// 0.13%). It is looked at after every outcome of the cluster, so a single crossing would come by chance sooner or
// later; the cluster reverts only when every look for revertAfterS (300 s) found the learned arm worse. Simulated
// with docs/serving.md's figures (10 requests/s in the cluster, 5% control, p = 0.9 and 0.7 in both arms): no false
// revert in 40 cluster-days, where reverting at the first crossing reverted 26 of the 40.
//
// Hysteresis. A reverted cluster is routed by the rule (its value staged as `rule` in the core: the core's own
// per-cluster override). With reenableAfterS = 0 (the default) it stays reverted until the next table swap: it lost
// to its rule in production, which is the signal to retrain. With reenableAfterS > 0 the roles of the arms swap (the
// coin's share now probes the learned value, the rest is the rule) and the cluster is re-enabled only after
// reenableAfterS seconds in which no look found the learned arm worse (any such look restarts the clock), and then
// only once a window with minSamples in each arm shows the learned arm's attainment at least the control's.
//
// Hand-over (issue 24, outcome 2). With training shares (the table's `cluster_share`, or `clusterShare` given for an
// older table) a mix-shift guard (src/router/mix-guard.ts) watches every routed request's cluster. When it raises an
// alarm, every learned cluster that is not reverted is handed over to the rule, routed as a reverted cluster in
// re-enable mode (the coin's share probes the learned value), until its arms give evidence either way: back to its
// learned value once a window shows the learned arm at least the control's, reverted when the revert test holds.
// The one-cluster state and its test live in drift-monitor.ts.

import type { Router } from "./router.js";
import type { Decision, RouteRequest } from "./types.js";
import { SPLITMIX_GAMMA, splitmix32 } from "../hashing/splitmix.js";
import { stageTable, type StagedTable } from "../table/staging.js";
import { beyondLoadBound } from "../table/load-bound.js";
import { CLUSTER_LOCAL, CLUSTER_REMOTE, CLUSTER_RULE, type Table } from "../table/table.js";
import {
  ClusterMonitor,
  controlLeadZ,
  validateDriftOptions,
  type ArmCounts,
  type DriftArm,
  type DriftGuardOptions,
  type DriftOutcome,
  meetsSlo,
} from "./drift-monitor.js";
import { MixGuard, validateMixOptions, validateShares, type MixGuardOptions, type MixStatus } from "./mix-guard.js";

export {
  ClusterMonitor,
  controlLeadZ,
  DRIFT_DEFAULTS,
  learnedArmWorse,
  meetsSlo,
  validateDriftOptions,
  type ArmCounts,
  type DriftArm,
  type DriftGuardOptions,
  type DriftOutcome,
  type MonitorChange,
} from "./drift-monitor.js";

/** The mix-shift guard's settings in the drift guard; `false` turns it off. */
export interface MixHandOverOptions extends MixGuardOptions {
  /** Training shares for a table without `cluster_share` (one per cluster); ignored when the table has its own. */
  clusterShare?: number[];
}

/** Which arm a routed request belongs to; hand it back to observe() when the request is over. */
export interface DriftTicket {
  readonly cluster: number;
  readonly arm: DriftArm;
  /** The table adoption and the cluster's state the request was routed under (a stale ticket is ignored). */
  readonly generation: number;
  readonly epoch: number;
}

export interface DriftClusterStatus {
  cluster: number;
  /** The table's value for the cluster. */
  value: "local" | "remote" | "rule";
  reverted: boolean;
  /** Handed over to the rule by a mix-shift alarm, waiting for its arms' evidence. */
  handedOver: boolean;
  /** In the window: judged requests and those that met the SLO, per arm; attainment null without requests. */
  learned: ArmCounts & { attainment: number | null };
  control: ArmCounts & { attainment: number | null };
  /** The control's lead as a pooled two-proportion z (0 while either arm is empty). */
  z: number;
  /** Requests routed in this cluster in the window, and the share of them beyond its out-of-distribution bound. */
  decisions: number;
  oodShare: number;
  /** Since the table was adopted: requests the guard routed by the rule (control draws, reverted, handed over). */
  controlRouted: number;
  revertedRouted: number;
  handedOverRouted: number;
  reverts: number;
  reenables: number;
  handovers: number;
  handbacks: number;
}

export interface DriftEvent {
  type: "revert" | "reenable" | "handover" | "handback";
  cluster: number;
  value: "local" | "remote";
  learned: ArmCounts;
  control: ArmCounts;
  z: number;
  table: { kind: string; checksum: string };
}

// ---- the guard -------------------------------------------------------------------------------------------------

/** The guard's view of one adopted learned table. */
interface TableState {
  table: Table;
  generation: number;
  /** The table's value per cluster (0 local, 1 remote, 2 rule). */
  values: number[];
  /** Some cluster is local or remote: only then is there anything to control. */
  hasArms: boolean;
  monitors: ClusterMonitor[];
  /** The variants staged for the core: `normal` (reverted clusters at rule) and `alternate` (the coin's). */
  normal: StagedTable;
  alternate: StagedTable;
  /** The mix-shift guard, when there are training shares and learned clusters. */
  mix: MixGuard | null;
}

/** A mix-shift alarm raised or cleared. */
export interface MixShiftEvent {
  type: "alarm" | "clear";
  psi: number;
  /** The clusters handed over to the rule by this alarm. */
  handedOver: number[];
  table: { kind: string; checksum: string };
}

const VALUE_NAMES = ["local", "remote", "rule"] as const;

export class DriftGuard {
  private readonly o: Required<DriftGuardOptions>;
  private readonly coin: ControlCoin;
  private state: TableState | null = null;
  private followed: Table | null = null;
  private generation = 0;
  private readonly mixOptions: MixHandOverOptions | false;
  /** Called on every revert, re-enable, hand-over and hand-back (the proxy logs a line and counts it). */
  onEvent: ((event: DriftEvent) => void) | null = null;
  /** Called when the mix-shift guard raises or clears its alarm. */
  onMixShift: ((event: MixShiftEvent) => void) | null = null;

  constructor(
    private readonly router: Router,
    options: DriftGuardOptions = {},
    mix: MixHandOverOptions | false = {},
  ) {
    this.o = validateDriftOptions(options);
    this.coin = new ControlCoin(this.o.seed);
    if (mix) validateMixOptions(mix); // now, not at the first table
    if (mix && mix.clusterShare) validateShares(mix.clusterShare);
    this.mixOptions = mix;
  }

  get options(): Readonly<Required<DriftGuardOptions>> {
    return this.o;
  }

  /**
   * Routes one request through the router: on the alternate variant with probability controlShare, else on the
   * table with its reverted clusters at `rule`. The ticket is null when the request belongs to no arm.
   */
  route(request: RouteRequest, nowMs = Date.now()): { decision: Decision; ticket: DriftTicket | null } {
    const s = this.follow();
    if (!s) return { decision: this.router.route(request), ticket: null };
    let decision: Decision;
    const alternate = s.hasArms && this.coin.next() < this.o.controlShare;
    if (alternate) {
      activate(this.router, s.alternate);
      try {
        decision = this.router.route(request);
      } finally {
        activate(this.router, s.normal);
      }
    } else decision = this.router.route(request);
    const ticket = this.classify(s, decision, nowMs);
    if (s.mix && decision.cluster !== null) this.watchMix(s, decision.cluster, nowMs);
    return { decision, ticket };
  }

  /** The mix-shift guard of the current table (null without training shares or learned clusters). */
  mixStatus(): MixStatus | null {
    return this.follow()?.mix?.status() ?? null;
  }

  /** Records how an armed request ended and looks at its cluster's test. Stale tickets are ignored. */
  observe(ticket: DriftTicket, outcome: DriftOutcome, nowMs = Date.now()): void {
    const s = this.state;
    const slo = s?.table.slo;
    const m = s?.monitors[ticket.cluster];
    if (!s || !slo || !m || ticket.generation !== s.generation || ticket.epoch !== m.epoch) return;
    const change = m.record(ticket.arm, meetsSlo(slo, outcome), nowMs);
    if (!change) return;
    this.stageVariants(s);
    this.emit(s, change.type, ticket.cluster, change.learned, change.control);
  }

  private emit(s: TableState, type: DriftEvent["type"], cluster: number, learned: ArmCounts, control: ArmCounts): void {
    this.onEvent?.({
      type,
      cluster,
      value: VALUE_NAMES[s.values[cluster]!] as "local" | "remote",
      learned,
      control,
      z: controlLeadZ(learned, control),
      table: { kind: s.table.kind, checksum: s.table.checksum },
    });
  }

  /** One routed request's cluster to the mix-shift guard; on an alarm every learned cluster goes to the rule. */
  private watchMix(s: TableState, cluster: number, nowMs: number): void {
    const change = s.mix!.observe(cluster);
    if (!change) return;
    const handedOver =
      change === "alarm"
        ? s.monitors.flatMap((m, c) => (s.values[c] !== CLUSTER_RULE && m.handOver(nowMs) ? [c] : []))
        : [];
    if (handedOver.length > 0) this.stageVariants(s);
    this.onMixShift?.({
      type: change,
      psi: s.mix!.psi,
      handedOver,
      table: { kind: s.table.kind, checksum: s.table.checksum },
    });
    const none = { requests: 0, met: 0 };
    for (const c of handedOver) this.emit(s, "handover", c, none, none);
  }

  /** Every cluster of the current learned table (empty for a rule table). */
  status(nowMs = Date.now()): DriftClusterStatus[] {
    const s = this.follow();
    if (!s) return [];
    return s.monitors.map((m, c) => {
      const { learned, control, decisions, ood } = m.arms(nowMs);
      return {
        cluster: c,
        value: VALUE_NAMES[s.values[c]!]!,
        reverted: m.reverted,
        handedOver: m.handedOver,
        learned: withAttainment(learned),
        control: withAttainment(control),
        z: controlLeadZ(learned, control),
        decisions,
        oodShare: decisions > 0 ? ood / decisions : 0,
        controlRouted: m.controlRouted,
        revertedRouted: m.revertedRouted,
        handedOverRouted: m.handedOverRouted,
        reverts: m.reverts,
        reenables: m.reenables,
        handovers: m.handovers,
        handbacks: m.handbacks,
      };
    });
  }

  /** The state of the router's current table: a new table (Router.setTable) starts afresh, nothing reverted. */
  private follow(): TableState | null {
    const table = this.router.table;
    if (table === this.followed) return this.state;
    this.followed = table;
    this.generation++;
    this.state = table.kind === "kmeans" || table.kind === "gmm" ? this.adopt(table) : null;
    return this.state;
  }

  private adopt(table: Table): TableState {
    const values = [...(table.bits ?? [])];
    const staged = stageTable(table);
    const shares = trainingShares(table, this.mixOptions);
    const learned = values.some((v) => v === CLUSTER_LOCAL || v === CLUSTER_REMOTE);
    return {
      table,
      generation: this.generation,
      values,
      hasArms: learned,
      monitors: values.map(() => new ClusterMonitor(this.o)),
      normal: staged,
      alternate: this.variant(
        table,
        values.map(() => CLUSTER_RULE),
      ),
      mix: this.mixOptions && shares && learned ? new MixGuard(shares, this.mixOptions) : null,
    };
  }

  private variant(table: Table, values: number[]): StagedTable {
    return stageTable({ ...table, bits: values });
  }

  /**
   * normal: reverted and handed-over clusters at rule; alternate: learned clusters at rule, handed-over ones (and
   * reverted ones when re-enabling) probed at their learned value.
   */
  private stageVariants(s: TableState): void {
    const probing = this.o.reenableAfterS > 0;
    const ruled = (m: ClusterMonitor): boolean => m.reverted || m.handedOver;
    const probed = (m: ClusterMonitor): boolean => (m.reverted && probing) || m.handedOver;
    s.normal = this.variant(
      s.table,
      s.values.map((v, c) => (ruled(s.monitors[c]!) ? CLUSTER_RULE : v)),
    );
    s.alternate = this.variant(
      s.table,
      s.values.map((v, c) => (probed(s.monitors[c]!) ? v : CLUSTER_RULE)),
    );
    activate(this.router, s.normal);
  }

  private classify(s: TableState, d: Decision, nowMs: number): DriftTicket | null {
    const c = d.cluster;
    const m = c === null ? undefined : s.monitors[c];
    if (c === null || !m) return null;
    m.routed(d.reason === "out-of-distribution", nowMs);
    let which: DriftArm | null = null;
    if (d.reason === "cluster") which = "learned";
    // a control request beyond the cluster's load bound would have gone to the rule in the learned arm too
    // (load-out-of-range, no ticket): the two arms are judged on the same loads
    else if (d.reason === "rule-fallback" && s.values[c] !== CLUSTER_RULE && !beyondLoadBound(s.table, c, d.load))
      which = "control";
    if (which === "control") {
      if (m.reverted) m.revertedRouted++;
      else if (m.handedOver) m.handedOverRouted++;
      else m.controlRouted++;
    }
    if (which === null || (m.reverted && this.o.reenableAfterS === 0)) return null;
    return { cluster: c, arm: which, generation: s.generation, epoch: m.epoch };
  }
}

/**
 * The control coin: SplitMix32 (Steele, Lea & Flood's SplitMix, 32-bit) over a Weyl counter started from the seed.
 * It shares the mixing step (src/hashing/splitmix.ts) with src/sim/rng.ts, not the generator: the package's entry
 * (src/index.ts), which `dolphin hash` and `dolphin route` load, does not pull in the simulator.
 */
class ControlCoin {
  private state: number;
  constructor(seed: number) {
    this.state = ((seed >>> 0) ^ Math.imul(Math.floor(seed / 0x100000000) >>> 0, 0x85ebca6b)) | 0;
  }
  /** Uniform in [0, 1). */
  next(): number {
    const word = splitmix32(this.state); // the counter's current value, mixed
    this.state = (this.state + SPLITMIX_GAMMA) | 0;
    return word / 0x100000000;
  }
}

/** Makes a staged variant the core's active table (setTable: the core validates it; the Router's table is unchanged). */
function activate(router: Router, v: StagedTable): void {
  router.engine.setTable(v.kind, v.k, v.dims, v.staged, v.oslAt);
}

/** The table's cluster_share (format version 3), else the given shares when they are one per cluster. */
function trainingShares(table: Table, mix: MixHandOverOptions | false): number[] | null {
  if (!mix) return null;
  const own = table.cluster_share;
  const k = table.bits?.length ?? 0;
  if (own) return own;
  return mix.clusterShare && mix.clusterShare.length === k ? mix.clusterShare : null;
}

function withAttainment(a: ArmCounts): ArmCounts & { attainment: number | null } {
  return { ...a, attainment: a.requests > 0 ? a.met / a.requests : null };
}
