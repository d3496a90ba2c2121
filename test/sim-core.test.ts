// The simulator's building blocks: event order, the prefix cache (pins, LRU, KV events), instances.
import { describe, expect, it } from "vitest";
import { quantile } from "../src/sim/metrics.js";
import { EventQueue, Priority } from "../src/sim/events.js";
import { BlockIds } from "../src/sim/block-ids.js";
import { KvCache } from "../src/sim/kv-cache.js";
import { BlocksStillToRoute } from "../src/sim/remaining.js";

describe("event queue", () => {
  it("orders by time, then priority class (steps, transfers, KV events, arrivals), then scheduling order", () => {
    const q = new EventQueue();
    const seen: string[] = [];
    q.schedule(5, Priority.arrival, () => seen.push("arrival@5 first"));
    q.schedule(5, Priority.arrival, () => seen.push("arrival@5 second"));
    q.schedule(5, Priority.step, () => seen.push("step@5"));
    q.schedule(5, Priority.kvEvent, () => seen.push("kv@5"));
    q.schedule(5, Priority.transfer, () => seen.push("transfer@5"));
    q.schedule(1, Priority.arrival, () => seen.push("arrival@1"));
    q.schedule(7, Priority.step, () => {
      seen.push("step@7");
      q.schedule(7, Priority.step, () => seen.push("step@7 scheduled at 7"));
    });
    q.run();
    expect(seen).toEqual([
      "arrival@1",
      "step@5",
      "transfer@5",
      "kv@5",
      "arrival@5 first",
      "arrival@5 second",
      "step@7",
      "step@7 scheduled at 7",
    ]);
    expect(q.nowMs).toBe(7);
  });

  it("refuses to schedule in the past", () => {
    const q = new EventQueue();
    q.schedule(10, Priority.step, () => expect(() => q.schedule(9, Priority.step, () => {})).toThrow(/in the past/));
    q.run();
  });

  it("keeps heap order over many random events", () => {
    const q = new EventQueue();
    const times: number[] = [];
    let x = 3;
    for (let i = 0; i < 5000; i++) {
      x = (Math.imul(x, 1103515245) + 12345) & 0x7fffffff;
      const t = x % 1000;
      q.schedule(t, Priority.step, () => times.push(t));
    }
    q.run();
    expect(times).toEqual([...times].sort((a, b) => a - b));
  });
});

