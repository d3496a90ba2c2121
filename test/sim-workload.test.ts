// Workloads for the simulator: the real traces and length files load with the documented statistics, the generators
// meet their targets, block hashes share exactly the shared prefixes, load scaling, and every bad row names its place.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, extname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SimRequest, Workload } from "../src/sim/types.js";
import { generate } from "../src/sim/generators.js";
import { parseWorkload } from "../src/sim/traces.js";
import { GENERATORS, WorkloadError, parseLoad, withLoad, workloadName } from "../src/sim/workload.js";
import { loadWorkload, readAzure, readLengths, readMooncake } from "../src/sim/workload-files.js";

const data = (p: string) => fileURLToPath(new URL(`../data/${p}`, import.meta.url));
const MOONCAKE = data("traces/mooncake_conversation_dev.jsonl");
const AZURE = data("traces/azure2023_conv.csv");
const LENGTHS = {
  sharegpt: {
    file: data("lengths/lengths_sharegpt_8k_filtered_stats_llama2_tokenizer.csv"),
    rows: 30_731,
    prompt: 2340,
    output: 439,
  },
  arxiv: {
    file: data("lengths/lengths_arxiv_summarization_stats_llama2_tokenizer_filtered_v2.csv"),
    rows: 28_257,
    prompt: 2588,
    output: 291,
  },
  bwb: {
    file: data("lengths/lengths_bwb_stats_llama2_tokenizer_filtered_v2.csv"),
    rows: 33_768,
    prompt: 1067,
    output: 1613,
  },
};

// ---------------------------------------------------------------------------------------------------------------
// Helpers.

/** Open-addressing set of (lo, hi) hash pairs; (0, 0) marks an empty slot (a real hash is never 0). */
class PairSet {
  private readonly lo: Uint32Array;
  private readonly hi: Uint32Array;
  private readonly mask: number;
  constructor(capacity: number) {
    let size = 1;
    while (size < capacity * 2) size *= 2;
    this.lo = new Uint32Array(size);
    this.hi = new Uint32Array(size);
    this.mask = size - 1;
  }
  has(lo: number, hi: number): boolean {
    for (let i = (lo ^ Math.imul(hi, 0x9e3779b1)) & this.mask; ; i = (i + 1) & this.mask) {
      if (this.lo[i] === lo && this.hi[i] === hi) return true;
      if (this.lo[i] === 0 && this.hi[i] === 0) return false;
    }
  }
  add(lo: number, hi: number): void {
    for (let i = (lo ^ Math.imul(hi, 0x9e3779b1)) & this.mask; ; i = (i + 1) & this.mask) {
      if (this.lo[i] === lo && this.hi[i] === hi) return;
      if (this.lo[i] === 0 && this.hi[i] === 0) {
        this.lo[i] = lo;
        this.hi[i] = hi;
        return;
      }
    }
  }
}

const blockCount = (r: SimRequest) => r.blocks.length / 2;

/** Per request in arrival order: blocks seen in an earlier request, and leading blocks seen earlier. */
function reuse(w: Workload): { reused: number[]; leading: number[] } {
  const total = w.requests.reduce((s, r) => s + blockCount(r), 0);
  const seen = new PairSet(total);
  const reused: number[] = [],
    leading: number[] = [];
  for (const r of w.requests) {
    let k = 0,
      lead = 0,
      isLead = true;
    for (let i = 0; i < r.blocks.length; i += 2) {
      const s = seen.has(r.blocks[i]!, r.blocks[i + 1]!);
      if (s) k++;
      if (s && isLead) lead++;
      else isLead = false;
    }
    for (let i = 0; i < r.blocks.length; i += 2) seen.add(r.blocks[i]!, r.blocks[i + 1]!);
    reused.push(k);
    leading.push(lead);
  }
  return { reused, leading };
}

/** Mean over requests of the fraction of their blocks seen earlier. */
function meanReusedFraction(w: Workload): number {
  const { reused } = reuse(w);
  return (
    w.requests.reduce((s, r, i) => s + (blockCount(r) === 0 ? 0 : reused[i]! / blockCount(r)), 0) / w.requests.length
  );
}

/** Fraction of all prompt tokens that lie in leading blocks shared with an earlier request. */
function sharedPrefixFraction(w: Workload): number {
  const { leading } = reuse(w);
  const prompt = w.requests.reduce((s, r) => s + r.promptTokens, 0);
  return (leading.reduce((s, x) => s + x, 0) * 16) / prompt;
}

