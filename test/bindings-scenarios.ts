// Seeded pieces of the cross-language scenarios test/bindings-agree.test.ts replays through Node, Python and Go: the
// random source and draws, rule parameters, and for the explain sentences, guarded learned tables, scenarios that
// explain on one decode worker, and what a sentence says (to check the scenarios cover every reason and bit).

import { encodeTable } from "../src/table/codec.js";
import type { FallbackKind, Table } from "../src/table/table.js";
import { kmeansTable } from "./helpers.js";

export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export type Rand = () => number;
export const int = (r: Rand, lo: number, hi: number): number => lo + Math.floor(r() * (hi - lo + 1));
export const pick = <T>(r: Rand, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;

export const FEATURES = ["isl", "eff_P", "eff_D", "osl_hat"] as const;

/** Random parameters for every rule kind but ppd (all drawn, whichever is used, so the draws stay in step). */
export function ruleParams(r: Rand): Record<FallbackKind, Record<string, number>> {
  return {
    "dynamo-isl": { max_local_prefill_tokens: int(r, 0, 4000), max_local_prefill_ratio: r() },
    "dynamo-load": { prefill_busy_threshold: 0.1 + r(), max_num_batched_tokens: int(r, 100, 8000) },
    "dynamo-legacy": { max_local_prefill_length: int(r, 0, 1500), max_prefill_queue_size: int(r, 1, 5) },
    trtllm: { max_local_prefill_length: int(r, 0, 2000) },
    "llm-d": { non_cached_tokens: int(r, 0, 1000), prompt_tokens: int(r, 0, 1000) },
    "always-local": {},
    "always-remote": {},
    "dynamo-isl-or-load": {
      max_local_prefill_tokens: int(r, 0, 4000),
      max_local_prefill_ratio: r(),
      prefill_busy_tokens: int(r, 1, 8000),
      decode_busy_tokens: r() < 0.3 ? 0 : int(r, 1, 20000),
    },
  };
}

/** A learned table guarded by `fallback` (random parameters): clusters valued `rule`, out-of-distribution and load
 *  bounds, so its requests meet every reason a learned table gives. */
export function guardedTable(r: Rand, kind: "kmeans" | "gmm", fallback: FallbackKind): Uint8Array {
  const k = int(r, 3, 6);
  const d = FEATURES.length;
  const centroids = Array.from({ length: k }, () => Array.from({ length: d }, () => r() * 6 - 3));
  const bits = Array.from({ length: k }, (_, i) => (i < 3 ? [2, 0, 1][i]! : int(r, 0, 1)));
  const extra: Partial<Table> = {
    version: 3,
    scaler: { mean: Array.from({ length: d }, () => 3 + r() * 4), std: Array.from({ length: d }, () => 0.5 + r() * 2) },
    fallback: { kind: fallback, params: ruleParams(r)[fallback] },
    ood_bound: Array.from({ length: k }, () => (kind === "kmeans" ? int(r, 4, 60) : -int(r, 4, 40))),
    load_bound: {
      prefill: Array.from({ length: k }, () => (r() < 0.1 ? 0 : int(r, 0, 6000))),
      decode: Array.from({ length: k }, () => (r() < 0.1 ? 0 : int(r, 0, 8000))),
    },
  };
  if (kind === "gmm") {
    extra.kind = "gmm";
    extra.weights = Array.from({ length: k }, () => 1 / k);
    extra.variances = Array.from({ length: k }, () => Array.from({ length: d }, () => 0.2 + r() * 2));
  }
  return encodeTable(kmeansTable(centroids, bits, extra));
}

/** A scenario for explain: one decode worker (whose load always counts), a prefill worker in three of four, and
 *  explained requests between index events, loads and signals. */
export function explainScenario(r: Rand, table: Uint8Array): Record<string, unknown> {
  const workers = [{ id: "d0", role: "decode", capacity_blocks: 400 }];
  if (r() < 0.75) workers.push({ id: "p0", role: "prefill", capacity_blocks: 400 });
  const base = Array.from({ length: int(r, 0, 3000) }, () => int(r, 0, 152063));
  const prompts = Array.from({ length: 4 }, () => ({
    tokens: [
      ...base.slice(0, int(r, 0, base.length)),
      ...Array.from({ length: int(r, 0, 400) }, () => int(r, 0, 9999)),
    ],
  }));
  const steps: Record<string, unknown>[] = [];
  for (let i = 0; i < 40; i++) {
    const op = pick(r, ["store", "load", "load", "signals", "explain", "explain", "explain", "explain"] as const);
    const worker = pick(r, workers).id;
    if (op === "store") steps.push({ op, worker, prompt: int(r, 0, 3), blocks: int(r, 0, 200) });
    else if (op === "load") steps.push({ op, worker, prefill: int(r, 0, 4000), decode: int(r, 0, 4000) });
    else if (op === "signals") steps.push({ op, prefill_queue: int(r, 0, 3), qps: r() * 20 });
    else {
      const context_tokens = r() < 0.5 ? -1 : int(r, 0, 3000);
      steps.push({
        op,
        prompt: int(r, 0, 3),
        mode: "prompt",
        turn: int(r, 1, 3),
        context_tokens,
        prompt_tokens: 0,
        osl_hat: int(r, 0, 2000),
      });
    }
  }
  return {
    table: Buffer.from(table).toString("base64"),
    workers,
    block_size: 16,
    model: "",
    salt: "",
    record: false,
    load_scale: 0,
    prompts,
    steps,
  };
}

/** What a sentence says: its reason (by its words), the bit it gives and the fallback rule it names. */
export function saysOf(why: string): string {
  const reason = why.startsWith("the policy said remote")
    ? "no-prefill-worker"
    : why.startsWith("PPD: turn 1")
      ? "first-turn"
      : why.startsWith("nearest ")
        ? "cluster"
        : / is out of distribution /.test(why)
          ? "out-of-distribution"
          : / is beyond the load /.test(why)
            ? "load-out-of-range"
            : /^cluster \d+ → rule/.test(why)
              ? "rule-fallback"
              : "rule";
  const ruled = / → rule → (local|remote) because .* \(([a-z-]+)\): /.exec(why);
  return ruled ? `${reason} ${ruled[2]} ${ruled[1]}` : `${reason} ${/(local|remote) prefill$/.exec(why)?.[1]}`;
}
