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
// out-of-distribution requests go to the rule in both variants and count toward the cluster's OOD share only.
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

import type { Router } from "./router.js";
import type { Decision, RouteRequest } from "./types.js";
import { SPLITMIX_GAMMA, splitmix32 } from "../hashing/splitmix.js";
import { stageTable, type StagedTable } from "../table/staging.js";
import { CLUSTER_LOCAL, CLUSTER_REMOTE, CLUSTER_RULE, type Table } from "../table/table.js";

export interface DriftGuardOptions {
  /** Share of requests routed on the alternate variant (the control arm of each learned cluster), in [0, 0.5]. */
  controlShare?: number;
  /** The sliding window both arms are compared over, seconds (> 0). */
  windowS?: number;
  /** Fewest judged requests each arm needs in the window before the test may act (integer ≥ 1). */
  minSamples?: number;
  /** One-sided z the control's lead must reach to revert (> 0). */
  zRevert?: number;
  /** Attainment points (0–1) the control must lead by to revert. */
  minGap?: number;
  /** Seconds the revert test must hold at every look before the cluster reverts (0: at the first look). */
  revertAfterS?: number;
  /** 0: a reverted cluster stays on the rule until the next table swap; > 0: clean seconds before re-enabling. */
  reenableAfterS?: number;
  /** Seed of the control coin. */
  seed?: number;
}

export const DRIFT_DEFAULTS: Readonly<Required<DriftGuardOptions>> = {
  controlShare: 0.05,
  windowS: 600,
  minSamples: 50,
  zRevert: 3,
  minGap: 0.02,
  revertAfterS: 300,
  reenableAfterS: 0,
  seed: 1,
};

export type DriftArm = "learned" | "control";

/** Which arm a routed request belongs to; hand it back to observe() when the request is over. */
export interface DriftTicket {
  readonly cluster: number;
  readonly arm: DriftArm;
  /** The table adoption and the cluster's state the request was routed under (a stale ticket is ignored). */
  readonly generation: number;
  readonly epoch: number;
}

/** How a request ended, as the host saw it. */
export type DriftOutcome = { failed: true } | { failed?: false; e2eMs: number; outputTokens: number };

export interface ArmCounts {
  requests: number;
  met: number;
}

export interface DriftClusterStatus {
  cluster: number;
  /** The table's value for the cluster. */
  value: "local" | "remote" | "rule";
  reverted: boolean;
  /** In the window: judged requests and those that met the SLO, per arm; attainment null without requests. */
  learned: ArmCounts & { attainment: number | null };
  control: ArmCounts & { attainment: number | null };
  /** The control's lead as a pooled two-proportion z (0 while either arm is empty). */
  z: number;
  /** Requests routed in this cluster in the window, and the share of them beyond its out-of-distribution bound. */
  decisions: number;
  oodShare: number;
  /** Since the table was adopted: requests the guard routed by the rule (control draws and reverted routes). */
  controlRouted: number;
  revertedRouted: number;
  reverts: number;
  reenables: number;
}

export interface DriftEvent {
  type: "revert" | "reenable";
  cluster: number;
  value: "local" | "remote";
  learned: ArmCounts;
  control: ArmCounts;
  z: number;
  table: { kind: string; checksum: string };
}

// ---- the statistic ---------------------------------------------------------------------------------------------

/** Pooled one-sided two-proportion z of the control's lead over the learned arm; 0 when an arm is empty or p̂ is 0 or 1. */
export function controlLeadZ(learned: ArmCounts, control: ArmCounts): number {
  const nL = learned.requests;
  const nC = control.requests;
  if (nL === 0 || nC === 0) return 0;
  const pooled = (learned.met + control.met) / (nL + nC);
  const se = Math.sqrt(pooled * (1 - pooled) * (1 / nL + 1 / nC));
  return se > 0 ? (control.met / nC - learned.met / nL) / se : 0;
}

/** The revert test: both arms have minSamples, the control leads by ≥ minGap and by z ≥ zRevert. */
export function learnedArmWorse(
  learned: ArmCounts,
  control: ArmCounts,
  o: Pick<Required<DriftGuardOptions>, "minSamples" | "minGap" | "zRevert">,
): boolean {
  if (learned.requests < o.minSamples || control.requests < o.minSamples) return false;
  const lead = control.met / control.requests - learned.met / learned.requests;
  return lead >= o.minGap && controlLeadZ(learned, control) >= o.zRevert;
}

/** The learner's reward (the paper's end-to-end attainment): no failure and E2E ≤ TTFT SLO + (osl − 1) × TPOT SLO. */
export function meetsSlo(slo: { ttft_ms: number; tpot_ms: number }, outcome: DriftOutcome): boolean {
  if (outcome.failed) return false;
  return outcome.e2eMs <= slo.ttft_ms + Math.max(outcome.outputTokens - 1, 0) * slo.tpot_ms;
}

// ---- the sliding window ----------------------------------------------------------------------------------------

