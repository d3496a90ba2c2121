// One learned cluster's test in the drift guard (src/router/drift-guard.ts, whose first comment states the design):
// the options, the statistic, the sliding window and ClusterMonitor, which holds a cluster's state (learned, handed
// over to the rule on a mix-shift alarm, reverted) and decides its changes from its judged outcomes. Host-independent.

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

/** How a request ended, as the host saw it. */
export type DriftOutcome = { failed: true } | { failed?: false; e2eMs: number; outputTokens: number };

export interface ArmCounts {
  requests: number;
  met: number;
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
  /** handback: a handed-over cluster's probe did at least as well as the rule, so it is learned again */
  type: "revert" | "reenable" | "handback";
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
  /**
   * Handed over to the rule on a mix-shift alarm (src/router/mix-guard.ts): routed as a reverted cluster with
   * re-enabling on (the coin's share probes the learned value, the rest is the rule) until the arms give evidence
   * either way: the learned arm worse (the revert test, with its persistence) reverts it; a window with minSamples in
   * each arm and the learned arm's attainment at least the control's hands it back.
   */
  handedOver = false;
  /** Bumped on every change: the outcomes of requests routed before it are dropped (see DriftTicket.epoch). */
  epoch = 0;
  /** When the current unbroken run of looks that found the learned arm worse began (NaN: the last look did not). */
  private worseSinceMs = NaN;
  /** Reverted, with re-enabling on: when the current clean stretch began. */
  private cleanSinceMs = 0;
  reverts = 0;
  reenables = 0;
  handovers = 0;
  handbacks = 0;
  /** Requests routed by the rule: control draws while learned, routes while reverted and while handed over. */
  controlRouted = 0;
  revertedRouted = 0;
  handedOverRouted = 0;

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
      if (worse && nowMs - this.worseSinceMs >= this.o.revertAfterS * 1000)
        return this.change({ type: "revert", learned, control }, nowMs);
      if (!this.handedOver || worse || !this.atLeastControl(learned, control)) return null;
      return this.change({ type: "handback", learned, control }, nowMs);
    }
    if (worse) {
      this.cleanSinceMs = nowMs; // a dirty look restarts the probation
      return null;
    }
    if (this.o.reenableAfterS === 0 || nowMs - this.cleanSinceMs < this.o.reenableAfterS * 1000) return null;
    if (!this.atLeastControl(learned, control)) return null;
    return this.change({ type: "reenable", learned, control }, nowMs);
  }

  /** A mix-shift alarm: a learned cluster goes to the rule until its arms say which is better (false if reverted). */
  handOver(nowMs: number): boolean {
    if (this.reverted || this.handedOver) return false;
    this.handedOver = true;
    this.handovers++;
    this.restart(nowMs);
    return true;
  }

  /** minSamples in each arm and the learned arm's attainment at least the control's. */
  private atLeastControl(learned: ArmCounts, control: ArmCounts): boolean {
    const enough = learned.requests >= this.o.minSamples && control.requests >= this.o.minSamples;
    return enough && learned.met / learned.requests >= control.met / control.requests;
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
    this.handedOver = false;
    if (change.type === "revert") this.reverts++;
    else if (change.type === "reenable") this.reenables++;
    else this.handbacks++;
    this.restart(nowMs);
    return change;
  }

  /** A new state: earlier tickets are stale, the clocks restart and the window starts empty. */
  private restart(nowMs: number): void {
    this.epoch++;
    this.cleanSinceMs = nowMs;
    this.worseSinceMs = NaN;
    this.window.clear(); // the arms' shares change: a fresh window compares like with like
  }
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