/** True when every hash pair of the workload occurs once. */
function allBlocksDistinct(w: Workload): boolean {
  const seen = new PairSet(w.requests.reduce((s, r) => s + blockCount(r), 0));
  for (const r of w.requests) {
    for (let i = 0; i < r.blocks.length; i += 2) {
      if (seen.has(r.blocks[i]!, r.blocks[i + 1]!)) return false;
      seen.add(r.blocks[i]!, r.blocks[i + 1]!);
    }
  }
  return true;
}

function startsWith(blocks: Uint32Array, prefix: Uint32Array): boolean {
  if (prefix.length > blocks.length) return false;
  for (let i = 0; i < prefix.length; i++) if (blocks[i] !== prefix[i]) return false;
  return true;
}

/** Same requests field by field (plain loops: deep equality over typed arrays is slow). */
function sameWorkload(a: Workload, b: Workload): boolean {
  if (a.name !== b.name || a.rate !== b.rate || a.requests.length !== b.requests.length) return false;
  return a.requests.every((r, i) => {
    const q = b.requests[i]!;
    const { blocks: rb, ...rest } = r,
      { blocks: qb, ...qrest } = q;
    return JSON.stringify(rest) === JSON.stringify(qrest) && rb.length === qb.length && startsWith(rb, qb);
  });
}

const mean = (xs: readonly number[]) => xs.reduce((s, x) => s + x, 0) / xs.length;
const within = (value: number, target: number, rel: number) => Math.abs(value - target) <= rel * target;

/** Ids 0..n−1 in arrival order, one hash pair per full block, turns ≥ 1: the first request that is not. */
function firstMalformed(w: Workload): SimRequest | undefined {
  return w.requests.find(
    (r, i) =>
      r.id !== i ||
      r.blocks.length !== 2 * Math.floor(r.promptTokens / 16) ||
      !(r.turn >= 1) ||
      !Number.isFinite(r.arrivalMs) ||
      (i > 0 && r.arrivalMs < w.requests[i - 1]!.arrivalMs),
  );
}

/**
 * Each later turn with the request of its previous turn: the latest earlier request of the same session one turn
 * before whose blocks the later turn's blocks start with (a session may branch: two turns k extending one turn k−1).
 */
function previousTurns(w: Workload): [SimRequest, SimRequest][] {
  const byTurn = new Map<string, SimRequest[]>();
  const pairs: [SimRequest, SimRequest][] = [];
  for (const r of w.requests) {
    if (r.turn > 1) {
      const candidates = byTurn.get(`${r.session}:${r.turn - 1}`) ?? [];
      const prev = [...candidates].reverse().find((q) => startsWith(r.blocks, q.blocks));
      expect(
        prev,
        `request ${r.id} (session ${r.session}, turn ${r.turn}) extends no turn ${r.turn - 1}`,
      ).toBeDefined();
      pairs.push([prev!, r]);
    }
    const key = `${r.session}:${r.turn}`;
    byTurn.set(key, [...(byTurn.get(key) ?? []), r]);
  }
  return pairs;
}

let tmp = "";
beforeAll(() => {
  tmp = mkdtempSync(join(tmpdir(), "sim-workload-"));
});
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

function file(name: string, text: string): string {
  const p = join(tmp, name);
  writeFileSync(p, text);
  return p;
}

// ---------------------------------------------------------------------------------------------------------------

