// `dolphin bench core`: the hot path measured on the WebAssembly core and on the plain-TypeScript reference in
// the same run, with tinybench. Medians (machines here are shared and noisy), and speedup = ts / wasm.
// Workloads: a 20,000-token prompt in 16-token blocks (1,250 blocks) against 16 workers whose caches hold
// prefixes of it of different lengths; decide on K = 8 and K = 64 k-means tables. Scale: the same prompt routed
// through the Router against 16, 256 and 1,024 workers, each holding a prefix of it at a different depth, and
// the index's memory per cached block. The native yardstick: bench/native-hash.c (libxxhash, -O3 -march=native)
// hashes the same prompt in the same run when `cc` and xxhash.h exist; otherwise the figure is absent.
// Hashing is timed like for like with the native program, which hashes ids already in its own memory:
// `hash_20k_tokens_us.wasm` (and `.ts`) hash a prompt already in the engine's input buffer (Engine.inputTokens /
// hashInputTokens: in core memory for the WebAssembly engine), and `.wasm_with_copy` is the whole JS call
// hashTokens(tokens), which also copies the 80 KB of ids in (~2 µs) and the 1,250 hashes out into a fresh array
// (a 10 KB allocation: 2–5 µs a call when calls follow each other; hashTokens(tokens, out) does without it).
// `hash_vs_native` is each of the two over the native figure (present with it).

import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Bench } from "tinybench";
import { Role, type Engine } from "../src/contract/core-api.js";
import { createCore, instantiateCore } from "../src/core/core.js";
import { ReferenceEngine } from "../src/reference/engine.js";
import { Router } from "../src/router/router.js";
import { stageTable } from "../src/table/staging.js";
import type { Table } from "../src/table/table.js";
import { validateTable } from "../src/table/validate.js";

export interface Timing {
  wasm: number;
  ts: number;
  speedup: number;
}
/** Hashing: `wasm` and `ts` hash ids already in the engine's input buffer; `wasm_with_copy` is hashTokens(tokens). */
export interface HashTiming extends Timing {
  wasm_with_copy: number;
}
export interface CoreBenchResult {
  hash_20k_tokens_us: HashTiming;
  /** hash_20k_tokens_us.wasm and .wasm_with_copy over native_hash_20k_tokens_us; absent when it is. */
  hash_vs_native?: { wasm: number; wasm_with_copy: number };
  match_1250_blocks_16_workers_us: Timing;
  decide_ns: { k8: Timing; k64: Timing };
  route_20k_tokens_us: Timing;
  /** libxxhash's chained xxh64 of the same prompt (bench/native-hash.c); absent when it cannot be built here. */
  native_hash_20k_tokens_us?: number;
  /** Router.route of the 20k-token prompt (wasm) by worker count, every worker holding a prefix of a different depth. */
  route_us_by_workers: Record<"16" | "256" | "1024", number>;
  /** The core's match alone (Engine.match of the prompt's block hashes) in the same clusters: see routeByWorkers. */
  match_us_by_workers: Record<"16" | "256" | "1024", number>;
  /** route at 1,024 workers over route at 16, the median of routeByWorkers' rounds (each round measures both). */
  route_1024_over_16_workers: number;
  /** The core's index memory per cached block (all its tables), at 2^20 blocks: see indexBytesPerBlock. */
  index_bytes_per_block: number;
  wasm_bytes: number;
  runtime: { node: string; platform: string; cpus: number; time_ms_per_task: number };
}

