// `dolphin bench peers`: our core against the peers' routing cores on the same work, alternated (issue 26, outcome 2):
// hashing a 20,000-token prompt; matching it against 16, 256 and 1,024 workers holding prefixes at different depths
// (worker w of n the first ⌊(w + 1)·B / (n + 1)⌋ of its B = 1,250 blocks); the whole route where the peer has one;
// the index's bytes per cached (worker, block); applying a batch of 1,000 blocks' KV events (a store, then its
// removal). Each system runs in its own runtime and times only its own in-process calls with the same method (the
// median over slices of the mean per call, after a warm-up slice): dolphin here in Node (the core through its
// Engine/Router API, copies in and out included), Dynamo's dynamo-kv-router in native Rust and llm-d's
// llm-d-kv-cache in native Go through the harnesses `npm run setup` builds (bench/peers/). Rounds alternate the
// three in rotating order; every figure is the median over rounds. No inter-process call is ever timed.

import { join } from "node:path";
import { rootHash, hashTokens } from "../src/hashing/hashes.js";
import { decodeEventBatch, type KvEvent } from "../src/router/kv-events.js";
import { Router } from "../src/router/router.js";
import { EventIngest } from "../src/serve/proxy/kv-ingest.js";
import { encodeVllmEventBatch } from "../src/serve/worker/kv-events.js";
import { ruleTable } from "../src/table/rule-table.js";
import { indexBytesPerBlock, lcgTokens } from "./core.js";
import { repoRoot } from "./harness.js";
import { buildGoBeside, callPeer } from "./peers/harness.js";
import { median } from "./stats.js";

export const SIZES = [16, 256, 1024] as const;
type BySize = Record<"16" | "256" | "1024", number>;

export interface SystemFigures {
  route_us: BySize | null;
  match_us: BySize;
  hash_20k_tokens_us: number;
  bytes_per_block: number;
  events_us_per_1k_blocks: number;
}

export interface GoSideBySide {
  dolphin_go: { hash_20k_tokens_us: number; hash_20k_tokens_cbor_fnv_us: number; match_us: BySize; route_us: BySize };
  llm_d: { hash_20k_tokens_us: number; match_us: BySize };
}

export interface PeersBenchResult {
  rounds: number;
  dolphin: SystemFigures;
  dynamo: SystemFigures;
  "llm-d": SystemFigures;
  /** dolphin's figure over the better peer's (≤ 1 means dolphin is at least as good). */
  dolphin_over_best_peer: Record<string, number>;
  /** our Go binding next to llm-d in one Go process, slices alternated (one run after the rounds) */
  go_side_by_side: GoSideBySide;
  /** every round's figures, in the order run */
  per_round: { system: string; figures: SystemFigures }[];
}

const BLOCK = 16;
const MODEL = "bench-model";
const WORKLOAD = {
  tokens: 20_000,
  seed: 1,
  block_size: BLOCK,
  workers: [...SIZES],
  event_blocks: 1000,
  distinct_blocks: 160_000,
};

/** The median over `slices` slices of `sliceMs` of the mean µs per call, after one warm-up slice. */
function medianUs(slices: number, sliceMs: number, f: () => void): number {
  const per: number[] = [];
  for (let s = 0; s <= slices; s++) {
    const t = performance.now();
    let n = 0;
    while (performance.now() - t < sliceMs) {
      f();
      n++;
    }
    if (s > 0) per.push(((performance.now() - t) * 1e3) / n);
  }
  return median(per);
}

/** The KV-event batches every system applies: a store of 1,000 blocks (vLLM's map form, engine hashes of its own) and its removal. */
function eventPayloads(): { store: Buffer; remove: Buffer } {
  const tokens = Array.from(lcgTokens(WORKLOAD.event_blocks * BLOCK, 2));
  const engine = hashTokens(tokens, BLOCK, rootHash("a vLLM engine's own hashes"));
  const stored: KvEvent = {
    kind: "stored",
    hashes: engine,
    parent: null,
    tokenIds: tokens,
    blockSize: BLOCK,
    medium: "GPU",
  };
  return {
    store: encodeVllmEventBatch(1.7e9, [stored]),
    remove: encodeVllmEventBatch(1.7e9 + 1, [{ kind: "removed", hashes: engine, medium: "GPU" }]),
  };
}

