// The explain view's computation: one request described by its prompt length, the tokens of it cached on the prefill
// worker and on the decode worker, and its predicted output length, routed by the core (router.explain) on a cluster
// of one prefill and one decode worker whose caches hold exactly those prefixes. Browser-safe: the explain worker
// runs it, and test/explorer-explain.test.ts checks the page's answer against router.explain in Node.

import type { Router } from "../../../src/router/router.js";
import type { Explanation, WorkerSpec } from "../../../src/router/types.js";

export interface ExplainInputs {
  promptTokens: number;
  /** prompt tokens cached on the prefill worker, and on the decode worker (counted in whole blocks) */
  cachedP: number;
  cachedD: number;
  oslHat: number;
}

/** The cluster the explain view routes on: one worker per role, so eff_P and eff_D are those workers' caches. */
export const EXPLAIN_WORKERS: readonly WorkerSpec[] = [
  { id: "P0", role: "prefill" },
  { id: "D0", role: "decode" },
];
/** The core's default block size: cached tokens count in whole blocks of it. */
export const EXPLAIN_BLOCK_TOKENS = 16;
export const MAX_EXPLAIN_PROMPT = 1_048_576;

/** The inputs, checked: each an integer, the prompt 1–1,048,576 tokens, the cached tokens at most the prompt. */
export function checkExplainInputs(x: Record<keyof ExplainInputs, unknown>): ExplainInputs {
  const int = (name: string, v: unknown, min: number, max: number): number => {
    if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > max)
      throw new RangeError(`${name}: expected an integer from ${min} to ${max}, got ${String(v)}`);
    return v;
  };
  const promptTokens = int("prompt length", x.promptTokens, 1, MAX_EXPLAIN_PROMPT);
  return {
    promptTokens,
    cachedP: int("cached tokens on P", x.cachedP, 0, promptTokens),
    cachedD: int("cached tokens on D", x.cachedD, 0, promptTokens),
    oslHat: int("predicted output length", x.oslHat, 0, MAX_EXPLAIN_PROMPT),
  };
}

/** A prompt of n token ids, the same for every call (so that a cached prefix is a prefix of it). */
export function explainPrompt(n: number): Uint32Array {
  const tokens = new Uint32Array(n);
  for (let i = 0; i < n; i++) tokens[i] = (i * 7919) % 50_000;
  return tokens;
}

/** router.explain for these inputs, on a router built with EXPLAIN_WORKERS; the index is left empty afterwards. */
export function explainRequest(router: Router, inputs: ExplainInputs): Explanation {
  const x = checkExplainInputs(inputs);
  const tokens = explainPrompt(x.promptTokens);
  router.index.clear();
  try {
    if (x.cachedP > 0) router.index.store("P0", router.hash({ tokens: tokens.subarray(0, x.cachedP) }));
    if (x.cachedD > 0) router.index.store("D0", router.hash({ tokens: tokens.subarray(0, x.cachedD) }));
    return router.explain({ tokens, oslHat: x.oslHat });
  } finally {
    router.index.clear();
  }
}
