// Generates every host's copy of the core's contract from spec/abi.json, the one place it is written:
//   assembly/generated/abi.ts   constants the core is compiled with (AssemblyScript)
//   src/generated/abi.ts        constants, kind descriptors and the error-message table for TypeScript hosts
// Bindings in other languages add an emitter here (one function returning the file's text). Outputs are generated
// at build time and never committed; a file is rewritten only when its text changes, so incremental builds stay
// incremental. Usage: node build/gen-abi.mjs (build/build.mjs runs it first).
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
export const SPEC_PATH = join(root, "spec/abi.json");

const HEADER = "// GENERATED from spec/abi.json by build/gen-abi.mjs: do not edit (change the spec and rebuild).";

/** snake_case or kebab-case → camelCase; SCREAMING names for constants. */
const camel = (s) => s.replace(/[-_]([a-z0-9])/gi, (_, c) => c.toUpperCase());
const upper = (s) => s.replace(/-/g, "_").toUpperCase();

/** Checks the spec's own consistency, so a typo fails the build instead of a host. */
export function checkSpec(spec) {
  const fail = (what) => { throw new Error(`spec/abi.json: ${what}`); };
  if (!Number.isInteger(spec.abi_version) || spec.abi_version < 1) fail("abi_version must be a positive integer");
  const codes = new Set();
  for (const e of spec.errors) {
    if (codes.has(e.code)) fail(`error code ${e.code} is used twice`);
    codes.add(e.code);
    if (typeof e.message !== "string") fail(`error ${e.name} has no message`);
  }
  const kindCodes = new Set();
  for (const k of spec.kinds) {
    if (kindCodes.has(k.code) || k.code < 1) fail(`kind ${k.name}: code ${k.code} is used twice or < 1`);
    kindCodes.add(k.code);
    for (const p of k.params) {
      if (!["scalar", "list", "ppd-bits"].includes(p.type)) fail(`kind ${k.name}: param ${p.name} has unknown type ${p.type}`);
      if (p.type === "scalar" && p.default === undefined && p.positive !== true) fail(`kind ${k.name}: required param ${p.name} must be positive`);
    }
  }
  if (new Set(spec.exports.map((e) => e.name)).size !== spec.exports.length) fail("exports repeats a name");
  for (const r of ["request_record", "decision_record"]) {
    if (new Set(spec[r].map((s) => s.name)).size !== spec[r].length) fail(`${r} repeats a slot name`);
  }
  return spec;
}

export function loadSpec() {
  return checkSpec(JSON.parse(readFileSync(SPEC_PATH, "utf8")));
}

// ---- AssemblyScript ------------------------------------------------------------------------------------------

function emitAssemblyScript(spec) {
  const out = [HEADER, "// The core's constants (assembly/ imports these; hosts get the same numbers from their own generated copy).", ""];
  const c = (name, value, type = "i32", doc) => out.push(`${doc ? `/** ${doc} */\n` : ""}export const ${name}: ${type} = ${value};`);
  c("ABI_VERSION", spec.abi_version);
  out.push("");
  for (const [k, v] of Object.entries(spec.limits)) c(`LIMIT_${upper(k)}`, v);
  out.push("");
  for (const e of spec.errors) c(e.name === "OK" ? "OK" : `E_${e.name}`, e.code);
  out.push("");
  for (const [k, v] of Object.entries(spec.roles)) c(`ROLE_${upper(k)}`, v);
  for (const [k, v] of Object.entries(spec.route_flags)) c(`FLAG_${upper(k)}`, v.bit, "i32", v.doc);
  out.push("");
  c("KIND_NONE", 0);
  for (const k of spec.kinds) c(`KIND_${upper(k.name)}`, k.code);
  c("KIND_MAX", Math.max(...spec.kinds.map((k) => k.code)));
  out.push("");
  spec.reasons.forEach((r, i) => c(`REASON_${upper(r)}`, i));
  out.push("");
  spec.request_record.forEach((s, i) => c(`R_${upper(s.name)}`, i, "i32", s.doc));
  c("REQUEST_SLOTS", spec.request_record.length);
  out.push("");
  spec.decision_record.forEach((s, i) => c(`D_${upper(s.name)}`, i, "i32", s.doc));
  c("DECISION_SLOTS", spec.decision_record.length);
  if (spec.table_problems) {
    out.push("");
    spec.table_problems.forEach((p, i) => c(`P_${p.name}`, i, "i32", p.message));
  }
  return `${out.join("\n")}\n`;
}

