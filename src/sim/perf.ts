// The simulator's calibrated performance model: the time of one forward pass ("step") of an instance under
// continuous batching with chunked prefill, KV-cache capacity, and the time to ship KV between instances.
//
// Model and coefficients: shared/docs/perf-model.md. Calibration against measured profiles, and the error to expect
// (about ±25% against current vLLM): docs/simulator-calibration.md, test/sim-perf.test.ts. Every routing result of
// the simulator inherits that error. Pure functions, no I/O, no Node built-ins (the browser explorer loads this).

import { describeValue, isPlainObject, JSON_WORDS } from "../contract/values.js";

/** One model on one instance (tp GPUs). Coefficients in ms; T = decode sequences + new prefill tokens in a step. */
export interface ModelPreset {
  /** "h20-72b" | "h100-70b" | "h100-8b" | a custom name from a cluster file. */
  name: string;
  description: string;
  /** GPUs per instance (tensor parallel degree). */
  tp: number;
  /** Fixed per-step cost: scheduling, kernel launches, sampling. */
  tFixMs: number;
  /** T_w: streaming all weights from HBM once per step; the floor of any step's linear layers. */
  weightStreamMs: number;
  /** Linear-layer compute per token of T (k_lin). */
  kLinMs: number;
  /** Tensor-parallel all-reduce per step (c_ar) and per token of T (k_ar); both 0 at TP1. */
  cArMs: number;
  kArMs: number;
  /** Decode attention: KV reads per context token of every decode sequence in the step (k_kv). */
  kKvMs: number;
  /** Prefill attention per (query, key) pair: N*P + N*N/2 pairs for N new tokens on P cached (c_attn). */
  cAttnMs: number;
  kvBytesPerToken: number;
  /** HBM of all GPUs of the instance. */
  hbmBytes: number;
  /** Weights of the whole model (all GPUs of the instance). */
  weightBytes: number;
  /** Share of HBM vLLM may use (weights + KV cache); vLLM's default 0.9. */
  gpuMemoryUtilization: number;
  /** Chunked-prefill budget: new tokens per step (vLLM max_num_batched_tokens). */
  maxNumBatchedTokens: number;
  /** Sequences per step (vLLM max_num_seqs). */
  maxNumSeqs: number;
}

export type PresetName = "h20-72b" | "h100-70b" | "h100-8b";
export const DEFAULT_PRESET: PresetName = "h20-72b";

const MIB = 1024 * 1024;
const KIB = 1024;
// Device memory as nvidia-smi reports it (the total vLLM's gpu_memory_utilization applies to):
// H100 SXM 80GB shows 81,559 MiB, H20 shows 97,871 MiB.
const H100_HBM_BYTES = 81_559 * MIB;
const H20_HBM_BYTES = 97_871 * MIB;

/** vLLM defaults shared by the presets. */
const VLLM_DEFAULTS = { gpuMemoryUtilization: 0.9, maxNumBatchedTokens: 8192, maxNumSeqs: 256 } as const;

