// Workloads for the cluster simulator: what every source of requests shares. The sources are the parsers for recorded
// traces and length files (traces.ts: Mooncake JSONL, Azure CSV, the per-dataset length CSVs, or files of the same
// formats a user brings) and the seeded synthetic generators (generators.ts: the paper's hybrid mix, its three
// single-type parts, multi-turn chat). This module holds their options, errors and messages, the hashing of prompts
// made of content segments, the arrival helpers, and arrival-rate scaling for `--load`.
//
// Every request carries the chained hashes of its prompt's full 16-token blocks (SIM_BLOCK_TOKENS), built from a
// description of the prompt's content, so that requests sharing a prefix share leading hashes exactly as vLLM's prefix
// cache would see them: h_i = xxh64Pair(content_i, h_{i−1}), h_{−1} = 0.
//
// Browser-safe: nothing here, in traces.ts or in generators.ts touches the file system; workload-files.ts (Node) reads
// files and hands their text to the parsers.

import { out, xxh64Pair } from "../hashing/xxh64.js";
import type { Rng } from "./rng.js";
import { SIM_BLOCK_TOKENS, type SimRequest, type Workload } from "./types.js";

export type WorkloadFormat = "auto" | "mooncake" | "azure" | "lengths";
export const GENERATORS = ["hybrid", "arxiv", "leval", "humaneval", "multiturn"] as const;
export type GeneratorName = (typeof GENERATORS)[number];

export interface WorkloadOptions {
  /** Seed of every random choice (arrival spreading, Poisson arrivals, generated lengths); default 1. */
  seed?: number;
  /** Generators: how many requests (default 2,000). Files: keep only the first this many in arrival order. */
  requests?: number;
  /** Generators and length files: arrival rate in requests/s (default per generator; 4 for length files).
   * Ignored by recorded traces (rescale them with withLoad). */
  rate?: number;
}

export type Load =
  { kind: "trace" } | { kind: "scale"; factor: number } | { kind: "rate"; rps: number } | { kind: "saturated" };

/** A malformed workload file or a bad workload argument. Row errors read "<file>:<line>: <field>: <what is wrong>". */
export class WorkloadError extends Error {
  override readonly name = "WorkloadError";
}

// ---------------------------------------------------------------------------------------------------------------
// Error messages, in one place.

const GENERATOR_LIST = GENERATORS.join(", ");
const LOAD_FORMS = `"trace", "saturated", "xS" (arrival rate scaled by S, e.g. x2) or a rate in requests/s (e.g. 12.5)`;

export function rowError(file: string, line: number, field: string, what: string): WorkloadError {
  return new WorkloadError(`${file}:${line}: ${field}: ${what}`);
}

export const workloadMessages = {
  unknownGenerator: (s: string) => `unknown generator "${s}" (generators: ${GENERATOR_LIST})`,
  unknownFormat: (file: string) =>
    `${file}: cannot tell the workload format: expected Mooncake JSONL (timestamp, input_length, output_length, hash_ids), ` +
    `an Azure CSV (TIMESTAMP,ContextTokens,GeneratedTokens) or a lengths CSV (num_prefill_tokens,num_decode_tokens,…); ` +
    `pass the format explicitly`,
  empty: (file: string) => `${file}: no requests`,
  badOption: (name: string, want: string, got: unknown) =>
    `workload option ${name}: must be ${want}, got ${String(got)}`,
  badLoad: (s: string) => `expected ${LOAD_FORMS}, got "${s}"`,
  noRate: (name: string) => `workload "${name}": cannot rescale to a rate: it has no arrival spread (rate 0)`,
};

// ---------------------------------------------------------------------------------------------------------------
// Prompt blocks from content segments (the generators' prompts; trace rows without block ids).

/** Marks the content of a block that straddles segments (folded from its pieces) before the first piece. */
const STRADDLE_LO = 0x5354_5244,
  STRADDLE_HI = 0x4c45_0000;

