// `dolphin bench core`: the hot path measured on the WebAssembly core and on the plain-TypeScript reference in
// the same run, with tinybench. Medians (machines here are shared and noisy), and speedup = ts / wasm.
// Workloads: a 20,000-token prompt in 16-token blocks (1,250 blocks) against 16 workers whose caches hold
// prefixes of it of different lengths; decide on K = 8 and K = 64 k-means tables. Scale: the same prompt routed
// through the Router against 16, 256 and 1,024 workers, each holding a prefix of it at a different depth, and
// the index's memory per cached block. The native yardstick: bench/native-hash.c (libxxhash, -O3 -march=native)
// hashes the same prompt in the same run when `cc` and xxhash.h exist; otherwise the figure is absent.

import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Bench } from "tinybench";
import { Role, type Engine } from "../src/core-api.js";
import { createCore, instantiateCore } from "../src/core.js";
import { ReferenceEngine } from "../src/reference/engine.js";
import { Router } from "../src/router.js";
import { stageTable } from "../src/staging.js";
import { validateTable, type Table } from "../src/table.js";

export interface Timing {
  wasm: number;
  ts: number;
  speedup: number;
}
export interface CoreBenchResult {
  hash_20k_tokens_us: Timing;
  match_1250_blocks_16_workers_us: Timing;
  decide_ns: { k8: Timing; k64: Timing };
  route_20k_tokens_us: Timing;
  /** libxxhash's chained xxh64 of the same prompt (bench/native-hash.c); absent when it cannot be built here. */
  native_hash_20k_tokens_us?: number;
  /** Router.route of the 20k-token prompt (wasm) by worker count, every worker holding a prefix of a different depth. */
  route_us_by_workers: Record<"16" | "256" | "1024", number>;
  /** The core's match alone (Engine.match of the prompt's block hashes) in the same clusters: see routeByWorkers. */
  match_us_by_workers: Record<"16" | "256" | "1024", number>;
  /** The core's index memory per cached block (all its tables), at 2^20 blocks: see indexBytesPerBlock. */
  index_bytes_per_block: number;
  wasm_bytes: number;
  runtime: { node: string; platform: string; cpus: number; time_ms_per_task: number };
}

const PROMPT_TOKENS = 20_000;
const WORKERS = 16;
const DECIDE_BATCH = 1000;

/** A reproducible prompt of `n` token ids below Qwen's vocabulary size (the bindings' benchmark uses it too). */
export function lcgTokens(n: number, seed: number): Uint32Array {
  const out = new Uint32Array(n);
  let x = seed >>> 0;
  for (let i = 0; i < n; i++) {
    x = (Math.imul(x, 1103515245) + 12345) & 0x7fffffff;
    out[i] = x % 152064;
  }
  return out;
}

function kmeans(k: number): Table {
  let s = 12345;
  const rnd = (): number => (s = (Math.imul(s, 1103515245) + 12345) & 0x7fffffff) / 0x7fffffff;
  return validateTable({
    format: "dolphin-routing.table",
    version: 1,
    kind: "kmeans",
    features: ["isl", "eff_P", "eff_D", "osl_hat"],
    scaler: { mean: [7.5, 6.5, 6.5, 5.5], std: [1.5, 2, 2, 1] },
    centroids: Array.from({ length: k }, () => [0, 0, 0, 0].map(() => rnd() * 4 - 2)),
    bits: Array.from({ length: k }, (_, i) => i % 2),
    provenance: { tool: "dolphin bench", created: "2026-11-29T00:00:00Z", workload: "synthetic", seed: 12345 },
    checksum: "xxh64:0000000000000000",
  });
}

/** Worker w (of 16) holds the first (w+1)/16 of the prompt's blocks: matching walks deep before stopping. */
function populate(e: Engine, pairs: Uint32Array): void {
  const blocks = pairs.length >>> 1;
  for (let w = 0; w < WORKERS; w++) {
    e.setWorker(w, w < WORKERS / 2 ? Role.prefill : Role.decode, 4096);
    const held = Math.floor(((w + 1) * blocks) / (WORKERS + 1));
    e.indexStore(w, pairs.subarray(0, 2 * held));
    e.setLoad(w, (w * 997) % 4000, (w * 1999) % 30000);
  }
}