describe("KV cache", () => {
  const pairsOf = (ids: number[]) => Uint32Array.from(ids.flatMap((i) => [i, 7]));
  function setup(capacity: number) {
    const ids = new BlockIds();
    const events: string[] = [];
    const cache = new KvCache(capacity, ids, {
      stored: (p) => events.push(`+${Array.from(p.filter((_, i) => i % 2 === 0)).join(",")}`),
      removed: (p) => events.push(`-${Array.from(p.filter((_, i) => i % 2 === 0)).join(",")}`),
    });
    return { ids, cache, events, blocks: (n: number[]) => ids.intern(pairsOf(n)) };
  }

  it("interns each distinct hash once", () => {
    const ids = new BlockIds();
    const a = ids.intern(pairsOf([1, 2, 3]));
    const b = ids.intern(pairsOf([3, 2, 9]));
    expect(Array.from(a)).toEqual([0, 1, 2]);
    expect(Array.from(b)).toEqual([2, 1, 3]);
    for (let i = 0; i < 300_000; i++) ids.id(i, i ^ 0x55); // growth keeps ids stable
    expect(ids.id(3, 7)).toBe(2);
    expect(Array.from(ids.pairs([2]))).toEqual([3, 7]);
  });

  it("pins what a running request uses, caches it after, and evicts least recently used first", () => {
    const { cache, events, blocks } = setup(6);
    const a = blocks([1, 2, 3]);
    expect(cache.admit(a, 0, 4)).toBe(true); // 3 prompt blocks + 1 private
    cache.commit(a, 0, 3);
    expect(events).toEqual(["+1,2,3"]);
    expect(cache.usedBlocks).toBe(4);
    const b = blocks([1, 2, 4]);
    expect(cache.prefixHit(b, 3)).toBe(2);
    expect(cache.admit(b, 2, 2)).toBe(true);
    expect(cache.admit(blocks([9]), 0, 1)).toBe(false); // 6 of 6 in use, nothing evictable
    cache.release(a, 3, 1); // block 3 becomes evictable; 1, 2 still pinned by b
    expect(cache.availableBlocks).toBe(2);
    cache.commit(b, 2, 3);
    cache.release(b, 3, 1);
    // LRU order of unpinned blocks: 3 (released first), then 1, 2, 4
    expect(cache.admit(blocks([8]), 0, 4)).toBe(true);
    expect(events.at(-1)).toBe("-3,1");
    expect(cache.prefixHit(b, 3)).toBe(0);
  });

  it("never evicts a pinned block, and a refused admission changes nothing", () => {
    const { cache, blocks } = setup(4);
    const a = blocks([1, 2, 3, 4]);
    cache.admit(a, 0, 4);
    cache.commit(a, 0, 4);
    const used = cache.usedBlocks;
    expect(cache.admit(blocks([5]), 0, 1)).toBe(false);
    expect(cache.usedBlocks).toBe(used);
    expect(cache.prefixHit(a, 4)).toBe(4);
  });

  it("shares a block two requests computed at once and returns the spare reservation", () => {
    const { cache, events, blocks } = setup(10);
    const a = blocks([1, 2]);
    cache.admit(a, 0, 2);
    cache.admit(a, 0, 2);
    cache.commit(a, 0, 2);
    cache.commit(a, 0, 2);
    expect(events).toEqual(["+1,2"]);
    expect(cache.usedBlocks).toBe(2);
    cache.release(a, 2, 0);
    cache.release(a, 2, 0);
    expect(cache.availableBlocks).toBe(10);
  });

  it("interns a turn's shared leading blocks from the turn before to the same ids as a lookup would", () => {
    const ids = new BlockIds();
    const before = pairsOf([1, 2, 3]);
    const beforeIds = ids.intern(before);
    ids.intern(pairsOf([9, 4])); // 4 is interned elsewhere first
    const turn = pairsOf([1, 2, 4, 5]);
    const viaHint = ids.intern(turn, 4, { pairs: before, ids: beforeIds });
    expect(Array.from(viaHint)).toEqual([0, 1, 4, 5]);
    expect(Array.from(ids.intern(turn))).toEqual(Array.from(viaHint));
  });

  it("reports neither the store nor the eviction of a block its filter declines", () => {
    const ids = new BlockIds();
    const events: string[] = [];
    const declined = new Set(ids.intern(pairsOf([2, 5])));
    const cache = new KvCache(
      4,
      ids,
      {
        stored: (p) => events.push(`+${Array.from(p.filter((_, i) => i % 2 === 0)).join(",")}`),
        removed: (p) => events.push(`-${Array.from(p.filter((_, i) => i % 2 === 0)).join(",")}`),
      },
      { wanted: (id) => !declined.has(id) },
    );
    const a = ids.intern(pairsOf([1, 2, 3]));
    cache.admit(a, 0, 3);
    cache.commit(a, 0, 3);
    cache.release(a, 3, 0);
    expect(events).toEqual(["+1,3"]);
    const b = ids.intern(pairsOf([4, 5, 6]));
    cache.admit(b, 0, 4); // evicts 1, 2 (declined, so not reported) and 3
    expect(events.at(-1)).toBe("-1,3");
    cache.commit(b, 0, 3);
    expect(events.at(-1)).toBe("+4,6");
    cache.release(b, 3, 1);
    cache.admit(ids.intern(pairsOf([7, 8, 9, 10])), 0, 4); // every block of b goes, 5 unreported
    expect(events.at(-1)).toBe("-4,6");
  });
});

