// The AssemblyScript emitter: the constants the core is compiled with (assembly/generated/abi.ts) and the kind
// descriptors and names as static data (assembly/generated/names.ts), from spec/abi.json.
import { HEADER, camel, upper } from "./names.mjs";

export function emitAssemblyScript(spec) {
  const out = [
    HEADER,
    "// The core's constants (assembly/ imports these; hosts get the same numbers from their own generated copy).",
    "",
  ];
  const c = (name, value, type = "i32", doc) =>
    out.push(`${doc ? `/** ${doc} */\n` : ""}export const ${name}: ${type} = ${value};`);
  c("ABI_VERSION", spec.abi_version);
  out.push("");
  for (const [k, v] of Object.entries(spec.limits)) c(`LIMIT_${upper(k)}`, v);
  out.push("");
  for (const e of spec.errors) c(e.name === "OK" ? "OK" : `E_${e.name}`, e.code);
  out.push("");
  for (const [k, v] of Object.entries(spec.roles)) c(`ROLE_${upper(k)}`, v);
  for (const [k, v] of Object.entries(spec.route_flags)) c(`FLAG_${upper(k)}`, v.bit, "i32", v.doc);
  for (const [k, v] of Object.entries(spec.hash_schemes)) c(`SCHEME_${upper(k)}`, v.code, "i32", v.doc);
  for (const [k, v] of Object.entries(spec.tiers)) c(`TIER_${upper(k)}`, v.code, "i32", v.doc);
  for (const [k, v] of Object.entries(spec.tiers))
    c(`TIER_WEIGHT_${upper(k)}`, Number.isInteger(v.weight) ? v.weight.toFixed(1) : String(v.weight), "f64");
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
  if (spec.table_error_record) {
    out.push("");
    spec.table_error_record.forEach((s, i) => c(`TE_${upper(s.name)}`, i, "i32", s.doc));
    c("TABLE_ERROR_SLOTS", spec.table_error_record.length);
  }
  if (spec.table_value_types) {
    out.push("");
    spec.table_value_types.forEach((t, i) => c(`TV_${upper(t.name)}`, i, "i32", t.describe));
  }
  if (spec.table_info_record) {
    out.push("");
    spec.table_info_record.forEach((s, i) => c(`TI_${upper(s.name)}`, i, "i32", s.doc));
    c("TABLE_INFO_SLOTS", spec.table_info_record.length);
  }
  if (spec.osl_class_record) {
    out.push("");
    spec.osl_class_record.forEach((s, i) => c(`OC_${upper(s.name)}`, i, "i32", s.doc));
    c("OSL_CLASS_SLOTS", spec.osl_class_record.length);
  }
  return `${out.join("\n")}\n`;
}