// Coefficients: shared/docs/perf-model.md, "Coefficients (BF16, ms)". KV bytes per token = 2 (K, V) × layers ×
// KV heads × head dim × 2 bytes. Weights = parameters × 2 bytes (BF16), parameter counts from the models' Hugging Face
// safetensors metadata.
export const PRESETS: Record<PresetName, ModelPreset> = {
  "h20-72b": {
    name: "h20-72b",
    description: "Qwen2.5-72B-Instruct, BF16, TP4 on 4×H20 96 GB (the DolphinRouting paper's setup)",
    tp: 4,
    // H20: 4.0 TB/s HBM, 148 TFLOPS BF16 dense: compute-bound decode above ≈ 29 sequences (T_w / k_lin).
    tFixMs: 2.0,
    weightStreamMs: 10.87,
    kLinMs: 0.373,
    cArMs: 4.0,
    kArMs: 0.0109,
    kKvMs: 2.6e-5,
    cAttnMs: 7.3e-6,
    kvBytesPerToken: 320 * KIB, // 80 layers × 8 KV heads × 128 × 2 × 2 B
    hbmBytes: 4 * H20_HBM_BYTES,
    weightBytes: 72.71e9 * 2, // 72.7 B parameters (Qwen2.5-72B model card) → ≈145 GB
    ...VLLM_DEFAULTS,
  },
  "h100-70b": {
    name: "h100-70b",
    description: "Llama-3.1-70B-Instruct, BF16, TP4 on 4×H100 SXM 80 GB",
    tp: 4,
    // TP4 all-reduce from Vidur's h100_dgx profile: 26.7 ms at 2,048 tokens, c_ar + k_ar × 2048 = 26.3 ms.
    tFixMs: 2.0,
    weightStreamMs: 12.98,
    kLinMs: 0.0559,
    cArMs: 4.0,
    kArMs: 0.0109,
    kKvMs: 3.1e-5,
    cAttnMs: 2.18e-6,
    kvBytesPerToken: 320 * KIB, // 80 layers × 8 KV heads × 128 × 2 × 2 B
    hbmBytes: 4 * H100_HBM_BYTES,
    weightBytes: 70.55e9 * 2, // 70.55 B parameters → ≈141 GB
    ...VLLM_DEFAULTS,
  },
  "h100-8b": {
    name: "h100-8b",
    description: "Llama-3.1-8B-Instruct, BF16, TP1 on 1×H100 SXM 80 GB",
    tp: 1,
    // T_w 5.6 ms: Vidur's H100 linear layers at one token.
    tFixMs: 1.0,
    weightStreamMs: 5.6,
    kLinMs: 0.0228,
    cArMs: 0,
    kArMs: 0,
    kKvMs: 4.9e-5,
    cAttnMs: 1.75e-6,
    kvBytesPerToken: 128 * KIB, // 32 layers × 8 KV heads × 128 × 2 × 2 B
    hbmBytes: H100_HBM_BYTES,
    weightBytes: 8.03e9 * 2, // 8.03 B parameters → ≈16 GB
    ...VLLM_DEFAULTS,
  },
};

/**
 * Time of one step: t_fix + max(T_w, k_lin·T) + (tp > 1 ? c_ar + k_ar·T : 0) + k_kv·decodeContextTokens
 * + c_attn·prefillAttnPairs, with T = decodeSeqs + prefillTokens. An empty step (T = 0) takes no time.
 * `decodeContextTokens` sums the context of every decode sequence; `prefillAttnPairs` sums attnPairs() over chunks.
 */
export function stepTimeMs(
  p: ModelPreset,
  decodeSeqs: number,
  decodeContextTokens: number,
  prefillTokens: number,
  prefillAttnPairs: number,
): number {
  const t = decodeSeqs + prefillTokens;
  if (t <= 0) return 0;
  const linear = Math.max(p.weightStreamMs, p.kLinMs * t);
  const allReduce = p.tp > 1 ? p.cArMs + p.kArMs * t : 0;
  return p.tFixMs + linear + allReduce + p.kKvMs * decodeContextTokens + p.cAttnMs * prefillAttnPairs;
}

/** (query, key) pairs of causal prefill attention for `newTokens` on `cachedTokens` already in the KV cache. */
export function attnPairs(newTokens: number, cachedTokens: number): number {
  return newTokens * cachedTokens + (newTokens * newTokens) / 2;
}

/** Tokens of KV cache an instance holds: (HBM × utilisation − weights) / KV bytes per token, floored, ≥ 0. */
export function kvCapacityTokens(p: ModelPreset): number {
  const free = p.hbmBytes * p.gpuMemoryUtilization - p.weightBytes;
  return free > 0 ? Math.floor(free / p.kvBytesPerToken) : 0;
}

/** KV-cache blocks of `blockTokens` tokens (vLLM's 16 by default). */
export function kvCapacityBlocks(p: ModelPreset, blockTokens = 16): number {
  return Math.floor(kvCapacityTokens(p) / blockTokens);
}

// ---- decode runs: many pure-decode steps at once ----

/** The part of a pure-decode step that does not depend on context: t_fix + max(T_w, k_lin·s) + all-reduce. */
function decodeStepBaseMs(p: ModelPreset, seqs: number): number {
  return stepTimeMs(p, seqs, 0, 0, 0);
}

/**
 * Time of `steps` consecutive pure-decode steps with `seqs` sequences whose total context starts at `ctx0` and grows
 * by `seqs` per step (closed form, no loop). Step i (0-based) has context ctx0 + i·seqs, so the sum is
 * steps·base + k_kv·(steps·ctx0 + seqs·steps·(steps − 1)/2). T = seqs is fixed, so the max(T_w, k_lin·T) branch
 * never flips inside a run.
 */
