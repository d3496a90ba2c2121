// The peers' harnesses for the differential tests and `dolphin bench peers` (issue 26): two small programs of ours
// around the peers' published routing cores, built once into a per-user cache outside the clone
// (${DOLPHIN_CACHE:-${XDG_CACHE_HOME:-~/.cache}/dolphin-routing}/peers):
//   bench/peers/dynamo/  Rust, on crates.io's dynamo-kv-router =1.6.1 (cargo; its target dir in the cache)
//   bench/peers/llmd/    Go, on github.com/llm-d/llm-d-kv-cache v0.9.0 (the Go module proxy; GOMODCACHE and
//                        GOCACHE in the cache, CGO_ENABLED=0: kvblock and kvevents need no cgo)
// Both land in <cache>/peers/bin. A stamp of the harnesses' sources makes a second run do nothing.
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { cacheRoot, du } from "./vllm-setup.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const DYNAMO = join(root, "bench", "peers", "dynamo");
const LLMD = join(root, "bench", "peers", "llmd");

export class PeersSetupError extends Error {}

/** Where the harnesses and their toolchains' caches live (bench/peers/harness.ts reads the same paths). */
export function peersPaths(env = process.env) {
  const home = join(cacheRoot(env), "peers");
  return {
    home,
    bin: join(home, "bin"),
    dynamo: join(home, "bin", "dolphin-peer-dynamo"),
    llmd: join(home, "bin", "dolphin-peer-llmd"),
    cargoTarget: join(home, "cargo-target"),
    goModCache: join(home, "go", "mod"),
    goBuildCache: join(home, "go", "build"),
    stamp: join(home, "built.json"),
  };
}

/** Go's environment for the llm-d harness: the peers' own module and build caches, no cgo. */
export function peersGoEnv(env = process.env) {
  const p = peersPaths(env);
  return { CGO_ENABLED: "0", GOFLAGS: "-mod=readonly -modcacherw", GOMODCACHE: p.goModCache, GOCACHE: p.goBuildCache };
}

function sources(dir) {
  const out = [];
  for (const e of readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...sources(p));
    else if (/\.(rs|go|toml|lock|mod|sum)$/.test(e.name)) out.push(p);
  }
  return out;
}

function sourcesHash() {
  const h = createHash("sha256");
  for (const f of [...sources(DYNAMO), ...sources(LLMD)]) h.update(f.slice(root.length)).update(readFileSync(f));
  return h.digest("hex").slice(0, 16);
}

function need(cmd, args, how) {
  const r = spawnSync(cmd, args, { encoding: "utf8" });
  if (r.status !== 0) throw new PeersSetupError(`peers: ${cmd} is needed to build the peers' harnesses: ${how}`);
  return r.stdout.trim();
}

function run(cmd, args, opts) {
  const r = spawnSync(cmd, args, { stdio: ["ignore", "inherit", "inherit"], ...opts });
  if (r.error || r.status !== 0)
    throw new PeersSetupError(`peers: ${cmd} ${args.join(" ")} failed (${r.error?.message ?? `exit ${r.status}`})`);
}

const mb = (bytes) => `${Math.round(bytes / 2 ** 20)} MB`;

/** The setup step: returns a one-line summary; throws PeersSetupError with what to do. */
export function peersStep({ checkOnly = false, log = console.log } = {}) {
  const p = peersPaths();
  const hash = sourcesHash();
  const stamp = existsSync(p.stamp) ? JSON.parse(readFileSync(p.stamp, "utf8")) : null;
  if (stamp?.sources === hash && existsSync(p.dynamo) && existsSync(p.llmd))
    return `peers: harnesses up to date in ${p.home} (${mb(stamp.bytes)})`;
  if (checkOnly) throw new PeersSetupError(`peers: harnesses not built in ${p.home}: run npm run setup`);
  const cargo = need(
    "cargo",
    ["--version"],
    "install Rust (https://rustup.rs: curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh), then run npm run setup",
  );
  const go = need(
    "go",
    ["version"],
    "install Go 1.25 or newer (https://go.dev/doc/install, or Debian: apt-get install -y golang), then run npm run setup",
  );
  mkdirSync(p.bin, { recursive: true });
  const t0 = Date.now();
  log(`setup: peers: 1/2 Dynamo's dynamo-kv-router 1.6.1 harness (${cargo}; about 60 s and 230 MB the first time)`);
  run("cargo", ["build", "--release", "--locked", "--quiet"], {
    cwd: DYNAMO,
    env: { ...process.env, CARGO_TARGET_DIR: p.cargoTarget },
  });
  const built = readFileSync(join(p.cargoTarget, "release", "dolphin-peer-dynamo"));
  writeFileSync(p.dynamo, built, { mode: 0o755 });
  const t1 = Date.now();
  log(`setup: peers: dynamo harness built in ${Math.round((t1 - t0) / 1000)} s`);
  log(
    `setup: peers: 2/2 llm-d's llm-d-kv-cache v0.9.0 harness (${go}; about 4 min and 2.7 GB of module and build caches the first time)`,
  );
  const goEnv = { ...process.env, ...peersGoEnv() };
  run("go", ["build", "-trimpath", "-o", p.llmd, "."], { cwd: LLMD, env: goEnv });
  // what `dolphin bench peers` builds with -tags dolphin (our Go binding beside llm-d) needs besides: fetched now,
  // so that build runs offline
  run("go", ["mod", "download", "github.com/tetratelabs/wazero"], { cwd: LLMD, env: goEnv });
  const t2 = Date.now();
  log(`setup: peers: llm-d harness built in ${Math.round((t2 - t1) / 1000)} s`);
  const bytes = du(p.home);
  writeFileSync(p.stamp, JSON.stringify({ sources: hash, bytes, builtAt: new Date().toISOString() }, null, 2) + "\n");
  return `peers: harnesses built in ${Math.round((t2 - t0) / 1000)} s into ${p.home} (${mb(bytes)} with caches)`;
}