function routerOf(module: WebAssembly.Module, n: number, pairs: Uint32Array): Router {
  const blocks = pairs.length >>> 1;
  const router = Router.create(ruleTable("dynamo-isl"), {
    module,
    blockSize: BLOCK,
    maxWorkers: 1024,
    maxPromptTokens: 1 << 18,
    capacityBlocks: blocks,
    workers: Array.from({ length: n }, (_, w) => ({ id: `w${w}`, role: w % 2 === 0 ? "decode" : "prefill" })),
  });
  for (let w = 0; w < n; w++) {
    router.index.store(`w${w}`, pairs.subarray(0, 2 * Math.floor(((w + 1) * blocks) / (n + 1))));
    router.setLoad(`w${w}`, { activePrefillTokens: (w * 997) % 4000, activeDecodeTokens: (w * 1999) % 30000 });
  }
  return router;
}

/** dolphin's turn, in this process. */
function dolphinTurn(
  module: WebAssembly.Module,
  slices: number,
  sliceMs: number,
  bytesPerBlock: number,
): SystemFigures {
  const tokens = lcgTokens(WORKLOAD.tokens, WORKLOAD.seed);
  const routers = SIZES.map((n) => routerOf(module, n, hashTokens(tokens, BLOCK, rootHash())));
  const pairs = routers[0]!.hash({ tokens });
  let sink = 0;
  const hash = medianUs(slices, sliceMs, () => (sink += routers[0]!.engine.hashTokens(tokens).length));
  const match: Record<string, number> = {};
  const route: Record<string, number> = {};
  SIZES.forEach((n, i) => {
    const r = routers[i]!;
    match[n] = medianUs(slices, sliceMs, () => (sink += r.engine.match(pairs)[0]!));
    route[n] = medianUs(slices, sliceMs, () => (sink += r.route({ tokens, oslHat: 300 }).blocks));
  });
  const { store, remove } = eventPayloads();
  const ingest = new EventIngest(BLOCK, rootHash(), 1 << 20);
  const events = medianUs(slices, sliceMs, () => {
    sink += ingest.apply(routers[0]!, "w0", decodeEventBatch(store)).stored;
    sink += ingest.apply(routers[0]!, "w0", decodeEventBatch(remove)).removed;
  });
  if (sink === -1) console.log(sink);
  return {
    route_us: route as BySize,
    match_us: match as BySize,
    hash_20k_tokens_us: hash,
    bytes_per_block: bytesPerBlock,
    events_us_per_1k_blocks: ((events / 2) * 1000) / WORKLOAD.event_blocks,
  };
}

function peerTurn(peer: "dynamo" | "llmd", slices: number, sliceMs: number): SystemFigures {
  const { store, remove } = eventPayloads();
  return callPeer<SystemFigures>(peer, {
    op: "bench",
    ...WORKLOAD,
    slices,
    slice_ms: sliceMs,
    ...(peer === "llmd" ? { store_payload: store.toString("base64"), remove_payload: remove.toString("base64") } : {}),
  });
}

const r3 = (x: number): number => Math.round(x * 1000) / 1000;

function medianFigures(all: SystemFigures[]): SystemFigures {
  const m = (f: (s: SystemFigures) => number) => r3(median(all.map(f)));
  const bySize = (f: (s: SystemFigures) => BySize | null): BySize | null =>
    f(all[0]!) === null ? null : (Object.fromEntries(SIZES.map((n) => [n, m((s) => f(s)![n])])) as BySize);
  return {
    route_us: bySize((s) => s.route_us),
    match_us: bySize((s) => s.match_us)!,
    hash_20k_tokens_us: m((s) => s.hash_20k_tokens_us),
    bytes_per_block: m((s) => s.bytes_per_block),
    events_us_per_1k_blocks: m((s) => s.events_us_per_1k_blocks),
  };
}

/** dolphin over the better (smaller) peer figure, per measure. */
function ratios(d: SystemFigures, peers: SystemFigures[]): Record<string, number> {
  const out: Record<string, number> = {};
  const best = (f: (s: SystemFigures) => number | undefined) =>
    Math.min(...peers.map(f).filter((x): x is number => x !== undefined));
  for (const n of SIZES) {
    out[`route_us_${n}`] = r3(d.route_us![n] / best((s) => s.route_us?.[n]));
    out[`match_us_${n}`] = r3(d.match_us[n] / best((s) => s.match_us[n]));
  }
  out["hash_20k_tokens_us"] = r3(d.hash_20k_tokens_us / best((s) => s.hash_20k_tokens_us));
  out["bytes_per_block"] = r3(d.bytes_per_block / best((s) => s.bytes_per_block));
  out["events_us_per_1k_blocks"] = r3(d.events_us_per_1k_blocks / best((s) => s.events_us_per_1k_blocks));
  return out;
}

