// A workload shrunk to fit a small model's context (the tiny model real vLLM serves on this machine: 4,096 tokens),
// keeping its shape: every prompt scaled by one factor, outputs capped, and shared prefixes kept shared in proportion.
// Browser-safe.
//
// Prefixes: the new prompt's block j stands for the original block ⌊(j + 1) / f⌋ − 1 and takes its chained hash.
// Chained hashes name a whole prefix, so two requests share new block j exactly when they shared that original block:
// a prefix of p shared blocks becomes one of about f·p, the same share of each prompt as before.

import { quantile } from "./metrics.js";
import { SIM_BLOCK_TOKENS, type SimRequest, type Workload } from "./types.js";

export interface ContextFit {
  /** the engine's context (--max-model-len): prompt + output must fit it */
  contextTokens: number;
  /** every output capped at this many tokens */
  maxOutputTokens: number;
  /** the prompt length (quantile of the reference workloads' prompts) scaled to the longest prompt that fits; the
   * few longer prompts are truncated to it (default 0.95) */
  quantile?: number;
}

/** The longest prompt that fits beside the longest output. */
export const promptLimit = (fit: ContextFit): number => fit.contextTokens - fit.maxOutputTokens;

/**
 * The factor `fitToContext` scales prompts by, from the prompts of `reference` (the workloads one study draws from,
 * so its training and evaluation arrivals are scaled alike): at most 1.
 */
export function contextScale(reference: readonly Workload[], fit: ContextFit): number {
  const lengths = reference.flatMap((w) => w.requests.map((r) => r.promptTokens)).sort((a, b) => a - b);
  const at = quantile(lengths, fit.quantile ?? 0.95);
  return Number.isFinite(at) && at > promptLimit(fit) ? promptLimit(fit) / at : 1;
}

/** One request scaled by `f` (prompt, cached context and blocks) and capped to fit. */
function fitRequest(r: SimRequest, f: number, fit: ContextFit): SimRequest {
  const promptTokens = Math.max(1, Math.min(promptLimit(fit), Math.round(r.promptTokens * f)));
  const have = r.blocks.length / 2;
  const n = Math.floor(promptTokens / SIM_BLOCK_TOKENS);
  const blocks = new Uint32Array(2 * n);
  for (let j = 0; j < n; j++) {
    // bounded by have − 1: (j + 1) / f ≤ promptTokens / (16 f) ≤ r.promptTokens / 16 up to rounding
    const from = Math.min(have - 1, Math.max(0, Math.floor((j + 1) / f) - 1));
    blocks[2 * j] = r.blocks[2 * from]!;
    blocks[2 * j + 1] = r.blocks[2 * from + 1]!;
  }
  const out: SimRequest = {
    ...r,
    promptTokens,
    outputTokens: Math.max(1, Math.min(r.outputTokens, fit.maxOutputTokens)),
    blocks,
  };
  if (r.contextTokens !== undefined) out.contextTokens = Math.min(promptTokens, Math.round(r.contextTokens * f));
  return out;
}

/** The workload with every prompt scaled by `f` (from contextScale) and capped, and every output capped. */
export function fitToContext(w: Workload, f: number, fit: ContextFit): Workload {
  if (!(f > 0 && f <= 1)) throw new Error(`fitToContext: scale must be in (0, 1], got ${f}`);
  return {
    name: `${w.name} (fit to ${fit.contextTokens} tokens: prompts ×${f.toFixed(3)}, outputs ≤ ${fit.maxOutputTokens})`,
    requests: w.requests.map((r) => fitRequest(r, f, fit)),
    rate: w.rate,
  };
}
