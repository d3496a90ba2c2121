// Fitting the step-time model to step times measured on a real engine (`dolphin calibrate`, src/serve/vllm/
// calibrate.ts measures them): least squares on the model form of docs/simulator-calibration.md, coefficients ≥ 0,
// the fit's error at every measured point, the KV transfer as a link, and the cluster file that `--cluster` takes.
// Pure functions, no I/O, no Node built-ins.

import { attnPairs, stepTimeMs } from "./step-time.js";
import type { ModelPreset } from "./model-presets.js";

/** One measured step: what was in it (the model's inputs) and how long the engine says it took. */
export interface StepPoint {
  /** "prefill" (a prefill alone), "decode" (decodes alone), "mixed" (decodes and one prefill in one step). */
  kind: "prefill" | "decode" | "mixed";
  label: string;
  decodeSeqs: number;
  /** Σ context over the decode sequences (the mean over the steps measured, for a run of decode steps). */
  decodeContextTokens: number;
  prefillTokens: number;
  /** Σ attnPairs(N, P) over the prefill chunks in the step. */
  prefillAttnPairs: number;
  /** The step time the engine reports (from its Prometheus histograms), ms: the median over repeats. */
  measuredMs: number;
  /** The same from wall clock on the client, ms, where there is one (a cross-check; never fitted). */
  wallMs?: number;
  /** Repeat-to-repeat spread: (max − min) / median of the repeats. */
  spread: number;
}

/** One measured KV transfer: tokens shipped and the time the receiving engine's NIXL histogram reports. */
export interface TransferPoint {
  label: string;
  tokens: number;
  measuredMs: number;
  spread: number;
  /** The decode engine's TTFT on the remote path, and a local prefill of the same prompt on it (ms), if measured. */
  remoteTtftMs?: number;
  localTtftMs?: number;
}

export type StepCoefficients = Pick<ModelPreset, "tFixMs" | "weightStreamMs" | "kLinMs" | "kKvMs" | "cAttnMs">;

export interface PointError {
  label: string;
  kind: string;
  measuredMs: number;
  fittedMs: number;
  /** (fitted − measured) / measured */
  error: number;
}

export interface StepFit {
  coefficients: StepCoefficients;
  errors: PointError[];
  maxAbsError: number;
}

export interface TransferFit {
  alphaMs: number;
  /** Achieved bytes per second, 10^9 (the link's gbPerSecond with eta 1). */
  gbPerSecond: number;
  errors: PointError[];
  maxAbsError: number;
}

/** A prefill chunk of `newTokens` on `cachedTokens` of cached prefix, alone in its step. */
export function prefillFeatures(newTokens: number, cachedTokens: number) {
  return {
    decodeSeqs: 0,
    decodeContextTokens: 0,
    prefillTokens: newTokens,
    prefillAttnPairs: attnPairs(newTokens, cachedTokens),
  };
}

type Features = Pick<StepPoint, "decodeSeqs" | "decodeContextTokens" | "prefillTokens" | "prefillAttnPairs">;

/** The model at a point: stepTimeMs with tp 1 (calibration measures one engine). */
export function fittedStepMs(c: StepCoefficients, f: Features): number {
  const p = { ...c, tp: 1, cArMs: 0, kArMs: 0 } as ModelPreset;
  return stepTimeMs(p, f.decodeSeqs, f.decodeContextTokens, f.prefillTokens, f.prefillAttnPairs);
}

/** Solves A x = b (n×n, Gaussian elimination with partial pivoting); null when singular. */
function solve(a: number[][], b: number[]): number[] | null {
  const n = b.length;
  const m = a.map((row, i) => [...row, b[i]!]);
  for (let col = 0; col < n; col++) {
    let piv = col;
    for (let r = col + 1; r < n; r++) if (Math.abs(m[r]![col]!) > Math.abs(m[piv]![col]!)) piv = r;
    const scale = Math.max(...m.map((row) => Math.abs(row[col]!)));
    if (!(Math.abs(m[piv]![col]!) > 1e-12 * Math.max(scale, 1e-300))) return null;
    [m[col], m[piv]] = [m[piv]!, m[col]!];
    for (let r = 0; r < n; r++) {
      if (r === col) continue;
      const f = m[r]![col]! / m[col]![col]!;
      for (let k = col; k <= n; k++) m[r]![k]! -= f * m[col]![k]!;
    }
  }
  return m.map((row, i) => row[n]! / row[i]!);
}