describe("Mooncake conversation trace", () => {
  interface Row {
    timestamp: number;
    input_length: number;
    output_length: number;
    hash_ids: number[];
  }
  let rows: Row[];
  let w: Workload;
  let loadMs: number;
  beforeAll(() => {
    rows = readFileSync(MOONCAKE, "utf8")
      .split("\n")
      .filter((l) => l !== "")
      .map((l) => JSON.parse(l) as Row);
    const t0 = performance.now();
    w = readMooncake(MOONCAKE);
    loadMs = performance.now() - t0;
  });

  it("loads all 7,851 requests, well formed, in file order", () => {
    expect(w.requests.length).toBe(7851);
    expect(firstMalformed(w)).toBeUndefined();
    w.requests.forEach((r, i) => {
      expect(r.promptTokens).toBe(rows[i]!.input_length);
      expect(r.outputTokens).toBe(rows[i]!.output_length);
    });
    console.log(
      `mooncake: loaded in ${loadMs.toFixed(0)} ms (timing is the benchmark's job, not the test's), rate ${w.rate.toFixed(3)} req/s`,
    );
  });

  it("spreads each ~3 s timestamp bucket's arrivals over the bucket", () => {
    const offsets: number[] = [];
    w.requests.forEach((r, i) => {
      const ts = rows[i]!.timestamp;
      expect(r.arrivalMs).toBeGreaterThanOrEqual(ts);
      expect(r.arrivalMs).toBeLessThan(ts + 3001);
      offsets.push(r.arrivalMs - ts);
    });
    expect(new Set(w.requests.map((r) => r.arrivalMs)).size).toBe(7851);
    expect(mean(offsets)).toBeGreaterThan(1300); // uniform over ~3,000 ms: mean ~1,500
    expect(mean(offsets)).toBeLessThan(1700);
    expect(w.rate).toBeCloseTo(7850 / 2400, 1);
  });

  it("gives requests that share hash_id prefixes the same leading block hashes, and different ones after", () => {
    let checkedSame = 0,
      checkedDiff = 0;
    for (let i = 0; i < rows.length; i++) {
      for (let j = i + 1; j < Math.min(rows.length, i + 6); j++) {
        const a = rows[i]!.hash_ids,
          b = rows[j]!.hash_ids;
        let k = 0;
        while (k < a.length && k < b.length && a[k] === b[k]) k++;
        const ra = w.requests[i]!,
          rb = w.requests[j]!;
        const same = Math.min(32 * k, blockCount(ra), blockCount(rb));
        if (!startsWith(ra.blocks, rb.blocks.subarray(0, 2 * same)))
          expect.fail(`requests ${i} and ${j} differ in their first ${same} blocks`);
        checkedSame += same;
        // after the shared ids, different content (different conversations: no grown partial block in common)
        if (
          ra.session !== rb.session &&
          k < a.length &&
          k < b.length &&
          32 * k < Math.min(blockCount(ra), blockCount(rb))
        ) {
          if (ra.blocks[64 * k] === rb.blocks[64 * k] && ra.blocks[64 * k + 1] === rb.blocks[64 * k + 1]) {
            expect.fail(`requests ${i} and ${j} share block ${32 * k} after their ids differ`);
          }
          checkedDiff++;
        }
      }
    }
    expect(checkedSame).toBeGreaterThan(100_000);
    expect(checkedDiff).toBeGreaterThan(10_000);
  });

  it("reuses about the README's ~0.38 of a request's blocks", () => {
    const f = meanReusedFraction(w);
    console.log(`mooncake: mean fraction of a request's 16-token blocks seen earlier ${f.toFixed(3)}`);
    expect(f).toBeGreaterThan(0.33);
    expect(f).toBeLessThan(0.45);
  });

  it("finds next turns: a later turn's blocks start with all of the previous turn's blocks", () => {
    const pairs = previousTurns(w);
    expect(pairs.length).toBeGreaterThan(2000); // 2,410 continuations with the module's rule
    for (const [prev, r] of pairs) {
      expect(r.promptTokens).toBeGreaterThan(prev.promptTokens);
      expect(r.contextTokens).toBe(Math.min(prev.promptTokens + prev.outputTokens, r.promptTokens));
    }
    for (const r of w.requests) if (r.turn === 1) expect(r.contextTokens).toBe(0);
  });

  it("spreads deterministically: same seed same arrivals, another seed other arrivals, same blocks", () => {
    const a = readMooncake(MOONCAKE, { requests: 500 }),
      b = readMooncake(MOONCAKE, { requests: 500, seed: 1 });
    const c = readMooncake(MOONCAKE, { requests: 500, seed: 2 });
    expect(a.requests.map((r) => r.arrivalMs)).toEqual(b.requests.map((r) => r.arrivalMs));
    expect(a.requests.map((r) => r.arrivalMs)).not.toEqual(c.requests.map((r) => r.arrivalMs));
    expect(a.requests.every((r, i) => startsWith(r.blocks, c.requests[i]!.blocks))).toBe(true);
    expect(a.requests.map((r) => r.arrivalMs)).toEqual(w.requests.slice(0, 500).map((r) => r.arrivalMs));
  });
});