/** Buckets per window: the window slides a tenth of its length at a time. */
const WINDOW_BUCKETS = 10;
const LEARNED_N = 0;
const LEARNED_MET = 1;
const CONTROL_N = 2;
const CONTROL_MET = 3;
const DECISIONS = 4;
const OOD = 5;
const FIELDS = 6;

/** Counts over the last WINDOW_BUCKETS buckets of `bucketMs` each, in a ring (a stale slot is zeroed on reuse). */
class SlidingCounts {
  private readonly counts = new Float64Array(WINDOW_BUCKETS * FIELDS);
  private readonly bucketOf = new Float64Array(WINDOW_BUCKETS).fill(-Infinity);

  constructor(private readonly bucketMs: number) {}

  add(nowMs: number, field: number, n = 1): void {
    const b = Math.floor(nowMs / this.bucketMs);
    const slot = ((b % WINDOW_BUCKETS) + WINDOW_BUCKETS) % WINDOW_BUCKETS;
    if (this.bucketOf[slot] !== b) {
      this.counts.fill(0, slot * FIELDS, slot * FIELDS + FIELDS);
      this.bucketOf[slot] = b;
    }
    this.counts[slot * FIELDS + field]! += n;
  }

  /** Every field summed over the buckets still inside the window at nowMs. */
  sum(nowMs: number): Float64Array {
    const b = Math.floor(nowMs / this.bucketMs);
    const out = new Float64Array(FIELDS);
    for (let slot = 0; slot < WINDOW_BUCKETS; slot++) {
      const age = b - this.bucketOf[slot]!;
      if (!(age >= 0 && age < WINDOW_BUCKETS)) continue;
      for (let f = 0; f < FIELDS; f++) out[f]! += this.counts[slot * FIELDS + f]!;
    }
    return out;
  }

  clear(): void {
    this.counts.fill(0);
    this.bucketOf.fill(-Infinity);
  }
}

export interface MonitorChange {
  type: "revert" | "reenable";
  learned: ArmCounts;
  control: ArmCounts;
}

// ---- one cluster's test -----------------------------------------------------------------------------------------

/**
 * The test of one learned cluster, apart from any router: its sliding window, the revert test with its persistence,
 * and the probation of a reverted cluster. `record` returns the change an outcome caused, if any. Simulations and
 * tests drive it directly; DriftGuard keeps one per cluster.
 */
export class ClusterMonitor {
  private readonly o: Required<DriftGuardOptions>;
  private readonly window: SlidingCounts;
  reverted = false;
  /** Bumped on every change: the outcomes of requests routed before it are dropped (see DriftTicket.epoch). */
  epoch = 0;
  /** When the current unbroken run of looks that found the learned arm worse began (NaN: the last look did not). */
  private worseSinceMs = NaN;
  /** Reverted, with re-enabling on: when the current clean stretch began. */
  private cleanSinceMs = 0;
  reverts = 0;
  reenables = 0;
  /** Requests routed by the rule: control draws while learned, and routes while reverted. */
  controlRouted = 0;
  revertedRouted = 0;

  constructor(options: DriftGuardOptions = {}) {
    this.o = validateDriftOptions(options);
    this.window = new SlidingCounts((this.o.windowS * 1000) / WINDOW_BUCKETS);
  }

  /** A request routed in this cluster, out of distribution or not (for the OOD share). */
  routed(outOfDistribution: boolean, nowMs: number): void {
    this.window.add(nowMs, DECISIONS);
    if (outOfDistribution) this.window.add(nowMs, OOD);
  }

  /** One judged outcome of an arm, then a look at the test: the change it caused, with the arms that caused it. */
  record(which: DriftArm, met: boolean, nowMs: number): MonitorChange | null {
    const n = which === "learned" ? LEARNED_N : CONTROL_N;
    this.window.add(nowMs, n);
    if (met) this.window.add(nowMs, n + 1); // LEARNED_MET, CONTROL_MET follow their counts
    const { learned, control } = this.arms(nowMs);
    const worse = learnedArmWorse(learned, control, this.o);
    if (!this.reverted) {
      if (!worse) this.worseSinceMs = NaN;
      else if (Number.isNaN(this.worseSinceMs)) this.worseSinceMs = nowMs;
      if (!worse || nowMs - this.worseSinceMs < this.o.revertAfterS * 1000) return null;
      return this.change({ type: "revert", learned, control }, nowMs);
    }
    if (worse) {
      this.cleanSinceMs = nowMs; // a dirty look restarts the probation
      return null;
    }
    if (this.o.reenableAfterS === 0 || nowMs - this.cleanSinceMs < this.o.reenableAfterS * 1000) return null;
    const enough = learned.requests >= this.o.minSamples && control.requests >= this.o.minSamples;
    if (!enough || learned.met / learned.requests < control.met / control.requests) return null;
    return this.change({ type: "reenable", learned, control }, nowMs);
  }

