// dolphin serve's ingest of tiered KV events (src/serve/proxy/kv-ingest.ts): vLLM's offloading connector publishes
// BlockStored with medium "CPU", often without token ids, for blocks the device stored before with theirs.
import { describe, expect, it } from "vitest";
import { hashTokens, rootHash } from "../src/hashing/hashes.js";
import type { KvEvent } from "../src/router/kv-events.js";
import { parseConfig } from "../src/serve/config.js";
import { EventIngest } from "../src/serve/proxy/kv-ingest.js";
import { ruleTable } from "../src/table/rule-table.js";
import { routerOn } from "./helpers.js";

const ENGINE_ROOT = rootHash("a vLLM engine's own hashes");
const tokens = Array.from({ length: 32 }, (_, i) => i);
/** The engine's hashes of the 2 blocks: another root, so unlike the router's (as vLLM's sha256 ones are). */
const engine = hashTokens(tokens, 16, ENGINE_ROOT);
const unknown = new Uint32Array([77, 0]);

function setup(): { router: ReturnType<typeof routerOn>; ingest: EventIngest; apply: (e: KvEvent[]) => unknown } {
  const router = routerOn("wasm", ruleTable("always-local"), { workers: [{ id: "d", role: "decode" }] });
  const ingest = new EventIngest(16, rootHash(""), 1000);
  const apply = (events: KvEvent[]): unknown => ingest.apply(router, "d", { ts: 0, events, dataParallelRank: null });
  return { router, ingest, apply };
}

const stored = (hashes: Uint32Array, medium: string | null, ids: number[] = []): KvEvent => ({
  kind: "stored",
  hashes,
  parent: null,
  tokenIds: ids,
  blockSize: 16,
  medium,
});

describe("KV ingest: cache tiers", () => {
  it("finds a CPU copy without token ids by the engine hash the device stored with its tokens", () => {
    const { router, apply } = setup();
    const ours = router.hash({ tokens });
    expect(apply([stored(engine, "GPU", tokens)])).toMatchObject({ stored: 2, lower: 0 });
    const both = new Uint32Array([...engine, ...unknown]);
    expect(apply([stored(both, "CPU")])).toMatchObject({ stored: 2, lower: 2, unmapped: 1 });
    expect(router.index.tiers("d", ours.subarray(0, 2))).toEqual(["GPU", "CPU"]);
    // evicted from the device: still matched, at the CPU weight, and removable from CPU by its engine hash
    apply([{ kind: "removed", hashes: engine, medium: "GPU" }]);
    expect(router.index.match(ours)["d"]).toBe(2);
    expect(router.index.lowerCount("d")).toBe(2);
    expect(router.route({ tokens: [...tokens, 99], oslHat: 1 }).features.effD).toBe(33 - 2 * 0.8 * 16);
    apply([{ kind: "removed", hashes: engine, medium: "CPU" }]);
    expect(router.index.count("d")).toBe(0);
  });

  it("leaves out a CPU block whose engine hash it never saw with tokens, and a medium with no tier", () => {
    const { router, apply } = setup();
    expect(apply([stored(engine, "CPU")])).toMatchObject({ stored: 0, unmapped: 2 });
    expect(apply([stored(engine, "DISK", tokens)])).toMatchObject({ stored: 0, untiered: 2 });
    expect(router.index.count("d")).toBe(0);
  });

  it("rehashes a CPU store that carries token ids, as a device one", () => {
    const { router, apply } = setup();
    expect(apply([stored(engine, "cpu", tokens)])).toMatchObject({ stored: 2, lower: 2 });
    expect(router.index.tiers("d", router.hash({ tokens }).subarray(2, 4))).toEqual(["CPU"]);
  });

  it("takes CPU hashes as they come from an engine whose device events carry no token ids", () => {
    const { router, apply } = setup();
    const ours = router.hash({ tokens });
    apply([stored(ours.subarray(0, 2), null)]);
    expect(apply([stored(ours.subarray(2, 4), "CPU")])).toMatchObject({ stored: 1, lower: 1 });
    expect(router.index.match(ours)["d"]).toBe(2);
  });
});

describe("dolphin serve config: tiers", () => {
  const base = { model: "m", workers: [] };
  it("defaults to llm-d's weights and takes a CPU weight in [0, 1]", () => {
    expect(parseConfig(base).tiers).toEqual({ GPU: 1, CPU: 0.8 });
    expect(parseConfig({ ...base, tiers: { CPU: 0.5 } }).tiers).toEqual({ GPU: 1, CPU: 0.5 });
  });
  it("rejects a weight outside [0, 1], a device weight other than 1 and an unknown tier, naming the field", () => {
    expect(() => parseConfig({ ...base, tiers: { CPU: 1.5 } })).toThrow(
      /config: tiers\.CPU: expected a number ≥ 0 and ≤ 1, got 1\.5/,
    );
    expect(() => parseConfig({ ...base, tiers: { GPU: 0.9 } })).toThrow(/config: tiers\.GPU: expected 1/);
    expect(() => parseConfig({ ...base, tiers: { DISK: 0.5 } })).toThrow(
      /config: tiers\.DISK: unknown key \(known: GPU, CPU\)/,
    );
  });
});
