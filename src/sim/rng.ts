// Seeded pseudo-random numbers for the simulator and its workloads: every random choice takes a seed, so a run
// reproduces exactly from its configuration.
//
// Generator: xoshiro128** 1.0 (Blackman & Vigna, prng.di.unimi.it), 32-bit state words, period 2^128 − 1; state
// seeded by splitmix32 over (seed, stream) so that distinct streams of one seed are independent for our purposes.

import { splitmix32 } from "../hashing/splitmix.js";

const TWO_POW_32 = 0x100000000;

export class Rng {
  private s0: number;
  private s1: number;
  private s2: number;
  private s3: number;

  /** `seed`: any safe integer; `stream`: an independent sequence of the same seed (e.g. 1 arrivals, 2 lengths). */
  constructor(seed: number, stream = 0) {
    if (!Number.isSafeInteger(seed)) throw new RangeError(`rng: seed must be a safe integer, got ${seed}`);
    let x = splitmix32(
      (seed >>> 0) ^ splitmix32(Math.floor(seed / TWO_POW_32) >>> 0) ^ Math.imul(stream + 1, 0x632be5ab),
    );
    this.s0 = x = splitmix32(x);
    this.s1 = x = splitmix32(x);
    this.s2 = x = splitmix32(x);
    this.s3 = splitmix32(x);
    if ((this.s0 | this.s1 | this.s2 | this.s3) === 0) this.s0 = 1; // the all-zero state is a fixed point
  }

  /** Next u32. */
  u32(): number {
    const s1 = this.s1;
    const r = Math.imul(rotl(Math.imul(s1, 5), 7), 9) >>> 0;
    const t = s1 << 9;
    this.s2 ^= this.s0;
    this.s3 ^= s1;
    this.s1 ^= this.s2;
    this.s0 ^= this.s3;
    this.s2 ^= t;
    this.s3 = rotl(this.s3, 11);
    return r;
  }

  /** Uniform in [0, 1), 32 bits of resolution. */
  next(): number {
    return this.u32() / TWO_POW_32;
  }

  /** Uniform in [a, b). */
  uniform(a: number, b: number): number {
    return a + (b - a) * this.next();
  }

  /** Uniform integer in [0, n) (n ≤ 2^32; the modulo bias of the float method is < 2^-32 · n, negligible here). */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }

  /** Uniform integer in [lo, hi], both inclusive. */
  intBetween(lo: number, hi: number): number {
    return lo + this.int(hi - lo + 1);
  }

  /** Standard normal (Box–Muller; one of the pair is discarded to keep the state simple). */
  normal(): number {
    const u = 1 - this.next(); // (0, 1]: log(u) is finite
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * this.next());
  }

  /** Lognormal with the given arithmetic mean and log-space σ: exp(ln(mean) − σ²/2 + σ·Z). */
  lognormalWithMean(mean: number, sigma: number): number {
    return Math.exp(Math.log(mean) - (sigma * sigma) / 2 + sigma * this.normal());
  }

  /** Lognormal with the given median and log-space σ. */
  lognormalWithMedian(median: number, sigma: number): number {
    return median * Math.exp(sigma * this.normal());
  }

  /** Exponential with the given mean. */
  exponential(mean: number): number {
    return -mean * Math.log(1 - this.next());
  }

  /** Geometric on {1, 2, …} with the given mean (≥ 1): the number of trials up to the first success. */
  geometric(mean: number): number {
    const p = 1 / mean;
    if (p >= 1) return 1;
    return 1 + Math.floor(Math.log(1 - this.next()) / Math.log(1 - p));
  }

  /** Fisher–Yates shuffle in place. */
  shuffle<T>(items: T[]): T[] {
    for (let i = items.length - 1; i > 0; i--) {
      const j = this.int(i + 1);
      const t = items[i] as T;
      items[i] = items[j] as T;
      items[j] = t;
    }
    return items;
  }
}

function rotl(x: number, k: number): number {
  return (x << k) | (x >>> (32 - k));
}