const PROMPT_TOKENS = 20_000;
const WORKERS = 16;
const DECIDE_BATCH = 1000;
/** routeByWorkers' alternating rounds (each cluster gets timeMs / rounds of measuring a round) */
const BY_WORKERS_ROUNDS = 9;

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
  // hashing in place: the prompt written once into each engine's input buffer (engines of their own: match and
  // the index calls write theirs)
  const hashConfig = { maxWorkers: 1, maxInputBytes: PROMPT_TOKENS * 4, indexBlocks: 0 };
  const hashEngines = {
    wasm: createCore(instantiateCore(module), hashConfig) as Engine,
    ts: new ReferenceEngine(hashConfig) as Engine,
  };
  for (const e of Object.values(hashEngines)) {
    e.inputTokens(PROMPT_TOKENS).set(tokens);
    if (e.hashInputTokens(PROMPT_TOKENS).join() !== pairs.join())
      throw new Error(`bench: the ${e.name} engine's hashes of the prompt in its input buffer differ from hashTokens'`);
  }

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
    const h = hashEngines[side];
    // the wasm side's figures come from alternatedHashing (with the native program); this warms it up
    bench.add(`hash:${side}`, () => {
      sink += h.hashInputTokens(PROMPT_TOKENS).length;
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
  const hw = hashEngines.wasm;
  const alternated = alternatedHashing(
    () => hw.hashInputTokens(PROMPT_TOKENS).length,
    () => engines.wasm.hashTokens(tokens).length,
    lastHash,
    Math.max(3, Math.min(15, Math.round(timeMs / 60))),
  );
  const native = alternated.native;
  const ts = median(bench, "hash:ts");
  const hash: HashTiming = {
    wasm: round(alternated.wasm),
    ts: round(ts),
    speedup: round(ts / alternated.wasm),
    wasm_with_copy: round(alternated.wasm_with_copy),
  };
  return {
    hash_20k_tokens_us: hash,
    ...(native !== undefined
      ? {
          native_hash_20k_tokens_us: round(native),
          hash_vs_native: { wasm: round(hash.wasm / native), wasm_with_copy: round(hash.wasm_with_copy / native) },
        }
      : {}),
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

/** Hashes per timed batch in the alternated hashing slices, as bench/native-hash.c batches them. */
const HASH_BATCH = 20;
/** Batches per slice: a slice is about 16 ms of hashing on each side. */
const HASH_SLICE_BATCHES = 41;

/**
 * The hashing figures that are compared with the native program, measured in alternation with it: this machine's
 * speed drifts between states for seconds at a time (other jobs on the cores), so one side measured in a calm
 * moment and the other in a busy one would compare the moments, not the code. Each round times a slice of the
 * native program (its median batch), then the same number of batches of the core hashing the prompt in its memory,
 * then of the whole hashTokens(tokens) call; each figure is the median over the rounds. Without cc or xxhash.h
 * there is no native slice and the two core figures are measured the same way.
 */
function alternatedHashing(
  inMemory: () => number,
  withCopy: () => number,
  expectedLastHash: string,
  rounds: number,
): { wasm: number; wasm_with_copy: number; native?: number } {
  const native = buildNative();
  try {
    const times = { wasm: [] as number[], wasm_with_copy: [] as number[], native: [] as number[] };
    for (let r = 0; r < rounds; r++) {
      if (native) times.native.push(native.run(r === 0 ? expectedLastHash : undefined));
      times.wasm.push(sliceMedianUs(inMemory));
      times.wasm_with_copy.push(sliceMedianUs(withCopy));
    }
    if (sliceSink === -1) console.log(sliceSink);
    return {
      wasm: middle(times.wasm),
      wasm_with_copy: middle(times.wasm_with_copy),
      ...(native ? { native: middle(times.native) } : {}),
    };
  } finally {
    native?.remove();
  }
}

let sliceSink = 0;
/** The median µs per call over HASH_SLICE_BATCHES batches of HASH_BATCH calls (the native program's method). */
function sliceMedianUs(fn: () => number): number {
  const us: number[] = [];
  for (let b = 0; b < HASH_SLICE_BATCHES; b++) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < HASH_BATCH; i++) sliceSink += fn();
    us.push(Number(process.hrtime.bigint() - t0) / 1e3 / HASH_BATCH);
  }
  return middle(us);
}

/** The median of a non-empty list (the upper one of an even count). */
function middle(xs: number[]): number {
  return [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
}

/**
 * Builds bench/native-hash.c with cc into a temporary directory: a runner for one slice (its median µs per prompt),
 * or undefined when there is no cc or xxhash.h (or the build fails). A native hash that differs from the core's
 * is a bug in the yardstick, not a figure: the first slice checks it and throws.
 */
function buildNative(): { run(expectedLastHash?: string): number; remove(): void } | undefined {
  const source = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "bench", "native-hash.c");
  if (!existsSync(source)) return undefined;
  const dir = mkdtempSync(join(tmpdir(), "dolphin-native-hash-"));
  const remove = () => rmSync(dir, { recursive: true, force: true });
  const exe = join(dir, "native-hash");
  const cc = spawnSync("cc", ["-O3", "-march=native", "-o", exe, source], { encoding: "utf8" });
  if (cc.error || cc.status !== 0) {
    remove();
    return undefined; // no compiler or no xxhash.h: the figure is absent
  }
  return {
    run(expectedLastHash?: string): number {
      const args = [String(PROMPT_TOKENS), "42", String(HASH_SLICE_BATCHES), String(HASH_BATCH)];
      const run = spawnSync(exe, args, { encoding: "utf8" });
      if (run.error || run.status !== 0)
        throw new Error(`bench: native-hash failed: ${run.error?.message ?? run.stderr}`);
      const [us, last] = run.stdout.trim().split(/\s+/);
      if (expectedLastHash !== undefined && last !== expectedLastHash)
        throw new Error(`bench: native-hash's last block hash ${last} differs from the core's ${expectedLastHash}`);
      return Number(us);
    },
    remove,
  };
}

/**
 * Router.route (wasm) of the prompt against n workers, worker w holding the first (w+1)/(n+1) of its blocks, and
 * the core's match alone in the same router (its engine's match of the block hashes): how much of the growth with
 * n is matching and how much is the rest (worker choice scores the workers whose cost floor can still win).
 * The three clusters are measured in alternating rounds (the order rotated each round), each figure the median of
 * its rounds' medians and the 1,024 ÷ 16 ratio the median of the rounds' ratios: this machine has stretches of
 * seconds where everything runs 1.3–1.8× slower, and one cluster measured wholly inside one would skew the ratio.
 */
async function routeByWorkers(module: WebAssembly.Module, tokens: Uint32Array, pairs: Uint32Array, timeMs: number) {
  const sizes = [16, 256, 1024] as const;
  const blocks = pairs.length >>> 1;
  let sink = 0;
  const routers = sizes.map((n) => {
    // the Router's default index pool, as route_20k_tokens_us and a user get it: 2^20 blocks, or the workers'
    // capacities when they add up to more (1,024 × 1,250 blocks). Sized to n × 1,250 instead, the 16 workers' index
    // was 0.75 MB (inside a core's L2 cache) against 48 MB at 1,024, and the ratio measured that as much as n
    const router = Router.create(kmeans(8), { ...routerOptions("wasm", module, n), capacityBlocks: blocks });
    for (let w = 0; w < n; w++) {
      const held = Math.floor(((w + 1) * blocks) / (n + 1));
      router.index.store(`w${w}`, pairs.subarray(0, 2 * held));
      router.setLoad(`w${w}`, { activePrefillTokens: (w * 997) % 4000, activeDecodeTokens: (w * 1999) % 30000 });
    }
    return router;
  });
  const rounds = BY_WORKERS_ROUNDS;
  const route: number[][] = sizes.map(() => []);
  const match: number[][] = sizes.map(() => []);
  for (let r = 0; r < rounds; r++) {
    for (let j = 0; j < sizes.length; j++) {
      const at = (j + r) % sizes.length;
      const router = routers[at]!;
      // the first round warms each cluster up for as long as the other benchmarks do; later ones re-fill the caches
      // the other clusters' rounds evicted
      const bench = new Bench({ time: timeMs / rounds, warmupTime: r === 0 ? Math.min(200, timeMs / 2) : 20 });
      bench.add("route", () => {
        sink += router.route({ tokens, oslHat: 300 }).blocks;
      });
      bench.add("match", () => {
        sink += router.engine.match(pairs)[0]!;
      });
      await bench.run();
      route[at]!.push(median(bench, "route"));
      match[at]!.push(median(bench, "match"));
    }
  }
  if (sink === -1) console.log(sink);
  type ByWorkers = Record<"16" | "256" | "1024", number>;
  const bySize = (xs: number[][]) => Object.fromEntries(sizes.map((n, i) => [String(n), round(middle(xs[i]!))]));
  return {
    route_us_by_workers: bySize(route) as ByWorkers,
    match_us_by_workers: bySize(match) as ByWorkers,
    route_1024_over_16_workers: round(middle(route[2]!.map((us, r) => us / route[0]![r]!))),
  };
}

/**
 * Memory per cached block of the core's index at 2^20 blocks: what a core with twice the pool allocates beyond
 * one with 2^20 blocks, per added block (all the index's tables; they grow with the pool, nothing else does).
 * Measured between two large pools rather than against a core without an index, because the stub runtime at least
 * doubles memory on each growth: the slack it leaves in the rest of the core would otherwise be absorbed by (or,
 * allocated after the index, added to) the index's figure.
 */
export function indexBytesPerBlock(module: WebAssembly.Module): number {
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
    row("hash 20k tokens (in core memory)", r.hash_20k_tokens_us, "µs"),
    `${"hash 20k tokens, hashTokens() call".padEnd(34)} ${String(r.hash_20k_tokens_us.wasm_with_copy).padStart(10)}   µs (ids copied in, hashes out)`,
    row("match 1,250 blocks × 16 workers", r.match_1250_blocks_16_workers_us, "µs"),
    row("decide, K = 8", r.decide_ns.k8, "ns"),
    row("decide, K = 64", r.decide_ns.k64, "ns"),
    row("route 20k tokens, 16 workers", r.route_20k_tokens_us, "µs"),
    `${"native chained xxh64, 20k tokens".padEnd(34)} ${r.native_hash_20k_tokens_us === undefined ? "(no cc or xxhash.h)" : `${r.native_hash_20k_tokens_us} µs (wasm/native ${r.hash_vs_native?.wasm}×, with the copies ${r.hash_vs_native?.wasm_with_copy}×)`}`,
    `${"route by workers (wasm)".padEnd(34)} ${Object.entries(r.route_us_by_workers)
      .map(([n, us]) => `${n}: ${us} µs`)
      .join(", ")} (1,024 ÷ 16: ${r.route_1024_over_16_workers}×)`,
    `${"  of which match".padEnd(34)} ${Object.entries(r.match_us_by_workers)
      .map(([n, us]) => `${n}: ${us} µs`)
      .join(", ")}`,
    `${"index bytes per cached block".padEnd(34)} ${r.index_bytes_per_block}`,
    `core.wasm: ${r.wasm_bytes} bytes; ${r.runtime.node} ${r.runtime.platform}, ${r.runtime.cpus} CPUs, ${r.runtime.time_ms_per_task} ms per task`,
  ].join("\n");
}
