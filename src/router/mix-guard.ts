// The mix-shift guard (issue 24, outcome 2): does the recent traffic still have the make-up of the traffic the table
// was learned on? It watches the clusters' shares over a sliding window of the last `window` decisions against the
// training shares (the table's `cluster_share`) and raises an alarm when the two populations part. Host-independent
// (no Node imports); the drift guard (src/router/drift-guard.ts) hands the learned clusters over to the rule on an
// alarm, and any host can run one on its own.
//
// Statistic: the population stability index, PSI = Σ_k (q_k − p_k) ln(q_k / p_k), with q the window's shares and p
// the training's, each smoothed by half a request per cluster (q_k = (n_k + ½) / (N + ½K), p_k the same with
// N·p_k for n_k) so an empty cluster costs a bounded amount. PSI, not a chi-square, because a chi-square's one
// advantage is its null distribution (χ² with K − 1 degrees of freedom), which holds only for independent requests:
// real traffic comes in sessions and bursts (a conversation's turns land in the same clusters), so the nominal
// p-value would be wrong and the threshold has to be measured on held-out traffic of the training family anyway
// (bench/mix-shift.ts). What is left is PSI's own advantage: it is an effect size (symmetric KL divergence, in nats),
// so a threshold means the same size of shift at any window length; the window only sets the noise.
//
// Hysteresis: the alarm rises when PSI ≥ psiAlarm with a full window and clears when PSI < psiClear.
// Requests beyond their out-of-distribution bound count in their nearest cluster (the core reports it); the
// near-the-bound share is not watched: the core's decision carries no distance, and the mixes the issue saw depart
// inside the clusters (their features fall within the old bounds), which the shares catch.

export interface MixGuardOptions {
  /** Decisions in the sliding window (integer ≥ 20). */
  window?: number;
  /** PSI at or above which the mix has departed (> 0). Default measured: bench/mix-shift.ts, docs/serving.md. */
  psiAlarm?: number;
  /** PSI below which an alarm clears (0 < psiClear ≤ psiAlarm). */
  psiClear?: number;
}

/**
 * Defaults from the measurement (bench/mix-shift.ts; docs/serving.md "Mix-shift guard"): at a 200-decision window
 * no held-out window of the five families whose held-out traffic is stationary reached 0.75 (their largest PSI:
 * 0.58, mooncake's, whose sessions make it bursty), while every table alarmed on every other family's traffic
 * within its first 221 decisions. Clearing at half the alarm keeps a window near the threshold from flapping.
 */
export const MIX_DEFAULTS: Readonly<Required<MixGuardOptions>> = { window: 200, psiAlarm: 0.75, psiClear: 0.375 };

export type MixChange = "alarm" | "clear";

export interface MixStatus {
  /** PSI of the current window (null until the window is full). */
  psi: number | null;
  alarm: boolean;
  /** Decisions in the window, and each cluster's share of them next to its training share. */
  decisions: number;
  shares: number[];
  trainingShares: number[];
  alarms: number;
}

/** Half a request per cluster on both sides of the PSI (see above). */
const PSEUDO_COUNT = 0.5;

/** PSI of observed per-cluster counts against training shares, both smoothed by PSEUDO_COUNT per cluster. */
export function populationStabilityIndex(counts: ArrayLike<number>, trainingShares: readonly number[]): number {
  const k = trainingShares.length;
  let n = 0;
  for (let c = 0; c < k; c++) n += counts[c]!;
  const denominator = n + PSEUDO_COUNT * k;
  let psi = 0;
  for (let c = 0; c < k; c++) {
    const q = (counts[c]! + PSEUDO_COUNT) / denominator;
    const p = (n * trainingShares[c]! + PSEUDO_COUNT) / denominator;
    psi += (q - p) * Math.log(q / p);
  }
  return psi;
}

export class MixGuard {
  private readonly o: Required<MixGuardOptions>;
  private readonly shares: number[];
  /** The window's clusters in a ring, and how many of each. */
  private readonly ring: Int32Array;
  private readonly counts: Float64Array;
  private seen = 0;
  private current = NaN;
  alarm = false;
  alarms = 0;

  constructor(trainingShares: readonly number[], options: MixGuardOptions = {}) {
    this.o = validateMixOptions(options);
    this.shares = validateShares(trainingShares);
    this.ring = new Int32Array(this.o.window);
    this.counts = new Float64Array(this.shares.length);
  }

  get options(): Readonly<Required<MixGuardOptions>> {
    return this.o;
  }

  /** One routed request's cluster; the alarm's change it caused, if any. A cluster outside the table is ignored. */
  observe(cluster: number): MixChange | null {
    if (!(cluster >= 0 && cluster < this.shares.length)) return null;
    const slot = this.seen % this.o.window;
    if (this.seen >= this.o.window) this.counts[this.ring[slot]!]!--;
    this.ring[slot] = cluster;
    this.counts[cluster]!++;
    this.seen++;
    if (this.seen < this.o.window) return null;
    this.current = populationStabilityIndex(this.counts, this.shares);
    if (!this.alarm && this.current >= this.o.psiAlarm) {
      this.alarm = true;
      this.alarms++;
      return "alarm";
    }
    if (this.alarm && this.current < this.o.psiClear) {
      this.alarm = false;
      return "clear";
    }
    return null;
  }

  /** The PSI of the current window, NaN until it is full. */
  get psi(): number {
    return this.current;
  }

  status(): MixStatus {
    const decisions = Math.min(this.seen, this.o.window);
    return {
      psi: Number.isNaN(this.current) ? null : this.current,
      alarm: this.alarm,
      decisions,
      shares: [...this.counts].map((n) => (decisions > 0 ? n / decisions : 0)),
      trainingShares: [...this.shares],
      alarms: this.alarms,
    };
  }
}

/** The options with defaults filled in; a bad one is a RangeError naming it. */
export function validateMixOptions(options: MixGuardOptions): Required<MixGuardOptions> {
  const o = { ...MIX_DEFAULTS, ...options };
  if (options.psiClear === undefined && options.psiAlarm !== undefined) o.psiClear = o.psiAlarm / 2;
  const check = (name: keyof MixGuardOptions, ok: boolean, what: string): void => {
    if (!ok) throw new RangeError(`mix guard: ${name} must be ${what}, got ${String(o[name])}`);
  };
  check("window", Number.isInteger(o.window) && o.window >= 20, "an integer ≥ 20");
  check("psiAlarm", o.psiAlarm > 0 && Number.isFinite(o.psiAlarm), "a finite number > 0");
  check("psiClear", o.psiClear > 0 && o.psiClear <= o.psiAlarm, "a number in (0, psiAlarm]");
  return o;
}

/** Training shares: at least one, each finite and ≥ 0, summing to 1 within 1e-6 (the table format's rule). */
export function validateShares(shares: readonly number[]): number[] {
  const sum = shares.reduce((a, b) => a + b, 0);
  if (shares.length === 0 || !shares.every((s) => Number.isFinite(s) && s >= 0) || Math.abs(sum - 1) > 1e-6)
    throw new RangeError(
      `mix guard: training shares must be finite, ≥ 0 and sum to 1, got [${shares.map(String).join(", ")}]`,
    );
  return [...shares];
}