export function decodeRunMs(p: ModelPreset, seqs: number, ctx0: number, steps: number): number {
  if (seqs <= 0 || steps <= 0) return 0;
  return steps * decodeStepBaseMs(p, seqs) + p.kKvMs * (steps * ctx0 + (seqs * steps * (steps - 1)) / 2);
}

/**
 * The largest number of such steps (0 … maxSteps) that fit within `budgetMs`: decodeRunMs(result) ≤ budgetMs, and
 * budgetMs < decodeRunMs(result + 1) when result < maxSteps. Solves a·n + b·n(n − 1)/2 = budget for n (the stable
 * root of a quadratic), then a guard corrects the last unit of float error. Empty steps (seqs 0) are free: maxSteps.
 * A negative or NaN budget gives 0.
 */
export function decodeStepsWithin(
  p: ModelPreset,
  seqs: number,
  ctx0: number,
  budgetMs: number,
  maxSteps: number,
): number {
  const max = Math.max(0, Math.floor(maxSteps));
  if (seqs <= 0) return max;
  if (!(budgetMs >= 0) || max === 0) return 0;
  const a = decodeStepBaseMs(p, seqs) + p.kKvMs * ctx0; // first step
  const b = p.kKvMs * seqs; // growth per step
  // (b/2)·n² + (a − b/2)·n − budget = 0. Positive root in the form that does not cancel when b ≪ a.
  const qa = b / 2;
  const qb = a - b / 2;
  const disc = Math.sqrt(qb * qb + 4 * qa * budgetMs);
  let n: number;
  if (qb > 0) n = (2 * budgetMs) / (qb + disc);
  else if (qa > 0) n = (-qb + disc) / (2 * qa);
  else n = Infinity; // steps cost nothing
  n = Number.isFinite(n) ? Math.min(max, Math.max(0, Math.floor(n))) : max;
  // Guard: the root is within a few ulps, so each loop runs at most a step or two.
  while (n > 0 && decodeRunMs(p, seqs, ctx0, n) > budgetMs) n--;
  while (n < max && decodeRunMs(p, seqs, ctx0, n + 1) <= budgetMs) n++;
  return n;
}

// ---- KV transfer ----

export interface LinkPreset {
  name: string;
  gbPerSecond: number;
}
export type LinkName = "nvlink" | "ib-ndr" | "ib-hdr" | "100gbe";

/** Bandwidth per link, one direction, GB/s (10^9 bytes): shared/docs/perf-model.md. */
export const LINKS: Record<LinkName, LinkPreset> = {
  nvlink: { name: "nvlink", gbPerSecond: 450 }, // NVLink 4, per GPU
  "ib-ndr": { name: "ib-ndr", gbPerSecond: 50 }, // InfiniBand NDR / RoCE 400G
  "ib-hdr": { name: "ib-hdr", gbPerSecond: 25 }, // InfiniBand HDR / RoCE 200G
  "100gbe": { name: "100gbe", gbPerSecond: 12.5 },
};

/** alpha: per-transfer setup (RDMA); eta: achieved share of link bandwidth; links: links used in parallel. */
export interface TransferModel {
  alphaMs: number;
  eta: number;
  links: number;
}

/** A fit of Mooncake's measured vLLM 1P1D transfers (docs/simulator-calibration.md). */
export const DEFAULT_TRANSFER: TransferModel = { alphaMs: 0.5, eta: 0.7, links: 1 };

/** Time to ship the KV of `tokens` tokens: alpha + bytes / (eta · bandwidth · links). No tokens, no transfer: 0. */
export function kvTransferMs(
  tokens: number,
  p: ModelPreset,
  link: LinkPreset,
  t: TransferModel = DEFAULT_TRANSFER,
): number {
  if (tokens <= 0) return 0;
  const bytesPerMs = t.eta * link.gbPerSecond * t.links * 1e6; // GB/s = 10^6 bytes per ms
  return t.alphaMs + (tokens * p.kvBytesPerToken) / bytesPerMs;
}

// ---- names ----

/** A preset by name: custom presets (`extra`, from a cluster file) first, then the built-in ones. */
export function resolvePreset(name: string, extra?: Record<string, ModelPreset>): ModelPreset {
  const found =
    (extra && Object.hasOwn(extra, name) ? extra[name] : undefined) ??
    (Object.hasOwn(PRESETS, name) ? PRESETS[name as PresetName] : undefined);
  if (found) return found;
  const known = [...Object.keys(PRESETS), ...Object.keys(extra ?? {})].sort();
  throw new Error(`unknown model preset "${name}" (known: ${known.join(", ")})`);
}

