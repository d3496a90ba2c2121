// The peer routers `dolphin bench routers` runs beside `dolphin serve` (issue 26): vLLM's own router (`vllm-router`,
// a Rust binary shipped in its wheel) and SGLang's model gateway (`smg`, now Shepherd), both from PyPI at pinned
// versions, into a venv of their own in the per-user cache outside the clone
// (${DOLPHIN_CACHE:-${XDG_CACHE_HOME:-~/.cache}/dolphin-routing}/routers/venv): the project's .venv stays what
// build/requirements.txt says, and every clone on the machine reuses the one install. A stamp of the pins makes a
// second run do nothing.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { cacheRoot, du } from "./vllm-setup.mjs";

export const VLLM_ROUTER_VERSION = "0.1.17";
export const SMG_VERSION = "1.13.0";

export class RoutersSetupError extends Error {}

/** Where the routers live (bench/routers/install.ts reads the same paths). */
export function routersPaths(env = process.env) {
  const home = join(cacheRoot(env), "routers");
  const bin = join(home, "venv", "bin");
  return {
    home,
    venv: join(home, "venv"),
    python: join(bin, "python"),
    vllmRouter: join(bin, "vllm-router"),
    smg: join(bin, "smg"),
    stamp: join(home, "installed.json"),
  };
}

const pins = () => [`vllm-router==${VLLM_ROUTER_VERSION}`, `smg==${SMG_VERSION}`];

function run(cmd, args) {
  const r = spawnSync(cmd, args, { stdio: ["ignore", "inherit", "inherit"] });
  if (r.error || r.status !== 0)
    throw new RoutersSetupError(`routers: ${cmd} ${args.join(" ")} failed (${r.error?.message ?? `exit ${r.status}`})`);
}

const mb = (bytes) => `${Math.round(bytes / 2 ** 20)} MB`;

/** The installed state, or null when missing, partial or of other pins. */
export function routersInstalled(env = process.env) {
  const p = routersPaths(env);
  if (!existsSync(p.stamp) || !existsSync(p.vllmRouter) || !existsSync(p.smg)) return null;
  try {
    const s = JSON.parse(readFileSync(p.stamp, "utf8"));
    return JSON.stringify(s.pins) === JSON.stringify(pins()) ? s : null;
  } catch {
    return null;
  }
}

/** The setup step: returns a one-line summary; throws RoutersSetupError with what to do. */
export function routersStep({ checkOnly = false, log = console.log } = {}) {
  const p = routersPaths();
  const done = routersInstalled();
  if (done) return `routers: ${done.pins.join(", ")} in ${p.home} (${mb(done.bytes)})`;
  if (checkOnly)
    throw new RoutersSetupError(`routers: vllm-router and smg are not installed in ${p.home}: run npm run setup`);
  const python = ["python3.11", "python3"].find((c) => {
    const r = spawnSync(c, ["-c", "import sys, venv; assert sys.version_info >= (3, 9)"], { encoding: "utf8" });
    return r.status === 0;
  });
  if (!python)
    throw new RoutersSetupError(
      "routers: Python 3.9 or newer with the venv module is needed for vllm-router and smg (PyPI wheels): " +
        "install it (Debian: apt-get install -y python3 python3-venv), then run npm run setup",
    );
  log(
    `setup: routers: installing ${pins().join(" and ")} from PyPI into ${p.venv} ` +
      "(wheels of about 24 MB and 37 MB, each a Rust binary, and their Python dependencies: about 250 MB installed)",
  );
  const t0 = Date.now();
  mkdirSync(p.home, { recursive: true });
  if (!existsSync(p.python)) run(python, ["-m", "venv", p.venv]);
  run(p.python, ["-m", "pip", "install", "--disable-pip-version-check", "--progress-bar", "off", ...pins()]);
  for (const bin of [p.vllmRouter, p.smg])
    if (!existsSync(bin)) throw new RoutersSetupError(`routers: installed, but ${bin} is missing`);
  const state = { pins: pins(), bytes: du(p.venv), installedAt: new Date().toISOString() };
  writeFileSync(p.stamp, JSON.stringify(state, null, 2) + "\n");
  return `routers: installed ${pins().join(", ")} in ${Math.round((Date.now() - t0) / 1000)} s into ${p.home} (${mb(state.bytes)})`;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  try {
    console.log(`setup: ${routersStep({ checkOnly: process.argv.includes("--check") })}`);
  } catch (e) {
    if (!(e instanceof RoutersSetupError)) throw e;
    console.error(`setup: ${e.message}`);
    process.exit(1);
  }
}