/** A run of prompt tokens with one content identity: token t of the run is "token t of content `id`" (id < 2^32). */
export interface Segment {
  id: number;
  tokens: number;
}

/**
 * Chained hashes of the full blocks of a prompt made of `segments` (their tokens must sum to ≥ promptTokens).
 * A block inside one segment has content (id, offset in the segment), so the same content at the same position gives
 * the same hash; a block straddling segments folds (id, offset | length << 27) of each piece. Offsets < 2^27.
 */
export function segmentBlocks(segments: readonly Segment[], promptTokens: number): Uint32Array {
  const n = Math.floor(promptTokens / SIM_BLOCK_TOKENS);
  const blocks = new Uint32Array(2 * n);
  let hLo = 0,
    hHi = 0;
  let seg = 0,
    segStart = 0; // the segment holding the block's first token, and the prompt position it starts at
  for (let b = 0; b < n; b++) {
    const start = b * SIM_BLOCK_TOKENS,
      end = start + SIM_BLOCK_TOKENS;
    while (segStart + segments[seg]!.tokens <= start) segStart += segments[seg++]!.tokens; // bounded by the sum check
    const s = segments[seg]!;
    let cLo: number, cHi: number;
    if (segStart + s.tokens >= end) {
      cLo = s.id;
      cHi = start - segStart;
    } else {
      cLo = STRADDLE_LO;
      cHi = STRADDLE_HI;
      for (let pos = start, k = seg, kStart = segStart; pos < end; kStart += segments[k++]!.tokens) {
        const t = segments[k]!;
        const take = Math.min(end, kStart + t.tokens) - pos;
        if (take <= 0) continue;
        xxh64Pair(cLo, cHi, t.id, (pos - kStart) | (take << 27));
        cLo = out.lo;
        cHi = out.hi;
        pos += take;
      }
    }
    xxh64Pair(cLo, cHi, hLo, hHi);
    hLo = blocks[2 * b] = out.lo;
    hHi = blocks[2 * b + 1] = out.hi;
  }
  return blocks;
}

// ---------------------------------------------------------------------------------------------------------------
// Shared helpers.

export function checkOptions(opts: WorkloadOptions): {
  seed: number;
  requests: number | undefined;
  rate: number | undefined;
} {
  const { seed = 1, requests, rate } = opts;
  if (!Number.isSafeInteger(seed)) throw new WorkloadError(workloadMessages.badOption("seed", "an integer", seed));
  if (requests !== undefined && !(Number.isSafeInteger(requests) && requests >= 1)) {
    throw new WorkloadError(workloadMessages.badOption("requests", "an integer ≥ 1", requests));
  }
  if (rate !== undefined && !(Number.isFinite(rate) && rate > 0))
    throw new WorkloadError(workloadMessages.badOption("rate", "a number > 0", rate));
  return { seed, requests, rate };
}

/** Mean arrival rate in requests/s: (n − 1) / span; 0 when there is no span. */
export function meanRate(requests: readonly SimRequest[]): number {
  const first = requests[0],
    last = requests[requests.length - 1];
  if (first === undefined || last === undefined || last.arrivalMs <= first.arrivalMs) return 0;
  return ((requests.length - 1) * 1000) / (last.arrivalMs - first.arrivalMs);
}

/** Sorts by arrival (stable), numbers the requests 0..n−1 and wraps them. */
export function finish(name: string, requests: SimRequest[]): Workload {
  requests.sort((a, b) => a.arrivalMs - b.arrivalMs);
  requests.forEach((r, i) => (r.id = i));
  return { name, requests, rate: meanRate(requests) };
}

/**
 * Poisson arrival times in ms: the first at 0, then exponential gaps, rescaled so that the mean rate (n − 1) / span
 * is exactly `rate` (a Poisson process conditioned on its span: the gaps keep their shape).
 */
