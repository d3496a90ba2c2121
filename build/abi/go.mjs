// The Go emitter: the core's contract for the Go binding (bindings/go/abi_gen.go, package dolphin), from
// spec/abi.json: constants, slot indices, kind codes, each kind's explain words, the export list and the
// error-message table with the same templates and by_detail entries as the TypeScript host, so messages are
// identical across hosts.
import { HEADER, camel, stagedParams, upper } from "./names.mjs";

/** SCREAMING or kebab names → Go's exported CamelCase. */
const goName = (s) => camel(s.toLowerCase().replace(/-/g, "_")).replace(/^./, (c) => c.toUpperCase());
const str = (s) => JSON.stringify(s); // a JSON string is a valid Go interpreted string literal
const strings = (xs) => `[]string{${xs.map(str).join(", ")}}`;

export function emitGo(spec) {
  const kinds = spec.kinds.slice().sort((a, b) => a.code - b.code);
  const out = [
    HEADER,
    "",
    "package dolphin",
    "",
    "// The core's contract for the Go binding: constants, slots, kinds and the error-message table.",
    "",
    `const abiVersion = ${spec.abi_version}`,
    "",
  ];
  // One declaration a line, no groups: gofmt has nothing to align, so the output is gofmt-clean as written.
  for (const [k, v] of Object.entries(spec.limits)) out.push(`const limit${goName(k)} = ${v}`);
  out.push("", "// Worker roles (setWorker).");
  for (const [k, v] of Object.entries(spec.roles)) out.push(`const role${goName(k)} = ${v}`);
  out.push("", "// Route flags (the request record's flags slot).");
  for (const [k, v] of Object.entries(spec.route_flags)) out.push(`\n// ${v.doc}\nconst flag${goName(k)} = ${v.bit}`);
  out.push("", "// hashSchemes maps a block-hash scheme's name to its code (setHashScheme).");
  out.push(
    `var hashSchemes = map[string]int{${Object.entries(spec.hash_schemes)
      .map(([k, v]) => `${str(k)}: ${v.code}`)
      .join(", ")}}`,
  );
  out.push(
    "",
    "// tiers maps a cache tier's name (a KV event's medium) to its code (indexStoreTier); tierWeights its default weight.",
  );
  out.push(
    `var tiers = map[string]int{${Object.entries(spec.tiers)
      .map(([k, v]) => `${str(k)}: ${v.code}`)
      .join(", ")}}`,
  );
  out.push(
    `var tierWeights = map[string]float64{${Object.entries(spec.tiers)
      .map(([k, v]) => `${str(k)}: ${Number.isInteger(v.weight) ? v.weight.toFixed(1) : v.weight}`)
      .join(", ")}}`,
  );
  out.push("");
  out.push("// kindCodes maps a table kind's name to its code.");
  out.push(`var kindCodes = map[string]int{${kinds.map((k) => `${str(k.name)}: ${k.code}`).join(", ")}}`);
  out.push("", "// kindParams lists each kind's parameter names (in the spec's order).");
  out.push(
    `var kindParams = map[string][]string{${kinds.map((k) => `${str(k.name)}: ${strings(k.params.map((p) => p.name))}`).join(", ")}}`,
  );
  out.push(`var learnedKinds = ${strings(kinds.filter((k) => k.learned).map((k) => k.name))}`);
  out.push(...explainGo(spec, kinds));
  out.push(`var reasonNames = ${strings(spec.reasons)}`);
  out.push(`var featureNames = ${strings(spec.features)}`);
  out.push(`var oslFeatureNames = ${strings(spec.osl_features)}`);
  out.push("", "// Slots of the request record (f64 each) the host writes at requestPtr() before route().");
  spec.request_record.forEach((s, i) => out.push(`const r${goName(s.name)} = ${i}`));
  out.push(`const requestSlots = ${spec.request_record.length}`);
  out.push("", "// Slots of the decision record (f64 each) route() writes at decisionPtr().");
  spec.decision_record.forEach((s, i) => out.push(`const d${goName(s.name)} = ${i}`));
  out.push(`const decisionSlots = ${spec.decision_record.length}`);
  out.push("", "// exportNames lists the core's exported functions (besides memory): checked when a module is loaded.");
  out.push(`var exportNames = ${strings(spec.exports.map((e) => e.name))}`);
  out.push("", "// Error codes (Error.Code).");
  for (const e of spec.errors) out.push(`const Code${goName(e.name)} = ${e.code}`);
  out.push("");
  out.push(
    "type errorMessage struct {",
    "\tname     string",
    "\tmessage  string",
    "\tbyDetail map[string]string",
    "}",
    "",
  );
  out.push(
    "// errorMessages holds each code's template, indexed by code ({detail}: errorDetail() as JavaScript's String(n)",
  );
  out.push("// writes it). A slice without keys: gofmt-clean as written.");
  out.push("var errorMessages = []errorMessage{");
  const byCode = new Map(spec.errors.map((e) => [e.code, e]));
  for (let code = 0; code <= Math.max(...byCode.keys()); code++) {
    const e = byCode.get(code);
    if (!e) {
      out.push("\t{},");
      continue;
    }
    const by = e.by_detail
      ? `map[string]string{${Object.entries(e.by_detail)
          .map(([k, v]) => `${str(k)}: ${str(v)}`)
          .join(", ")}}`
      : "nil";
    out.push(`\t{${str(e.name)}, ${str(e.message)}, ${by}},`);
  }
  out.push("}");
  if (spec.table_problems) {
    out.push("", "type tableProblem struct {", "\tname    string", "\tmessage string", "\tmissing string", "}", "");
    out.push(
      "// tableProblems are the table decoder's problems, by code (missing: the template when the value is absent).",
    );
    out.push("var tableProblems = []tableProblem{");
    for (const p of spec.table_problems) out.push(`\t{${str(p.name)}, ${str(p.message)}, ${str(p.missing ?? "")}},`);
    out.push("}");
  }
  if (spec.table_error_record) {
    out.push("", "// Slots of the table error record (f64 each) loadTable fills at tableErrorPtr() on BAD_TABLE.");
    spec.table_error_record.forEach((s, i) => out.push(`const te${goName(s.name)} = ${i}`));
    out.push(`const tableErrorSlots = ${spec.table_error_record.length}`);
  }
  if (spec.table_value_types)
    out.push("", `var tableValueTypes = ${strings(spec.table_value_types.map((t) => t.name))}`);
  if (spec.table_info_record) {
    out.push("", "// Slots of the table info record (f64 each) loadTable fills at tableInfoPtr() on success.");
    spec.table_info_record.forEach((s, i) => out.push(`const ti${goName(s.name)} = ${i}`));
    out.push(`const tableInfoSlots = ${spec.table_info_record.length}`);
  }
  if (spec.osl_class_record) {
    out.push(
      "",
      "// Slots of one output-length class record (f64 each; class i at tableOslClassesPtr() + 8 × i × oslClassSlots)",
      "// loadTable fills on success.",
    );
    spec.osl_class_record.forEach((s, i) => out.push(`const oc${goName(s.name)} = ${i}`));
    out.push(`const oslClassSlots = ${spec.osl_class_record.length}`);
  }
  return `${out.join("\n")}\n`;
}

