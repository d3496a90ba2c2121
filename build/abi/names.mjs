// What every emitter shares: the generated-file header, the name conventions and the staged parameters. A module of
// its own so that the emitters do not import build/gen-abi.mjs, which imports them (a cycle that deadlocks its
// top-level await when gen-abi.mjs runs as a script).

export const HEADER =
  "// GENERATED from spec/abi.json by build/gen-abi.mjs: do not edit (change the spec and rebuild).";

/** snake_case or kebab-case → camelCase; SCREAMING names for constants. */
export const camel = (s) => s.replace(/[-_]([a-z0-9])/gi, (_, c) => c.toUpperCase());
export const upper = (s) => s.replace(/-/g, "_").toUpperCase();

/** A kind's parameters in their staging slots' order (their "stage"): what the bindings read back after loadTable. */
export const stagedParams = (kind) =>
  kind.params
    .filter((p) => p.stage !== undefined)
    .sort((a, b) => a.stage - b.stage)
    .map((p) => p.name);
