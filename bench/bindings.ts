// `dolphin bench bindings`: route() of a 20,000-token prompt against 16 workers in Node, Python and Go in one run,
// each through its own binding of the same core.wasm and paying its own call overhead (copying the prompt into the
// core's memory, writing the request record, reading the decision). One setup and one method in all three
// (bindings/python/tests/bench_route.py, bindings/go/internal/bench): the same table (spec/vectors/tables/
// kmeans.msgpack), prompt (LCG tokens, seed 42), workers (8 prefill, 8 decode, each holding a prefix of the
// prompt and a load); 200 warm-up calls, then the median over 31 rounds of the mean time of 20 calls. The three
// hosts run in turn, three times over, and each figure is the median of its three: on a shared machine the load
// changes from second to second, and taking turns spreads it over all three instead of penalizing one.
// Targets (issue 10): Python ≤ 2× Node, Go (wazero's compiler) ≤ 1.5× Node.

import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Router } from "../src/router/router.js";
import { lcgTokens } from "./core.js";

export interface BindingsBenchResult {
  route_20k_tokens_us: { node: number; python: number; go: number };
}

/** The repository root: the nearest ancestor holding spec/vectors (this file runs from bench/ or dist/bench/). */
function repoRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, "spec", "vectors"))) {
    const up = dirname(dir);
    if (up === dir)
      throw new Error("bench bindings: run it from the repository (spec/vectors and bindings/ are needed)");
    dir = up;
  }
  return dir;
}
const ROOT = repoRoot();
const TABLE = join(ROOT, "spec/vectors/tables/kmeans.msgpack");
const WORKERS = 16;
const ROUNDS = 31;
const PER_ROUND = 20;
const WARMUP = 200;
const TURNS = 3;

function medianUs(call: () => void): number {
  for (let i = 0; i < WARMUP; i++) call();
  const rounds: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const t = process.hrtime.bigint();
    for (let i = 0; i < PER_ROUND; i++) call();
    rounds.push(Number(process.hrtime.bigint() - t) / PER_ROUND / 1e3);
  }
  rounds.sort((a, b) => a - b);
  return rounds[ROUNDS >> 1]!;
}

function nodeRouter(module: WebAssembly.Module): { route: () => number } {
  const router = Router.create(new Uint8Array(readFileSync(TABLE)), {
    module,
    capacityBlocks: 4096,
    maxPromptTokens: 1 << 18,
    workers: Array.from({ length: WORKERS }, (_, w) => ({
      id: `w${w}`,
      role: w < WORKERS / 2 ? ("prefill" as const) : ("decode" as const),
    })),
  });
  const tokens = lcgTokens(20_000, 42);
  const pairs = router.hash({ tokens });
  const blocks = pairs.length >>> 1;
  for (let w = 0; w < WORKERS; w++) {
    router.index.store(`w${w}`, pairs.subarray(0, 2 * Math.floor(((w + 1) * blocks) / (WORKERS + 1))));
    router.setLoad(`w${w}`, { activePrefillTokens: (w * 997) % 4000, activeDecodeTokens: (w * 1999) % 30000 });
  }
  return { route: () => router.route({ tokens, oslHat: 300 }).blocks };
}

/** Runs one host's harness and returns its JSON; a missing toolchain is an error saying how to install it. */
function host(
  command: string,
  args: string[],
  cwd: string,
  env: NodeJS.ProcessEnv,
  install: string,
): Record<string, number> {
  return JSON.parse(spawn(command, args, cwd, env, install)) as Record<string, number>;
}

function spawn(command: string, args: string[], cwd: string, env: NodeJS.ProcessEnv, install: string): string {
  const r = spawnSync(command, args, { cwd, env, encoding: "utf8" });
  if (r.error) throw new Error(`bench bindings: cannot run ${command} (${r.error.message}): ${install}`);
  if (r.status !== 0) throw new Error(`bench bindings: ${command} ${args.join(" ")} failed:\n${r.stderr}`);
  return r.stdout;
}

export function runBindingsBench(module: WebAssembly.Module): BindingsBenchResult {
  const python = join(ROOT, ".venv/bin/python");
  const pyDir = join(ROOT, "bindings/python");
  if (!existsSync(python))
    throw new Error(`bench bindings: ${python} is missing: run npm run setup (needs Python 3.11+ with venv)`);
  if (!existsSync(join(pyDir, "dolphin_routing/core.wasm")))
    throw new Error("bench bindings: the bindings have no core.wasm: run npm run build");
  const goDir = join(ROOT, "bindings/go");
  const goInstall =
    "install Go 1.25+ (https://go.dev/doc/install, or Debian: apt-get install -y golang), then npm run setup";
  spawn("go", ["build", "-o", "/dev/null", "./internal/bench"], goDir, process.env, goInstall); // compile outside the turns
  const router = nodeRouter(module);
  let sink = 0;
  const turns = { node: [] as number[], python: [] as number[], go: [] as number[] };
  for (let turn = 0; turn < TURNS; turn++) {
    turns.node.push(
      medianUs(() => {
        sink += router.route();
      }),
    );
    turns.python.push(
      host(
        python,
        [join(pyDir, "tests/bench_route.py"), TABLE],
        pyDir,
        { ...process.env, PYTHONPATH: pyDir },
        "run npm run setup",
      )["route_20k_tokens_us"]!,
    );
    turns.go.push(
      host("go", ["run", "./internal/bench", TABLE], goDir, process.env, goInstall)["route_20k_tokens_us"]!,
    );
  }
  if (sink === -1) console.log(sink);
  const median = (xs: number[]): number => Math.round(xs.slice().sort((a, b) => a - b)[xs.length >> 1]! * 100) / 100;
  return { route_20k_tokens_us: { node: median(turns.node), python: median(turns.python), go: median(turns.go) } };
}

export function formatBindingsBench(r: BindingsBenchResult): string {
  const t = r.route_20k_tokens_us;
  return [
    "route(), 20,000-token prompt, 16 workers, median µs per call (prompt copied in each call)",
    `  node    ${t.node.toFixed(1).padStart(8)}`,
    `  python  ${t.python.toFixed(1).padStart(8)}   ${(t.python / t.node).toFixed(2)}× node (target ≤ 2×)`,
    `  go      ${t.go.toFixed(1).padStart(8)}   ${(t.go / t.node).toFixed(2)}× node (target ≤ 1.5×)`,
  ].join("\n");
}