describe("blocks still to route", () => {
  it("wants a block while a request not yet routed contains it, and ids it was not told about", () => {
    const remaining = new BlocksStillToRoute([Int32Array.of(0, 1), Int32Array.of(0, 2), Int32Array.of(3)], 5);
    expect([0, 1, 2, 3, 4, 9].map((id) => remaining.wanted(id))).toEqual([true, true, true, true, false, true]);
    remaining.routed = 1; // the first request is routed: block 1 is in no later request
    expect([0, 1, 2, 3].map((id) => remaining.wanted(id))).toEqual([true, false, true, true]);
    remaining.routed = 2;
    expect([0, 1, 2, 3].map((id) => remaining.wanted(id))).toEqual([false, false, false, true]);
    remaining.routed = 3;
    expect(remaining.wanted(3)).toBe(false);
  });
});

describe("instance abort", () => {
  it("drops aborted jobs wherever they are (waiting, prefilling, decoding) and gives their KV back", async () => {
    const { Instance } = await import("../src/sim/instance.js");
    const { PRESETS } = await import("../src/sim/model-presets.js");
    const queue = new EventQueue();
    const finished: number[] = [];
    const host = {
      queue,
      prefillDone() {},
      decodeAdmitted() {},
      firstToken() {},
      rejected() {},
      loadChanged() {},
      finished: (_i: unknown, j: { req: { id: number } }) => finished.push(j.req.id),
    };
    const ids = new BlockIds();
    // room for two requests at a time: the third waits
    const inst = new Instance(0, "R0", "replica", PRESETS["h100-8b"], 600, host as never, ids, null);
    const req = (id: number) => {
      const blocks = new Uint32Array(2 * 250);
      for (let i = 0; i < 250; i++) [blocks[2 * i], blocks[2 * i + 1]] = [id * 1000 + i, 9];
      return { id, arrivalMs: 0, promptTokens: 4000, outputTokens: 500, blocks, turn: 1 };
    };
    const jobs = [0, 1, 2, 3].map((id) => inst.enqueue(req(id), ids.intern(req(id).blocks), "local"));
    expect(jobs.map((j) => j.state)).toEqual(["prefilling", "waiting", "waiting", "waiting"]);
    expect(inst.abort(jobs[2]!)).toBe(true); // waiting
    queue.run(100); // job 0 prefilling, maybe decoding
    expect(inst.abort(jobs[0]!)).toBe(true);
    queue.run();
    expect(finished.sort()).toEqual([1, 3]);
    expect(jobs.map((j) => j.state)).toEqual(["done", "done", "done", "done"]);
    expect(inst.pendingPrefillTokens).toBe(0);
    expect(inst.activeDecodeTokens).toBe(0);
    expect(inst.cache.availableBlocks).toBe(600); // everything unpinned again
    expect(inst.abort(jobs[1]!)).toBe(false); // already done
  });
});

describe("quantile", () => {
  const five = [10, 20, 30, 40, 50];
  it("is the nearest-rank member by default: index ceil(q·n) − 1", () => {
    expect([0, 0.2, 0.5, 0.9, 0.99, 1].map((q) => quantile(five, q))).toEqual([10, 10, 30, 50, 50, 50]);
  });
  it('is the lower member with rank "lower": index floor(q·(n − 1))', () => {
    expect([0, 0.5, 0.9, 1].map((q) => quantile(five, q, "lower"))).toEqual([10, 30, 40, 50]);
  });
  it("differs between the two only where the doc says: q = 2/3 with n ≡ 2 (mod 3)", () => {
    expect(quantile(five, 2 / 3)).toBe(40);
    expect(quantile(five, 2 / 3, "lower")).toBe(30);
    expect(quantile([1, 2, 3, 4, 5, 6], 2 / 3)).toBe(quantile([1, 2, 3, 4, 5, 6], 2 / 3, "lower"));
  });
  it("is NaN for an empty array", () => {
    expect(quantile([], 0.5)).toBeNaN();
    expect(quantile([], 0.5, "lower")).toBeNaN();
  });
});
