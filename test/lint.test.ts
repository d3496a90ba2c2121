// The layer rules (.dependency-cruiser.cjs, run by `npm run lint`): the tree passes, and a copy of the tree with one
// forbidden import per rule fails on exactly those imports, so a rule that stopped matching would show here.
import { spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const DEPCRUISE = join(ROOT, "node_modules/dependency-cruiser/bin/dependency-cruise.mjs");

/** The arguments `npm run lint` gives depcruise, read from its script so the test and the script cannot drift. */
function lintArgs(): string[] {
  const script = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { scripts: Record<string, string> })
    .scripts["lint"];
  const words = (script ?? "").trim().split(/\s+/);
  expect(words[0], `package.json scripts.lint: ${script}`).toBe("depcruise");
  return words.slice(1);
}

/** What the lint reads: the folders it is given, the rules and the tsconfig they resolve imports with. */
const lintInputs = (): string[] => [
  ...lintArgs().filter((a) => existsSync(join(ROOT, a)) && statSync(join(ROOT, a)).isDirectory()),
  ".dependency-cruiser.cjs",
  "tsconfig.json",
];

/**
 * Runs the lint in `cwd` with the same command line as `npm run lint`: the exit code and the violations it
 * printed, as "rule: from → to".
 */
function lint(cwd: string): { status: number | null; violations: string[]; output: string } {
  const r = spawnSync(process.execPath, [DEPCRUISE, ...lintArgs()], {
    cwd,
    encoding: "utf8",
    env: { ...process.env, NO_COLOR: "1", FORCE_COLOR: "0" },
  });
  const output = r.stdout + r.stderr;
  const lines = output.split("\n");
  const violations = lines.flatMap((line, i) => {
    const m = /^\s*error (\S+): (\S+) → (\S+)\s*$/.exec(line);
    if (m) return [`${m[1]}: ${m[2]} → ${m[3]}`];
    // a circle is printed over lines, one file a line: its first step is what it names here
    const c = /^\s*error (\S+): (\S+) →\s*$/.exec(line);
    const next = /^\s*(\S+)/.exec(lines[i + 1] ?? "");
    return c && next ? [`${c[1]}: ${c[2]} → ${next[1]}`] : [];
  });
  return { status: r.status, violations: violations.sort(), output };
}

// One forbidden import per rule (file → content), and what the lint must say about it.
const OFFENDERS: Record<string, string> = {
  "src/sim/bad-node.ts": `import { readFileSync } from "node:fs";\nexport const f = readFileSync;\n`,
  "src/learn/bad-bare-builtin.ts": `import { join } from "path";\nexport const j = join;\n`,
  "src/bad-dynamic.ts": `export const cpus = async () => (await import("node:os")).cpus();\n`,
  "src/learn/bad-edge.ts": `export { loadWorkload } from "../sim/workload-files.js";\n`,
  "src/serve/bad-bindings.ts": `export { loadCoreModule } from "../../bindings/node/index.js";\n`,
  "src/sim/bad-learn.ts": `import type { TrainResult } from "../learn/train.js";\nexport type R = TrainResult;\n`,
  "src/sim/bad-serve.ts": `import { parseConfig } from "../serve/config.js";\nexport const p = parseConfig;\n`,
  "src/learn/bad-serve.ts": `import type { ServeConfig } from "../serve/config.js";\nexport type C = ServeConfig;\n`,
  "src/bad-cli.ts": `import "./cli/index.js";\n`,
  "src/serve/bad-reference.ts": `export { ReferenceEngine } from "../reference/engine.js";\n`,
  "src/bad-bench.ts": `import "../bench/core.js";\n`,
  "assembly/bad-host.ts": `import { ErrorCode } from "../src/contract/errors.ts";\nexport const e = ErrorCode;\n`,
  "bindings/browser/bad-node.ts": `import { readFileSync } from "node:fs";\nexport const f = readFileSync;\n`,
  "src/hashing/bad-table.ts": `import type { Table } from "../table/table.js";\nexport type T = Table;\n`,
  "src/contract/bad-hashing.ts": `export { toPairs } from "../hashing/hashes.js";\n`,
  "src/table/bad-core.ts": `export { createCore } from "../core/core.js";\n`,
  "src/core/bad-router.ts": `export { Router } from "../router/router.js";\n`,
  "src/reference/bad-router.ts": `import type { Router } from "../router/router.js";\nexport type R = Router;\n`,
  "src/router/bad-sim.ts": `import type { Workload } from "../sim/types.js";\nexport type W = Workload;\n`,
  "src/report/bad-learn.ts": `import type { RewardForm } from "../learn/guard.js";\nexport type F = RewardForm;\n`,
  "src/serve/bad-envoy.ts": `import type { EnvoySetup } from "../envoy/config.js";\nexport type S = EnvoySetup;\n`,
  "src/envoy/bad-learn.ts": `import type { RewardForm } from "../learn/guard.js";\nexport type F = RewardForm;\n`,
  "src/generated/bad-contract.ts": `export { ErrorCode } from "../contract/errors.js";\n`,
  "src/sim/bad-circle-a.ts": `import { b } from "./bad-circle-b.js";\nexport const a = () => b;\n`,
  "src/sim/bad-circle-b.ts": `import { a } from "./bad-circle-a.js";\nexport const b = () => a;\n`,
  // allowed: a type-only import of a Node built-in vanishes when compiled
  "src/sim/ok-type-only.ts": `import type { IncomingMessage } from "node:http";\nexport type M = IncomingMessage;\n`,
};

