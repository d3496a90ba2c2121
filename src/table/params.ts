// A rule table's `params`, checked against its kind's parameters as spec/abi.json describes them (scalars, ascending
// lists, PPD's 3 × 9 × Q bit grid), and each rule kind's defaults (the twin of assembly/table/params.ts).

import { KINDS, type ParamDescriptor } from "../generated/abi.js";
import {
  bitArray,
  expectArray,
  expected,
  expectLength,
  expectMap,
  expectNumber,
  numberArray,
  strictlyAscending,
} from "./fields.js";
import { POLICY_KINDS, TableError, type PolicyKind } from "./table.js";

const MAX_QPS_LEVELS = 64;
export const PPD_CONTEXT_CLASSES = 3;
export const PPD_RATIO_CLASSES = 9;

export type RuleKind = Exclude<PolicyKind, "kmeans" | "gmm">;

/** Parameters of each rule kind, with defaults (from reference-systems.md, via spec/abi.json). No default = required. */
const RULE_PARAMS = Object.fromEntries(
  KINDS.filter((k) => !k.learned).map((k) => [k.name, Object.fromEntries(k.params.map((p) => [p.name, p]))]),
) as Record<RuleKind, Record<string, ParamDescriptor>>;

export const isRuleKind = (kind: PolicyKind): kind is RuleKind => kind !== "kmeans" && kind !== "gmm";

export function validatePpdBits(v: unknown, path: string, qpsLevels: number): number[][][] {
  const contexts = expectArray(v, path, `a ${PPD_CONTEXT_CLASSES}×${PPD_RATIO_CLASSES}×Q array of 0/1 bits`);
  expectLength(contexts, path, PPD_CONTEXT_CLASSES, "context classes");
  return contexts.map((ratios, i) => {
    const ratioRows = expectArray(ratios, `${path}[${i}]`, "an array of ratio classes");
    expectLength(ratioRows, `${path}[${i}]`, PPD_RATIO_CLASSES, "ratio classes");
    return ratioRows.map((row, j) => bitArray(row, `${path}[${i}][${j}]`, qpsLevels, "bits (one per QPS level)"));
  });
}

export function validateParams(
  v: unknown,
  kind: RuleKind,
  base = "params",
): Record<string, number | number[] | number[][][]> {
  const m = v === undefined ? {} : expectMap(v, base);
  const specs = RULE_PARAMS[kind];
  const known = Object.keys(specs);
  for (const key of Object.keys(m)) {
    if (!known.includes(key)) {
      throw new TableError(
        `${base}.${key}`,
        `unknown parameter for kind "${kind}" (known: ${known.join(", ") || "none"})`,
      );
    }
  }
  const out: Record<string, number | number[] | number[][][]> = {};
  for (const [key, spec] of Object.entries(specs)) {
    const path = `${base}.${key}`;
    const given = m[key];
    if (spec.type === "scalar") {
      if (given === undefined && spec.default === undefined) throw expected(path, "a number > 0 (required)", given);
      out[key] =
        given === undefined
          ? spec.default!
          : expectNumber(given, path, { min: 0, minExclusive: spec.positive === true });
    } else if (spec.type === "list") {
      if (given === undefined) {
        out[key] = [...spec.default];
        continue;
      }
      const values = numberArray(given, path, undefined, { min: 0, minExclusive: spec.positive });
      if (values.length < spec.min_length || values.length > spec.max_length) {
        const range =
          spec.min_length === spec.max_length ? `${spec.min_length}` : `${spec.min_length} to ${spec.max_length}`;
        throw new TableError(path, `expected ${range} values, got ${values.length}`);
      }
      strictlyAscending(values, path);
      out[key] = values;
    } else {
      const qps = out.qps_levels as number[];
      if (given === undefined)
        throw expected(
          path,
          `a ${PPD_CONTEXT_CLASSES}×${PPD_RATIO_CLASSES}×${qps.length} array of 0/1 bits (required)`,
          given,
        );
      out[key] = validatePpdBits(given, path, qps.length);
    }
  }
  return out;
}

/** A copy of the default parameters of a rule kind (required ones, without defaults, are absent; learned kinds: {}). */
export function defaultParams(kind: PolicyKind): Record<string, number | number[]> {
  if (!(POLICY_KINDS as readonly string[]).includes(kind))
    throw expected("kind", `one of ${POLICY_KINDS.join(", ")}`, kind);
  if (!isRuleKind(kind)) return {};
  const out: Record<string, number | number[]> = {};
  for (const [key, spec] of Object.entries(RULE_PARAMS[kind])) {
    if (spec.type === "scalar" && spec.default !== undefined) out[key] = spec.default;
    else if (spec.type === "list") out[key] = [...spec.default];
  }
  return out;
}
