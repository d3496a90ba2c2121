// Our Dynamo rules against Dynamo's own code: the same generated requests (prompt length, the decode worker's
// cached blocks, the prefill worker's active tokens, the decode worker's projected blocks) routed by a Router on the
// core (dynamo-isl, dynamo-load) and decided by dynamo-kv-router 1.6.1's conditional-disagg policies through the
// Rust harness (bench/peers/dynamo). Same decision every time, except where our rule departs on purpose
// (docs/peers.md):
//   - cached tokens: we credit at most isl − 1 tokens in whole blocks (vLLM recomputes the last token), Dynamo the
//     whole overlap; on Dynamo's input computed our way the decisions are identical;
//   - the decode-busy guard: Dynamo's caller vetoes a bypass when the decode worker is busy; our rules have no veto.
import { describe, expect, it } from "vitest";
import { callPeer } from "../bench/peers/harness.js";
import { splitmix32 } from "../src/hashing/splitmix.js";
import type { Router } from "../src/router/router.js";
import { ruleTable } from "../src/table/rule-table.js";
import { routerOn } from "./helpers.js";

const BLOCK = 16;
const CASES = 1500;

interface Case {
  isl: number;
  /** blocks of the prompt the decode worker holds */
  cachedBlocks: number;
  activePrefill: number;
  capacity: number;
  busyThreshold: number;
  maxTokens: number;
  maxRatio: number;
  decode: { potential_decode_blocks: number; total_kv_blocks: number; threshold: number };
}

/**
 * Seeded cases: random ones, and one in five each on an edge: a short prompt the decode worker holds whole (where
 * the cached-token rules differ), eff_D at max_local_prefill_tokens ± 1 or eff_D / isl at the ratio exactly, and
 * the prefill worker's active tokens at the busy line ± 1.
 */
function cases(seed: number, n: number): Case[] {
  let s = seed >>> 0;
  const u = (): number => (s = splitmix32(s)) / 2 ** 32;
  const int = (lo: number, hi: number): number => lo + Math.floor(u() * (hi - lo + 1));
  return Array.from({ length: n }, () => {
    const edge = int(0, 4);
    const capacity = [2048, 8192, 16384][int(0, 2)]!;
    const busyThreshold = [0.5, 1, 1.5, 2][int(0, 3)]!;
    let isl = u() < 0.5 ? int(1, 4096) : int(1, 100_000);
    let cachedBlocks = int(0, Math.floor(isl / BLOCK));
    let maxTokens = u() < 0.5 ? 2048 : int(16, 8192);
    let maxRatio = u() < 0.5 ? 0.7 : Math.round(u() * 1000) / 1000;
    let activePrefill = int(0, 3 * capacity);
    if (edge === 1) {
      isl = BLOCK * int(1, 8);
      cachedBlocks = isl / BLOCK;
    } else if (edge === 2) {
      cachedBlocks = int(0, 200);
      const effD = maxTokens + int(-1, 1);
      isl = cachedBlocks * BLOCK + effD;
      if (u() < 0.5) [maxTokens, maxRatio] = [8192, effD / isl];
    } else if (edge === 3) activePrefill = busyThreshold * capacity + int(-1, 1);
    return {
      isl,
      cachedBlocks,
      activePrefill,
      capacity,
      busyThreshold,
      maxTokens,
      maxRatio,
      decode: { potential_decode_blocks: int(0, 2000), total_kv_blocks: 1000, threshold: 0.9 },
    };
  });
}

function router(engine: "wasm" | "reference" = "wasm"): Router {
  return routerOn(engine, ruleTable("always-remote"), {
    workers: [
      { id: "p", role: "prefill" },
      { id: "d", role: "decode" },
    ],
    blockSize: BLOCK,
  });
}

/** Our decision for each case under `table`: the bit (1 remote) and the decode-side cached tokens it used. */
function ours(r: Router, table: (c: Case) => ReturnType<typeof ruleTable>, all: Case[]) {
  return all.map((c, i) => {
    const blocks = Math.floor(c.isl / BLOCK);
    const hashes = Array.from({ length: blocks }, (_, b) => (BigInt(i + 1) << 32n) | BigInt(b));
    r.setTable(table(c));
    r.index.clear("d");
    if (c.cachedBlocks > 0) r.index.store("d", hashes.slice(0, c.cachedBlocks));
    r.setLoad("p", { activePrefillTokens: c.activePrefill });
    const d = r.route({ blockHashes: hashes, promptTokens: c.isl });
    return { bit: d.bit, cachedTokens: d.features.isl - d.features.effD, matched: d.matchedBlocks.decode };
  });
}

interface DynamoAnswer {
  bypass: boolean;
  bypass_guarded: boolean;
}

