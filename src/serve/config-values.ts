// Reading one field of the `dolphin serve` configuration: ConfigError, which names the field
// (`config: timeouts.connect_ms: expected …`), and the readers of a section, a number, a string, a choice, a URL and
// a flag, each with its default, and the cache tiers' weight map. The whole config (config.ts) and a worker entry (config-workers.ts) are built from
// these.

import { describeValue } from "../contract/values.js";
import { Tier, TIER_WEIGHTS } from "../generated/abi.js";
import type { TierName } from "../router/types.js";

export class ConfigError extends Error {
  readonly field: string;
  constructor(field: string, problem: string) {
    super(`config: ${field}: ${problem}`);
    this.name = "ConfigError";
    this.field = field;
  }
}

export type Obj = Record<string, unknown>;

export function fail(field: string, what: string, v: unknown): never {
  throw new ConfigError(
    field,
    v === undefined ? `missing (expected ${what})` : `expected ${what}, got ${describeValue(v)}`,
  );
}

export function object(v: unknown, field: string): Obj {
  if (v === null || typeof v !== "object" || Array.isArray(v)) fail(field, "an object", v);
  return v as Obj;
}

export function onlyKeys(o: Obj, field: string, known: readonly string[]): void {
  for (const k of Object.keys(o)) {
    if (!known.includes(k))
      throw new ConfigError(field ? `${field}.${k}` : k, `unknown key (known: ${known.join(", ")})`);
  }
}

/** A section that may be absent or null (defaults) or an object with only the given keys. */
export function section(v: unknown, field: string, known: readonly string[]): Obj {
  if (v === undefined || v === null) return {};
  const o = object(v, field);
  onlyKeys(o, field, known);
  return o;
}

export type NumberRule = { min: number; max?: number; integer?: boolean; exclusiveMin?: boolean };

/** The numeric fields of one section: `key` read from it, named `section.key` in errors, defaulting to its default. */
export function numbersIn(o: Obj, path: string, defaults: object): (key: string, rule: NumberRule) => number {
  return (key, rule) => number(o[key], `${path}.${key}`, (defaults as Record<string, number>)[key]!, rule);
}

export function number(v: unknown, field: string, dflt: number, rule: NumberRule): number {
  if (v === undefined) return dflt;
  const { min, max = Number.MAX_SAFE_INTEGER, integer = false, exclusiveMin = false } = rule;
  const what = `${integer ? "an integer" : "a number"} ${exclusiveMin ? ">" : "≥"} ${min}${max < Number.MAX_SAFE_INTEGER ? ` and ≤ ${max}` : ""}`;
  if (typeof v !== "number" || !Number.isFinite(v)) fail(field, what, v);
  if ((integer && !Number.isInteger(v)) || (exclusiveMin ? !(v > min) : !(v >= min)) || v > max) fail(field, what, v);
  return v;
}

export function string(v: unknown, field: string, dflt?: string): string {
  if (v === undefined && dflt !== undefined) return dflt;
  if (typeof v !== "string" || v === "") fail(field, "a non-empty string", v);
  return v;
}

export function oneOf<T extends string>(v: unknown, field: string, options: readonly T[], dflt: T): T {
  if (v === undefined) return dflt;
  if (typeof v !== "string" || !(options as readonly string[]).includes(v))
    fail(field, `one of ${options.join(", ")}`, v);
  return v as T;
}

export function httpUrl(v: unknown, field: string): string {
  const s = string(v, field);
  let u: URL;
  try {
    u = new URL(s);
  } catch {
    return fail(field, "an http:// or https:// URL", v);
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") fail(field, "an http:// or https:// URL", v);
  if (u.search || u.hash) fail(field, "a base URL without query or fragment", v);
  return s.replace(/\/+$/, "");
}

export function boolean(v: unknown, field: string, dflt: boolean): boolean {
  if (v === undefined) return dflt;
  if (typeof v !== "boolean") fail(field, "true or false", v);
  return v;
}

/**
 * The `tiers` weight map: what a block held only in a lower cache tier counts for against a device hit, by tier
 * name (spec/abi.json tiers). Each weight a number in [0, 1]; GPU, the device, only 1; a tier not given keeps its
 * default (CPU 0.8).
 */
export function tierWeights(v: unknown, field: string): Record<TierName, number> {
  const o = section(v, field, Object.keys(Tier));
  const out = { ...TIER_WEIGHTS } as Record<TierName, number>;
  for (const name of Object.keys(Tier) as TierName[]) {
    if (o[name] === undefined) continue;
    if (name === "GPU") {
      if (o[name] !== 1) fail(`${field}.GPU`, "1 (device hits are what the other tiers are weighed against)", o[name]);
      continue;
    }
    out[name] = number(o[name], `${field}.${name}`, out[name], { min: 0, max: 1 });
  }
  return out;
}
