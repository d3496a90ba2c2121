// Workloads for the cluster simulator: parsers for recorded traces and length files (Mooncake JSONL, Azure CSV, the
// per-dataset length CSVs, or files of the same formats a user brings), seeded synthetic generators (the paper's
// hybrid mix, its three single-type parts, multi-turn chat), and arrival-rate scaling for `--load`.
//
// Every request carries the chained hashes of its prompt's full 16-token blocks (SIM_BLOCK_TOKENS), built from a
// description of the prompt's content, so that requests sharing a prefix share leading hashes exactly as vLLM's prefix
// cache would see them: h_i = xxh64Pair(content_i, h_{i−1}), h_{−1} = 0.
//
// Browser-safe: the parse* functions take text and never touch the file system; workload-files.ts (Node) reads files
// and hands their text to them.

import { out, xxh64Pair } from "../xxh64.js";
import { Rng } from "./rng.js";
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

function rowError(file: string, line: number, field: string, what: string): WorkloadError {
  return new WorkloadError(`${file}:${line}: ${field}: ${what}`);
}

const msg = {
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
// Block hashing.

/** Tokens covered by one Mooncake hash id. */
const MOONCAKE_BLOCK_TOKENS = 512;
/** 16-token blocks per Mooncake hash id. */
const SUB_BLOCKS = MOONCAKE_BLOCK_TOKENS / SIM_BLOCK_TOKENS;
const TWO_POW_32 = 0x100000000;
/** Marks the content of a block that straddles segments (folded from its pieces) before the first piece. */
const STRADDLE_LO = 0x5354_5244,
  STRADDLE_HI = 0x4c45_0000;

/** A run of prompt tokens with one content identity: token t of the run is "token t of content `id`" (id < 2^32). */
interface Segment {
  id: number;
  tokens: number;
}

/**
 * Chained hashes of the full blocks of a prompt made of `segments` (their tokens must sum to ≥ promptTokens).
 * A block inside one segment has content (id, offset in the segment), so the same content at the same position gives
 * the same hash; a block straddling segments folds (id, offset | length << 27) of each piece. Offsets < 2^27.
 */
function segmentBlocks(segments: readonly Segment[], promptTokens: number): Uint32Array {
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

/** Sub-blocks j < count of a Mooncake id are those of another id (a turn's partial last block, now grown). */
interface Inherited {
  from: number;
  count: number;
}

/** Where the 32 sub-block hashes of a Mooncake id were first computed, and the chain hash they followed. */
interface Computed {
  blocks: Uint32Array;
  /** Index of the id's first sub-block in `blocks`. */
  at: number;
  prevLo: number;
  prevHi: number;
}

/**
 * Chained hashes of a Mooncake request's 16-token blocks. Sub-block j of hash id X has content (X, j) — ids are
 * prefix-chained, so X fixes the position and everything before it — unless X inherits sub-block j from another id.
 * Ids are safe integers: X / 2^32 < 2^21, so (X_hi << 6 | j) is injective. An id already hashed after the same chain
 * hash is copied from `computed` instead (hashing is ~100 ns a block; ~40% of the trace's blocks repeat).
 */
function mooncakeBlocks(
  ids: readonly number[],
  promptTokens: number,
  inherit: ReadonlyMap<number, Inherited>,
  computed: Map<number, Computed>,
): Uint32Array {
  const n = Math.floor(promptTokens / SIM_BLOCK_TOKENS);
  const blocks = new Uint32Array(2 * n);
  let hLo = 0,
    hHi = 0,
    b = 0;
  for (let p = 0; p < ids.length && b < n; p++) {
    const id = ids[p]!;
    const count = Math.min(SUB_BLOCKS, n - b);
    const done = computed.get(id);
    if (done !== undefined && done.prevLo === hLo && done.prevHi === hHi) {
      blocks.set(done.blocks.subarray(2 * done.at, 2 * (done.at + count)), 2 * b);
      b += count;
      hLo = blocks[2 * b - 2]!;
      hHi = blocks[2 * b - 1]!;
      continue;
    }
    if (count === SUB_BLOCKS && done === undefined) computed.set(id, { blocks, at: b, prevLo: hLo, prevHi: hHi });
    const inherited = inherit.get(id);
    for (let j = 0; j < count; j++, b++) {
      let src = id;
      for (let i = inherited; i !== undefined && j < i.count; i = inherit.get(src)) src = i.from;
      xxh64Pair(src >>> 0, (Math.floor(src / TWO_POW_32) << 6) | j, hLo, hHi);
      hLo = blocks[2 * b] = out.lo;
      hHi = blocks[2 * b + 1] = out.hi;
    }
  }
  return blocks;
}

// ---------------------------------------------------------------------------------------------------------------
// Shared helpers.

function checkOptions(opts: WorkloadOptions): { seed: number; requests: number | undefined; rate: number | undefined } {
  const { seed = 1, requests, rate } = opts;
  if (!Number.isSafeInteger(seed)) throw new WorkloadError(msg.badOption("seed", "an integer", seed));
  if (requests !== undefined && !(Number.isSafeInteger(requests) && requests >= 1)) {
    throw new WorkloadError(msg.badOption("requests", "an integer ≥ 1", requests));
  }
  if (rate !== undefined && !(Number.isFinite(rate) && rate > 0))
    throw new WorkloadError(msg.badOption("rate", "a number > 0", rate));
  return { seed, requests, rate };
}

/** Mean arrival rate in requests/s: (n − 1) / span; 0 when there is no span. */
function meanRate(requests: readonly SimRequest[]): number {
  const first = requests[0],
    last = requests[requests.length - 1];
  if (first === undefined || last === undefined || last.arrivalMs <= first.arrivalMs) return 0;
  return ((requests.length - 1) * 1000) / (last.arrivalMs - first.arrivalMs);
}

/** Sorts by arrival (stable), numbers the requests 0..n−1 and wraps them. */
function finish(name: string, requests: SimRequest[]): Workload {
  requests.sort((a, b) => a.arrivalMs - b.arrivalMs);
  requests.forEach((r, i) => (r.id = i));
  return { name, requests, rate: meanRate(requests) };
}

/**
 * Poisson arrival times in ms: the first at 0, then exponential gaps, rescaled so that the mean rate (n − 1) / span
 * is exactly `rate` (a Poisson process conditioned on its span: the gaps keep their shape).
 */
function poissonArrivals(n: number, rate: number, rng: Rng): Float64Array {
  const t = new Float64Array(n);
  for (let i = 1; i < n; i++) t[i] = t[i - 1]! + rng.exponential(1000 / rate);
  const span = t[n - 1] ?? 0;
  if (span > 0) {
    const scale = ((n - 1) * 1000) / rate / span;
    for (let i = 0; i < n; i++) t[i]! *= scale;
  }
  return t;
}

function clampRound(x: number, min: number, max: number): number {
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

/** Splits text into lines (LF or CRLF) with 1-based numbers, skipping blank lines. */
function lines(text: string): { line: number; text: string }[] {
  const rows: { line: number; text: string }[] = [];
  const parts = text.split("\n");
  for (let i = 0; i < parts.length; i++) {
    const s = parts[i]!.endsWith("\r") ? parts[i]!.slice(0, -1) : parts[i]!;
    if (s.trim() !== "") rows.push({ line: i + 1, text: s });
  }
  return rows;
}

/** A token count or timestamp: a finite integer ≥ min. */
function checkInteger(v: unknown, file: string, line: number, field: string, min: number): number {
  if (v === undefined || v === null || v === "") throw rowError(file, line, field, "missing");
  if (typeof v !== "number" || !Number.isFinite(v))
    throw rowError(file, line, field, `not a number: ${JSON.stringify(v)}`);
  if (!Number.isInteger(v)) throw rowError(file, line, field, `not an integer: ${v}`);
  if (v < min) throw rowError(file, line, field, `must be ≥ ${min}, got ${v}`);
  if (v > Number.MAX_SAFE_INTEGER) throw rowError(file, line, field, `too large: ${v}`);
  return v;
}

const DECIMAL = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;

/** A CSV cell as a number (decimal notation only), or a row error naming the column. */
function csvNumber(raw: string | undefined, file: string, line: number, field: string): number {
  const s = (raw ?? "").trim();
  if (s === "") throw rowError(file, line, field, "missing");
  if (!DECIMAL.test(s)) throw rowError(file, line, field, `not a number: "${s}"`);
  return Number(s);
}

interface CsvRows {
  /** Column index by header name. */
  col: Map<string, number>;
  width: number;
  rows: { line: number; fields: string[] }[];
}

/** Parses a plain CSV (no quoting: every cell is a number or a datetime) and checks the header has `required`. */
function parseCsv(text: string, file: string, required: readonly string[]): CsvRows {
  const all = lines(text);
  const head = all[0];
  if (head === undefined) throw new WorkloadError(msg.empty(file));
  const names = head.text.split(",").map((s) => s.trim());
  const col = new Map(names.map((n, i) => [n, i] as const));
  for (const r of required) {
    if (!col.has(r))
      throw rowError(
        file,
        head.line,
        "header",
        `missing column "${r}" (expected ${required.join(",")}), got "${head.text}"`,
      );
  }
  const rows = all.slice(1).map(({ line, text: t }) => {
    const fields = t.split(",");
    if (fields.length !== names.length)
      throw rowError(file, line, "row", `expected ${names.length} fields, got ${fields.length}`);
    return { line, fields };
  });
  if (rows.length === 0) throw new WorkloadError(msg.empty(file));
  return { col, width: names.length, rows };
}

// ---------------------------------------------------------------------------------------------------------------
// Mooncake JSONL.

interface MooncakeRow {
  line: number;
  timestamp: number;
  input: number;
  output: number;
  ids: number[];
}

function mooncakeRow(text: string, file: string, line: number): MooncakeRow {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (err) {
    throw rowError(file, line, "json", (err as Error).message);
  }
  if (typeof v !== "object" || v === null || Array.isArray(v))
    throw rowError(file, line, "json", "expected an object per line");
  const o = v as Record<string, unknown>;
  const timestamp = checkInteger(o["timestamp"], file, line, "timestamp", 0);
  const input = checkInteger(o["input_length"], file, line, "input_length", 1);
  const output = checkInteger(o["output_length"], file, line, "output_length", 1);
  const ids = o["hash_ids"];
  if (ids === undefined) throw rowError(file, line, "hash_ids", "missing");
  if (!Array.isArray(ids)) throw rowError(file, line, "hash_ids", `not an array: ${JSON.stringify(ids)}`);
  const want = Math.ceil(input / MOONCAKE_BLOCK_TOKENS);
  if (ids.length !== want) {
    throw rowError(
      file,
      line,
      "hash_ids",
      `has ${ids.length} ids but input_length ${input} needs ceil(${input}/512) = ${want}`,
    );
  }
  for (let i = 0; i < ids.length; i++) {
    const id: unknown = ids[i];
    if (typeof id !== "number" || !Number.isSafeInteger(id) || id < 0) {
      throw rowError(file, line, "hash_ids", `id ${i} is not an integer ≥ 0: ${JSON.stringify(id)}`);
    }
  }
  return { line, timestamp, input, output, ids: ids as number[] };
}

/** Median gap between consecutive distinct timestamps: the quantisation bucket width (0 with fewer than 2). */
function bucketWidthMs(sorted: readonly MooncakeRow[]): number {
  const gaps: number[] = [];
  for (let i = 1; i < sorted.length; i++) {
    const g = sorted[i]!.timestamp - sorted[i - 1]!.timestamp;
    if (g > 0) gaps.push(g);
  }
  gaps.sort((a, b) => a - b);
  return gaps[gaps.length >> 1] ?? 0;
}

/**
 * Arrival times: timestamps as recorded, except that a trace with ties (quantised into buckets, ~3 s in Mooncake's)
 * has each bucket's arrivals spread uniformly over [t, t + min(width, next t − t)), width the median gap between
 * buckets; the sorted offsets go to the bucket's rows in file order, so the file's order is kept.
 */
function spreadArrivals(rows: readonly MooncakeRow[], rng: Rng): Float64Array {
  const arrivals = new Float64Array(rows.length);
  let quantised = false;
  for (let i = 1; i < rows.length && !quantised; i++) quantised = rows[i]!.timestamp === rows[i - 1]!.timestamp;
  const width = quantised ? bucketWidthMs(rows) : 0;
  for (let i = 0; i < rows.length;) {
    const t = rows[i]!.timestamp;
    let j = i;
    while (j < rows.length && rows[j]!.timestamp === t) j++;
    const span = width === 0 ? 0 : Math.min(width, j < rows.length ? rows[j]!.timestamp - t : width);
    const offsets = Array.from({ length: j - i }, () => rng.next() * span).sort((a, b) => a - b);
    for (let k = i; k < j; k++) arrivals[k] = t + offsets[k - i]!;
    i = j;
  }
  return arrivals;
}

/**
 * Sessions from block chains: request r is the next turn of an earlier request q when r's ids start with all of q's
 * ids but the last (q's last 512-token block is usually partial, so it is re-hashed once the conversation grows),
 * r's id at that position is q's last or new, r's prompt is longer, and the shared ids are at least 2 (the first id is
 * often a system prompt shared by every request, so one shared id proves nothing). When r's id there is new, it
 * inherits the full 16-token sub-blocks of q's partial last id: r's prompt contains q's, as a prefix cache would see.
 */
function mooncakeSessions(rows: readonly MooncakeRow[]) {
  const n = rows.length;
  const session = new Int32Array(n),
    turn = new Int32Array(n),
    context = new Float64Array(n);
  const inherit = new Map<number, Inherited>();
  /** Id at index len − 2 of a request's chain → the latest such request (the key fixes the first len − 1 ids). */
  const tip = new Map<number, number>();
  const seen = new Set<number>();
  let sessions = 0;
  for (let r = 0; r < n; r++) {
    const { ids, input } = rows[r]!;
    let prev = -1;
    for (let q = ids.length - 2; q >= 1; q--) {
      const cand = tip.get(ids[q]!);
      if (cand === undefined) continue;
      const p = rows[cand]!;
      const next = ids[q + 1]!,
        pLast = p.ids[p.ids.length - 1]!;
      if ((next === pLast || !seen.has(next)) && input > p.input) prev = cand;
      if (prev >= 0 && next !== pLast) {
        const count = Math.floor(p.input / SIM_BLOCK_TOKENS) - SUB_BLOCKS * (p.ids.length - 1);
        if (count > 0 && count < SUB_BLOCKS) inherit.set(next, { from: pLast, count });
      }
      break; // the deepest matching tip decides
    }
    if (prev >= 0) {
      session[r] = session[prev]!;
      turn[r] = turn[prev]! + 1;
      context[r] = Math.min(rows[prev]!.input + rows[prev]!.output, input);
    } else {
      session[r] = sessions++;
      turn[r] = 1;
    }
    if (ids.length >= 2) tip.set(ids[ids.length - 2]!, r);
    for (const id of ids) seen.add(id);
  }
  return { session, turn, context, inherit };
}

/** Parses Mooncake JSONL text (see data/README.md); `file` names the source in errors. */
export function parseMooncake(text: string, file: string, opts: WorkloadOptions = {}): Workload {
  const { seed, requests: cap } = checkOptions(opts);
  let rows = lines(text).map(({ line, text: t }) => mooncakeRow(t, file, line));
  if (rows.length === 0) throw new WorkloadError(msg.empty(file));
  rows.sort((a, b) => a.timestamp - b.timestamp); // stable: file order within a timestamp
  if (cap !== undefined) rows = rows.slice(0, cap);
  const arrivals = spreadArrivals(rows, new Rng(seed, 1));
  const { session, turn, context, inherit } = mooncakeSessions(rows);
  const computed = new Map<number, Computed>();
  const requests = rows.map((row, i): SimRequest => ({
    id: i,
    arrivalMs: arrivals[i]!,
    promptTokens: row.input,
    outputTokens: row.output,
    blocks: mooncakeBlocks(row.ids, row.input, inherit, computed),
    session: session[i]!,
    turn: turn[i]!,
    contextTokens: context[i]!,
    type: "mooncake",
  }));
  return finish(workloadName(file), requests);
}

// ---------------------------------------------------------------------------------------------------------------
// Azure LLM inference trace CSV.

const AZURE_COLUMNS = ["TIMESTAMP", "ContextTokens", "GeneratedTokens"] as const;
const DATETIME = /^(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(\.\d+)?Z?$/;

/** "2023-11-16 18:15:46.6805900" (read as UTC) → ms since the epoch, or NaN when malformed or out of range. */
function parseDatetimeMs(s: string): number {
  const m = DATETIME.exec(s);
  if (m === null) return NaN;
  const [y, mo, d, h, mi, sec] = [m[1], m[2], m[3], m[4], m[5], m[6]].map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const ms = Date.UTC(y, mo - 1, d, h, mi, sec);
  const check = new Date(ms);
  if (check.getUTCMonth() !== mo - 1 || check.getUTCDate() !== d || h > 23 || mi > 59 || sec > 59) return NaN;
  return ms + (m[7] === undefined ? 0 : Number(m[7]) * 1000);
}

/** Parses an Azure trace CSV (TIMESTAMP, ContextTokens, GeneratedTokens); arrivals in ms from the earliest row. */
export function parseAzure(text: string, file: string, opts: WorkloadOptions = {}): Workload {
  const { requests: cap } = checkOptions(opts);
  const { col, rows } = parseCsv(text, file, AZURE_COLUMNS);
  const [cT, cIn, cOut] = AZURE_COLUMNS.map((c) => col.get(c)!) as [number, number, number];
  let parsed = rows.map(({ line, fields }) => {
    const raw = (fields[cT] ?? "").trim();
    if (raw === "") throw rowError(file, line, "TIMESTAMP", "missing");
    const t = parseDatetimeMs(raw);
    if (Number.isNaN(t))
      throw rowError(file, line, "TIMESTAMP", `not a datetime like 2023-11-16 18:15:46.6805900: "${raw}"`);
    const input = checkInteger(csvNumber(fields[cIn], file, line, "ContextTokens"), file, line, "ContextTokens", 1);
    const output = checkInteger(
      csvNumber(fields[cOut], file, line, "GeneratedTokens"),
      file,
      line,
      "GeneratedTokens",
      1,
    );
    return { t, input, output };
  });
  parsed.sort((a, b) => a.t - b.t);
  if (cap !== undefined) parsed = parsed.slice(0, cap);
  const origin = parsed[0]!.t;
  const requests = parsed.map((p, i): SimRequest => ({
    id: i,
    arrivalMs: p.t - origin,
    promptTokens: p.input,
    outputTokens: p.output,
    blocks: segmentBlocks([{ id: i, tokens: p.input }], p.input), // no prefix information: unique content
    turn: 1,
    contextTokens: 0,
    type: "azure",
  }));
  return finish(workloadName(file), requests);
}

// ---------------------------------------------------------------------------------------------------------------
// Per-dataset length CSVs.

/** Arrival rate of a length file in requests/s, when none is given: between the two recorded chat traces in
 * data/traces (Mooncake 3.3 req/s, Azure 5.5 req/s). */
export const LENGTHS_DEFAULT_RATE = 4;
const LENGTHS_COLUMNS = ["num_prefill_tokens", "num_decode_tokens"] as const;

/** "lengths_arxiv_summarization_stats_llama2_tokenizer_filtered_v2" → "arxiv_summarization". */
function lengthsType(name: string): string {
  return name.replace(/^lengths_/, "").replace(/_stats.*$/, "") || name;
}

/**
 * Parses a lengths CSV (num_prefill_tokens, num_decode_tokens, and optionally num_total_tokens, pd_ratio, checked
 * when present): rows in file order, Poisson arrivals at opts.rate (default LENGTHS_DEFAULT_RATE), unique content.
 */
export function parseLengths(text: string, file: string, opts: WorkloadOptions = {}): Workload {
  const { seed, requests: cap, rate = LENGTHS_DEFAULT_RATE } = checkOptions(opts);
  const { col, rows: all } = parseCsv(text, file, LENGTHS_COLUMNS);
  const rows = cap === undefined ? all : all.slice(0, cap);
  const cIn = col.get("num_prefill_tokens")!,
    cOut = col.get("num_decode_tokens")!;
  const cTotal = col.get("num_total_tokens"),
    cRatio = col.get("pd_ratio");
  const arrivals = poissonArrivals(rows.length, rate, new Rng(seed, 1));
  const name = workloadName(file),
    type = lengthsType(name);
  const requests = rows.map(({ line, fields }, i): SimRequest => {
    const input = checkInteger(
      csvNumber(fields[cIn], file, line, "num_prefill_tokens"),
      file,
      line,
      "num_prefill_tokens",
      1,
    );
    const output = checkInteger(
      csvNumber(fields[cOut], file, line, "num_decode_tokens"),
      file,
      line,
      "num_decode_tokens",
      1,
    );
    if (cTotal !== undefined) {
      const total = checkInteger(
        csvNumber(fields[cTotal], file, line, "num_total_tokens"),
        file,
        line,
        "num_total_tokens",
        0,
      );
      if (total !== input + output) {
        throw rowError(
          file,
          line,
          "num_total_tokens",
          `${total} ≠ num_prefill_tokens + num_decode_tokens = ${input + output}`,
        );
      }
    }
    if (cRatio !== undefined && !Number.isFinite(csvNumber(fields[cRatio], file, line, "pd_ratio"))) {
      throw rowError(file, line, "pd_ratio", `not a finite number: "${fields[cRatio]!.trim()}"`);
    }
    return {
      id: i,
      arrivalMs: arrivals[i]!,
      promptTokens: input,
      outputTokens: output,
      blocks: segmentBlocks([{ id: i, tokens: input }], input),
      turn: 1,
      contextTokens: 0,
      type,
    };
  });
  return finish(name, requests);
}

// ---------------------------------------------------------------------------------------------------------------
// Synthetic generators.
//
// Sources: data/README.md (the DolphinRouting explainer's published averages; the lengths files; the traces) and this
// module's own measurement of the Mooncake trace. Lengths are rounded and clamped lognormals "with mean m" (log-space
// σ given); the clamps move the means by < 1%.
//
// arxiv      prompt mean 8,088 (ArXiv summarization, unfiltered, explainer), σ 0.5, clamp 1,024–30,000; output mean
//            291, σ 0.22, clamp 32–1,024 (lengths_arxiv…csv: output mean 291 / p90 372; σ 0.22 gives p90 ≈ 377).
//            Cold: every prompt is unique content. Default 2 req/s (≈ 16k uncached prompt tokens/s).
// leval      prompt = one of 16 shared documents (16,000–18,000 tokens, uniform, drawn once) + a unique question of
//            1,019–3,019 tokens (uniform): mean 19,019 (L-Eval, explainer). Documents picked uniformly, so all but
//            the first request per document reuse ~17k / 19k ≈ 0.89 of the prompt (explainer: >80% prefix-cache hits).
//            16 documents hold ~272k tokens of KV. Output mean 180, σ 0.4, clamp 16–800 (no published figure; an
//            assumption: short answers, p10 ≈ 100, p90 ≈ 280). Default 2 req/s (≈ 4k uncached prompt tokens/s).
// humaneval  prompt = a shared 32-token instruction + a unique problem with mean 166, σ 0.45, clamp 32–1,024: mean 198
//            (HumanEval, explainer). Output mean 220, σ 0.4, clamp 32–768 (an assumption: code with a little prose,
//            p10 ≈ 120, p90 ≈ 340). Default 10 req/s.
// hybrid     the paper's mix: equal thirds of arxiv, leval and humaneval by request count, in a random order, one
//            Poisson arrival process. Mean prompt ≈ (8,088 + 19,019 + 198) / 3 ≈ 9,100. Default 3 req/s.
// multiturn  sessions with WildChat statistics (explainer): turns per session geometric with mean 2.54 (cap 40);
//            user turn mean 296, σ 1.0, clamp 4–16,384; assistant turn (the output) mean 441, σ 0.7, clamp 4–4,096.
//            Turn k's prompt = turn k−1's prompt + its output + the new user input, so its blocks extend turn k−1's
//            chain (the output has content of its own); a session ends early if a prompt would pass 32,768 tokens.
//            Sessions start as a Poisson process at rate / 2.54. Turn k+1 arrives when turn k would plausibly have
//            finished (1 s to first token + 30 ms per output token) plus a think time, lognormal with median 110 s
//            and σ 1.0 — fitted to the Mooncake trace's gaps from a turn to the next (p10 42 s, median 123 s, p90 459 s
//            as measured with this module's session detection). `rate` (default 4 req/s) is the steady-state request
//            rate. Sessions are kept whole, so a 2,000-request workload ramps up over its first minutes and its long
//            sessions trail for up to an hour: measured with the defaults, ~2.5 req/s over the middle half of the
//            requests and a mean rate (n − 1) / span of ~0.5 req/s (Workload.rate reports the latter; withLoad scales
//            think times with everything else). The last session is cut so the workload has exactly `requests`.

export const DEFAULT_REQUESTS = 2000;

/** A lognormal length: arithmetic mean, log-space σ, clamp. */
interface LengthDist {
  mean: number;
  sigma: number;
  min: number;
  max: number;
}

const draw = (rng: Rng, d: LengthDist): number => clampRound(rng.lognormalWithMean(d.mean, d.sigma), d.min, d.max);

export const GENERATOR_PARAMS = {
  arxiv: {
    rate: 2,
    prompt: { mean: 8088, sigma: 0.5, min: 1024, max: 30_000 },
    output: { mean: 291, sigma: 0.22, min: 32, max: 1024 },
  },
  leval: {
    rate: 2,
    documents: 16,
    documentTokens: { min: 16_000, max: 18_000 },
    questionTokens: { min: 1019, max: 3019 },
    output: { mean: 180, sigma: 0.4, min: 16, max: 800 },
  },
  humaneval: {
    rate: 10,
    instructionTokens: 32,
    problem: { mean: 166, sigma: 0.45, min: 32, max: 1024 },
    output: { mean: 220, sigma: 0.4, min: 32, max: 768 },
  },
  hybrid: { rate: 3 },
  multiturn: {
    rate: 4,
    turnsMean: 2.54,
    maxTurns: 40,
    maxPromptTokens: 32_768,
    user: { mean: 296, sigma: 1.0, min: 4, max: 16_384 },
    assistant: { mean: 441, sigma: 0.7, min: 4, max: 4096 },
    ttftMs: 1000,
    tpotMs: 30,
    thinkMedianMs: 110_000,
    thinkSigma: 1.0,
  },
} as const;

/** One generated request before arrival times and ids. */
interface Draft {
  promptTokens: number;
  outputTokens: number;
  segments: Segment[];
  type: string;
}

/** Content ids and the shared pieces (L-Eval documents, the HumanEval instruction) of one generated workload. */
class Content {
  private next = 0;
  private documents: Segment[] | undefined;
  private instruction: Segment | undefined;

  constructor(private readonly rng: Rng) {}

  fresh(tokens: number): Segment {
    return { id: this.next++, tokens };
  }

  document(): Segment {
    const p = GENERATOR_PARAMS.leval;
    this.documents ??= Array.from({ length: p.documents }, () =>
      this.fresh(this.rng.intBetween(p.documentTokens.min, p.documentTokens.max)),
    );
    return this.documents[this.rng.int(this.documents.length)]!;
  }

  humanevalInstruction(): Segment {
    return (this.instruction ??= this.fresh(GENERATOR_PARAMS.humaneval.instructionTokens));
  }
}

type SingleType = "arxiv" | "leval" | "humaneval";

function draft(type: SingleType, rng: Rng, content: Content): Draft {
  switch (type) {
    case "arxiv": {
      const p = GENERATOR_PARAMS.arxiv;
      const prompt = draw(rng, p.prompt);
      return { promptTokens: prompt, outputTokens: draw(rng, p.output), segments: [content.fresh(prompt)], type };
    }
    case "leval": {
      const p = GENERATOR_PARAMS.leval;
      const doc = content.document();
      const question = content.fresh(rng.intBetween(p.questionTokens.min, p.questionTokens.max));
      return {
        promptTokens: doc.tokens + question.tokens,
        outputTokens: draw(rng, p.output),
        segments: [doc, question],
        type,
      };
    }
    case "humaneval": {
      const p = GENERATOR_PARAMS.humaneval;
      const instruction = content.humanevalInstruction();
      const problem = content.fresh(draw(rng, p.problem));
      return {
        promptTokens: instruction.tokens + problem.tokens,
        outputTokens: draw(rng, p.output),
        segments: [instruction, problem],
        type,
      };
    }
  }
}

/** Single-type and hybrid workloads: independent requests, Poisson arrivals. */
function generateIndependent(
  name: Exclude<GeneratorName, "multiturn">,
  n: number,
  rate: number,
  seed: number,
): Workload {
  const lengthsRng = new Rng(seed, 2);
  const content = new Content(new Rng(seed, 3));
  let types: SingleType[];
  if (name === "hybrid") {
    const thirds: SingleType[] = ["arxiv", "leval", "humaneval"];
    types = new Rng(seed, 4).shuffle(Array.from({ length: n }, (_, i) => thirds[i % 3]!));
  } else {
    types = Array<SingleType>(n).fill(name);
  }
  const arrivals = poissonArrivals(n, rate, new Rng(seed, 1));
  const requests = types.map((type, i): SimRequest => {
    const d = draft(type, lengthsRng, content);
    return {
      id: i,
      arrivalMs: arrivals[i]!,
      promptTokens: d.promptTokens,
      outputTokens: d.outputTokens,
      blocks: segmentBlocks(d.segments, d.promptTokens),
      turn: 1,
      contextTokens: 0,
      type: d.type,
    };
  });
  return finish(name, requests);
}

function generateMultiturn(n: number, rate: number, seed: number): Workload {
  const p = GENERATOR_PARAMS.multiturn;
  const arrivalRng = new Rng(seed, 1),
    rng = new Rng(seed, 2);
  const content = new Content(rng);
  const requests: SimRequest[] = [];
  let start = 0;
  for (let session = 0; requests.length < n; session++) {
    if (session > 0) start += arrivalRng.exponential((1000 * p.turnsMean) / rate);
    const turns = Math.min(p.maxTurns, rng.geometric(p.turnsMean));
    const segments: Segment[] = [];
    let context = 0,
      arrivalMs = start;
    for (let turn = 1; turn <= turns && requests.length < n; turn++) {
      const user = content.fresh(draw(rng, p.user));
      const prompt = context + user.tokens;
      if (prompt > p.maxPromptTokens) break;
      const output = draw(rng, p.assistant);
      segments.push(user);
      requests.push({
        id: 0,
        arrivalMs,
        promptTokens: prompt,
        outputTokens: output,
        blocks: segmentBlocks(segments, prompt),
        session,
        turn,
        contextTokens: context,
        type: "multiturn",
      });
      segments.push(content.fresh(output)); // the reply becomes part of the next turn's prompt
      context = prompt + output;
      arrivalMs += p.ttftMs + p.tpotMs * output + rng.lognormalWithMedian(p.thinkMedianMs, p.thinkSigma);
    }
  }
  return finish("multiturn", requests);
}

/** A seeded synthetic workload (see the table above for what each generator draws). */
export function generate(name: GeneratorName, opts: WorkloadOptions = {}): Workload {
  if (!(GENERATORS as readonly string[]).includes(name)) throw new WorkloadError(msg.unknownGenerator(String(name)));
  const { seed, requests = DEFAULT_REQUESTS, rate = GENERATOR_PARAMS[name].rate } = checkOptions(opts);
  return name === "multiturn"
    ? generateMultiturn(requests, rate, seed)
    : generateIndependent(name, requests, rate, seed);
}

// ---------------------------------------------------------------------------------------------------------------
// Generator names and format dispatch.

export function isGenerator(s: string): s is GeneratorName {
  return (GENERATORS as readonly string[]).includes(s);
}

/** The format of a workload file, from its extension and first line. */
function detectFormat(file: string, text: string): Exclude<WorkloadFormat, "auto"> {
  const first = lines(text)[0]?.text.trim() ?? "";
  if (first.startsWith("{")) return "mooncake";
  const header = first.split(",").map((s) => s.trim());
  if (header.includes("TIMESTAMP")) return "azure";
  if (header.includes("num_prefill_tokens")) return "lengths";
  throw new WorkloadError(msg.unknownFormat(file));
}

/**
 * Parses a workload file's text in the given format; with "auto", the format is told from its first line. `file`
 * names the source in errors and gives the workload its name.
 */
export function parseWorkload(
  text: string,
  file: string,
  format: WorkloadFormat = "auto",
  opts: WorkloadOptions = {},
): Workload {
  const f = format === "auto" ? detectFormat(file, text) : format;
  switch (f) {
    case "mooncake":
      return parseMooncake(text, file, opts);
    case "azure":
      return parseAzure(text, file, opts);
    case "lengths":
      return parseLengths(text, file, opts);
  }
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
  if (!(Number.isFinite(v) && v > 0)) throw new WorkloadError(msg.badLoad(s));
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
        throw new WorkloadError(msg.badOption("scale factor", "a number > 0", factor));
      break;
    case "rate":
      if (!(Number.isFinite(load.rps) && load.rps > 0))
        throw new WorkloadError(msg.badOption("rate", "a number > 0", load.rps));
      if (!(w.rate > 0)) throw new WorkloadError(msg.noRate(w.name));
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