function dynamo(policy: string, all: Case[], cachedTokens: (c: Case, i: number) => number): DynamoAnswer[] {
  const request = {
    op: "disagg",
    cases: all.map((c, i) => ({
      policy,
      prompt_tokens: c.isl,
      cached_tokens: cachedTokens(c, i),
      eff_isl_threshold: c.maxTokens,
      eff_isl_ratio_threshold: c.maxRatio,
      prefill: {
        active_prefill_tokens: c.activePrefill,
        prefill_token_capacity: c.capacity,
        threshold: c.busyThreshold,
      },
      decode: c.decode,
    })),
  };
  return callPeer<{ answers: DynamoAnswer[] }>("dynamo", request).answers;
}

const bitOf = (bypass: boolean): number => (bypass ? 0 : 1);
const islTable = (c: Case) =>
  ruleTable("dynamo-isl", { max_local_prefill_tokens: c.maxTokens, max_local_prefill_ratio: c.maxRatio });
const loadTable = (c: Case) =>
  ruleTable("dynamo-load", { prefill_busy_threshold: c.busyThreshold, max_num_batched_tokens: c.capacity });

describe("our Dynamo rules against dynamo-kv-router 1.6.1's conditional-disagg policies", () => {
  const all = cases(26, CASES);
  const r = router();
  const isl = ours(r, islTable, all);
  const load = ours(r, loadTable, all);

  it("the TypeScript reference (src/reference/policy.ts) decides as the core on every case", () => {
    const ref = router("reference");
    expect(ours(ref, islTable, all)).toEqual(isl);
    expect(ours(ref, loadTable, all)).toEqual(load);
  });

  /** Dynamo's `policy` on the cached tokens we credited gives our bit on every case, and both bits occur. */
  function sameEverywhere(policy: string, ourBits: ReturnType<typeof ours>): void {
    const theirs = dynamo(policy, all, (_, i) => ourBits[i]!.cachedTokens);
    expect(all.filter((_, i) => ourBits[i]!.bit !== bitOf(theirs[i]!.bypass))).toEqual([]);
    expect(new Set(ourBits.map((o) => o.bit))).toEqual(new Set([0, 1]));
  }

  it("dynamo-isl decides as isl_bounding on every case, given the decode-side cached tokens we credit", () => {
    sameEverywhere("isl_bounding", isl);
  });

  it("dynamo-isl departs from isl_bounding on Dynamo's whole-overlap credit only where vLLM recomputes the last token", () => {
    const theirs = dynamo("isl_bounding", all, (_, i) => isl[i]!.matched * BLOCK);
    const differ = all.flatMap((c, i) => (isl[i]!.bit !== bitOf(theirs[i]!.bypass) ? [{ c, i }] : []));
    expect(differ.length).toBeGreaterThan(0);
    for (const { c, i } of differ) {
      // the whole prompt is cached: Dynamo sees eff_isl 0 (bypass), we a last block to compute
      expect(isl[i]!.matched * BLOCK, `case ${i}`).toBe(c.isl);
      expect(isl[i]!.cachedTokens, `case ${i}`).toBe(c.isl - BLOCK);
      expect(theirs[i]!.bypass, `case ${i}`).toBe(true);
    }
  });

  it("dynamo-load decides as prefill_load on every case", () => {
    sameEverywhere("prefill_load", load);
  });

  it("isl_or_load is local exactly when dynamo-isl or dynamo-load is", () => {
    const theirs = dynamo("isl_or_load", all, (_, i) => isl[i]!.cachedTokens);
    const composed = all.map((_, i) => (isl[i]!.bit === 0 || load[i]!.bit === 0 ? 0 : 1));
    expect(theirs.map((a) => bitOf(a.bypass))).toEqual(composed);
  });

  it("Dynamo's decode-busy guard is the only difference from its guarded decision: we have no veto", () => {
    const theirs = dynamo("isl_bounding", all, (_, i) => isl[i]!.cachedTokens);
    const busy = (c: Case) => c.decode.potential_decode_blocks > c.decode.threshold * c.decode.total_kv_blocks;
    all.forEach((c, i) => {
      expect(theirs[i]!.bypass_guarded, `case ${i}`).toBe(theirs[i]!.bypass && !busy(c));
    });
    expect(all.some((c, i) => busy(c) && isl[i]!.bit === 0)).toBe(true);
  });
});

describe("the peers' harnesses refuse a bad request, naming what is wrong", () => {
  it("dynamo: an unknown op and a policy it does not have", () => {
    expect(() => callPeer("dynamo", { op: "route" })).toThrow(/request\.op: expected disagg, hash or bench/);
    expect(() =>
      callPeer("dynamo", { op: "disagg", cases: [{ policy: "legacy", prompt_tokens: 1, cached_tokens: 0 }] }),
    ).toThrow(/request\.cases\[0\]\.policy: expected isl_bounding, prefill_load or isl_or_load/);
  });

  it("llm-d: an unknown op and a block size of 0", () => {
    expect(() => callPeer("llmd", { op: "route" })).toThrow(/request\.op: expected hash, events or bench/);
    expect(() => callPeer("llmd", { op: "hash", cases: [{ tokens: [], block_size: 0 }] })).toThrow(
      /request\.cases\[0\]\.block_size: must be positive/,
    );
  });
});
