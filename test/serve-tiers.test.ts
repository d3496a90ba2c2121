// dolphin serve and cache tiers (issue 28, item 2), end to end: synthetic KV events of each tier POSTed to
// /admin/kv-events (the CPU engines here report "GPU" for their own cache), the index and the decisions after them.
import { afterEach, describe, expect, it } from "vitest";
import { toPairs } from "../src/hashing/hashes.js";
import { encodeEventBatch, type KvEvent } from "../src/router/kv-events.js";
import type { RunningProxy } from "../src/serve/proxy.js";
import { cleanUp, metric, proxy, startFake } from "./serve-fault-tools.js";

afterEach(cleanUp);

const PROMPT = "A long shared system prompt that many requests reuse. ".repeat(4);
const TOKENS = Array.from(Buffer.from(JSON.stringify(PROMPT))); // vllmLike's /tokenize: the body's bytes
const BLOCKS = Math.floor(TOKENS.length / 16);
/** The engine's own hashes of the first n blocks (unlike the router's, as vLLM's sha256 ones). */
const engineHashes = (n: number): Uint32Array => toPairs(Array.from({ length: n }, (_, i) => BigInt(5_000_000 + i)));

async function events(p: RunningProxy, worker: string, list: KvEvent[]): Promise<Record<string, number>> {
  const r = await fetch(`${p.url}/admin/kv-events`, {
    method: "POST",
    headers: { authorization: "Bearer t", "content-type": "application/msgpack", "x-dolphin-worker": worker },
    body: Buffer.from(encodeEventBatch({ ts: 1, dataParallelRank: null, events: list })),
  });
  expect(r.status).toBe(200);
  return (await r.json()) as Record<string, number>;
}

const stored = (n: number, medium: string, withTokens: boolean): KvEvent => ({
  kind: "stored",
  hashes: engineHashes(n),
  parent: null,
  tokenIds: withTokens ? TOKENS.slice(0, n * 16) : [],
  blockSize: 16,
  medium,
});

async function setup(cpuWeight: number): Promise<RunningProxy> {
  const d0 = await startFake();
  const d1 = await startFake();
  const p = await proxy(
    [
      { id: "d0", url: d0.url, role: "decode" },
      { id: "d1", url: d1.url, role: "decode" },
    ],
    { mode: "precise", block_size: 16, tiers: { CPU: cpuWeight } },
  );
  // d0: the whole prompt stored on the device, offloaded to CPU (no token ids), then evicted from the device
  await events(p, "d0", [stored(BLOCKS, "GPU", true)]);
  expect(await events(p, "d0", [stored(BLOCKS, "CPU", false)])).toMatchObject({ lower_tier_blocks: BLOCKS });
  await events(p, "d0", [{ kind: "removed", hashes: engineHashes(BLOCKS), medium: "GPU" }]);
  // d1: 60% of it on the device
  await events(p, "d1", [stored(Math.floor(BLOCKS * 0.6), "GPU", true)]);
  return p;
}

const route = async (p: RunningProxy): Promise<string> => {
  const r = await fetch(`${p.url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "test-model", prompt: PROMPT, max_tokens: 1 }),
  });
  await r.arrayBuffer();
  return r.headers.get("x-dolphin-decode-worker")!;
};

describe("dolphin serve: cache tiers", () => {
  it("routes to a whole prefix on CPU at weight 0.8 over 60% of it on a device, and counts the CPU blocks", async () => {
    const p = await setup(0.8);
    expect(p.router.index.lowerCount("d0")).toBe(BLOCKS);
    expect(await route(p)).toBe("d0");
    expect(await metric(p, 'dolphin_kv_events_total{kind="stored_lower_tier_blocks"')).toBe(BLOCKS);
  });

  it("with tiers.CPU 0.5 the device's 60% wins", async () => {
    const p = await setup(0.5);
    expect(await route(p)).toBe("d1");
  });
});