export function runPeersBench(
  module: WebAssembly.Module,
  opts: { rounds: number; slices: number; sliceMs: number },
): PeersBenchResult {
  const bytesPerBlock = indexBytesPerBlock(module);
  const turns: Record<string, () => SystemFigures> = {
    dolphin: () => dolphinTurn(module, opts.slices, opts.sliceMs, bytesPerBlock),
    dynamo: () => peerTurn("dynamo", opts.slices, opts.sliceMs),
    "llm-d": () => peerTurn("llmd", opts.slices, opts.sliceMs),
  };
  const names = Object.keys(turns);
  const per_round: PeersBenchResult["per_round"] = [];
  for (let r = 0; r < opts.rounds; r++)
    for (let j = 0; j < names.length; j++) {
      const system = names[(j + r) % names.length]!;
      per_round.push({ system, figures: turns[system]!() });
    }
  const root = repoRoot();
  const go_side_by_side = callPeer<GoSideBySide>(
    "llmd",
    {
      op: "bench-go",
      table: join(root, "spec", "vectors", "tables", "dynamo-isl.msgpack"),
      ...WORKLOAD,
      slices: opts.slices,
      slice_ms: opts.sliceMs,
    },
    buildGoBeside(root),
  );
  const of = (system: string) => medianFigures(per_round.filter((t) => t.system === system).map((t) => t.figures));
  const [dolphin, dynamo, llmd] = [of("dolphin"), of("dynamo"), of("llm-d")];
  return {
    rounds: opts.rounds,
    dolphin,
    dynamo,
    "llm-d": llmd,
    dolphin_over_best_peer: ratios(dolphin, [dynamo, llmd]),
    go_side_by_side,
    per_round,
  };
}

export function formatPeersBench(r: PeersBenchResult): string {
  const systems = ["dolphin", "dynamo", "llm-d"] as const;
  const cell = (x: number | undefined | null) => (x === undefined || x === null ? "—" : x.toFixed(2)).padStart(10);
  const row = (name: string, f: (s: SystemFigures) => number | undefined | null, ratio: string) =>
    `${name.padEnd(28)}${systems.map((s) => cell(f(r[s]))).join("")}${cell(r.dolphin_over_best_peer[ratio])}`;
  const lines = [`${"".padEnd(28)}${[...systems, "dolphin/best"].map((s) => s.padStart(10)).join("")}`];
  lines.push(row("hash 20k tokens (µs)", (s) => s.hash_20k_tokens_us, "hash_20k_tokens_us"));
  for (const n of SIZES) lines.push(row(`match, ${n} workers (µs)`, (s) => s.match_us[n], `match_us_${n}`));
  for (const n of SIZES) lines.push(row(`route, ${n} workers (µs)`, (s) => s.route_us?.[n], `route_us_${n}`));
  lines.push(row("bytes per cached block", (s) => s.bytes_per_block, "bytes_per_block"));
  lines.push(row("events, µs per 1k blocks", (s) => s.events_us_per_1k_blocks, "events_us_per_1k_blocks"));
  lines.push(`(medians of ${r.rounds} alternated rounds)`);
  const g = r.go_side_by_side;
  lines.push("", "in one Go process, alternating slices:   dolphin (Go binding)   llm-d");
  lines.push(
    `hash 20k tokens (µs)   ${cell(g.dolphin_go.hash_20k_tokens_us)} (cbor-fnv ${g.dolphin_go.hash_20k_tokens_cbor_fnv_us.toFixed(2)}) ${cell(g.llm_d.hash_20k_tokens_us)}`,
  );
  for (const n of SIZES)
    lines.push(
      `match, ${n} workers (µs) ${cell(g.dolphin_go.match_us[n])} ${cell(g.llm_d.match_us[n])}   route ${g.dolphin_go.route_us[n].toFixed(2)}`,
    );
  return lines.join("\n");
}