/** Each kind's explain words and the parameters in its staging slots (what a template's {name} may name). */
function explainGo(spec, kinds) {
  // a clause as alternatives: the last has no condition (gen-abi.mjs checks), and a plain template is one of them
  const alts = (c) =>
    `[]explainAlt{${(typeof c === "string" ? [c] : c)
      .map((a) => (typeof a === "string" ? `{"", ${str(a)}}` : `{${str(a.when)}, ${str(a.say)}}`))
      .join(", ")}}`;
  const explain = (k) => {
    const e = k.explain ?? {};
    const fields = [`kind: ${str(k.name)}`];
    for (const f of ["nearest", "score", "beyond", "rule"]) if (e[f] !== undefined) fields.push(`${f}: ${str(e[f])}`);
    for (const f of ["local", "remote"]) if (e[f] !== undefined) fields.push(`${f}: ${alts(e[f])}`);
    return `\t{${fields.join(", ")}},`;
  };
  return [
    "",
    '// explainAlt is one alternative of a rule\'s clause: said when `when` ("a op b") holds, always when "".',
    "type explainAlt struct{ when, say string }",
    "",
    "// kindExplain is a kind's explain words (spec/abi.json \"explain\"): a learned kind's nearest / score / beyond, a",
    '// rule kind\'s rule sentence ("" = none) and its local / remote clauses (nil = none), the first alternative that',
    "// holds said. {name} names a decision value (explainValues) or a staged parameter, {a × b} a product.",
    "type kindExplain struct {",
    ...[
      ["kind", "string"],
      ["nearest, score, beyond, rule", "string"],
      ["local, remote", "[]explainAlt"],
    ].map(([names, type]) => `\t${names.padEnd(29)}${type}`), // aligned as gofmt aligns them
    "}",
    "",
    "var kindExplains = []kindExplain{",
    ...kinds.map(explain),
    "}",
    "",
    "// explainValues are the decision's values a template may name besides the kind's parameters.",
    `var explainValues = ${strings((spec.explain_values ?? []).map((v) => v.name))}`,
    "",
    '// kindStagedParams lists the parameter in each staging slot (the "stage" of spec/abi.json), for kinds that stage any.',
    `var kindStagedParams = map[string][]string{${kinds
      .filter((k) => stagedParams(k).length > 0)
      .map((k) => `${str(k.name)}: ${strings(stagedParams(k))}`)
      .join(", ")}}`,
  ];
}
