// The prefix index at a full pool = the TypeScript reference: every capacity summing to the pool and hashes drawn
// from a small set, so blocks are shared by many workers across several worker groups, the tables run at their
// highest load, and deletion shifts both nodes (whose LRU neighbours must follow) and group slots (whose nodes must
// follow). Counts and every worker's match are compared after each operation.
import { describe, expect, it } from "vitest";
import { Role, type Engine } from "../src/contract/core-api.js";
import { createCore, instantiateCore } from "../src/core/core.js";
import { ReferenceEngine } from "../src/reference/engine.js";
import { coreModule } from "./helpers.js";

function splitmix(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x9e3779b9) >>> 0;
    let z = s;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
    return (z ^ (z >>> 16)) >>> 0;
  };
}

describe.each([
  { workers: 150, pool: 600, distinct: 240 }, // three groups of 62
  { workers: 64, pool: 512, distinct: 90 }, // one group of 64
])("index at a full pool ($workers workers, $pool blocks)", ({ workers, pool, distinct }) => {
  it("evicts, removes and matches like the reference", () => {
    const config = { maxWorkers: workers, maxInputBytes: 1 << 14, indexBlocks: pool };
    const engines: Engine[] = [createCore(instantiateCore(coreModule("debug")), config), new ReferenceEngine(config)];
    const rnd = splitmix(workers * 7919 + pool);
    const capacity = pool / workers;
    for (const e of engines)
      for (let w = 0; w < workers; w++) e.setWorker(w, w % 2 ? Role.decode : Role.prefill, Math.floor(capacity));
    // a few workers hold more, so the capacities add up to the whole pool
    const spare = pool - Math.floor(capacity) * workers;
    for (const e of engines) if (spare > 0) e.setWorker(0, Role.prefill, Math.floor(capacity) + spare);
    const hashes = (from: number, len: number): Uint32Array => {
      const out = new Uint32Array(2 * len);
      for (let i = 0; i < len; i++) {
        const id = (from + i) % distinct;
        out[2 * i] = Math.imul(id + 1, 2654435761) >>> 0;
        out[2 * i + 1] = id & 3;
      }
      return out;
    };
    for (let step = 0; step < 3000; step++) {
      const w = rnd() % workers;
      const from = rnd() % distinct;
      const len = 1 + (rnd() % 12);
      const op = rnd() % 10;
      const h = hashes(from, len);
      const newCapacity = rnd() % (Math.floor(capacity) + 1);
      for (const e of engines) {
        if (op < 6) e.indexStore(w, h);
        else if (op < 8) e.indexRemove(w, h);
        else if (op < 9) e.indexClear(w);
        else e.setWorker(w, Role.decode, newCapacity);
      }
      if (step % 7 === 0) {
        const probe = hashes(rnd() % distinct, 20);
        const [a, b] = engines.map((e) => Array.from(e.match(probe)));
        expect(a, `match after step ${step}`).toEqual(b);
      }
      const [ca, cb] = engines.map((e) => Array.from({ length: workers }, (_, x) => e.indexCount(x)));
      expect(ca, `counts after step ${step}`).toEqual(cb);
    }
  });
});

// Blocks held by every worker of some groups: the index keeps a summary of a block's full groups
// (assembly/prefix-index/holders.ts), made, kept and unmade as groups fill and lose workers (stores, removes, LRU
// evictions, clears). Matches and counts = the reference after every operation. 125 workers end in a group of one
// (never full), 200 in one of 17; 4,000 workers are too many for summaries (and for the bitmap walk).
describe.each([{ workers: 125 }, { workers: 200 }, { workers: 4000 }])(
  "index with full groups ($workers workers)",
  ({ workers }) => {
    it("makes and unmakes summaries like the reference", () => {
      const blocks = 24;
      const capacity = 20;
      const config = { maxWorkers: workers, maxInputBytes: 1 << 12, indexBlocks: workers * capacity };
      const engines: Engine[] = [createCore(instantiateCore(coreModule("debug")), config), new ReferenceEngine(config)];
      const rnd = splitmix(workers);
      // the workers that play: all of them, or (4,000) every 37th, so groups far apart hold blocks
      const players = Array.from({ length: workers }, (_, w) => w).filter((w) => workers <= 200 || w % 37 === 0);
      for (const e of engines) for (const w of players) e.setWorker(w, w % 3 ? Role.decode : Role.prefill, capacity);
      const prompt = (from: number, len: number): Uint32Array => {
        const out = new Uint32Array(2 * len);
        for (let i = 0; i < len; i++) {
          out[2 * i] = Math.imul(from + i + 1, 2246822519) >>> 0;
          out[2 * i + 1] = (from + i) * 7;
        }
        return out;
      };
      // nested prefixes, deeper with the id (as in bench core's scale workload): groups fill one after another
      for (const e of engines)
        players.forEach((w, k) => e.indexStore(w, prompt(0, 1 + Math.floor((k * 20) / players.length))));
      for (let step = 0; step < 600; step++) {
        const w = players[rnd() % players.length]!;
        const from = rnd() % blocks;
        const len = 1 + (rnd() % 6);
        const op = rnd() % 20;
        const depth = 8 + (rnd() % 12);
        const newCapacity = rnd() % (capacity + 1);
        for (const e of engines) {
          // op < 3: every player stores the same prefix, so every group is full again
          if (op < 3) for (const x of players) e.indexStore(x, prompt(0, depth));
          else if (op < 10) e.indexStore(w, prompt(from, Math.min(len, blocks - from)));
          else if (op < 16) e.indexRemove(w, prompt(from, 1));
          else if (op < 18) e.indexClear(w);
          else e.setWorker(w, Role.decode, newCapacity);
        }
        for (const start of [0, 3]) {
          const [a, b] = engines.map((e) => Array.from(e.match(prompt(start, blocks - start))));
          expect(a, `match from block ${start} after step ${step}`).toEqual(b);
        }
        const [ca, cb] = engines.map((e) => players.map((x) => e.indexCount(x)));
        expect(ca, `counts after step ${step}`).toEqual(cb);
      }
    });
  },
);