/** Names and kind descriptors as static data: a file of its own, so only the table decoder links them in. */
export function emitAssemblyScriptNames(spec) {
  const out = [
    HEADER,
    "// Kind descriptors and names, as flat static arrays indexed by kind code (no allocation at run time).",
    "",
  ];
  const names = [
    "",
    ...spec.kinds
      .slice()
      .sort((a, b) => a.code - b.code)
      .map((k) => k.name),
  ];
  out.push(`/** Table kind names by code (index 0 is no kind). */`);
  out.push(`export const KIND_NAMES: StaticArray<string> = [${names.map((n) => JSON.stringify(n)).join(", ")}];`);
  out.push(`/** 1 when the kind is learned (clusters), by code. */`);
  out.push(
    `export const KIND_LEARNED: StaticArray<u8> = [${[
      "0",
      ...spec.kinds
        .slice()
        .sort((a, b) => a.code - b.code)
        .map((k) => (k.learned ? 1 : 0)),
    ].join(", ")}];`,
  );
  const params = [];
  const firstParam = [0];
  for (const k of spec.kinds.slice().sort((a, b) => a.code - b.code)) {
    params.push(...k.params);
    firstParam.push(params.length);
  }
  firstParam.unshift(0); // kind 0 has none: KIND_PARAMS_START[code] … KIND_PARAMS_START[code + 1]
  out.push(
    `/** Rule parameters of kind \`code\` are PARAM_* entries KIND_PARAMS_START[code] ≤ i < KIND_PARAMS_START[code + 1]. */`,
  );
  out.push(`export const KIND_PARAMS_START: StaticArray<i32> = [${firstParam.join(", ")}];`);
  out.push(
    `export const PARAM_TYPE_SCALAR: i32 = 0;\nexport const PARAM_TYPE_LIST: i32 = 1;\nexport const PARAM_TYPE_PPD_BITS: i32 = 2;`,
  );
  out.push(
    `export const PARAM_NAMES: StaticArray<string> = [${params.map((p) => JSON.stringify(p.name)).join(", ")}];`,
  );
  out.push(
    `export const PARAM_TYPES: StaticArray<i32> = [${params.map((p) => ["scalar", "list", "ppd-bits"].indexOf(p.type)).join(", ")}];`,
  );
  out.push(`/** Where a scalar's value goes in the rule's two staged parameters (−1: not staged there). */`);
  out.push(`export const PARAM_STAGE: StaticArray<i32> = [${params.map((p) => p.stage ?? -1).join(", ")}];`);
  out.push(`/** 1 when the parameter must be > 0 (else ≥ 0). */`);
  out.push(`export const PARAM_POSITIVE: StaticArray<u8> = [${params.map((p) => (p.positive ? 1 : 0)).join(", ")}];`);
  out.push(`/** 1 when the parameter has a default (scalars: PARAM_DEFAULT; lists: LIST_DEFAULTS). */`);
  out.push(
    `export const PARAM_HAS_DEFAULT: StaticArray<u8> = [${params.map((p) => (p.default !== undefined ? 1 : 0)).join(", ")}];`,
  );
  out.push(
    `export const PARAM_DEFAULT: StaticArray<f64> = [${params.map((p) => (typeof p.default === "number" ? p.default : 0)).join(", ")}];`,
  );
  out.push(`export const PARAM_MIN_LENGTH: StaticArray<i32> = [${params.map((p) => p.min_length ?? 0).join(", ")}];`);
  out.push(`export const PARAM_MAX_LENGTH: StaticArray<i32> = [${params.map((p) => p.max_length ?? 0).join(", ")}];`);
  const listDefaults = [];
  const listStart = params.map((p) => {
    const at = listDefaults.length;
    if (Array.isArray(p.default)) listDefaults.push(...p.default);
    return at;
  });
  out.push(
    `/** A list parameter's default values are LIST_DEFAULTS[PARAM_LIST_START[i] …] (PARAM_LIST_LENGTH[i] of them). */`,
  );
  out.push(`export const PARAM_LIST_START: StaticArray<i32> = [${listStart.join(", ")}];`);
  out.push(
    `export const PARAM_LIST_LENGTH: StaticArray<i32> = [${params.map((p) => (Array.isArray(p.default) ? p.default.length : 0)).join(", ")}];`,
  );
  out.push(`export const LIST_DEFAULTS: StaticArray<f64> = [${listDefaults.join(", ")}];`);
  out.push(
    `export const FEATURE_NAMES: StaticArray<string> = [${spec.features.map((f) => JSON.stringify(f)).join(", ")}];`,
  );
  out.push(
    `export const OSL_FEATURE_NAMES: StaticArray<string> = [${spec.osl_features.map((f) => JSON.stringify(f)).join(", ")}];`,
  );
  return `${out.join("\n")}\n`;
}

/**
 * Message templates for hosts that run inside the module (the Envoy filter): the same templates src/generated/abi.ts
 * has. A file of its own, so the core (which only returns codes) does not carry the strings.
 */
export function emitAssemblyScriptMessages(spec) {
  const out = [HEADER, "// Error and table-problem message templates for in-module hosts (the Envoy filter).", ""];
  out.push(`/** Error message templates by error code ({detail}: errorDetail()). */`);
  const byCode = [];
  for (const e of spec.errors) byCode[e.code] = e.message;
  out.push(
    `export const ERROR_MESSAGES: StaticArray<string> = [${Array.from(byCode, (m) => JSON.stringify(m ?? "")).join(", ")}];`,
  );
  if (spec.table_problems) {
    out.push(`/** Table decoder problem message templates by problem code (the table error record's problem slot). */`);
    out.push(
      `export const TABLE_PROBLEM_MESSAGES: StaticArray<string> = [${spec.table_problems.map((t) => JSON.stringify(t.message)).join(", ")}];`,
    );
  }
  return `${out.join("\n")}\n`;
}