/** Names and kind descriptors as static data: a file of its own, so only the table decoder links them in. */
function emitAssemblyScriptNames(spec) {
  const out = [HEADER, "// Kind descriptors and names, as flat static arrays indexed by kind code (no allocation at run time).", ""];
  const names = ["", ...spec.kinds.slice().sort((a, b) => a.code - b.code).map((k) => k.name)];
  out.push(`/** Table kind names by code (index 0 is no kind). */`);
  out.push(`export const KIND_NAMES: StaticArray<string> = [${names.map((n) => JSON.stringify(n)).join(", ")}];`);
  out.push(`/** 1 when the kind is learned (clusters), by code. */`);
  out.push(`export const KIND_LEARNED: StaticArray<u8> = [${["0", ...spec.kinds.slice().sort((a, b) => a.code - b.code).map((k) => (k.learned ? 1 : 0))].join(", ")}];`);
  const params = [];
  const firstParam = [0];
  for (const k of spec.kinds.slice().sort((a, b) => a.code - b.code)) {
    params.push(...k.params);
    firstParam.push(params.length);
  }
  firstParam.unshift(0); // kind 0 has none: KIND_PARAMS_START[code] … KIND_PARAMS_START[code + 1]
  out.push(`/** Rule parameters of kind \`code\` are PARAM_* entries KIND_PARAMS_START[code] ≤ i < KIND_PARAMS_START[code + 1]. */`);
  out.push(`export const KIND_PARAMS_START: StaticArray<i32> = [${firstParam.join(", ")}];`);
  out.push(`export const PARAM_TYPE_SCALAR: i32 = 0;\nexport const PARAM_TYPE_LIST: i32 = 1;\nexport const PARAM_TYPE_PPD_BITS: i32 = 2;`);
  out.push(`export const PARAM_NAMES: StaticArray<string> = [${params.map((p) => JSON.stringify(p.name)).join(", ")}];`);
  out.push(`export const PARAM_TYPES: StaticArray<i32> = [${params.map((p) => ["scalar", "list", "ppd-bits"].indexOf(p.type)).join(", ")}];`);
  out.push(`/** Where a scalar's value goes in the rule's two staged parameters (−1: not staged there). */`);
  out.push(`export const PARAM_STAGE: StaticArray<i32> = [${params.map((p) => (p.stage ?? -1)).join(", ")}];`);
  out.push(`/** 1 when the parameter must be > 0 (else ≥ 0). */`);
  out.push(`export const PARAM_POSITIVE: StaticArray<u8> = [${params.map((p) => (p.positive ? 1 : 0)).join(", ")}];`);
  out.push(`/** 1 when the parameter has a default (scalars: PARAM_DEFAULT; lists: LIST_DEFAULTS). */`);
  out.push(`export const PARAM_HAS_DEFAULT: StaticArray<u8> = [${params.map((p) => (p.default !== undefined ? 1 : 0)).join(", ")}];`);
  out.push(`export const PARAM_DEFAULT: StaticArray<f64> = [${params.map((p) => (typeof p.default === "number" ? p.default : 0)).join(", ")}];`);
  out.push(`export const PARAM_MIN_LENGTH: StaticArray<i32> = [${params.map((p) => p.min_length ?? 0).join(", ")}];`);
  out.push(`export const PARAM_MAX_LENGTH: StaticArray<i32> = [${params.map((p) => p.max_length ?? 0).join(", ")}];`);
  const listDefaults = [];
  const listStart = params.map((p) => {
    const at = listDefaults.length;
    if (Array.isArray(p.default)) listDefaults.push(...p.default);
    return at;
  });
  out.push(`/** A list parameter's default values are LIST_DEFAULTS[PARAM_LIST_START[i] …] (PARAM_LIST_LENGTH[i] of them). */`);
  out.push(`export const PARAM_LIST_START: StaticArray<i32> = [${listStart.join(", ")}];`);
  out.push(`export const PARAM_LIST_LENGTH: StaticArray<i32> = [${params.map((p) => (Array.isArray(p.default) ? p.default.length : 0)).join(", ")}];`);
  out.push(`export const LIST_DEFAULTS: StaticArray<f64> = [${listDefaults.join(", ")}];`);
  out.push(`export const FEATURE_NAMES: StaticArray<string> = [${spec.features.map((f) => JSON.stringify(f)).join(", ")}];`);
  out.push(`export const OSL_FEATURE_NAMES: StaticArray<string> = [${spec.osl_features.map((f) => JSON.stringify(f)).join(", ")}];`);
  return `${out.join("\n")}\n`;
}

