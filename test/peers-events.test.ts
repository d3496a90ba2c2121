// The same vLLM KV-event batches through our ingest and through llm-d-kv-cache v0.9.0's own pipeline (kvevents.Pool,
// its vLLM adapter, kvblock's in-memory index, through bench/peers/llmd): the same blocks held per worker and the
// same match length per prompt. The batches are vLLM 0.32's map form (encodeVllmEventBatch, checked byte for byte
// against vLLM's own msgspec encoding in serve-worker-vllm-parity.test.ts), from four simulated engines with
// 64-block caches serving prompts that share prefixes: BlockStored with a parent and token ids, BlockRemoved on
// eviction (tail first, as vLLM frees), AllBlocksCleared now and then, and CPU-tier copies (vLLM's offloading).
// The engines' own block hashes are not the routers': both pipelines rehash token ids (llm-d-cbor-fnv on our side,
// so the two indexes hold the same keys) and map engine hashes to their own for removals.
import { describe, expect, it } from "vitest";
import { callPeer } from "../bench/peers/harness.js";
import { cborFnvRoot, cborFnvTokens } from "../src/hashing/cbor-fnv.js";
import { hashTokens, rootHash } from "../src/hashing/hashes.js";
import { splitmix32 } from "../src/hashing/splitmix.js";
import { decodeEventBatch, type KvEvent } from "../src/router/kv-events.js";
import { EventIngest } from "../src/serve/proxy/kv-ingest.js";
import { encodeVllmEventBatch } from "../src/serve/worker/kv-events.js";
import { ruleTable } from "../src/table/rule-table.js";
import { routerOn } from "./helpers.js";

const BS = 16;
const MODEL = "Qwen/Qwen2.5-0.5B";
const SEED = "0";
const WORKERS = ["w0", "w1", "w2", "w3"];
const CAPACITY = 64;
const ENGINE_ROOT = rootHash("a vLLM engine's own hashes");

interface Message {
  pod: string;
  payload: Buffer;
}

/** One simulated engine's GPU prefix cache: block hash (hex) → its pair, in LRU order (oldest first). */
class EngineCache {
  readonly blocks = new Map<string, Uint32Array>();

  touch(key: string, pair: Uint32Array): void {
    this.blocks.delete(key);
    this.blocks.set(key, pair);
  }
}

const keyOf = (pairs: Uint32Array, i: number): string => `${pairs[2 * i + 1]}:${pairs[2 * i]}`;
const slice = (pairs: Uint32Array, from: number, to: number): Uint32Array => pairs.slice(2 * from, 2 * to);

function simulate(seed: number, steps: number): { messages: Message[]; prompts: number[][] } {
  let s = seed >>> 0;
  const u = (): number => (s = splitmix32(s)) / 2 ** 32;
  const int = (lo: number, hi: number): number => lo + Math.floor(u() * (hi - lo + 1));
  const tokens = (n: number): number[] => Array.from({ length: n }, () => int(0, 151_000));
  const families = Array.from({ length: 12 }, () => tokens(BS * int(2, 40)));
  const caches = WORKERS.map(() => new EngineCache());
  const messages: Message[] = [];
  const prompts: number[][] = [];
  for (let step = 0; step < steps; step++) {
    const w = int(0, WORKERS.length - 1);
    const cache = caches[w]!;
    const events: KvEvent[] = [];
    if (u() < 1 / 80) {
      cache.blocks.clear();
      events.push({ kind: "cleared" });
    } else {
      const family = families[int(0, families.length - 1)]!;
      const prompt = [...family.slice(0, BS * int(1, family.length / BS)), ...tokens(BS * int(0, 8) + int(0, BS - 1))];
      prompts.push(prompt);
      const engine = hashTokens(prompt, BS, ENGINE_ROOT);
      const blocks = engine.length / 2;
      let cached = 0;
      while (cached < blocks && cache.blocks.has(keyOf(engine, cached))) cached++;
      if (cached < blocks) {
        const stored: KvEvent = {
          kind: "stored",
          hashes: slice(engine, cached, blocks),
          parent: cached > 0 ? slice(engine, cached - 1, cached) : null,
          tokenIds: prompt.slice(cached * BS, blocks * BS),
          blockSize: BS,
          medium: "GPU",
        };
        events.push(stored);
        if (u() < 1 / 10) events.push({ ...stored, medium: "CPU" });
      }
      // freed tail first: the prompt's last block is the least recently used
      for (let i = blocks - 1; i >= 0; i--) cache.touch(keyOf(engine, i), slice(engine, i, i + 1));
      const evicted: Uint32Array[] = [];
      for (const [key, pair] of cache.blocks) {
        if (cache.blocks.size <= CAPACITY) break;
        cache.blocks.delete(key);
        evicted.push(pair);
      }
      if (evicted.length > 0) {
        const hashes = new Uint32Array(2 * evicted.length);
        evicted.forEach((p, i) => hashes.set(p, 2 * i));
        events.push({ kind: "removed", hashes, medium: "GPU" });
      }
    }
    if (events.length > 0) messages.push({ pod: WORKERS[w]!, payload: encodeVllmEventBatch(1.7e9 + step / 8, events) });
  }
  return { messages, prompts };
}