/** A link by name: custom links first, then the built-in ones. */
export function resolveLink(name: string, extra?: Record<string, LinkPreset>): LinkPreset {
  const found =
    (extra && Object.hasOwn(extra, name) ? extra[name] : undefined) ??
    (Object.hasOwn(LINKS, name) ? LINKS[name as LinkName] : undefined);
  if (found) return found;
  const known = [...Object.keys(LINKS), ...Object.keys(extra ?? {})].sort();
  throw new Error(`unknown link "${name}" (known: ${known.join(", ")})`);
}

// ---- cluster files: custom presets and links ----

/** A field of a cluster file that is wrong: message `<source>: <path>: <what is wrong>`. */
export class ClusterFileError extends Error {
  constructor(
    readonly source: string,
    readonly path: string,
    detail: string,
  ) {
    super(`${source}: ${path}: ${detail}`);
    this.name = "ClusterFileError";
  }
}

type NumberRule = "positive" | "nonNegative" | "integer≥1" | "fraction";
const RULE_TEXT: Record<NumberRule, string> = {
  positive: "a finite number > 0",
  nonNegative: "a finite number ≥ 0",
  "integer≥1": "an integer ≥ 1",
  fraction: "a number in (0, 1]",
};

/** Numeric fields of ModelPreset and the rule each must satisfy. */
const PRESET_NUMBER_FIELDS = {
  tp: "integer≥1",
  tFixMs: "nonNegative",
  weightStreamMs: "nonNegative",
  kLinMs: "nonNegative",
  cArMs: "nonNegative",
  kArMs: "nonNegative",
  kKvMs: "nonNegative",
  cAttnMs: "nonNegative",
  kvBytesPerToken: "positive",
  hbmBytes: "positive",
  weightBytes: "nonNegative",
  gpuMemoryUtilization: "fraction",
  maxNumBatchedTokens: "integer≥1",
  maxNumSeqs: "integer≥1",
} as const satisfies Record<Exclude<keyof ModelPreset, "name" | "description">, NumberRule>;
type PresetNumberField = keyof typeof PRESET_NUMBER_FIELDS;

/**
 * Hardware and architecture figures a custom preset may give instead of the derived coefficients (perf-model.md,
 * "Where they come from"). Per GPU where it matters; the instance has tp GPUs.
 */
const SPEC_FIELDS = {
  hbmBandwidthGBps: "positive", // HBM bandwidth per GPU, GB/s
  bf16Tflops: "positive", // dense BF16 peak per GPU
  attnTflops: "positive", // achieved prefill-attention throughput per GPU (≈300 on H100)
  linearParams: "positive", // parameters of the linear layers (embeddings and lm_head excluded)
  layers: "integer≥1",
  queryHeads: "integer≥1",
  kvHeads: "integer≥1",
  headDim: "integer≥1",
} as const satisfies Record<string, NumberRule>;
type SpecField = keyof typeof SPEC_FIELDS;
type Specs = Partial<Record<SpecField, number>>;

/** Achieved shares of peak behind the derived coefficients (perf-model.md). */
export const DERIVATION = { hbmShare: 0.8, flopsShare: 0.62 } as const;

const PRESET_KEYS = ["base", "description", ...Object.keys(PRESET_NUMBER_FIELDS), ...Object.keys(SPEC_FIELDS)];
const LINK_KEYS = ["gbPerSecond"];
const PRESET_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

const describe = (v: unknown): string => describeValue(v, { ...JSON_WORDS, object: "a map" });
const isMap = isPlainObject;

function checkNumber(source: string, path: string, v: unknown, rule: NumberRule): number {
  const ok =
    typeof v === "number" &&
    Number.isFinite(v) &&
    (rule === "positive"
      ? v > 0
      : rule === "nonNegative"
        ? v >= 0
        : rule === "integer≥1"
          ? Number.isSafeInteger(v) && v >= 1
          : v > 0 && v <= 1);
  if (!ok) throw new ClusterFileError(source, path, `expected ${RULE_TEXT[rule]}, got ${describe(v)}`);
  return v as number;
}

function checkKeys(source: string, path: string, m: Record<string, unknown>, known: readonly string[]): void {
  for (const key of Object.keys(m)) {
    if (!known.includes(key))
      throw new ClusterFileError(source, `${path}.${key}`, `unknown field (known: ${known.join(", ")})`);
  }
}

