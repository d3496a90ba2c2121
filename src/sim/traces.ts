// Recorded traces and length files as simulator workloads: Mooncake JSONL (its block ids become chained block
// hashes), the Azure LLM inference CSV and the per-dataset length CSVs (prompts of fresh content), or files of the
// same formats a user brings; parseWorkload tells the format from the first line. Every row is checked: a malformed
// one is a WorkloadError "<file>:<line>: <field>: <what is wrong>".
//
// Browser-safe: the parsers take text; workload-files.ts (Node) reads the files.

import { out, xxh64Pair } from "../hashing/xxh64.js";
import { Rng } from "./rng.js";
import { SIM_BLOCK_TOKENS, type SimRequest, type Workload } from "./types.js";
import {
  checkOptions,
  finish,
  poissonArrivals,
  rowError,
  segmentBlocks,
  workloadMessages as msg,
  workloadName,
  WorkloadError,
  type WorkloadFormat,
  type WorkloadOptions,
} from "./workload.js";

// ---------------------------------------------------------------------------------------------------------------
// Block hashing of Mooncake ids.

/** Tokens covered by one Mooncake hash id. */
const MOONCAKE_BLOCK_TOKENS = 512;
/** 16-token blocks per Mooncake hash id. */
const SUB_BLOCKS = MOONCAKE_BLOCK_TOKENS / SIM_BLOCK_TOKENS;
const TWO_POW_32 = 0x100000000;

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
// Reading rows.

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
// Format dispatch.

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