export function poissonArrivals(n: number, rate: number, rng: Rng): Float64Array {
  const t = new Float64Array(n);
  for (let i = 1; i < n; i++) t[i] = t[i - 1]! + rng.exponential(1000 / rate);
  const span = t[n - 1] ?? 0;
  if (span > 0) {
    const scale = ((n - 1) * 1000) / rate / span;
    for (let i = 0; i < n; i++) t[i]! *= scale;
  }
  return t;
}

export function clampRound(x: number, min: number, max: number): number {
  return Math.min(max, Math.max(min, Math.round(x)));
}

/**
 * A workload's name from its file: the last path segment without its extension, as node:path's
 * basename(file, extname(file)) gives it on POSIX (written out so this module loads in a browser).
 */
export function workloadName(file: string): string {
  const base = file.replace(/\/+$/, "").split("/").pop() ?? "";
  const dot = base.lastIndexOf(".");
  return dot > 0 ? base.slice(0, dot) : base;
}

// ---------------------------------------------------------------------------------------------------------------
// Generator names, and the load.

export function isGenerator(s: string): s is GeneratorName {
  return (GENERATORS as readonly string[]).includes(s);
}

const POSITIVE = /^(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;

/** Parses a `--load` value: trace | saturated | xS (scale the arrival rate by S) | R (requests per second). */
export function parseLoad(s: string): Load {
  const t = s.trim().toLowerCase();
  if (t === "trace") return { kind: "trace" };
  if (t === "saturated") return { kind: "saturated" };
  const scaled = t.startsWith("x");
  const num = scaled ? t.slice(1) : t;
  const v = POSITIVE.test(num) ? Number(num) : NaN;
  if (!(Number.isFinite(v) && v > 0)) throw new WorkloadError(workloadMessages.badLoad(s));
  return scaled ? { kind: "scale", factor: v } : { kind: "rate", rps: v };
}

/**
 * The workload at another load: arrival times divided by the scale factor (for a rate, factor = rps / w.rate, so
 * the mean rate (n − 1) / span becomes rps). A new Workload of new request objects in the same order with the same
 * ids; block arrays are shared, not copied.
 */
export function withLoad(w: Workload, load: Exclude<Load, { kind: "saturated" }>): Workload {
  let factor: number;
  switch (load.kind) {
    case "trace":
      factor = 1;
      break;
    case "scale":
      factor = load.factor;
      if (!(Number.isFinite(factor) && factor > 0))
        throw new WorkloadError(workloadMessages.badOption("scale factor", "a number > 0", factor));
      break;
    case "rate":
      if (!(Number.isFinite(load.rps) && load.rps > 0))
        throw new WorkloadError(workloadMessages.badOption("rate", "a number > 0", load.rps));
      if (!(w.rate > 0)) throw new WorkloadError(workloadMessages.noRate(w.name));
      factor = load.rps / w.rate;
      break;
  }
  const requests = w.requests.map((r) => ({ ...r, arrivalMs: r.arrivalMs / factor }));
  return { name: w.name, requests, rate: load.kind === "rate" ? load.rps : w.rate * factor };
}

/**
 * A trace split in time for learning and evaluation: the first half of its requests to train, the second to evaluate,
 * each re-based to start at 0 and re-numbered, so the two share no request.
 */
export function splitInTime(all: Workload): { train: Workload; eval: Workload } {
  const half = Math.floor(all.requests.length / 2);
  const part = (from: number, to: number, name: string): Workload => {
    const reqs = all.requests.slice(from, to);
    const t0 = reqs[0]?.arrivalMs ?? 0;
    const requests = reqs.map((r, i) => ({ ...r, id: i, arrivalMs: r.arrivalMs - t0 }));
    const span = (requests.at(-1)?.arrivalMs ?? 0) / 1000;
    return { name, requests, rate: span > 0 ? (requests.length - 1) / span : all.rate };
  };
  return {
    train: part(0, half, `${all.name} (first half)`),
    eval: part(half, all.requests.length, `${all.name} (second half)`),
  };
}
