// Generates every host's copy of the core's contract from spec/abi.json, the one place it is written:
//   assembly/generated/abi.ts, names.ts   constants and kind descriptors the core is compiled with (build/abi/assemblyscript.mjs)
//   src/generated/abi.ts                  constants, kind descriptors, exports, error messages for TypeScript (build/abi/typescript.mjs)
// A binding in another language adds an emitter in build/abi/<language>.mjs (one function: spec → the file's text)
// and one line in `emitters()` below. Outputs are generated
// at build time and never committed; a file is rewritten only when its text changes, so incremental builds stay
// incremental. Usage: node build/gen-abi.mjs (build/build.mjs runs it first).
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
export const SPEC_PATH = join(root, "spec/abi.json");

/** Checks the spec's own consistency, so a typo fails the build instead of a host. */
export function checkSpec(spec) {
  const fail = (what) => {
    throw new Error(`spec/abi.json: ${what}`);
  };
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
      if (!["scalar", "list", "ppd-bits"].includes(p.type))
        fail(`kind ${k.name}: param ${p.name} has unknown type ${p.type}`);
      if (p.type === "scalar" && p.default === undefined && p.positive !== true)
        fail(`kind ${k.name}: required param ${p.name} must be positive`);
    }
  }
  checkHostFields(spec, fail);
  if (new Set(spec.exports.map((e) => e.name)).size !== spec.exports.length) fail("exports repeats a name");
  for (const r of [
    "request_record",
    "decision_record",
    "table_error_record",
    "table_info_record",
    "osl_class_record",
    "table_problems",
    "table_value_types",
  ]) {
    if (spec[r] && new Set(spec[r].map((s) => s.name)).size !== spec[r].length) fail(`${r} repeats a name`);
  }
  return spec;
}

/**
 * The kind fields the hosts read beside the core: `explain` (the words of every host's explain: a learned kind's
 * nearest / score / beyond, a rule kind's rule sentence and local / remote clauses, whose {placeholders} name the
 * kind's staged parameters (the bindings read parameters back from the staging slots) or "explain_values",
 * {a × b} a product, and whose "when" compares two of them), `baseline` (its place among the baselines every
 * evaluation compares, and a note for the help) and `needs_table` (these two TypeScript only).
 */
function checkHostFields(spec, fail) {
  const values = new Set((spec.explain_values ?? []).map((v) => v.name));
  const orders = new Set();
  for (const k of spec.kinds) {
    const staged = new Set(k.params.filter((p) => p.stage !== undefined).map((p) => p.name));
    const known = (name) => {
      if (values.has(name) || staged.has(name)) return;
      if (k.params.some((p) => p.name === name))
        fail(`kind ${k.name}: explain names parameter "${name}", which has no staging slot the bindings could read`);
      fail(`kind ${k.name}: explain names unknown value "${name}"`);
    };
    const template = (t) => {
      if (typeof t !== "string" || t === "") fail(`kind ${k.name}: an explain template must be a non-empty string`);
      for (const [, inside] of t.matchAll(/\{([^}]*)\}/g)) inside.split(" × ").forEach(known);
    };
    const clause = (c) => {
      if (typeof c === "string") return template(c);
      if (!Array.isArray(c) || typeof c.at(-1) !== "string")
        fail(`kind ${k.name}: an explain clause is a template or a list whose last one has no "when"`);
      for (const alt of c) {
        if (typeof alt === "string") template(alt);
        else {
          const [a, op, b, ...rest] = String(alt.when).split(" ");
          if (rest.length > 0 || !["<", "≤", ">", "≥"].includes(op))
            fail(`kind ${k.name}: explain "when" must be "a op b" with op <, ≤, > or ≥, got "${alt.when}"`);
          known(a);
          known(b);
          template(alt.say);
        }
      }
    };
    const e = k.explain ?? {};
    const allowed = k.learned ? ["nearest", "score", "beyond"] : ["rule", "local", "remote"];
    for (const key of Object.keys(e))
      if (!allowed.includes(key)) fail(`kind ${k.name}: explain.${key} is not one of ${allowed.join(", ")}`);
    if (k.learned) {
      for (const key of allowed)
        if (typeof e[key] !== "string") fail(`kind ${k.name}: explain.${key} must be a string`);
    } else {
      if (e.rule !== undefined) template(e.rule);
      if (e.local !== undefined) clause(e.local);
      if (e.remote !== undefined) clause(e.remote);
    }
    if (k.baseline !== undefined) {
      if (k.learned) fail(`kind ${k.name}: a learned kind is no baseline (the learned table is "dolphin")`);
      if (!Number.isInteger(k.baseline.order) || k.baseline.order < 1 || orders.has(k.baseline.order))
        fail(`kind ${k.name}: baseline.order must be an integer ≥ 1 no other kind has`);
      orders.add(k.baseline.order);
    }
    if (k.needs_table !== undefined && (k.learned || typeof k.needs_table !== "boolean"))
      fail(`kind ${k.name}: needs_table is true or false, on rule kinds only (a learned kind always needs a table)`);
  }
}

export function loadSpec() {
  return checkSpec(JSON.parse(readFileSync(SPEC_PATH, "utf8")));
}

// ---- write ---------------------------------------------------------------------------------------------------

// One emitter per host language (build/abi/<language>.mjs): each turns the spec into one file's text.
async function emitters() {
  const { emitAssemblyScript, emitAssemblyScriptMessages, emitAssemblyScriptNames } =
    await import("./abi/assemblyscript.mjs");
  const { emitTypeScript } = await import("./abi/typescript.mjs");
  const { emitPython } = await import("./abi/python.mjs");
  const { emitGo } = await import("./abi/go.mjs");
  return [
    { path: "assembly/generated/abi.ts", emit: emitAssemblyScript },
    { path: "assembly/generated/names.ts", emit: emitAssemblyScriptNames },
    { path: "assembly/generated/messages.ts", emit: emitAssemblyScriptMessages },
    { path: "src/generated/abi.ts", emit: emitTypeScript },
    { path: "bindings/python/dolphin_routing/_abi.py", emit: emitPython },
    { path: "bindings/go/abi_gen.go", emit: emitGo },
  ];
}

/** Writes every generated file whose text changed; returns the paths written. */
export async function generate() {
  const spec = loadSpec();
  const written = [];
  for (const { path, emit } of await emitters()) {
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
  for (const p of await generate()) console.log(`gen-abi: ${p}`);
}