function median(bench: Bench, name: string, perCall = 1, unitMs = 1e3): number {
  const task = bench.getTask(name);
  const r = task?.result as { latency?: { p50: number } } | undefined;
  if (!r?.latency) throw new Error(`bench: task ${name} did not run`);
  return (r.latency.p50 * unitMs) / perCall;
}

export async function runCoreBench(
  module: WebAssembly.Module,
  wasmBytes: number,
  timeMs = 400,
): Promise<CoreBenchResult> {
  const config = { maxWorkers: 1024, maxInputBytes: 1 << 20, indexBlocks: 1 << 17 };
  const tokens = lcgTokens(PROMPT_TOKENS, 42);
  const engines = {
    wasm: createCore(instantiateCore(module), config) as Engine,
    ts: new ReferenceEngine(config) as Engine,
  };
  const pairs = engines.ts.hashTokens(tokens);
  for (const e of Object.values(engines)) populate(e, pairs);

  const decideEngines = { k8: makeDecide(module, 8), k64: makeDecide(module, 64) };
  const routers = {
    wasm: Router.create(kmeans(8), routerOptions("wasm", module)),
    ts: Router.create(kmeans(8), routerOptions("reference")),
  };
  for (const r of Object.values(routers)) {
    for (let w = 0; w < WORKERS; w++) {
      const held = Math.floor(((w + 1) * (pairs.length >>> 1)) / (WORKERS + 1));
      r.index.store(`w${w}`, pairs.subarray(0, 2 * held));
      r.setLoad(`w${w}`, { activePrefillTokens: (w * 997) % 4000, activeDecodeTokens: (w * 1999) % 30000 });
    }
  }
  // decide inputs: a ring of realistic feature vectors
  const inputs = Array.from({ length: 64 }, (_, i) => {
    const isl = 200 + ((i * 7919) % 30000);
    return [isl, Math.floor(isl * ((i % 5) / 5)), Math.floor(isl * ((i % 3) / 3)), 50 + ((i * 131) % 2000)] as const;
  });
  let sink = 0;
  const decideLoop = (e: Engine) => () => {
    for (let i = 0; i < DECIDE_BATCH; i++) {
      const f = inputs[i & 63]!;
      sink += e.decideFeatures(f[0], f[1], f[2], f[3], 1, -1)[1]!;
    }
  };

  const bench = new Bench({ time: timeMs, warmupTime: Math.min(200, timeMs / 2) });
  for (const side of ["wasm", "ts"] as const) {
    const e = engines[side];
    bench.add(`hash:${side}`, () => {
      sink += e.hashTokens(tokens).length;
    });
    bench.add(`match:${side}`, () => {
      sink += e.match(pairs)[0]!;
    });
    bench.add(`decide8:${side}`, decideLoop(decideEngines.k8[side]));
    bench.add(`decide64:${side}`, decideLoop(decideEngines.k64[side]));
    const router = routers[side];
    bench.add(`route:${side}`, () => {
      sink += router.route({ tokens, oslHat: 300 }).blocks;
    });
  }
  await bench.run();
  if (sink === -1) console.log(sink);

  const timing = (name: string, perCall = 1, unitMs = 1e3): Timing => {
    const wasm = median(bench, `${name}:wasm`, perCall, unitMs);
    const ts = median(bench, `${name}:ts`, perCall, unitMs);
    return { wasm: round(wasm), ts: round(ts), speedup: round(ts / wasm) };
  };
  const hashCheck = engines.wasm.hashTokens(tokens);
  const lastHash = hashHex(hashCheck[hashCheck.length - 2]!, hashCheck[hashCheck.length - 1]!);
  const native = nativeHash(lastHash);
  return {
    hash_20k_tokens_us: timing("hash"),
    ...(native !== undefined ? { native_hash_20k_tokens_us: round(native) } : {}),
    ...(await routeByWorkers(module, tokens, pairs, timeMs)),
    index_bytes_per_block: indexBytesPerBlock(module),
    match_1250_blocks_16_workers_us: timing("match"),
    decide_ns: { k8: timing("decide8", DECIDE_BATCH, 1e6), k64: timing("decide64", DECIDE_BATCH, 1e6) },
    route_20k_tokens_us: timing("route"),
    wasm_bytes: wasmBytes,
    runtime: {
      node: process.version,
      platform: `${process.platform}-${process.arch}`,
      cpus: (await import("node:os")).cpus().length,
      time_ms_per_task: timeMs,
    },
  };
}

