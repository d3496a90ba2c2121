// How the tests reach the other hosts' toolchains: the venv `npm run setup` creates (build/setup.mjs) and Go on the
// PATH. A missing one is a failure that says how to install it, never a skip.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
export const VENV_PYTHON = join(ROOT, ".venv", "bin", "python");
export const PYTHON_DIR = join(ROOT, "bindings", "python");
export const GO_DIR = join(ROOT, "bindings", "go");

export interface HostCommand {
  command: string;
  args: string[];
  cwd: string;
  env?: NodeJS.ProcessEnv;
}

/** The venv's python running `args` in bindings/python (dolphin_routing importable); throws how to set it up. */
export function pythonCommand(...args: string[]): HostCommand {
  if (!existsSync(VENV_PYTHON)) {
    throw new Error(
      `${VENV_PYTHON} is missing: run \`npm run setup\` (it needs Python 3.11+ with venv; Debian: apt-get install -y python3 python3-venv)`,
    );
  }
  return {
    command: VENV_PYTHON,
    args,
    cwd: PYTHON_DIR,
    env: { ...process.env, PYTHONPATH: PYTHON_DIR, PYTHONDONTWRITEBYTECODE: "1" },
  };
}

/** `go run <pkg>` in bindings/go; throws how to install Go when it is not on the PATH. */
export function goCommand(pkg: string): HostCommand {
  requireGo();
  return { command: "go", args: ["run", pkg], cwd: GO_DIR };
}

export function requireGo(): void {
  const r = spawnSync("go", ["version"], { encoding: "utf8" });
  if (r.error || r.status !== 0) {
    throw new Error(
      "Go is not on the PATH: install Go 1.25 or newer (https://go.dev/doc/install, or Debian: apt-get install -y golang), then run `npm run setup`",
    );
  }
}