/** Derive the coefficients the entry did not give from its hardware and architecture figures, where it has them. */
function deriveFromSpecs(
  fields: Partial<Record<PresetNumberField, number>>,
  given: ReadonlySet<string>,
  s: Specs,
  base: ModelPreset | undefined,
): void {
  const tp = fields.tp ?? 1;
  const set = (k: PresetNumberField, v: number | undefined): void => {
    if (!given.has(k) && v !== undefined) fields[k] = v;
  };
  if (s.layers !== undefined && s.kvHeads !== undefined && s.headDim !== undefined) {
    set("kvBytesPerToken", 2 * s.layers * s.kvHeads * s.headDim * 2); // K and V, BF16
  }
  if (fields.kvBytesPerToken === undefined && base) fields.kvBytesPerToken = base.kvBytesPerToken;
  const hbmBytesPerMs =
    s.hbmBandwidthGBps !== undefined ? DERIVATION.hbmShare * s.hbmBandwidthGBps * 1e6 * tp : undefined;
  if (hbmBytesPerMs !== undefined) {
    if (fields.weightBytes !== undefined) set("weightStreamMs", fields.weightBytes / hbmBytesPerMs);
    if (fields.kvBytesPerToken !== undefined) set("kKvMs", fields.kvBytesPerToken / hbmBytesPerMs);
  }
  if (s.linearParams !== undefined && s.bf16Tflops !== undefined) {
    set("kLinMs", (2 * s.linearParams) / (DERIVATION.flopsShare * s.bf16Tflops * 1e9 * tp)); // TFLOPS = 10^9 FLOP/ms
  }
  if (s.layers !== undefined && s.queryHeads !== undefined && s.headDim !== undefined && s.attnTflops !== undefined) {
    set("cAttnMs", (4 * s.layers * s.queryHeads * s.headDim) / (s.attnTflops * 1e9 * tp));
  }
  if (tp === 1) {
    set("cArMs", 0);
    set("kArMs", 0);
  }
}

/** Which figures would derive a missing field, for the error message. */
const DERIVED_FROM: Partial<Record<PresetNumberField, string>> = {
  weightStreamMs: "hbmBandwidthGBps and weightBytes",
  kKvMs: "hbmBandwidthGBps and kvBytesPerToken",
  kLinMs: "linearParams and bf16Tflops",
  cAttnMs: "layers, queryHeads, headDim and attnTflops",
  kvBytesPerToken: "layers, kvHeads and headDim",
  cArMs: "tp 1",
  kArMs: "tp 1",
};
const DEFAULTS: Partial<Record<PresetNumberField, number>> = { ...VLLM_DEFAULTS };

function parsePreset(source: string, name: string, entry: unknown): ModelPreset {
  const path = `presets.${name}`;
  if (!PRESET_NAME.test(name)) {
    throw new ClusterFileError(
      source,
      path,
      "preset names are 1–64 letters, digits, '.', '_' or '-', starting with a letter or digit",
    );
  }
  if (Object.hasOwn(PRESETS, name)) {
    throw new ClusterFileError(
      source,
      path,
      `shadows the built-in preset "${name}"; choose another name and set base: "${name}"`,
    );
  }
  if (!isMap(entry)) throw new ClusterFileError(source, path, `expected a map, got ${describe(entry)}`);
  checkKeys(source, path, entry, PRESET_KEYS);

  let base: ModelPreset | undefined;
  if (entry.base !== undefined) {
    if (typeof entry.base !== "string" || !Object.hasOwn(PRESETS, entry.base)) {
      throw new ClusterFileError(
        source,
        `${path}.base`,
        `expected one of ${Object.keys(PRESETS).join(", ")}, got ${describe(entry.base)}`,
      );
    }
    base = PRESETS[entry.base as PresetName];
  }
  if (entry.description !== undefined && typeof entry.description !== "string") {
    throw new ClusterFileError(source, `${path}.description`, `expected a string, got ${describe(entry.description)}`);
  }

  const fields: Partial<Record<PresetNumberField, number>> = {};
  const given = new Set<string>();
  for (const [k, rule] of Object.entries(PRESET_NUMBER_FIELDS) as [PresetNumberField, NumberRule][]) {
    if (entry[k] !== undefined) {
      fields[k] = checkNumber(source, `${path}.${k}`, entry[k], rule);
      given.add(k);
    }
  }
  const specs: Specs = {};
  for (const [k, rule] of Object.entries(SPEC_FIELDS) as [SpecField, NumberRule][]) {
    if (entry[k] !== undefined) specs[k] = checkNumber(source, `${path}.${k}`, entry[k], rule);
  }
  // Precedence: given directly > derived from this entry's figures > the base preset > vLLM defaults.
  // The inputs of the derivations come from the base when the entry lacks them.
  for (const k of ["tp", "weightBytes", "hbmBytes"] as const) if (fields[k] === undefined && base) fields[k] = base[k];
  deriveFromSpecs(fields, given, specs, base);
  const out: Record<string, number> = {};
  for (const k of Object.keys(PRESET_NUMBER_FIELDS) as PresetNumberField[]) {
    const v = fields[k] ?? base?.[k] ?? DEFAULTS[k];
    if (v === undefined) {
      const how = DERIVED_FROM[k] ? `, a base preset, or ${DERIVED_FROM[k]}` : " or a base preset";
      throw new ClusterFileError(source, `${path}.${k}`, `missing (give it${how})`);
    }
    out[k] = v;
  }
  const preset: ModelPreset = {
    ...(out as Record<PresetNumberField, number>),
    name,
    description:
      (entry.description as string | undefined) ??
      (base ? `${base.description} (custom "${name}")` : `custom preset "${name}"`),
  };
  if (kvCapacityTokens(preset) <= 0) {
    throw new ClusterFileError(
      source,
      `${path}.weightBytes`,
      `weights (${preset.weightBytes} B) leave no KV cache in gpuMemoryUtilization × hbmBytes (${preset.gpuMemoryUtilization} × ${preset.hbmBytes} B)`,
    );
  }
  return preset;
}

