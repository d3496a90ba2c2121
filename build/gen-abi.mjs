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
