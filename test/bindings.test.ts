// Runs the Python and Go bindings' own suites from `npm test`: pytest (with Hypothesis) and mypy --strict for
// bindings/python, go vet, gofmt and go test (vectors, API, fuzz seeds, the picker example) for bindings/go. A
// failure shows the suite's output; a missing toolchain fails with how to install it (test/bindings-tools.ts).
import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { GO_DIR, pythonCommand, requireGo, type HostCommand } from "./bindings-tools.js";

function run(cmd: HostCommand, what: string): string {
  const r = spawnSync(cmd.command, cmd.args, {
    cwd: cmd.cwd,
    env: cmd.env ?? process.env,
    encoding: "utf8",
    maxBuffer: 64 << 20,
  });
  if (r.error) throw new Error(`${what}: ${r.error.message}`);
  const output = `${r.stdout}${r.stderr}`;
  if (r.status !== 0) expect.fail(`${what} failed (exit ${r.status}):\n${output.slice(-20_000)}`);
  return output;
}

function go(...args: string[]): HostCommand {
  requireGo();
  return { command: "go", args, cwd: GO_DIR };
}

describe("Python binding (bindings/python)", () => {
  it("pytest: every spec/vectors case, the API, Hypothesis properties", () => {
    const out = run(pythonCommand("-m", "pytest", "-q", "-p", "no:cacheprovider"), "pytest");
    expect(out).toMatch(/\d+ passed/);
  }, 300_000);

  it("mypy --strict is clean", () => {
    run(pythonCommand("-m", "mypy", "--no-incremental"), "mypy --strict");
  }, 300_000);
});

describe("Go binding (bindings/go)", () => {
  it("go vet is clean and gofmt has nothing to change", () => {
    run(go("vet", "./..."), "go vet");
    const unformatted = run({ command: "gofmt", args: ["-l", "."], cwd: GO_DIR }, "gofmt -l").trim();
    expect(unformatted, "files gofmt would change").toBe("");
  }, 300_000);

  it("go test: every spec/vectors case, the API, fuzz seed corpora, the picker example", () => {
    run(go("test", "-count=1", "./..."), "go test");
  }, 300_000);
});