/**
 * Least squares with every coefficient ≥ 0: min Σ (X·x − y)² over x ≥ 0, by trying each set of free coefficients
 * (the others held at 0) and keeping the best feasible one. Exact for the few columns the model has (≤ 5).
 * Columns are scaled to unit norm first (the features span 1 … 10^7).
 */
export function nonNegativeLeastSquares(x: number[][], y: number[]): { coef: number[]; sse: number } {
  const cols = x[0]?.length ?? 0;
  const norm = Array.from({ length: cols }, (_, j) => Math.sqrt(x.reduce((s, r) => s + r[j]! ** 2, 0)) || 1);
  const xs = x.map((r) => r.map((v, j) => v / norm[j]!));
  let best = { coef: new Array<number>(cols).fill(0), sse: y.reduce((s, v) => s + v * v, 0) };
  for (let mask = 1; mask < 1 << cols; mask++) {
    const free = [...Array(cols).keys()].filter((j) => mask & (1 << j));
    const ata = free.map((i) => free.map((j) => xs.reduce((s, r) => s + r[i]! * r[j]!, 0)));
    const aty = free.map((i) => xs.reduce((s, r, k) => s + r[i]! * y[k]!, 0));
    const sol = solve(ata, aty);
    if (!sol || sol.some((v) => v < 0)) continue;
    const coef = new Array<number>(cols).fill(0);
    free.forEach((j, k) => (coef[j] = sol[k]!));
    const sse = xs.reduce((s, r, k) => s + (r.reduce((a, v, j) => a + v * coef[j]!, 0) - y[k]!) ** 2, 0);
    if (sse < best.sse - 1e-15) best = { coef, sse };
  }
  return { coef: best.coef.map((c, j) => c / norm[j]!), sse: best.sse };
}

function errorsOf<P extends { label: string; measuredMs: number }>(
  points: P[],
  kind: (p: P) => string,
  model: (p: P) => number,
): { errors: PointError[]; maxAbsError: number } {
  const errors = points.map((p) => {
    const fittedMs = model(p);
    return {
      label: p.label,
      kind: kind(p),
      measuredMs: p.measuredMs,
      fittedMs,
      error: (fittedMs - p.measuredMs) / p.measuredMs,
    };
  });
  return { errors, maxAbsError: Math.max(0, ...errors.map((e) => Math.abs(e.error))) };
}

/**
 * Fits t = t_fix + max(T_w, k_lin·T) + k_kv·Σctx + c_attn·Σpairs to the points, minimising the squared *relative*
 * error (the target is a relative band). For a corner T_w = k_lin·T0 the model is linear in (t_fix, k_lin, k_kv,
 * c_attn) ≥ 0, solved exactly; T0 is scanned over {0} ∪ the points' T, then refined between the best one's neighbours.
 */
export function fitStepTime(points: StepPoint[]): StepFit {
  if (points.length === 0) throw new Error("no measured steps to fit");
  const y = points.map(() => 1);
  const ts = points.map((p) => p.decodeSeqs + p.prefillTokens);
  const at = (t0: number): { c: StepCoefficients; sse: number } => {
    const x = points.map((p, i) => {
      const w = 1 / p.measuredMs;
      return [w, Math.max(t0, ts[i]!) * w, p.decodeContextTokens * w, p.prefillAttnPairs * w];
    });
    const { coef, sse } = nonNegativeLeastSquares(x, y);
    const [tFixMs, kLinMs, kKvMs, cAttnMs] = coef as [number, number, number, number];
    return { c: { tFixMs, weightStreamMs: kLinMs * t0, kLinMs, kKvMs, cAttnMs }, sse };
  };
  // the corner: every point's T, then a golden-section search between the best one's neighbours
  const corners = [0, ...new Set(ts)].sort((a, b) => a - b).slice(0, -1);
  let bestI = 0;
  let best = at(0);
  corners.forEach((t0, i) => {
    const r = at(t0);
    if (r.sse < best.sse) [best, bestI] = [r, i];
  });
  let [lo, hi] = [corners[Math.max(0, bestI - 1)]!, corners[Math.min(corners.length - 1, bestI + 1)]!];
  const g = (Math.sqrt(5) - 1) / 2;
  for (let i = 0; i < 60 && hi - lo > 1e-9 * Math.max(1, hi); i++) {
    const [a, b] = [hi - g * (hi - lo), lo + g * (hi - lo)];
    const [ra, rb] = [at(a), at(b)];
    if (ra.sse < best.sse) best = ra;
    if (rb.sse < best.sse) best = rb;
    if (ra.sse < rb.sse) hi = b;
    else lo = a;
  }
  const c = best.c;
  return {
    coefficients: c,
    ...errorsOf(
      points,
      (p) => p.kind,
      (p) => fittedStepMs(c, p),
    ),
  };
}