  /** Both arms in the window at nowMs. */
  arms(nowMs: number): { learned: ArmCounts; control: ArmCounts; decisions: number; ood: number } {
    const sums = this.window.sum(nowMs);
    return {
      learned: { requests: sums[LEARNED_N]!, met: sums[LEARNED_MET]! },
      control: { requests: sums[CONTROL_N]!, met: sums[CONTROL_MET]! },
      decisions: sums[DECISIONS]!,
      ood: sums[OOD]!,
    };
  }

  private change(change: MonitorChange, nowMs: number): MonitorChange {
    this.reverted = change.type === "revert";
    if (this.reverted) this.reverts++;
    else this.reenables++;
    this.epoch++;
    this.cleanSinceMs = nowMs;
    this.worseSinceMs = NaN;
    this.window.clear(); // the arms' shares change: a fresh window compares like with like
    return change;
  }
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
}

const VALUE_NAMES = ["local", "remote", "rule"] as const;

export class DriftGuard {
  private readonly o: Required<DriftGuardOptions>;
  private readonly coin: ControlCoin;
  private state: TableState | null = null;
  private followed: Table | null = null;
  private generation = 0;
  /** Called on every revert and re-enable (the proxy logs a line and counts it). */
  onEvent: ((event: DriftEvent) => void) | null = null;

  constructor(
    private readonly router: Router,
    options: DriftGuardOptions = {},
  ) {
    this.o = validateDriftOptions(options);
    this.coin = new ControlCoin(this.o.seed);
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
    return { decision, ticket: this.classify(s, decision, nowMs) };
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
    const { type, learned, control } = change;
    this.onEvent?.({
      type,
      cluster: ticket.cluster,
      value: VALUE_NAMES[s.values[ticket.cluster]!] as "local" | "remote",
      learned,
      control,
      z: controlLeadZ(learned, control),
      table: { kind: s.table.kind, checksum: s.table.checksum },
    });
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
        learned: withAttainment(learned),
        control: withAttainment(control),
        z: controlLeadZ(learned, control),
        decisions,
        oodShare: decisions > 0 ? ood / decisions : 0,
        controlRouted: m.controlRouted,
        revertedRouted: m.revertedRouted,
        reverts: m.reverts,
        reenables: m.reenables,
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
    return {
      table,
      generation: this.generation,
      values,
      hasArms: values.some((v) => v === CLUSTER_LOCAL || v === CLUSTER_REMOTE),
      monitors: values.map(() => new ClusterMonitor(this.o)),
      normal: staged,
      alternate: this.variant(
        table,
        values.map(() => CLUSTER_RULE),
      ),
    };
  }

  private variant(table: Table, values: number[]): StagedTable {
    return stageTable({ ...table, bits: values });
  }

  /** normal: reverted clusters at rule; alternate: learned clusters at rule, reverted ones probed when re-enabling. */
  private stageVariants(s: TableState): void {
    const probing = this.o.reenableAfterS > 0;
    s.normal = this.variant(
      s.table,
      s.values.map((v, c) => (s.monitors[c]!.reverted ? CLUSTER_RULE : v)),
    );
    s.alternate = this.variant(
      s.table,
      s.values.map((v, c) => (s.monitors[c]!.reverted && probing ? v : CLUSTER_RULE)),
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
    else if (d.reason === "rule-fallback" && s.values[c] !== CLUSTER_RULE) which = "control";
    if (which === "control") {
      if (m.reverted) m.revertedRouted++;
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

function withAttainment(a: ArmCounts): ArmCounts & { attainment: number | null } {
  return { ...a, attainment: a.requests > 0 ? a.met / a.requests : null };
}

/** The options with defaults filled in; a bad one is a RangeError naming it. */
export function validateDriftOptions(options: DriftGuardOptions): Required<DriftGuardOptions> {
  const o = { ...DRIFT_DEFAULTS, ...options };
  const check = (name: keyof DriftGuardOptions, ok: boolean, what: string): void => {
    if (!ok) throw new RangeError(`drift guard: ${name} must be ${what}, got ${String(o[name])}`);
  };
  check("controlShare", o.controlShare >= 0 && o.controlShare <= 0.5, "a number in [0, 0.5]");
  check("windowS", o.windowS > 0 && Number.isFinite(o.windowS), "a finite number > 0");
  check("minSamples", Number.isInteger(o.minSamples) && o.minSamples >= 1, "an integer ≥ 1");
  check("zRevert", o.zRevert > 0 && Number.isFinite(o.zRevert), "a finite number > 0");
  check("minGap", o.minGap >= 0 && o.minGap <= 1, "a number in [0, 1]");
  check("revertAfterS", o.revertAfterS >= 0 && Number.isFinite(o.revertAfterS), "a finite number ≥ 0");
  check("reenableAfterS", o.reenableAfterS >= 0 && Number.isFinite(o.reenableAfterS), "a finite number ≥ 0");
  check("seed", Number.isSafeInteger(o.seed), "a safe integer");
  return o;
}