// ---- TypeScript ----------------------------------------------------------------------------------------------

function emitTypeScript(spec) {
  const json = (v) => JSON.stringify(v);
  const obj = (entries) => `{ ${entries.map(([k, v]) => `${/^[a-zA-Z_$][\w$]*$/.test(k) ? k : json(k)}: ${v}`).join(", ")} }`;
  const kinds = spec.kinds.slice().sort((a, b) => a.code - b.code);
  const out = [
    HEADER,
    "// The core's contract for TypeScript hosts: constants, kind descriptors and the error-message table.",
    "",
    `export const ABI_VERSION = ${spec.abi_version};`,
    `export const LIMITS = ${obj(Object.entries(spec.limits).map(([k, v]) => [camel(k), v]))} as const;`,
    `export const Role = ${obj(Object.entries(spec.roles).map(([k, v]) => [k, v]))} as const;`,
    `export const Flag = ${obj(Object.entries(spec.route_flags).map(([k, v]) => [k, v.bit]))} as const;`,
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
    "export interface KindDescriptor { name: string; code: number; learned: boolean; doc: string; summary?: string; params: readonly ParamDescriptor[] }",
    "/** Every policy kind, described once (spec/abi.json): the table code, the reference engine, the baselines and the docs read this. */",
    `export const KINDS: readonly KindDescriptor[] = ${json(kinds)};`,
    "",
    "/** The core's exported functions (besides `memory`): every host checks they exist when it loads a module. */",
    `export const EXPORT_NAMES = ${json(spec.exports.map((e) => e.name))} as const;`,
    `export const ErrorCode = ${obj(spec.errors.map((e) => [e.name, e.code]))} as const;`,
    "export interface ErrorMessage { name: string; message: string; by_detail?: Record<string, string> }",
    `export const ERROR_MESSAGES: Readonly<Record<number, ErrorMessage>> = ${json(Object.fromEntries(spec.errors.map((e) => [e.code, { name: e.name, message: e.message, ...(e.by_detail ? { by_detail: e.by_detail } : {}) }])))};`,
  ];
  if (spec.table_problems) {
    out.push("/** The table decoder's problems, by code: message templates over the error record's fields. */");
    out.push(`export const TABLE_PROBLEMS: readonly { name: string; message: string }[] = ${json(spec.table_problems.map((p) => ({ name: p.name, message: p.message })))};`);
  }
  return `${out.join("\n")}\n`;
}

// ---- write ---------------------------------------------------------------------------------------------------

const EMITTERS = [
  { path: "assembly/generated/abi.ts", emit: emitAssemblyScript },
  { path: "assembly/generated/names.ts", emit: emitAssemblyScriptNames },
  { path: "src/generated/abi.ts", emit: emitTypeScript },
];

/** Writes every generated file whose text changed; returns the paths written. */
export function generate() {
  const spec = loadSpec();
  const written = [];
  for (const { path, emit } of EMITTERS) {
    const file = join(root, path);
    const text = emit(spec);
    if (existsSync(file) && readFileSync(file, "utf8") === text) continue;
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, text);
    written.push(path);
  }
  return written;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  for (const p of generate()) console.log(`gen-abi: ${p}`);
}
