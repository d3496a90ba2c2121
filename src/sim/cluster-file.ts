// Cluster files: custom model presets and links. A preset gives the step-time model's coefficients directly, or
// starts from a built-in preset and overrides some, or derives them from hardware and architecture figures
// (shared/docs/perf-model.md, "Where they come from"); every field is checked and an error names it. Parses text and
// never reads a file (src/sim/run.ts and the explorer do), so the browser explorer loads this too.

import { describeValue, isPlainObject, JSON_WORDS } from "../contract/values.js";
import { kvCapacityTokens, PRESETS, VLLM_DEFAULTS, type ModelPreset, type PresetName } from "./model-presets.js";
import { LINKS, type LinkPreset } from "./kv-transfer.js";

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
const LINK_KEYS = ["gbPerSecond", "alphaMs", "eta"];
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
      const link: LinkPreset = {
        name,
        gbPerSecond: checkNumber(source, `${path}.gbPerSecond`, entry.gbPerSecond, "positive"),
      };
      // a measured link's own setup cost and achieved share (dolphin calibrate writes eta 1)
      if (entry.alphaMs !== undefined)
        link.alphaMs = checkNumber(source, `${path}.alphaMs`, entry.alphaMs, "nonNegative");
      if (entry.eta !== undefined) link.eta = checkNumber(source, `${path}.eta`, entry.eta, "fraction");
      links[name] = link;
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