describe("Mooncake format, small files", () => {
  const line = (timestamp: number, input: number, ids: number[], output = 10) =>
    JSON.stringify({ timestamp, input_length: input, output_length: output, hash_ids: ids });

  it("grows a turn's partial last 512-token block into the next turn's: all 68 full blocks shared", () => {
    // P: ids [0,1,2], 1,100 tokens = 68 full blocks (32 + 32 + 4). R extends P: shares [0,1], new id 3 at P's last.
    const w = readMooncake(
      file("turns.jsonl", [line(0, 1100, [0, 1, 2], 50), line(9000, 1800, [0, 1, 3, 4])].join("\n")),
    );
    const [p, r] = w.requests as [SimRequest, SimRequest];
    expect([p.turn, r.turn, r.session]).toEqual([1, 2, p.session]);
    expect(r.contextTokens).toBe(1150);
    expect(blockCount(p)).toBe(68);
    expect(startsWith(r.blocks, p.blocks)).toBe(true);
    expect(allBlocksDistinct({ ...w, requests: [r] })).toBe(true);
  });

  it("does not call a request that shares only the first id a next turn", () => {
    const w = readMooncake(file("system.jsonl", [line(0, 1500, [0, 1, 2]), line(9000, 1800, [0, 5, 6, 7])].join("\n")));
    expect(w.requests.map((r) => r.turn)).toEqual([1, 1]);
    expect(w.requests[0]!.session).not.toBe(w.requests[1]!.session);
    expect(w.requests[0]!.blocks.subarray(0, 64)).toEqual(w.requests[1]!.blocks.subarray(0, 64));
    expect(w.requests[0]!.blocks[64]).not.toBe(w.requests[1]!.blocks[64]);
  });

  it("keeps distinct timestamps as recorded (no buckets to spread), sorted", () => {
    const w = readMooncake(
      file("plain.jsonl", [line(700, 600, [0, 1]), line(5, 100, [9]), line(20, 40, [3])].join("\n")),
    );
    expect(w.requests.map((r) => r.arrivalMs)).toEqual([5, 20, 700]);
    expect(w.requests.map((r) => r.promptTokens)).toEqual([100, 40, 600]);
    expect(w.rate).toBeCloseTo(2000 / 695, 9);
  });
});

describe("Azure conversation trace", () => {
  let w: Workload;
  beforeAll(() => {
    w = readAzure(AZURE);
  });

  it("loads every row (19,366: data/README.md says 19,365) at ~5.5 req/s with the README's means", () => {
    expect(w.requests.length).toBe(19_366);
    expect(firstMalformed(w)).toBeUndefined();
    expect(w.rate).toBeGreaterThan(5.4);
    expect(w.rate).toBeLessThan(5.6);
    expect(mean(w.requests.map((r) => r.promptTokens))).toBeCloseTo(1155, -1);
    expect(mean(w.requests.map((r) => r.outputTokens))).toBeCloseTo(211, -1);
  });

  it("measures arrivals in ms from the first row's datetime", () => {
    // 2023-11-16 18:15:46.6805900 → 18:15:50.9951690 → 18:15:51.2224670
    expect(w.requests[0]!.arrivalMs).toBe(0);
    expect(w.requests[1]!.arrivalMs).toBeCloseTo(4314.579, 3);
    expect(w.requests[2]!.arrivalMs).toBeCloseTo(4541.877, 3);
    expect(w.requests[0]).toMatchObject({ promptTokens: 374, outputTokens: 44, turn: 1, type: "azure" });
  });

  it("gives every request unique blocks", () => {
    expect(allBlocksDistinct(w)).toBe(true);
  });
});

