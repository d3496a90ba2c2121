// The Python emitter: the core's contract for the Python binding (bindings/python/dolphin_routing/_abi.py), from
// spec/abi.json: constants, slot indices, kind codes, each kind's explain words, the export list and the
// error-message table with the same templates and by_detail entries as the TypeScript host, so messages are
// identical across hosts.
import { HEADER, stagedParams, upper } from "./names.mjs";

/** A JSON value as a Python literal (JSON strings are valid Python string literals). */
export function py(value) {
  if (value === null) return "None";
  if (value === true) return "True";
  if (value === false) return "False";
  if (typeof value === "number") return Number.isInteger(value) ? String(value) : JSON.stringify(value);
  if (typeof value === "string") return JSON.stringify(value);
  if (Array.isArray(value)) return `(${value.map(py).join(", ")}${value.length === 1 ? "," : ""})`;
  return `{${Object.entries(value)
    .map(([k, v]) => `${JSON.stringify(k)}: ${py(v)}`)
    .join(", ")}}`;
}

export function emitPython(spec) {
  const comment = HEADER.replace(/^\/\//, "#");
  const kinds = spec.kinds.slice().sort((a, b) => a.code - b.code);
  const out = [
    comment,
    '"""The core\'s contract for the Python binding: constants, slots, kinds and the error-message table."""',
    "from typing import Final, Mapping, NamedTuple, Optional, Tuple",
    "",
    `ABI_VERSION: Final = ${spec.abi_version}`,
  ];
  for (const [k, v] of Object.entries(spec.limits)) out.push(`LIMIT_${upper(k)}: Final = ${v}`);
  out.push(`ROLES: Final[Mapping[str, int]] = ${py(spec.roles)}`);
  for (const [k, v] of Object.entries(spec.route_flags)) out.push(`FLAG_${upper(k)}: Final = ${v.bit}  # ${v.doc}`);
  out.push(
    `HASH_SCHEMES: Final[Mapping[str, int]] = ${py(Object.fromEntries(Object.entries(spec.hash_schemes).map(([k, v]) => [k, v.code])))}`,
  );
  out.push(
    `TIERS: Final[Mapping[str, int]] = ${py(Object.fromEntries(Object.entries(spec.tiers).map(([k, v]) => [k, v.code])))}`,
  );
  out.push(
    `TIER_WEIGHTS: Final[Mapping[str, float]] = ${py(Object.fromEntries(Object.entries(spec.tiers).map(([k, v]) => [k, v.weight])))}`,
  );
  out.push(`KINDS: Final[Mapping[str, int]] = ${py(Object.fromEntries(kinds.map((k) => [k.name, k.code])))}`);
  out.push(
    `KIND_PARAMS: Final[Mapping[str, Tuple[str, ...]]] = ${py(Object.fromEntries(kinds.map((k) => [k.name, k.params.map((p) => p.name)])))}`,
  );
  out.push(`LEARNED_KINDS: Final[Tuple[str, ...]] = ${py(kinds.filter((k) => k.learned).map((k) => k.name))}`);
  out.push(...explainPython(spec, kinds));
  out.push(`REASONS: Final[Tuple[str, ...]] = ${py(spec.reasons)}`);
  out.push(`FEATURES: Final[Tuple[str, ...]] = ${py(spec.features)}`);
  out.push(`OSL_FEATURES: Final[Tuple[str, ...]] = ${py(spec.osl_features)}`);
  out.push("", "# Slots of the request record (f64 each) the host writes at requestPtr() before route().");
  spec.request_record.forEach((s, i) => out.push(`R_${upper(s.name)}: Final = ${i}`));
  out.push(`REQUEST_SLOTS: Final = ${spec.request_record.length}`);
  out.push("", "# Slots of the decision record (f64 each) route() writes at decisionPtr().");
  spec.decision_record.forEach((s, i) => out.push(`D_${upper(s.name)}: Final = ${i}`));
  out.push(`DECISION_SLOTS: Final = ${spec.decision_record.length}`);
  out.push("", "# The core's exported functions (besides memory): checked when a module is loaded.");
  out.push(`EXPORT_NAMES: Final[Tuple[str, ...]] = ${py(spec.exports.map((e) => e.name))}`);
  out.push(
    "",
    "# Error codes and their message templates ({detail}: errorDetail() as JavaScript's String(n) writes it).",
  );
  for (const e of spec.errors) out.push(`E_${e.name}: Final = ${e.code}`);
  out.push("ERROR_MESSAGES: Final[Mapping[int, Tuple[str, str, Optional[Mapping[str, str]]]]] = {");
  for (const e of spec.errors)
    out.push(`    ${e.code}: (${py(e.name)}, ${py(e.message)}, ${e.by_detail ? py(e.by_detail) : "None"}),`);
  out.push("}");
  if (spec.table_problems) {
    out.push(
      "",
      "# The table decoder's problems, by code: (name, message template, template when the value is missing).",
    );
    out.push("TABLE_PROBLEMS: Final[Tuple[Tuple[str, str, Optional[str]], ...]] = (");
    for (const p of spec.table_problems)
      out.push(`    (${py(p.name)}, ${py(p.message)}, ${p.missing ? py(p.missing) : "None"}),`);
    out.push(")");
  }
  if (spec.table_error_record) {
    out.push("", "# Slots of the table error record (f64 each) loadTable fills at tableErrorPtr() on BAD_TABLE.");
    spec.table_error_record.forEach((s, i) => out.push(`TE_${upper(s.name)}: Final = ${i}`));
    out.push(`TABLE_ERROR_SLOTS: Final = ${spec.table_error_record.length}`);
  }
  if (spec.table_value_types)
    out.push(`TABLE_VALUE_TYPES: Final[Tuple[str, ...]] = ${py(spec.table_value_types.map((t) => t.name))}`);
  if (spec.table_info_record) {
    out.push("", "# Slots of the table info record (f64 each) loadTable fills at tableInfoPtr() on success.");
    spec.table_info_record.forEach((s, i) => out.push(`TI_${upper(s.name)}: Final = ${i}`));
    out.push(`TABLE_INFO_SLOTS: Final = ${spec.table_info_record.length}`);
  }
  if (spec.osl_class_record) {
    out.push(
      "",
      "# Slots of one output-length class record (f64 each; class i at tableOslClassesPtr() + 8 × i × OSL_CLASS_SLOTS)",
      "# loadTable fills on success.",
    );
    spec.osl_class_record.forEach((s, i) => out.push(`OC_${upper(s.name)}: Final = ${i}`));
    out.push(`OSL_CLASS_SLOTS: Final = ${spec.osl_class_record.length}`);
  }
  return `${out.join("\n")}\n`;
}

/** Each kind's explain words and the parameters in its staging slots (what a template's {name} may name). */
function explainPython(spec, kinds) {
  // a clause as alternatives (when, say): the last has no condition (gen-abi.mjs checks), a plain template is one
  const alts = (c) =>
    py((typeof c === "string" ? [c] : c).map((a) => (typeof a === "string" ? [null, a] : [a.when, a.say])));
  const explain = (k) => {
    const e = k.explain ?? {};
    const fields = [];
    for (const f of ["nearest", "score", "beyond", "rule"]) if (e[f] !== undefined) fields.push(`${f}=${py(e[f])}`);
    for (const f of ["local", "remote"]) if (e[f] !== undefined) fields.push(`${f}=${alts(e[f])}`);
    return `    ${py(k.name)}: KindExplain(${fields.join(", ")}),`;
  };
  return [
    "",
    "",
    "class KindExplain(NamedTuple):",
    '    """A kind\'s explain words (spec/abi.json "explain"): a learned kind\'s nearest / score / beyond, a rule kind\'s rule',
    "    sentence and local / remote clauses, alternatives (when, say) whose first that holds (when None: always) is said.",
    '    {name} names a decision value (EXPLAIN_VALUES) or a staged parameter, {a × b} a product."""',
    "",
    "    nearest: Optional[str] = None",
    "    score: Optional[str] = None",
    "    beyond: Optional[str] = None",
    "    rule: Optional[str] = None",
    "    local: Optional[Tuple[Tuple[Optional[str], str], ...]] = None",
    "    remote: Optional[Tuple[Tuple[Optional[str], str], ...]] = None",
    "",
    "",
    "KIND_EXPLAIN: Final[Mapping[str, KindExplain]] = {",
    ...kinds.map(explain),
    "}",
    "# The decision's values a template may name besides the kind's parameters.",
    `EXPLAIN_VALUES: Final[Tuple[str, ...]] = ${py((spec.explain_values ?? []).map((v) => v.name))}`,
    '# The parameter in each staging slot (spec/abi.json "stage"), for the kinds that stage any.',
    `KIND_STAGED_PARAMS: Final[Mapping[str, Tuple[str, ...]]] = ${py(Object.fromEntries(kinds.filter((k) => stagedParams(k).length > 0).map((k) => [k.name, stagedParams(k)])))}`,
    "",
  ];
}
