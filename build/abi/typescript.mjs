// The TypeScript emitter: constants, kind descriptors, exports and the error-message table for TypeScript hosts
// (src/generated/abi.ts), from spec/abi.json.
import { HEADER, camel, upper } from "./names.mjs";

export function emitTypeScript(spec) {
  const json = (v) => JSON.stringify(v);
  const obj = (entries) =>
    `{ ${entries.map(([k, v]) => `${/^[a-zA-Z_$][\w$]*$/.test(k) ? k : json(k)}: ${v}`).join(", ")} }`;
  const kinds = spec.kinds.slice().sort((a, b) => a.code - b.code);
  const out = [
    HEADER,
    "// The core's contract for TypeScript hosts: constants, kind descriptors and the error-message table.",
    "",
    `export const ABI_VERSION = ${spec.abi_version};`,
    `export const LIMITS = ${obj(Object.entries(spec.limits).map(([k, v]) => [camel(k), v]))} as const;`,
    `export const Role = ${obj(Object.entries(spec.roles).map(([k, v]) => [k, v]))} as const;`,
    `export const Flag = ${obj(Object.entries(spec.route_flags).map(([k, v]) => [k, v.bit]))} as const;`,
    "/** Block-hash schemes (setHashScheme); `text`: whether the scheme hashes text mode's 64-byte blocks. */",
    `export const HashScheme = ${obj(Object.entries(spec.hash_schemes).map(([k, v]) => [k, v.code]))} as const;`,
    `export const HASH_SCHEME_TEXT = ${obj(Object.entries(spec.hash_schemes).map(([k, v]) => [k, v.text]))} as const;`,
    "/** Cache tiers (indexStoreTier) and their default weights (setTierWeight); GPU's is fixed at 1. */",
    `export const Tier = ${obj(Object.entries(spec.tiers).map(([k, v]) => [k, v.code]))} as const;`,
    `export const TIER_WEIGHTS = ${obj(Object.entries(spec.tiers).map(([k, v]) => [k, v.weight]))} as const;`,
    `export const Kind = ${obj(kinds.map((k) => [k.name, k.code]))} as const;`,
    `export const Reason = ${json(spec.reasons)} as const;`,
    `export const FEATURES = ${json(spec.features)} as const;`,
    `export const OSL_FEATURES = ${json(spec.osl_features)} as const;`,
    "/** Slots of the request record (Float64Array of REQUEST_SLOTS) the host writes before `route`. */",
    `export const RequestSlot = ${obj(spec.request_record.map((s, i) => [camel(s.name), i]))} as const;`,
    `export const REQUEST_SLOTS = ${spec.request_record.length};`,
    "/** Slots of the decision record (Float64Array of DECISION_SLOTS) `route` writes. */",
    `export const Slot = ${obj(spec.decision_record.map((s, i) => [camel(s.name), i]))} as const;`,
    `export const DECISION_SLOTS = ${spec.decision_record.length};`,
    "",
    "export type ParamDescriptor =",
    '  | { name: string; type: "scalar"; default?: number; positive?: boolean; stage?: number; doc?: string }',
    '  | { name: string; type: "list"; default: readonly number[]; min_length: number; max_length: number; positive: boolean; doc?: string }',
    '  | { name: string; type: "ppd-bits"; doc?: string };',
    "/** Why a rule gave a bit: a template, or alternatives whose first that holds (`when`, or none) is said. */",
    "export type ExplainClause = string | readonly (string | { when: string; say: string })[];",
    "/** The words of Router.explain: a learned kind's nearest / score / beyond, a rule kind's rule sentence and local / remote clauses. */",
    "export interface KindExplain { nearest?: string; score?: string; beyond?: string; rule?: string; local?: ExplainClause; remote?: ExplainClause }",
    "export interface KindDescriptor { name: string; code: number; learned: boolean; doc: string; summary?: string; params: readonly ParamDescriptor[]; explain?: KindExplain; baseline?: { order: number; note?: string }; needs_table?: boolean }",
    "/** Every policy kind, described once (spec/abi.json): the table code, the reference engine, explain, the baselines, the CLI's help and the docs read this. */",
    `export const KINDS: readonly KindDescriptor[] = ${json(kinds)};`,
    "/** The decision's values an explain template may name besides the kind's parameters. */",
    `export const EXPLAIN_VALUES = ${json((spec.explain_values ?? []).map((v) => v.name))} as const;`,
    "/** The rule kinds every evaluation compares (after the learned table), in their `baseline.order`. */",
    `export const BASELINE_KINDS = ${json(
      kinds
        .filter((k) => k.baseline)
        .sort((a, b) => a.baseline.order - b.baseline.order)
        .map((k) => k.name),
    )} as const;`,
    "",
    "/** The core's exported functions (besides `memory`): every host checks they exist when it loads a module. */",
    `export const EXPORT_NAMES = ${json(spec.exports.map((e) => e.name))} as const;`,
    `export const ErrorCode = ${obj(spec.errors.map((e) => [e.name, e.code]))} as const;`,
    "export interface ErrorMessage { name: string; message: string; by_detail?: Record<string, string> }",
    `export const ERROR_MESSAGES: Readonly<Record<number, ErrorMessage>> = ${json(Object.fromEntries(spec.errors.map((e) => [e.code, { name: e.name, message: e.message, ...(e.by_detail ? { by_detail: e.by_detail } : {}) }])))};`,
  ];
  if (spec.table_problems) {
    out.push(
      "/** The table decoder's problems, by code: message templates over the error record's fields (`missing`: the text when the value is absent). */",
    );
    out.push(
      `export const TABLE_PROBLEMS: readonly { name: string; message: string; missing?: string }[] = ${json(spec.table_problems.map((p) => ({ name: p.name, message: p.message, ...(p.missing ? { missing: p.missing } : {}) })))};`,
    );
  }
  if (spec.table_error_record) {
    out.push(
      "/** Slots of the table error record (Float64Array of TABLE_ERROR_SLOTS at tableErrorPtr()) `loadTable` fills on E_BAD_TABLE. */",
    );
    out.push(
      `export const TableErrorSlot = ${obj(spec.table_error_record.map((s, i) => [camel(s.name), i]))} as const;`,
    );
    out.push(`export const TABLE_ERROR_SLOTS = ${spec.table_error_record.length};`);
  }
  if (spec.table_value_types) {
    out.push("/** Types of the offending value in a table error record (value_type), by code. */");
    out.push(`export const TABLE_VALUE_TYPES = ${json(spec.table_value_types.map((t) => t.name))} as const;`);
  }
  if (spec.table_info_record) {
    out.push(
      "/** Slots of the table info record (Float64Array of TABLE_INFO_SLOTS at tableInfoPtr()) `loadTable` fills on success. */",
    );
    out.push(`export const TableInfoSlot = ${obj(spec.table_info_record.map((s, i) => [camel(s.name), i]))} as const;`);
    out.push(`export const TABLE_INFO_SLOTS = ${spec.table_info_record.length};`);
  }
  if (spec.osl_class_record) {
    out.push(
      "/** Slots of one output-length class record (OSL_CLASS_SLOTS f64 values per class at tableOslClassesPtr()) `loadTable` fills on success. */",
    );
    out.push(`export const OslClassSlot = ${obj(spec.osl_class_record.map((s, i) => [camel(s.name), i]))} as const;`);
    out.push(`export const OSL_CLASS_SLOTS = ${spec.osl_class_record.length};`);
  }
  return `${out.join("\n")}\n`;
}