function hashHex(lo: number, hi: number): string {
  return hi.toString(16).padStart(8, "0") + lo.toString(16).padStart(8, "0");
}

/**
 * Builds bench/native-hash.c with cc into a temporary directory and runs it on the same prompt: its median µs,
 * or undefined when there is no cc or xxhash.h (or the build fails). A native hash that differs from the core's
 * is a bug in the yardstick, not a figure: it throws.
 */
function nativeHash(expectedLastHash: string): number | undefined {
  const source = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "bench", "native-hash.c");
  if (!existsSync(source)) return undefined;
  const dir = mkdtempSync(join(tmpdir(), "dolphin-native-hash-"));
  try {
    const exe = join(dir, "native-hash");
    const cc = spawnSync("cc", ["-O3", "-march=native", "-o", exe, source], { encoding: "utf8" });
    if (cc.error || cc.status !== 0) return undefined; // no compiler or no xxhash.h: the figure is absent
    const run = spawnSync(exe, [String(PROMPT_TOKENS), "42", "201"], { encoding: "utf8" });
    if (run.error || run.status !== 0)
      throw new Error(`bench: native-hash failed: ${run.error?.message ?? run.stderr}`);
    const [us, last] = run.stdout.trim().split(/\s+/);
    if (last !== expectedLastHash)
      throw new Error(`bench: native-hash's last block hash ${last} differs from the core's ${expectedLastHash}`);
    return Number(us);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Router.route (wasm) of the prompt against n workers, worker w holding the first (w+1)/(n+1) of its blocks, and
 * the core's match alone in the same router (its engine's match of the block hashes): how much of the growth with
 * n is matching and how much is the rest (worker choice scores every worker).
 */
async function routeByWorkers(module: WebAssembly.Module, tokens: Uint32Array, pairs: Uint32Array, timeMs: number) {
  const route: Record<string, number> = {};
  const match: Record<string, number> = {};
  const blocks = pairs.length >>> 1;
  let sink = 0;
  for (const n of [16, 256, 1024]) {
    const router = Router.create(kmeans(8), {
      ...routerOptions("wasm", module, n),
      capacityBlocks: blocks,
      indexBlocks: n * blocks,
    });
    for (let w = 0; w < n; w++) {
      const held = Math.floor(((w + 1) * blocks) / (n + 1));
      router.index.store(`w${w}`, pairs.subarray(0, 2 * held));
      router.setLoad(`w${w}`, { activePrefillTokens: (w * 997) % 4000, activeDecodeTokens: (w * 1999) % 30000 });
    }
    const bench = new Bench({ time: timeMs, warmupTime: Math.min(200, timeMs / 2) });
    bench.add(`route:${n}`, () => {
      sink += router.route({ tokens, oslHat: 300 }).blocks;
    });
    bench.add(`match:${n}`, () => {
      sink += router.engine.match(pairs)[0]!;
    });
    await bench.run();
    route[String(n)] = round(median(bench, `route:${n}`));
    match[String(n)] = round(median(bench, `match:${n}`));
  }
  if (sink === -1) console.log(sink);
  type ByWorkers = Record<"16" | "256" | "1024", number>;
  return { route_us_by_workers: route as ByWorkers, match_us_by_workers: match as ByWorkers };
}