describe("length files", () => {
  for (const [name, spec] of Object.entries(LENGTHS)) {
    it(`${name}: every row, the README's means, Poisson arrivals at the default 4 req/s, unique blocks`, () => {
      const w = readLengths(spec.file);
      expect(w.requests.length).toBe(spec.rows);
      expect(firstMalformed(w)).toBeUndefined();
      expect(within(mean(w.requests.map((r) => r.promptTokens)), spec.prompt, 0.005)).toBe(true);
      expect(within(mean(w.requests.map((r) => r.outputTokens)), spec.output, 0.005)).toBe(true);
      expect(w.rate).toBeCloseTo(4, 9);
      const gaps = w.requests.slice(1).map((r, i) => r.arrivalMs - w.requests[i]!.arrivalMs);
      const m = mean(gaps),
        sd = Math.sqrt(mean(gaps.map((g) => (g - m) ** 2)));
      expect(sd / m).toBeGreaterThan(0.95); // exponential gaps: coefficient of variation 1
      expect(sd / m).toBeLessThan(1.05);
      expect(allBlocksDistinct({ ...w, requests: w.requests.slice(0, 3000) })).toBe(true);
    });
  }

  it("takes the rate and the request cap from the options; rows stay in file order", () => {
    const w = readLengths(LENGTHS.bwb.file, { rate: 10, requests: 3 });
    expect(w.requests.map((r) => [r.promptTokens, r.outputTokens])).toEqual([
      [1047, 1368],
      [1154, 1461],
      [957, 1394],
    ]);
    expect(w.rate).toBeCloseTo(10, 9);
    expect(w.requests[0]!.type).toBe("bwb");
  });
});

describe("generators", () => {
  const targets = {
    arxiv: { prompt: 8088, output: 291 },
    leval: { prompt: 19_019, output: 180 },
    humaneval: { prompt: 198, output: 220 },
    hybrid: { prompt: (8088 + 19_019 + 198) / 3, output: (291 + 180 + 220) / 3 },
  };
  const made = new Map<string, Workload>();
  const get = (name: (typeof GENERATORS)[number]) => {
    if (!made.has(name)) made.set(name, generate(name));
    return made.get(name)!;
  };

  for (const [name, t] of Object.entries(targets) as [keyof typeof targets, { prompt: number; output: number }][]) {
    it(`${name}: 2,000 requests, mean prompt and output within 10% of the documented targets`, () => {
      const w = get(name);
      expect(w.requests.length).toBe(2000);
      expect(firstMalformed(w)).toBeUndefined();
      const p = mean(w.requests.map((r) => r.promptTokens)),
        o = mean(w.requests.map((r) => r.outputTokens));
      console.log(
        `${name}: prompt mean ${p.toFixed(0)}, output mean ${o.toFixed(0)}, rate ${w.rate}, ` +
          `shared prefix ${sharedPrefixFraction(w).toFixed(3)}`,
      );
      expect(within(p, t.prompt, 0.1)).toBe(true);
      expect(within(o, t.output, 0.1)).toBe(true);
    });
  }

  it("arxiv is cold: no block repeats", () => {
    expect(allBlocksDistinct(get("arxiv"))).toBe(true);
  });

  it("leval shares more than 80% of its prompt tokens as a prefix with an earlier request", () => {
    expect(sharedPrefixFraction(get("leval"))).toBeGreaterThan(0.8);
  });

  it("humaneval prompts share a short instruction prefix (2 blocks) and nothing else", () => {
    const w = get("humaneval");
    const { reused, leading } = reuse(w);
    expect(reused.slice(1).every((k) => k === 2)).toBe(true);
    expect(leading.slice(1).every((k) => k === 2)).toBe(true);
  });

  it("hybrid is equal thirds, interleaved, each type with its own shape", () => {
    const w = get("hybrid");
    const types = w.requests.map((r) => r.type);
    for (const t of ["arxiv", "leval", "humaneval"])
      expect(Math.abs(types.filter((x) => x === t).length - 2000 / 3)).toBeLessThan(1);
    let switches = 0;
    for (let i = 1; i < types.length; i++) if (types[i] !== types[i - 1]) switches++;
    expect(switches).toBeGreaterThan(1000); // random order: ~2/3 of neighbours differ
    const leval = { ...w, requests: w.requests.filter((r) => r.type === "leval") };
    expect(sharedPrefixFraction(leval)).toBeGreaterThan(0.8);
  });

  it("multiturn: WildChat's 2.54 turns per session, 296-token user turns, 441-token replies", () => {
    const w = get("multiturn");
    expect(w.requests.length).toBe(2000);
    expect(firstMalformed(w)).toBeUndefined();
    const sessions = new Set(w.requests.map((r) => r.session));
    const turnsPerSession = w.requests.length / sessions.size;
    const user = mean(w.requests.map((r) => r.promptTokens - r.contextTokens!));
    const reply = mean(w.requests.map((r) => r.outputTokens));
    console.log(
      `multiturn: ${sessions.size} sessions, ${turnsPerSession.toFixed(2)} turns each, user ${user.toFixed(0)}, ` +
        `reply ${reply.toFixed(0)}, prompt mean ${mean(w.requests.map((r) => r.promptTokens)).toFixed(0)}, measured rate ${w.rate.toFixed(2)}`,
    );
    expect(within(turnsPerSession, 2.54, 0.1)).toBe(true);
    expect(within(user, 296, 0.1)).toBe(true);
    expect(within(reply, 441, 0.1)).toBe(true);
  });

  it("multiturn: each later turn's prompt is the previous prompt + reply + new input, its blocks extending the chain", () => {
    const w = get("multiturn");
    const pairs = previousTurns(w);
    expect(pairs.length).toBeGreaterThan(1000);
    for (const [prev, r] of pairs) {
      expect(r.contextTokens).toBe(prev.promptTokens + prev.outputTokens);
      expect(r.promptTokens).toBeGreaterThan(r.contextTokens!);
      // sent no earlier than the previous turn could have finished (1 s to first token + 30 ms a token)
      expect(r.arrivalMs).toBeGreaterThanOrEqual(prev.arrivalMs + 1000 + 30 * prev.outputTokens);
    }
    for (const r of w.requests) if (r.turn === 1) expect(r.contextTokens).toBe(0);
    // sessions do not share content with each other
    const firsts = { ...w, requests: w.requests.filter((r) => r.turn === 1) };
    expect(allBlocksDistinct(firsts)).toBe(true);
  });

  it("is deterministic: same seed identical, another seed different", () => {
    for (const name of GENERATORS) {
      const a = generate(name, { seed: 7, requests: 300 }),
        b = generate(name, { seed: 7, requests: 300 });
      const c = generate(name, { seed: 8, requests: 300 });
      expect(sameWorkload(a, b)).toBe(true);
      expect(a.requests.map((r) => r.promptTokens)).not.toEqual(c.requests.map((r) => r.promptTokens));
      expect(a.requests.map((r) => r.arrivalMs)).not.toEqual(c.requests.map((r) => r.arrivalMs));
    }
  });

  it("takes the count and rate from the options; Poisson generators hit the rate exactly", () => {
    const w = generate("arxiv", { requests: 50, rate: 7 });
    expect(w.requests.length).toBe(50);
    expect(w.rate).toBeCloseTo(7, 9);
    expect(generate("hybrid").rate).toBeCloseTo(3, 9);
  });
});