const EXPECTED = [
  "node-builtins-only-in-edges: src/sim/bad-node.ts → fs",
  "node-builtins-only-in-edges: src/learn/bad-bare-builtin.ts → path",
  "node-builtins-only-in-edges: src/bad-dynamic.ts → os",
  "browser-safe-imports-no-edge: src/learn/bad-edge.ts → src/sim/workload-files.ts",
  "src-not-bindings: src/serve/bad-bindings.ts → bindings/node/index.ts",
  "layer-sim: src/sim/bad-learn.ts → src/learn/train.ts",
  "layer-sim: src/sim/bad-serve.ts → src/serve/config.ts",
  "browser-safe-imports-no-edge: src/sim/bad-serve.ts → src/serve/config.ts",
  "layer-learn: src/learn/bad-serve.ts → src/serve/config.ts",
  "layer-hashing: src/hashing/bad-table.ts → src/table/table.ts",
  "layer-contract: src/contract/bad-hashing.ts → src/hashing/hashes.ts",
  "layer-table: src/table/bad-core.ts → src/core/core.ts",
  "layer-core: src/core/bad-router.ts → src/router/router.ts",
  "layer-reference: src/reference/bad-router.ts → src/router/router.ts",
  "layer-router: src/router/bad-sim.ts → src/sim/types.ts",
  "layer-report: src/report/bad-learn.ts → src/learn/guard.ts",
  "layer-serve: src/serve/bad-envoy.ts → src/envoy/config.ts",
  "layer-envoy: src/envoy/bad-learn.ts → src/learn/guard.ts",
  "layer-generated: src/generated/bad-contract.ts → src/contract/errors.ts",
  "no-circular: src/sim/bad-circle-a.ts → src/sim/bad-circle-b.ts",
  "nothing-imports-cli: src/bad-cli.ts → src/cli/index.ts",
  "reference-is-the-oracle: src/serve/bad-reference.ts → src/reference/engine.ts",
  "src-not-tools: src/bad-bench.ts → bench/core.ts",
  "assembly-only-assembly: assembly/bad-host.ts → src/contract/errors.ts",
  "bindings-browser-no-node-builtins: bindings/browser/bad-node.ts → fs",
].sort();

const tmp = mkdtempSync(join(tmpdir(), "dolphin-lint-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe("npm run lint (layer rules)", () => {
  it("passes on the tree", () => {
    const r = lint(ROOT);
    expect(r.violations, r.output).toEqual([]);
    expect(r.status, r.output).toBe(0);
  });

  it("fails on a copy of the tree with one forbidden import per rule, naming each and nothing else", () => {
    for (const input of lintInputs()) cpSync(join(ROOT, input), join(tmp, input), { recursive: true });
    for (const [file, content] of Object.entries(OFFENDERS)) {
      mkdirSync(dirname(join(tmp, file)), { recursive: true });
      writeFileSync(join(tmp, file), content);
    }
    const r = lint(tmp);
    expect(r.violations, r.output).toEqual(EXPECTED);
    expect(r.status, r.output).not.toBe(0);
  });
});
