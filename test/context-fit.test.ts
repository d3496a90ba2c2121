// The fidelity study's workloads and prompts: a workload fitted to a small context keeps shared prefixes shared in
// proportion, and the replayer's token prompts have the workload's exact lengths and share tokens where blocks do.
import { describe, expect, it } from "vitest";
import { contextScale, fitToContext, promptLimit } from "../src/sim/context-fit.js";
import { segmentBlocks } from "../src/sim/workload.js";
import type { SimRequest, Workload } from "../src/sim/types.js";
import { tokensFor } from "../src/serve/tune.js";

const FIT = { contextTokens: 4096, maxOutputTokens: 32 };

/** A request whose prompt is a shared system prompt of `shared` tokens, then `own` tokens of its own. */
function req(id: number, shared: number, own: number, outputTokens = 100): SimRequest {
  const promptTokens = shared + own;
  return {
    id,
    arrivalMs: id * 100,
    promptTokens,
    outputTokens,
    turn: 1,
    blocks: segmentBlocks(
      [
        { id: 7, tokens: shared },
        { id: 1000 + id, tokens: own },
      ],
      promptTokens,
    ),
  };
}

const common = (a: Uint32Array, b: Uint32Array): number => {
  let n = 0;
  while (2 * n < Math.min(a.length, b.length) && a[2 * n] === b[2 * n] && a[2 * n + 1] === b[2 * n + 1]) n++;
  return n;
};

describe("fitToContext", () => {
  const w: Workload = { name: "w", rate: 10, requests: [req(0, 16_000, 4_000), req(1, 16_000, 2_000), req(2, 0, 800)] };

  it("scales every prompt by one factor so the longest fits beside the longest output, and caps outputs", () => {
    const f = contextScale([w], { ...FIT, quantile: 1 });
    expect(f).toBeCloseTo(promptLimit(FIT) / 20_000, 9);
    const fitted = fitToContext(w, f, FIT);
    for (const [i, r] of fitted.requests.entries()) {
      expect(r.promptTokens + r.outputTokens).toBeLessThanOrEqual(FIT.contextTokens);
      expect(r.promptTokens).toBe(Math.round(w.requests[i]!.promptTokens * f));
      expect(r.outputTokens).toBe(32);
      expect(r.blocks.length).toBe(2 * Math.floor(r.promptTokens / 16));
    }
  });

  it("keeps a shared prefix shared, in proportion, and unshared blocks apart", () => {
    const f = contextScale([w], { ...FIT, quantile: 1 });
    const [a, b, c] = fitToContext(w, f, FIT).requests as [SimRequest, SimRequest, SimRequest];
    // 1,000 shared blocks of 16 tokens before; about f × 1,000 after
    expect(Math.abs(common(a.blocks, b.blocks) - f * 1000)).toBeLessThanOrEqual(1);
    expect(common(a.blocks, c.blocks)).toBe(0);
  });

  it("leaves a workload that fits as it is, outputs aside", () => {
    const small: Workload = { name: "s", rate: 1, requests: [req(0, 512, 256)] };
    const f = contextScale([small], FIT);
    expect(f).toBe(1);
    const [r] = fitToContext(small, f, FIT).requests as [SimRequest];
    expect(r.blocks).toEqual(small.requests[0]!.blocks);
  });
});

describe("tokensFor (the replayer's token prompts)", () => {
  it("gives exactly the prompt's length, shared tokens over shared blocks, and a salt makes another prompt", () => {
    const a = req(0, 512, 100);
    const b = req(1, 512, 37);
    const ta = tokensFor(a);
    const tb = tokensFor(b);
    expect(ta).toHaveLength(612);
    expect(tb).toHaveLength(549);
    expect(tb.slice(0, 512)).toEqual(ta.slice(0, 512));
    expect(tb[512]).not.toBe(ta[512]);
    expect(ta.every((t) => Number.isInteger(t) && t >= 10 && t < 8000)).toBe(true);
    const salted = tokensFor(a, 5);
    expect(salted).toHaveLength(612);
    expect(salted.slice(0, 16)).not.toEqual(ta.slice(0, 16));
    expect(tokensFor(b, 5).slice(0, 512)).toEqual(salted.slice(0, 512));
  });
});