/** Fits t = alpha + tokens·bytesPerToken / bandwidth (both ≥ 0) to the transfers, relative least squares. */
export function fitTransfer(points: TransferPoint[], kvBytesPerToken: number): TransferFit {
  if (points.length === 0) throw new Error("no measured transfers to fit");
  const x = points.map((p) => [1 / p.measuredMs, p.tokens / p.measuredMs]);
  const { coef } = nonNegativeLeastSquares(
    x,
    points.map(() => 1),
  );
  const [alphaMs, msPerToken] = coef as [number, number];
  // a transfer time that does not grow with tokens: an unbounded bandwidth, capped for the file's sake
  const gbPerSecond = msPerToken > 0 ? kvBytesPerToken / (msPerToken * 1e6) : 1e6;
  const model = (p: TransferPoint) => alphaMs + (p.tokens * kvBytesPerToken) / (gbPerSecond * 1e6);
  return { alphaMs, gbPerSecond, ...errorsOf(points, () => "transfer", model) };
}

/** What the engine says about itself: its KV cache and scheduler budget, and the model's KV bytes per token. */
export interface EngineFacts {
  numGpuBlocks: number;
  blockSize: number;
  kvBytesPerToken: number;
  weightBytes: number;
  maxNumBatchedTokens: number;
  maxNumSeqs: number;
}

/**
 * The cluster file `dolphin simulate --cluster FILE` takes: one preset with the fitted coefficients and the engine's
 * own KV capacity (hbmBytes = weights + blocks × block size × KV bytes per token, utilisation 1, so
 * kvCapacityTokens is the engine's), a link with the fitted transfer (eta 1: gbPerSecond is what was achieved), and
 * the provenance: every measured point with the fit's error there.
 */
export function calibratedClusterFile(o: {
  name: string;
  description: string;
  facts: EngineFacts;
  step: StepFit;
  points: StepPoint[];
  transfer?: { fit: TransferFit; points: TransferPoint[] };
  provenance: Record<string, unknown>;
}): Record<string, unknown> {
  const { facts: f, step } = o;
  const kvCapacityTokens = f.numGpuBlocks * f.blockSize;
  const round = (v: number) => Number(v.toPrecision(6));
  const c = step.coefficients;
  const preset = {
    description: o.description,
    tp: 1,
    tFixMs: round(c.tFixMs),
    weightStreamMs: round(c.weightStreamMs),
    kLinMs: round(c.kLinMs),
    cArMs: 0,
    kArMs: 0,
    kKvMs: round(c.kKvMs),
    cAttnMs: round(c.cAttnMs),
    kvBytesPerToken: f.kvBytesPerToken,
    hbmBytes: f.weightBytes + kvCapacityTokens * f.kvBytesPerToken,
    weightBytes: f.weightBytes,
    gpuMemoryUtilization: 1,
    maxNumBatchedTokens: f.maxNumBatchedTokens,
    maxNumSeqs: f.maxNumSeqs,
  };
  const linkName = `${o.name}-nixl`;
  const errorsAt = (e: PointError) => ({ ...e, error: round(e.error), fittedMs: round(e.fittedMs) });
  return {
    presets: { [o.name]: preset },
    ...(o.transfer
      ? {
          links: {
            [linkName]: {
              gbPerSecond: round(o.transfer.fit.gbPerSecond),
              alphaMs: round(o.transfer.fit.alphaMs),
              eta: 1,
            },
          },
        }
      : {}),
    provenance: {
      ...o.provenance,
      kv_cache: { num_gpu_blocks: f.numGpuBlocks, block_size: f.blockSize, tokens: kvCapacityTokens },
      step_fit: {
        max_abs_error: round(step.maxAbsError),
        points: o.points.map((p, i) => ({ ...p, ...errorsAt(step.errors[i]!) })),
      },
      ...(o.transfer
        ? {
            transfer_fit: {
              link: linkName,
              max_abs_error: round(o.transfer.fit.maxAbsError),
              points: o.transfer.points.map((p, i) => ({ ...p, ...errorsAt(o.transfer!.fit.errors[i]!) })),
            },
          }
        : {}),
    },
  };
}