describe("loadWorkload", () => {
  it("runs generators by name and loads files of each format by content", () => {
    expect(loadWorkload("leval", "auto", { requests: 10 }).requests.every((r) => r.type === "leval")).toBe(true);
    expect(loadWorkload(MOONCAKE, "auto", { requests: 100 }).requests.length).toBe(100);
    expect(loadWorkload(AZURE, "auto", { requests: 100 }).requests[0]!.type).toBe("azure");
    expect(loadWorkload(LENGTHS.sharegpt.file, "auto", { requests: 100 }).requests[0]!.type).toBe(
      "sharegpt_8k_filtered",
    );
    expect(loadWorkload(AZURE, "azure", { requests: 5 }).requests.length).toBe(5);
  });

  it("names the generators when the name is neither a generator nor a file", () => {
    expect(() => loadWorkload("hybird")).toThrow(WorkloadError);
    expect(() => loadWorkload("hybird")).toThrow(
      /"hybird": not a generator \(hybrid, arxiv, leval, humaneval, multiturn\) and no such file/,
    );
    expect(() => loadWorkload(join(tmp, "missing.jsonl"))).toThrow(/no such file/);
    expect(() => generate("nope" as "hybrid")).toThrow(/unknown generator "nope" \(generators: hybrid, arxiv/);
  });

  it("rejects a file of unknown format and bad options", () => {
    expect(() => loadWorkload(file("what.csv", "a,b\n1,2\n"))).toThrow(/cannot tell the workload format/);
    expect(() => generate("arxiv", { requests: 0 })).toThrow(/requests: must be an integer ≥ 1, got 0/);
    expect(() => generate("arxiv", { rate: -1 })).toThrow(/rate: must be a number > 0, got -1/);
    expect(() => generate("arxiv", { seed: 1.5 })).toThrow(/seed: must be an integer/);
  });
});

describe("browser-safe parsing", () => {
  it("names a workload after its file as node:path's basename without extension does", () => {
    const cases = [
      "a/b/trace.jsonl",
      "trace.jsonl",
      "dir/lengths_x.y.csv",
      ".hidden",
      "dir/.hidden",
      "file.",
      "...",
      "..a",
      "noext",
      "dir/sub/",
      "/abs/path/t.csv",
      "a.b/c",
      "",
    ];
    for (const f of cases) expect(workloadName(f), f).toBe(basename(f, extname(f)));
  });

  it("parses a file's text in the format told from its first line, as loadWorkload does", () => {
    const text = readFileSync(AZURE, "utf8");
    const parsed = parseWorkload(text, AZURE, "auto", { requests: 50 });
    expect(parsed).toEqual(loadWorkload(AZURE, "auto", { requests: 50 }));
    expect(() => parseWorkload("a,b\n1,2\n", "what.csv")).toThrow(/what\.csv: cannot tell the workload format/);
  });
});

describe("load", () => {
  it("parses trace, saturated, xS and a rate", () => {
    expect(parseLoad("trace")).toEqual({ kind: "trace" });
    expect(parseLoad("saturated")).toEqual({ kind: "saturated" });
    expect(parseLoad("x2")).toEqual({ kind: "scale", factor: 2 });
    expect(parseLoad("x0.5")).toEqual({ kind: "scale", factor: 0.5 });
    expect(parseLoad("12.5")).toEqual({ kind: "rate", rps: 12.5 });
    expect(parseLoad(" 3 ")).toEqual({ kind: "rate", rps: 3 });
  });

  for (const bad of ["", "x", "x0", "0", "-1", "abc", "2x", "1e999", "x-1", "Infinity", "0x10", "trace2"]) {
    it(`rejects ${JSON.stringify(bad)} and says what is accepted`, () => {
      expect(() => parseLoad(bad)).toThrow(WorkloadError);
      expect(() => parseLoad(bad)).toThrow(/expected "trace", "saturated", "xS" .* or a rate in requests\/s/);
    });
  }

  it("withLoad rescales arrivals and keeps ids, order and everything else", () => {
    const w = generate("humaneval", { requests: 200 });
    const before = w.requests.map((r) => r.arrivalMs);
    const x2 = withLoad(w, { kind: "scale", factor: 2 });
    expect(x2.rate).toBeCloseTo(2 * w.rate, 9);
    x2.requests.forEach((r, i) => {
      expect(r.arrivalMs).toBeCloseTo(before[i]! / 2, 9);
      expect({ ...r, arrivalMs: 0 }).toEqual({ ...w.requests[i]!, arrivalMs: 0 });
    });
    const r25 = withLoad(w, { kind: "rate", rps: 25 });
    expect(r25.rate).toBe(25);
    expect(((r25.requests.length - 1) * 1000) / r25.requests.at(-1)!.arrivalMs).toBeCloseTo(25, 9);
    expect(sameWorkload(withLoad(w, { kind: "trace" }), w)).toBe(true);
    expect(w.requests.map((r) => r.arrivalMs)).toEqual(before); // the input is untouched
    expect(x2.requests).not.toBe(w.requests);
  });

  it("withLoad refuses a rate for a workload without arrival spread, and bad factors", () => {
    const one = generate("arxiv", { requests: 1 });
    expect(one.rate).toBe(0);
    expect(() => withLoad(one, { kind: "rate", rps: 5 })).toThrow(/no arrival spread/);
    expect(() => withLoad(one, { kind: "scale", factor: 0 })).toThrow(WorkloadError);
  });
});

describe("malformed rows name file, line and field", () => {
  const cases: [string, string, RegExp][] = [];
  const mc = (name: string, text: string, re: RegExp) => cases.push([`mooncake: ${name}`, text, re]);
  const ok = '{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [0, 1]}';
  mc("bad JSON", `${ok}\n{"timestamp": 3,`, /bad\.jsonl:2: json: /);
  mc("not an object", `${ok}\n[1, 2]`, /:2: json: expected an object per line/);
  mc("missing timestamp", '{"input_length": 600, "output_length": 5, "hash_ids": [0, 1]}', /:1: timestamp: missing/);
  mc(
    "negative input_length",
    '{"timestamp": 0, "input_length": -600, "output_length": 5, "hash_ids": [0, 1]}',
    /:1: input_length: must be ≥ 1, got -600/,
  );
  mc(
    "non-integer output_length",
    '{"timestamp": 0, "input_length": 600, "output_length": 1.5, "hash_ids": [0, 1]}',
    /:1: output_length: not an integer: 1.5/,
  );
  mc(
    "string timestamp",
    '{"timestamp": "0", "input_length": 600, "output_length": 5, "hash_ids": [0, 1]}',
    /:1: timestamp: not a number: "0"/,
  );
  mc(
    "hash_ids too short, after a blank line",
    `${ok}\n\n{"timestamp": 0, "input_length": 1100, "output_length": 5, "hash_ids": [0, 1]}`,
    /:3: hash_ids: has 2 ids but input_length 1100 needs ceil\(1100\/512\) = 3/,
  );
  mc(
    "hash_ids not an array",
    '{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": 7}',
    /:1: hash_ids: not an array: 7/,
  );
  mc(
    "negative id",
    '{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [0, -1]}',
    /:1: hash_ids: id 1 is not an integer ≥ 0: -1/,
  );
  mc("missing hash_ids", '{"timestamp": 0, "input_length": 600, "output_length": 5}', /:1: hash_ids: missing/);

  for (const [name, text, re] of cases) {
    it(name, () => {
      const p = file("bad.jsonl", text);
      expect(() => readMooncake(p)).toThrow(WorkloadError);
      expect(() => readMooncake(p)).toThrow(re);
      expect(() => loadWorkload(p)).toThrow(re);
    });
  }

  const azureHeader = "TIMESTAMP,ContextTokens,GeneratedTokens";
  const az: [string, string, RegExp][] = [
    [
      "bad header",
      "TIME,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,1,1",
      /bad\.csv:1: header: missing column "TIMESTAMP"/,
    ],
    [
      "bad datetime",
      `${azureHeader}\r\n2023-11-16 18:15:46.68,1,1\r\n2023-13-16 18:15:47.00,1,1`,
      /:3: TIMESTAMP: not a datetime like 2023-11-16 18:15:46\.6805900: "2023-13-16 18:15:47\.00"/,
    ],
    ["bad day", `${azureHeader}\n2023-02-30 18:15:46,1,1`, /:2: TIMESTAMP: not a datetime/],
    ["bad number", `${azureHeader}\n2023-11-16 18:15:46.68,abc,1`, /:2: ContextTokens: not a number: "abc"/],
    ["zero output", `${azureHeader}\n2023-11-16 18:15:46.68,5,0`, /:2: GeneratedTokens: must be ≥ 1, got 0/],
    ["missing field", `${azureHeader}\n2023-11-16 18:15:46.68,5`, /:2: row: expected 3 fields, got 2/],
    ["empty cell", `${azureHeader}\n2023-11-16 18:15:46.68,,5`, /:2: ContextTokens: missing/],
  ];
  for (const [name, text, re] of az) {
    it(`azure: ${name}`, () => {
      const p = file("bad.csv", text);
      expect(() => readAzure(p)).toThrow(WorkloadError);
      expect(() => readAzure(p)).toThrow(re);
    });
  }

  const lenHeader = "num_prefill_tokens,num_decode_tokens,num_total_tokens,pd_ratio";
  const len: [string, string, RegExp][] = [
    ["missing column", "num_prefill_tokens,total\n1,2", /bad\.csv:1: header: missing column "num_decode_tokens"/],
    ["bad number", `${lenHeader}\n10,5,15,2.0\n10,5x,15,2.0`, /:3: num_decode_tokens: not a number: "5x"/],
    ["non-integer", `${lenHeader}\n10.5,5,15,2.0`, /:2: num_prefill_tokens: not an integer: 10.5/],
    [
      "inconsistent total",
      `${lenHeader}\n10,5,16,2.0`,
      /:2: num_total_tokens: 16 ≠ num_prefill_tokens \+ num_decode_tokens = 15/,
    ],
    ["bad ratio", `${lenHeader}\n10,5,15,two`, /:2: pd_ratio: not a number: "two"/],
  ];
  for (const [name, text, re] of len) {
    it(`lengths: ${name}`, () => {
      const p = file("bad.csv", text);
      expect(() => readLengths(p)).toThrow(WorkloadError);
      expect(() => readLengths(p)).toThrow(re);
    });
  }

  it("an empty file has no requests", () => {
    expect(() => readMooncake(file("empty.jsonl", "\n\n"))).toThrow(/empty\.jsonl: no requests/);
    expect(() => readAzure(file("empty.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n"))).toThrow(/no requests/);
  });
});