/**
 * Custom model presets and links from a cluster file's `presets` and `links` maps (both optional; other top-level keys
 * belong to the simulator's own parser and are left alone). A preset gives ModelPreset's numeric fields directly, or
 * starts from `base` (a built-in preset), or derives coefficients from hardware and architecture figures
 * (hbmBandwidthGBps, bf16Tflops, attnTflops, linearParams, layers, queryHeads, kvHeads, headDim). Unknown fields,
 * bad values and missing coefficients are rejected: "<source>: presets.<name>.<field>: …".
 */
export function parseClusterFile(
  json: unknown,
  source: string,
): { presets: Record<string, ModelPreset>; links: Record<string, LinkPreset> } {
  if (!isMap(json)) throw new ClusterFileError(source, "(top level)", `expected a map, got ${describe(json)}`);
  const presets: Record<string, ModelPreset> = {};
  const links: Record<string, LinkPreset> = {};
  if (json.presets !== undefined) {
    if (!isMap(json.presets))
      throw new ClusterFileError(source, "presets", `expected a map of name → preset, got ${describe(json.presets)}`);
    for (const [name, entry] of Object.entries(json.presets)) presets[name] = parsePreset(source, name, entry);
  }
  if (json.links !== undefined) {
    if (!isMap(json.links))
      throw new ClusterFileError(source, "links", `expected a map of name → link, got ${describe(json.links)}`);
    for (const [name, entry] of Object.entries(json.links)) {
      const path = `links.${name}`;
      if (!PRESET_NAME.test(name))
        throw new ClusterFileError(source, path, "link names are 1–64 letters, digits, '.', '_' or '-'");
      if (Object.hasOwn(LINKS, name))
        throw new ClusterFileError(source, path, `shadows the built-in link "${name}"; choose another name`);
      if (!isMap(entry)) throw new ClusterFileError(source, path, `expected a map, got ${describe(entry)}`);
      checkKeys(source, path, entry, LINK_KEYS);
      links[name] = { name, gbPerSecond: checkNumber(source, `${path}.gbPerSecond`, entry.gbPerSecond, "positive") };
    }
  }
  return { presets, links };
}

/**
 * The one preset a cluster file to simulate defines, and the links it adds: what `--cluster file.json` means to
 * `dolphin simulate`, train and eval (src/sim/run.ts) and to the explorer's custom model (the file's text).
 */
export function clusterFromFile(
  text: string,
  source: string,
): { preset: ModelPreset; links: Record<string, LinkPreset> } {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new Error(`${source}: not JSON: ${(e as Error).message}`);
  }
  const parsed = parseClusterFile(json, source);
  const names = Object.keys(parsed.presets);
  if (names.length !== 1)
    throw new Error(`${source}: a cluster file to simulate must define exactly one preset, found ${names.length}`);
  return { preset: parsed.presets[names[0]!]!, links: parsed.links };
}
