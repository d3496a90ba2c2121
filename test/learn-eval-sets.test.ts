// The evaluation sets a study cell averages over (src/learn/eval-sets.ts): disjoint draws for a generator, the same
// requests with other arrivals for a lengths file, one set for a trace, and figures averaged policy by policy.
import { describe, expect, it } from "vitest";
import { evaluationSets, meanOutcome } from "../src/learn/eval-sets.js";
import { workloadParts, type JobOptions } from "../src/learn/job.js";
import { packageFile } from "../src/core/package-root.js";
import type { PolicyOutcome } from "../src/report/eval-output.js";

const job = (workload: string, requests: number): JobOptions => ({
  workload,
  format: "auto",
  split: "2P2D",
  slo: "2000,50",
  seed: 1,
  requests,
});

describe("evaluation sets", () => {
  it("draws a generator's extra sets with seeds past training, evaluation and held-out", () => {
    const j = job("hybrid", 40);
    const first = workloadParts(j).eval;
    const sets = evaluationSets(j, first, 3);
    expect(sets).toHaveLength(3);
    expect(sets[0]).toBe(first);
    // seed 1 trains, 2 evaluates, 3 is the guarded search's held-out draw: the extra sets are seeds 4 and 5
    const drawn = (seed: number) => workloadParts({ ...j, seed: seed - 1 }).eval;
    expect(sets[1]!.requests.map((r) => r.promptTokens)).toEqual(drawn(4).requests.map((r) => r.promptTokens));
    expect(sets[2]!.requests.map((r) => r.promptTokens)).toEqual(drawn(5).requests.map((r) => r.promptTokens));
    const heldOut = drawn(3).requests.map((r) => r.arrivalMs);
    for (const s of sets) expect(s.requests.map((r) => r.arrivalMs)).not.toEqual(heldOut);
  });

  it("gives a lengths file and a quantised trace other arrivals for their evaluation half, a timed trace one set", () => {
    const lengths = job(packageFile("data/lengths/lengths_sharegpt_8k_filtered_stats_llama2_tokenizer.csv"), 200);
    const sets = evaluationSets(lengths, workloadParts(lengths).eval, 2);
    expect(sets).toHaveLength(2);
    expect(sets[1]!.requests.map((r) => r.arrivalMs)).not.toEqual(sets[0]!.requests.map((r) => r.arrivalMs));
    // Mooncake's timestamps are 3 s buckets, each bucket's arrivals spread by the seed
    const mooncake = job(packageFile("data/traces/mooncake_conversation_dev.jsonl"), 200);
    expect(evaluationSets(mooncake, workloadParts(mooncake).eval, 3)).toHaveLength(3);
    // Azure's are its own, to the millisecond: the seed draws nothing
    const azure = job(packageFile("data/traces/azure2023_conv.csv"), 200);
    expect(evaluationSets(azure, workloadParts(azure).eval, 3)).toHaveLength(1);
  });

  it("rejects a count that is not a positive integer", () => {
    const j = job("hybrid", 20);
    expect(() => evaluationSets(j, workloadParts(j).eval, 0)).toThrow(/integer ≥ 1, got 0/);
  });

  it("averages each figure over the runs", () => {
    const run = (att: number, p90: number): PolicyOutcome => ({
      slo_attainment: att,
      ttft_ms: { p50: p90 / 2, p90, p99: 2 * p90 },
      tpot_ms: { p50: 1, p90: p90 / 100, p99: 3 },
      throughput_tokens_per_s: 10,
      local_fraction: att / 2,
      failed: 1,
    });
    const m = meanOutcome([run(0.9, 1000), run(0.7, 3000)]);
    expect(m.slo_attainment).toBeCloseTo(0.8, 12);
    expect(m.ttft_ms).toEqual({ p50: 1000, p90: 2000, p99: 4000 });
    expect(m.tpot_ms.p90).toBe(20);
    expect(m.failed).toBe(2);
    const one = run(1, 1);
    expect(meanOutcome([one])).toBe(one);
  });
});