/**
 * Memory per cached block of the core's index at 2^20 blocks: what a core with twice the pool allocates beyond
 * one with 2^20 blocks, per added block (all the index's tables; they grow with the pool, nothing else does).
 * Measured between two large pools rather than against a core without an index, because the stub runtime at least
 * doubles memory on each growth: the slack it leaves in the rest of the core would otherwise be absorbed by (or,
 * allocated after the index, added to) the index's figure.
 */
function indexBytesPerBlock(module: WebAssembly.Module): number {
  const blocks = 1 << 20;
  const bytes = (indexBlocks: number) => {
    const x = instantiateCore(module);
    createCore(x, { maxWorkers: 1024, maxInputBytes: 1 << 20, indexBlocks });
    return (x.exports["memory"] as WebAssembly.Memory).buffer.byteLength;
  };
  return round((bytes(2 * blocks) - bytes(blocks)) / blocks);
}

function routerOptions(engine: "wasm" | "reference", module?: WebAssembly.Module, workers = WORKERS) {
  return {
    engine,
    ...(module ? { module } : {}),
    maxWorkers: 1024,
    maxPromptTokens: 1 << 18,
    capacityBlocks: 4096,
    workers: Array.from({ length: workers }, (_, w) => ({
      id: `w${w}`,
      role: w < workers / 2 ? ("prefill" as const) : ("decode" as const),
    })),
  };
}

function makeDecide(module: WebAssembly.Module, k: number): { wasm: Engine; ts: Engine } {
  const config = { maxWorkers: 16, maxInputBytes: 4096, indexBlocks: 0 };
  const s = stageTable(kmeans(k));
  const wasm = createCore(instantiateCore(module), config);
  const ts = new ReferenceEngine(config);
  for (const e of [wasm, ts]) e.setTable(s.kind, s.k, s.dims, s.staged, s.oslAt);
  return { wasm, ts };
}

function round(x: number): number {
  return x >= 100 ? Math.round(x * 10) / 10 : Math.round(x * 1000) / 1000;
}

export function formatCoreBench(r: CoreBenchResult): string {
  const row = (name: string, t: Timing, unit: string) =>
    `${name.padEnd(34)} ${String(t.wasm).padStart(10)} ${String(t.ts).padStart(12)} ${(t.speedup + "×").padStart(9)}   ${unit}`;
  return [
    `${"median".padEnd(34)} ${"wasm".padStart(10)} ${"ts reference".padStart(12)} ${"speedup".padStart(9)}`,
    row("hash 20k tokens", r.hash_20k_tokens_us, "µs"),
    row("match 1,250 blocks × 16 workers", r.match_1250_blocks_16_workers_us, "µs"),
    row("decide, K = 8", r.decide_ns.k8, "ns"),
    row("decide, K = 64", r.decide_ns.k64, "ns"),
    row("route 20k tokens, 16 workers", r.route_20k_tokens_us, "µs"),
    `${"native chained xxh64, 20k tokens".padEnd(34)} ${r.native_hash_20k_tokens_us === undefined ? "(no cc or xxhash.h)" : `${r.native_hash_20k_tokens_us} µs (wasm/native ${round(r.hash_20k_tokens_us.wasm / r.native_hash_20k_tokens_us)}×)`}`,
    `${"route by workers (wasm)".padEnd(34)} ${Object.entries(r.route_us_by_workers)
      .map(([n, us]) => `${n}: ${us} µs`)
      .join(", ")}`,
    `${"  of which match".padEnd(34)} ${Object.entries(r.match_us_by_workers)
      .map(([n, us]) => `${n}: ${us} µs`)
      .join(", ")}`,
    `${"index bytes per cached block".padEnd(34)} ${r.index_bytes_per_block}`,
    `core.wasm: ${r.wasm_bytes} bytes; ${r.runtime.node} ${r.runtime.platform}, ${r.runtime.cpus} CPUs, ${r.runtime.time_ms_per_task} ms per task`,
  ].join("\n");
}