interface LlmdAnswer {
  holders: string[][];
  cpu_holders: string[][];
  matches: Record<string, number>[];
}

describe("vLLM KV events through our ingest and through llm-d-kv-cache v0.9.0's kvevents pipeline", () => {
  const { messages, prompts } = simulate(26, 600);
  const router = routerOn("wasm", ruleTable("always-remote"), {
    workers: WORKERS.map((id) => ({ id, role: "both" as const })),
    blockSize: BS,
    model: MODEL,
    hashScheme: "llm-d-cbor-fnv",
    hashSeed: SEED,
  });
  const root = cborFnvRoot(new TextEncoder().encode(SEED), new TextEncoder().encode(MODEL));
  const ingest = new Map(WORKERS.map((w) => [w, new EventIngest(BS, root, 1 << 20, cborFnvTokens)]));
  for (const m of messages) ingest.get(m.pod)!.apply(router, m.pod, decodeEventBatch(m.payload));

  // every block any prompt has, as both routers key it
  const keys = new Map<string, Uint32Array>();
  for (const p of prompts) {
    const h = router.hash({ tokens: p });
    for (let i = 0; i < h.length / 2; i++) keys.set(keyOf(h, i), slice(h, i, i + 1));
  }
  const keyList = [...keys.values()];
  const decimal = (pair: Uint32Array): string => ((BigInt(pair[1]!) << 32n) | BigInt(pair[0]!)).toString();
  const scored = [...prompts.filter((_, i) => i % 3 === 0), ...simulate(27, 40).prompts];
  const theirs = callPeer<{ answers: LlmdAnswer[] }>("llmd", {
    op: "events",
    cases: [
      {
        block_size: BS,
        hash_seed: SEED,
        model: MODEL,
        messages: messages.map((m) => ({ pod: m.pod, payload: m.payload.toString("base64") })),
        keys: keyList.map(decimal),
        prompts: scored,
      },
    ],
  }).answers[0]!;

  const holders = (k: Uint32Array, tier: "GPU" | "CPU"): string[] =>
    WORKERS.filter((w) => router.index.tiers(w, k).includes(tier));

  it("holds the same blocks on every worker's GPU tier and on its CPU tier", () => {
    const ours = keyList.map((k) => holders(k, "GPU"));
    expect(ours).toEqual(theirs.holders);
    // the offloaded copies (medium "CPU"), kept in their tier as llm-d keeps them
    expect(keyList.map((k) => holders(k, "CPU"))).toEqual(theirs.cpu_holders);
    expect(theirs.cpu_holders.some((h) => h.length > 0)).toBe(true);
    // the streams exercised what they should: blocks held by several workers, blocks evicted everywhere
    expect(ours.some((h) => h.length >= 2)).toBe(true);
    expect(ours.some((h) => h.length === 0)).toBe(true);
    expect(messages.length).toBeGreaterThan(500);
  });

  it("gives the same GPU-tier match length per prompt on every worker (LongestPrefixScorer's)", () => {
    const ours = scored.map((p) => {
      const h = router.hash({ tokens: p });
      const run = (w: string): number => {
        let n = 0;
        while (n < h.length / 2 && router.index.tiers(w, slice(h, n, n + 1)).includes("GPU")) n++;
        return n;
      };
      return Object.fromEntries(WORKERS.map((w) => [w, run(w)]));
    });
    const full = theirs.matches.map((m) => Object.fromEntries(WORKERS.map((w) => [w, m[w] ?? 0])));
    expect(ours).toEqual(full);
    expect(ours.some((m) => Object.values(m).some((n) => n > 5))).toBe(true);
  });

  it("matches past the GPU tier where offloaded copies continue a prefix (they count at the CPU weight)", () => {
    let longer = 0;
    for (const p of scored) {
      const h = router.hash({ tokens: p });
      const m = router.index.match(h);
      for (const w of WORKERS) {
        let gpu = 0;
        while (gpu < h.length / 2 && router.index.tiers(w, slice(h, gpu, gpu + 1)).includes("GPU")) gpu++;
        if (m[w]! > gpu) longer++;
      }
    }
    expect(longer).toBeGreaterThan(0);
  });
});
