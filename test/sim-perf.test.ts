// Calibration of the simulator's step-time and KV-transfer model (src/sim/step-time.ts, kv-transfer.ts, the presets
// in model-presets.ts) against the points of shared/docs/perf-model.md and the measured profiles in data/perf
// (data/README.md), plus the closed forms the simulator relies on and cluster-file validation (cluster-file.ts).
// docs/simulator-calibration.md states the model, the tolerances and the measured errors;
// `SIM_PERF_REPORT=1 npx vitest run test/sim-perf.test.ts` prints them.

import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import fc from "fast-check";
import { afterAll, describe, expect, it } from "vitest";
import { ClusterFileError, parseClusterFile } from "../src/sim/cluster-file.js";
import { DEFAULT_TRANSFER, LINKS, kvTransferMs, resolveLink, type LinkPreset } from "../src/sim/kv-transfer.js";
import {
  PRESETS,
  kvCapacityBlocks,
  kvCapacityTokens,
  resolvePreset,
  type ModelPreset,
} from "../src/sim/model-presets.js";
import { attnPairs, decodeRunMs, decodeStepsWithin, stepTimeMs } from "../src/sim/step-time.js";

const PERF_DIR = join(dirname(fileURLToPath(import.meta.url)), "..", "data", "perf");
const H8 = PRESETS["h100-8b"];
const H70 = PRESETS["h100-70b"];
const H20 = PRESETS["h20-72b"];

// ---- helpers ----

const report: string[] = [];
afterAll(() => {
  if (process.env.SIM_PERF_REPORT) console.log(`\nsim-perf calibration\n${report.join("\n")}`);
});

/** A prefill step of one cold prompt of `tokens` tokens. */
const prefillMs = (p: ModelPreset, tokens: number): number => stepTimeMs(p, 0, 0, tokens, attnPairs(tokens, 0));
/** A pure-decode step: `seqs` sequences of `ctxEach` context tokens each. */
const decodeMs = (p: ModelPreset, seqs: number, ctxEach: number): number => stepTimeMs(p, seqs, seqs * ctxEach, 0, 0);
/** The linear and all-reduce terms of a step of T tokens: what Vidur's linear-layer profile measures. */
const linearAllReduceMs = (p: ModelPreset, t: number): number => stepTimeMs(p, 0, 0, t, 0) - p.tFixMs;

const rel = (model: number, ref: number): number => model / ref - 1;
const pct = (x: number): string => `${x >= 0 ? "+" : ""}${(x * 100).toFixed(1)}%`;

interface ErrorStats {
  n: number;
  medianAbs: number;
  maxAbs: number;
  medianSigned: number;
  worstAt: number;
}
/** Median and max relative error; `at` labels each error (token count) so the worst one can be reported. */
function errorStats(errors: readonly number[], at: readonly number[]): ErrorStats {
  if (errors.length === 0) throw new Error("no rows to compare");
  const abs = errors.map(Math.abs);
  const median = (xs: number[]): number => {
    const s = [...xs].sort((a, b) => a - b);
    const m = s.length >> 1;
    return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
  };
  let worst = 0;
  abs.forEach((e, i) => {
    if (e > abs[worst]!) worst = i;
  });
  return {
    n: errors.length,
    medianAbs: median(abs),
    maxAbs: abs[worst]!,
    medianSigned: median([...errors]),
    worstAt: at[worst]!,
  };
}
const fmt = (s: ErrorStats): string =>
  `n=${s.n} median |err| ${pct(s.medianAbs)} (signed ${pct(s.medianSigned)}), max |err| ${pct(s.maxAbs)} at ${s.worstAt} tokens`;

/** A CSV of numbers and names from data/perf as rows of column → value. */
function readCsv(file: string): Record<string, string>[] {
  const path = join(PERF_DIR, file);
  if (!existsSync(path)) throw new Error(`calibration data missing: ${path} (see data/README.md)`);
  const [header, ...lines] = readFileSync(path, "utf8").trim().split(/\r?\n/);
  const cols = header!.split(",");
  return lines.map((line) => {
    const cells = line.split(",");
    return Object.fromEntries(cols.map((c, i) => [c, cells[i] ?? ""]));
  });
}
const num = (row: Record<string, string>, col: string): number => {
  const v = Number(row[col]);
  if (row[col] === undefined || row[col] === "" || !Number.isFinite(v)) throw new Error(`bad ${col}: ${row[col]}`);
  return v;
};

// Linear-layer parameters (embedding and lm_head excluded), from the models' configs:
// Llama-2-7b: 32 × (4·4096² + 3·4096·11008); Llama-3.1-8B: 32 × (2·4096² + 2·4096·1024 + 3·4096·14336).
// Llama-2-70b and Llama-3.1-70B have the same linear layers (80 layers, 8192 hidden, GQA 8, 28672 MLP).
const LINEAR_PARAMS_LLAMA2_7B = 32 * (4 * 4096 ** 2 + 3 * 4096 * 11008);
const LINEAR_PARAMS_LLAMA31_8B = 32 * (2 * 4096 ** 2 + 2 * 4096 * 1024 + 3 * 4096 * 14336);
const SCALE_7B_TO_8B = LINEAR_PARAMS_LLAMA31_8B / LINEAR_PARAMS_LLAMA2_7B; // 1.078

// ---- 1. the table of shared/docs/perf-model.md ----

describe("perf-model.md: what the model predicts, and what it must match", () => {
  // The model column within 2% (the table rounds); measured references of current stacks (Vidur) within ±25%;
  // older or eager stacks are sanity bounds: the model must be faster, by 10–35% for LLMServingSim (eager, ~25%
  // slower) and 15–50% for Splitwise (older stack, 30–50% slower).
  const MODEL_TOL = 0.02;
  const VIDUR_TOL = 0.25;
  const within = (model: number, ref: number, tol: number): void => {
    expect(Math.abs(rel(model, ref))).toBeLessThanOrEqual(tol);
  };
  const fasterBy = (model: number, ref: number, lo: number, hi: number): void => {
    expect(1 - model / ref).toBeGreaterThanOrEqual(lo);
    expect(1 - model / ref).toBeLessThanOrEqual(hi);
  };
  const LLMSS = [0.1, 0.35] as const;
  const SPLITWISE = [0.15, 0.5] as const;

  it("8B H100, prefill 2,048 tokens: 51 ms; Vidur ≈48 ±25%; faster than LLMServingSim eager 65", () => {
    const t = prefillMs(H8, 2048);
    within(t, 51, MODEL_TOL);
    within(t, 48, VIDUR_TOL);
    fasterBy(t, 65, ...LLMSS);
    report.push(`8B prefill 2048: ${t.toFixed(2)} ms (Vidur ≈48 ${pct(rel(t, 48))}, LLMSS 65 ${pct(rel(t, 65))})`);
  });

  it("8B H100, decode batch 1: 6.6 ms; Vidur 5.6 + lm_head ±25%; faster than LLMServingSim 8.2", () => {
    const t = decodeMs(H8, 1, 0);
    // lm_head of Llama-3.1-8B: 128,256 × 4096 BF16 weights = 1.05 GB streamed at 0.8 × 3.35 TB/s ≈ 0.39 ms.
    const vidur = 5.6 + (128_256 * 4096 * 2) / (0.8 * 3.35e9);
    within(t, 6.6, MODEL_TOL);
    within(t, vidur, VIDUR_TOL);
    fasterBy(t, 8.2, ...LLMSS);
    report.push(
      `8B decode b1: ${t.toFixed(2)} ms (Vidur ${vidur.toFixed(2)} ${pct(rel(t, vidur))}, LLMSS 8.2 ${pct(rel(t, 8.2))})`,
    );
  });

  it("70B TP4 H100, prefill 2,048 / 4,096: 147 / 298 ms; Vidur ≈145 / ≈291 ±25%; faster than Splitwise 201 / 464", () => {
    const t2 = prefillMs(H70, 2048);
    const t4 = prefillMs(H70, 4096);
    within(t2, 147, MODEL_TOL);
    within(t4, 298, MODEL_TOL);
    within(t2, 145, VIDUR_TOL);
    within(t4, 291, VIDUR_TOL);
    fasterBy(t2, 201, ...SPLITWISE);
    fasterBy(t4, 464, ...SPLITWISE);
    report.push(
      `70B prefill 2048/4096: ${t2.toFixed(1)} / ${t4.toFixed(1)} ms (Vidur ${pct(rel(t2, 145))} / ${pct(rel(t4, 291))}, ` +
        `Splitwise ${pct(rel(t2, 201))} / ${pct(rel(t4, 464))})`,
    );
  });

  it("70B TP4 H100, decode batch 1: 19.0 ms; Vidur 20.4 ±25%; faster than LLMServingSim 25.5 and Splitwise 29.4", () => {
    const t = decodeMs(H70, 1, 0);
    within(t, 19.0, MODEL_TOL);
    within(t, 20.4, VIDUR_TOL);
    fasterBy(t, 25.5, ...LLMSS);
    fasterBy(t, 29.4, ...SPLITWISE);
    report.push(
      `70B decode b1: ${t.toFixed(2)} ms (Vidur ${pct(rel(t, 20.4))}, LLMSS ${pct(rel(t, 25.5))}, Splitwise ${pct(rel(t, 29.4))})`,
    );
  });

  it("8B H100, decode batch 64 at 512 / 2k / 8k context: 8.2 / 13.0 / 32.2 ms", () => {
    const ts = [512, 2048, 8192].map((ctx) => decodeMs(H8, 64, ctx));
    [8.2, 13.0, 32.2].forEach((want, i) => within(ts[i]!, want, MODEL_TOL));
    report.push(`8B decode b64 at 512/2k/8k: ${ts.map((t) => t.toFixed(2)).join(" / ")} ms`);
  });

  it("interference, 8B H100, 200 decodes at 2.1k: a cold 1,024-token prefill +85%, a 128-token append on 2,048 cached +9%", () => {
    const base = decodeMs(H8, 200, 2100);
    const cold = stepTimeMs(H8, 200, 200 * 2100, 1024, attnPairs(1024, 0)) / base - 1;
    const append = stepTimeMs(H8, 200, 200 * 2100, 128, attnPairs(128, 2048)) / base - 1;
    // The table rounds to whole percent: within 1 percentage point.
    expect(Math.abs(cold - 0.85)).toBeLessThanOrEqual(0.01);
    expect(Math.abs(append - 0.09)).toBeLessThanOrEqual(0.01);
    // PPD: append-prefill costs an order of magnitude less than a full prefill. Direction and size, not the exact pair.
    expect(cold).toBeGreaterThanOrEqual(5 * append);
    report.push(
      `interference: base ${base.toFixed(2)} ms, cold 1024 ${pct(cold)}, append 128 on 2048 ${pct(append)}, ratio ${(cold / append).toFixed(1)}×`,
    );
  });

  it("H20 turns compute-bound above ≈30 decodes; H100 8B / 70B above ≈246 / ≈232", () => {
    expect(H20.weightStreamMs / H20.kLinMs).toBeCloseTo(29.1, 1);
    expect(H8.weightStreamMs / H8.kLinMs).toBeCloseTo(245.6, 1);
    expect(H70.weightStreamMs / H70.kLinMs).toBeCloseTo(232.2, 1);
  });

  it("TP4 all-reduce: 26.3 ms at 2,048 tokens against Vidur's h100_dgx 26.7 (±5%)", () => {
    const ar = H70.cArMs + H70.kArMs * 2048;
    within(ar, 26.7, 0.05);
  });
});

// ---- 2. measured profiles (data/perf) ----

describe("calibration against data/perf", () => {
  const vidur = readCsv("derived_vidur_h100_linear_layers_7b_tp1_70b_tp4.csv");
  const vidurRows = (model: string, tp: number) =>
    vidur.filter((r) => r.model === model && r.device === "h100" && num(r, "tp") === tp);
  const llmss8 = readCsv("derived_llmss_h100_Llama-3.1-8B_tp1_model_totals.csv");
  const llmss70 = readCsv("derived_llmss_h100_Llama-3.1-70B_tp4_model_totals_no_allreduce.csv");
  const vidur70 = vidurRows("Llama-2-70b", 4);
  const allReduce70 = new Map(vidur70.map((r) => [num(r, "tokens"), num(r, "allreduce_ms_h100_dgx")]));
  /** Vidur's TP4 all-reduce at `tokens`, interpolated linearly between its profiled token counts. */
  const allReduceAt = (tokens: number): number => {
    const xs = [...allReduce70.keys()].sort((a, b) => a - b);
    const hi = xs.findIndex((x) => x >= tokens);
    if (hi < 0) throw new Error(`no all-reduce profile at ${tokens} tokens`);
    if (xs[hi] === tokens || hi === 0) return allReduce70.get(xs[hi]!)!;
    const x0 = xs[hi - 1]!,
      x1 = xs[hi]!;
    return allReduce70.get(x0)! + ((tokens - x0) / (x1 - x0)) * (allReduce70.get(x1)! - allReduce70.get(x0)!);
  };

  /** Errors over rows, overall and by regime: weight-bound (T ≤ 64), the roofline corner, compute-bound (T ≥ 512). */
  function regimes(rows: { tokens: number; err: number }[]): {
    all: ErrorStats;
    low: ErrorStats;
    corner: ErrorStats;
    high: ErrorStats;
  } {
    const pick = (f: (t: number) => boolean): ErrorStats => {
      const sel = rows.filter((r) => f(r.tokens));
      return errorStats(
        sel.map((r) => r.err),
        sel.map((r) => r.tokens),
      );
    };
    return {
      all: pick(() => true),
      low: pick((t) => t <= 64),
      corner: pick((t) => t > 64 && t < 512),
      high: pick((t) => t >= 512),
    };
  }
  const logRegimes = (label: string, s: ReturnType<typeof regimes>): void => {
    report.push(
      `${label}\n  all: ${fmt(s.all)}\n  T≤64: ${fmt(s.low)}\n  64<T<512: ${fmt(s.corner)}\n  T≥512: ${fmt(s.high)}`,
    );
  };

  it("has the expected rows: Vidur H100 Llama-2-7b TP1 and Llama-2-70b TP4 (1…4096 tokens), LLMServingSim 8B / 70B (1…2048)", () => {
    expect(vidurRows("Llama-2-7b", 1).length).toBe(259);
    expect(vidur70.length).toBe(259);
    expect(llmss8.length).toBe(2048);
    expect(llmss70.length).toBe(2048);
    expect(Object.keys(llmss8[0]!)).toEqual([
      "tokens",
      "linear_ms",
      "attn_causal_ms",
      "emb_norm_lmhead_ms",
      "total_ms",
    ]);
  });

  // Tolerances: median ≤ 10% over all rows and ≤ 5% in the compute-bound regime (T ≥ 512); every row within 45%. The
  // sharp max(T_w, k_lin·T) corner underestimates the 64–512-token transition by up to ~45% (the model's known gap),
  // and Vidur's profile has single-row spikes of 25–35% above 512 tokens (tile quantisation).
  it("8B H100 TP1, linear terms vs Vidur's linear layers (Llama-2-7b scaled to Llama-3.1-8B): median ≤ 10%, T≥512 median ≤ 5%, all ≤ 45%", () => {
    const rows = vidurRows("Llama-2-7b", 1).map((r) => {
      const t = num(r, "tokens");
      return { tokens: t, err: rel(linearAllReduceMs(H8, t), num(r, "linear_ms") * SCALE_7B_TO_8B) };
    });
    const s = regimes(rows);
    logRegimes(`Vidur H100 linear, 8B TP1 (Llama-2-7b × ${SCALE_7B_TO_8B.toFixed(3)}): model max(T_w, k_lin·T)`, s);
    expect(s.all.medianAbs).toBeLessThanOrEqual(0.1);
    expect(s.high.medianAbs).toBeLessThanOrEqual(0.05);
    expect(s.high.maxAbs).toBeLessThanOrEqual(0.35);
    expect(s.low.maxAbs).toBeLessThanOrEqual(0.15);
    expect(s.all.maxAbs).toBeLessThanOrEqual(0.45);
  });

  it("70B H100 TP4, linear + all-reduce terms vs Vidur's Llama-2-70b TP4 linear layers + h100_dgx all-reduce: median ≤ 10%, T≥512 median ≤ 5%, all ≤ 45%", () => {
    const rows = vidur70.map((r) => {
      const t = num(r, "tokens");
      return { tokens: t, err: rel(linearAllReduceMs(H70, t), num(r, "linear_ms") + num(r, "allreduce_ms_h100_dgx")) };
    });
    const s = regimes(rows);
    logRegimes("Vidur H100 linear + all-reduce, 70B TP4: model max(T_w, k_lin·T) + c_ar + k_ar·T", s);
    expect(s.all.medianAbs).toBeLessThanOrEqual(0.1);
    expect(s.high.medianAbs).toBeLessThanOrEqual(0.05);
    expect(s.high.maxAbs).toBeLessThanOrEqual(0.35);
    expect(s.low.maxAbs).toBeLessThanOrEqual(0.25);
    expect(s.all.maxAbs).toBeLessThanOrEqual(0.45);
  });

  // LLMServingSim runs eager PyTorch (~25% slower than current vLLM kernels): a sanity bound, not a target.
  // The model's whole prefill step must be faster at every token count, by no more than 50%, and match the totals
  // within 10% (median) once they are scaled by 0.8 for eager mode.
  function llmssCheck(
    label: string,
    p: ModelPreset,
    rows: Record<string, string>[],
    extraMs: (t: number) => number,
  ): void {
    const tokens = rows.map((r) => num(r, "tokens"));
    const refs = rows.map((r, i) => num(r, "total_ms") + extraMs(tokens[i]!));
    const raw = errorStats(
      tokens.map((t, i) => rel(prefillMs(p, t), refs[i]!)),
      tokens,
    );
    const eager = errorStats(
      tokens.map((t, i) => rel(prefillMs(p, t), 0.8 * refs[i]!)),
      tokens,
    );
    const signed = tokens.map((t, i) => rel(prefillMs(p, t), refs[i]!));
    report.push(
      `${label}\n  raw: ${fmt(raw)}; model faster at every row by ${pct(-Math.max(...signed))} … ${pct(-Math.min(...signed))}` +
        `\n  eager-corrected (×0.8): ${fmt(eager)}`,
    );
    expect(Math.max(...signed)).toBeLessThan(0);
    expect(Math.min(...signed)).toBeGreaterThanOrEqual(-0.5);
    expect(eager.medianAbs).toBeLessThanOrEqual(0.1);
  }

  it("8B H100 TP1, whole prefill step vs LLMServingSim totals (eager): always faster, ≤ 50%; eager-corrected median ≤ 10%", () => {
    llmssCheck("LLMServingSim H100 Llama-3.1-8B TP1 totals (prefill step)", H8, llmss8, () => 0);
  });

  it("70B H100 TP4, whole prefill step vs LLMServingSim totals + Vidur all-reduce: always faster, ≤ 50%; eager-corrected median ≤ 10%", () => {
    // That file excludes the all-reduce; Vidur's h100_dgx TP4 all-reduce is added back (interpolated).
    llmssCheck(
      "LLMServingSim H100 Llama-3.1-70B TP4 totals + Vidur all-reduce (prefill step)",
      H70,
      llmss70,
      allReduceAt,
    );
  });

  // The model's attention term is the cost that grows with (query, key) pairs; LLMServingSim's per-layer launch cost
  // (its attention time at one token) belongs to t_fix, so it is subtracted before comparing.
  it("attention term: faster than LLMServingSim's eager H100 attention growth at every row, by at most 3× in the median (≥ 1,024 tokens)", () => {
    for (const [label, p, rows] of [
      ["8B", H8, llmss8],
      ["70B TP4", H70, llmss70],
    ] as const) {
      const launch = num(rows[0]!, "attn_causal_ms");
      const sel = rows.filter((r) => num(r, "tokens") >= 1024);
      const ratios = sel.map((r) => (p.cAttnMs * attnPairs(num(r, "tokens"), 0)) / (num(r, "attn_causal_ms") - launch));
      const s = errorStats(
        ratios.map((x) => x - 1),
        sel.map((r) => num(r, "tokens")),
      );
      report.push(`attention ${label} vs LLMServingSim attn_causal − its 1-token time (1024…2048 tokens): ${fmt(s)}`);
      expect(Math.max(...ratios)).toBeLessThan(1);
      expect(1 + s.medianSigned).toBeGreaterThan(1 / 3);
    }
  });

  it("Splitwise (older stack) Llama2-70B TP4 H100 prompt times: the model is 20–60% faster for prompts of 128…8192", () => {
    const rows = readCsv("derived_splitwise_llama2-70b_h100-80gb_tp4_bs1.csv").filter(
      (r) =>
        r.model === "llama2-70b" &&
        r.hardware === "h100-80gb" &&
        num(r, "batch_size") === 1 &&
        num(r, "tensor_parallel") === 4,
    );
    const byPrompt = new Map<number, number[]>();
    for (const r of rows)
      byPrompt.set(num(r, "prompt_size"), [...(byPrompt.get(num(r, "prompt_size")) ?? []), num(r, "prompt_time")]);
    expect(byPrompt.size).toBeGreaterThanOrEqual(5);
    const parts: string[] = [];
    for (const [prompt, times] of [...byPrompt].sort((a, b) => a[0] - b[0])) {
      const mean = times.reduce((a, b) => a + b, 0) / times.length;
      const faster = 1 - prefillMs(H70, prompt) / mean;
      parts.push(`${prompt}: ${pct(-faster)}`);
      expect(faster).toBeGreaterThanOrEqual(0.2);
      expect(faster).toBeLessThanOrEqual(0.6);
    }
    report.push(`Splitwise llama2-70b TP4 H100 prompt time, model vs mean: ${parts.join(", ")}`);
  });

  it("A100 sanity bounds (Vidur Llama-2-70b TP2 attention): achieved share of peak brackets the H100 coefficients", () => {
    // Per layer and GPU at TP2: 32 query heads, 4 KV heads, head dim 128. A100 80GB: 2.04 TB/s HBM, 312 TFLOPS BF16.
    const sorted = (xs: number[]): number[] => [...xs].sort((a, b) => a - b);
    const at = (xs: number[], q: number): number => xs[Math.min(xs.length - 1, Math.floor(q * xs.length))]!;
    // Decode: KV bytes read per ms, where batch × context ≥ 128k tokens (bandwidth-saturated).
    const decodeShares: number[] = [];
    for (const r of readCsv("derived_vidur_a100_Llama-2-70b_tp2_attn_decode_per_layer_ms.csv")) {
      const kv = num(r, "kv_cache_size");
      for (const [col, v] of Object.entries(r)) {
        if (col === "kv_cache_size" || v === "" || Number(col) * kv < 131072) continue;
        decodeShares.push((Number(col) * kv * 2 * 4 * 128 * 2) / (Number(v) * 1e-3) / 2.04e12);
      }
    }
    const dec = sorted(decodeShares);
    // The model's decode KV-read share of H100 peak (3.35 TB/s per GPU).
    const h100Share = H8.kvBytesPerToken / (H8.kKvMs * 1e-3) / 3.35e12;
    report.push(
      `decode attention, A100 share of peak HBM bandwidth (n=${dec.length}): median ${at(dec, 0.5).toFixed(2)}, ` +
        `p90 ${at(dec, 0.9).toFixed(2)}; model k_kv on H100 = ${h100Share.toFixed(2)}`,
    );
    expect(Math.abs(h100Share - at(dec, 0.5))).toBeLessThanOrEqual(0.1);

    // Prefill: attention FLOPs per ms for chunks of ≥ 1,024 tokens.
    const prefillShares: number[] = [];
    for (const r of readCsv("derived_vidur_a100_Llama-2-70b_tp2_attn_prefill_per_layer_ms.csv")) {
      const n = num(r, "prefill_chunk_size");
      for (const [col, v] of Object.entries(r)) {
        if (col === "prefill_chunk_size" || v === "" || n < 1024) continue;
        prefillShares.push((4 * 32 * 128 * attnPairs(n, Number(col))) / (Number(v) * 1e-3) / 312e12);
      }
    }
    const pre = sorted(prefillShares);
    const h100AttnShare = (4 * 32 * 32 * 128) / (H8.cAttnMs * 1e-3) / 989e12;
    report.push(
      `prefill attention, A100 share of peak BF16 (n=${pre.length}): median ${at(pre, 0.5).toFixed(2)}, ` +
        `max ${pre.at(-1)!.toFixed(2)}; model c_attn on H100 = ${h100AttnShare.toFixed(2)}`,
    );
    expect(h100AttnShare).toBeGreaterThanOrEqual(at(pre, 0.5));
    expect(h100AttnShare).toBeLessThanOrEqual(pre.at(-1)! * 1.25);
  });
});

// ---- 3. KV transfer ----

describe("kvTransferMs", () => {
  const links = Object.values(LINKS);

  it("is 0 for no tokens, alpha + bytes / (eta · bandwidth · links) otherwise", () => {
    expect(kvTransferMs(0, H8, LINKS["ib-ndr"])).toBe(0);
    // 1,000 tokens × 128 KiB over 0.7 × 50 GB/s.
    expect(kvTransferMs(1000, H8, LINKS["ib-ndr"])).toBeCloseTo(0.5 + (1000 * 131072) / (0.7 * 50e6), 9);
    expect(kvTransferMs(1000, H8, LINKS["ib-ndr"], { ...DEFAULT_TRANSFER, links: 2 })).toBeCloseTo(
      0.5 + (1000 * 131072) / (0.7 * 100e6),
      9,
    );
    expect(DEFAULT_TRANSFER).toEqual({ alphaMs: 0.5, eta: 0.7, links: 1 });
    expect(links.map((l) => l.gbPerSecond)).toEqual([450, 50, 25, 12.5]);
  });

  it("is monotone: more bandwidth or more links never slower, more tokens never faster", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 1_000_000 }),
        fc.integer({ min: 0, max: 1_000_000 }),
        fc.double({ min: 0.1, max: 1000, noNaN: true }),
        fc.double({ min: 0.1, max: 1000, noNaN: true }),
        fc.constantFrom(H8, H70, H20),
        (n1, n2, b1, b2, p) => {
          const [lo, hi] = b1 <= b2 ? [b1, b2] : [b2, b1];
          const slow: LinkPreset = { name: "a", gbPerSecond: lo };
          const fast: LinkPreset = { name: "b", gbPerSecond: hi };
          expect(kvTransferMs(n1, p, fast)).toBeLessThanOrEqual(kvTransferMs(n1, p, slow));
          expect(kvTransferMs(n1, p, slow, { ...DEFAULT_TRANSFER, links: 2 })).toBeLessThanOrEqual(
            kvTransferMs(n1, p, slow),
          );
          const [m1, m2] = n1 <= n2 ? [n1, n2] : [n2, n1];
          expect(kvTransferMs(m1, p, slow)).toBeLessThanOrEqual(kvTransferMs(m2, p, slow));
        },
      ),
      { numRuns: 300 },
    );
    const byBandwidth = [...links]
      .sort((a, b) => a.gbPerSecond - b.gbPerSecond)
      .map((l) => kvTransferMs(32768, H20, l));
    for (let i = 1; i < byBandwidth.length; i++) expect(byBandwidth[i]!).toBeLessThan(byBandwidth[i - 1]!);
  });

  it("reproduces Mooncake's vLLM 1P1D transfers within ±25% on 8 × ib-hdr links (8× RoCE, ≈200 GB/s)", () => {
    // kvcache-ai Mooncake docs, "vLLM with Mooncake Transfer Engine Benchmark": Qwen3-8B (36 layers × 8 KV heads ×
    // 128 × 2 × 2 B = 144 KiB per token), 8× RoCE ≈ 200 GB/s. Sizes are binary: 32,768 tokens = "4.50 GB" = 4.5 GiB.
    const qwen3: ModelPreset = { ...H8, name: "qwen3-8b", kvBytesPerToken: 36 * 8 * 128 * 2 * 2 };
    const t = { ...DEFAULT_TRANSFER, links: 8 };
    const link = LINKS["ib-hdr"];
    const points: [label: string, bytes: number, ms: number][] = [
      ["128 tok, 20 MB", 20 * 2 ** 20, 0.54],
      ["256 tok, 38 MB", 38 * 2 ** 20, 0.61],
      ["512 tok, 74 MB", 74 * 2 ** 20, 0.92],
      ["1k, 146 MB", 146 * 2 ** 20, 1.5],
      ["2k, 290 MB", 290 * 2 ** 20, 2.51],
      ["4k, 578 MB", 578 * 2 ** 20, 4.75],
      ["8k, 1.13 GB", 1.13 * 2 ** 30, 8.84],
      ["16k, 2.25 GB", 2.25 * 2 ** 30, 16.43],
      ["32k, 4.50 GB", 4.5 * 2 ** 30, 31.65],
    ];
    const errs = points.map(([, bytes, ms]) => rel(kvTransferMs(bytes / qwen3.kvBytesPerToken, qwen3, link, t), ms));
    report.push(
      `Mooncake 1P1D on 8×ib-hdr (alpha 0.5, eta 0.7): ${points.map(([l], i) => `${l} ${pct(errs[i]!)}`).join(", ")}`,
    );
    // The two end points the perf model cites, within ±25%; every row within ±30%.
    expect(Math.abs(errs[0]!)).toBeLessThanOrEqual(0.25);
    expect(Math.abs(errs[8]!)).toBeLessThanOrEqual(0.25);
    for (const e of errs) expect(Math.abs(e)).toBeLessThanOrEqual(0.3);
  });
});

// ---- 4. decode runs ----

describe("decodeRunMs and decodeStepsWithin", () => {
  const presets = fc.constantFrom(H8, H70, H20);

  it("decodeRunMs equals the sum of stepTimeMs over the steps", () => {
    fc.assert(
      fc.property(
        presets,
        fc.integer({ min: 0, max: 300 }),
        fc.integer({ min: 0, max: 2_000_000 }),
        fc.integer({ min: 0, max: 400 }),
        (p, seqs, ctx0, steps) => {
          let sum = 0;
          for (let i = 0; i < steps; i++) sum += stepTimeMs(p, seqs, ctx0 + i * seqs, 0, 0);
          const closed = decodeRunMs(p, seqs, ctx0, steps);
          expect(Math.abs(closed - sum)).toBeLessThanOrEqual(1e-9 * Math.max(1, sum));
        },
      ),
      { numRuns: 300 },
    );
  });

  /** The documented bracket: run(n) ≤ budget, and budget < run(n + 1) unless n = maxSteps. */
  const expectBracket = (p: ModelPreset, seqs: number, ctx0: number, budget: number, maxSteps: number): number => {
    const n = decodeStepsWithin(p, seqs, ctx0, budget, maxSteps);
    expect(Number.isInteger(n)).toBe(true);
    expect(n).toBeGreaterThanOrEqual(0);
    expect(n).toBeLessThanOrEqual(maxSteps);
    expect(decodeRunMs(p, seqs, ctx0, n)).toBeLessThanOrEqual(budget);
    if (n < maxSteps) expect(decodeRunMs(p, seqs, ctx0, n + 1)).toBeGreaterThan(budget);
    return n;
  };

  it("decodeStepsWithin brackets the budget for random runs", () => {
    fc.assert(
      fc.property(
        presets,
        fc.integer({ min: 1, max: 256 }),
        fc.integer({ min: 0, max: 4_000_000 }),
        fc.double({ min: 0, max: 1e7, noNaN: true }),
        fc.integer({ min: 0, max: 1_000_000 }),
        (p, seqs, ctx0, budget, maxSteps) => {
          expectBracket(p, seqs, ctx0, budget, maxSteps);
        },
      ),
      { numRuns: 500 },
    );
  });

  it("lands exactly on a budget that is some run's exact time, up to 10^9 steps", () => {
    fc.assert(
      fc.property(
        presets,
        fc.integer({ min: 1, max: 256 }),
        fc.integer({ min: 0, max: 4_000_000 }),
        fc.integer({ min: 0, max: 1_000_000_000 }),
        (p, seqs, ctx0, steps) => {
          const budget = decodeRunMs(p, seqs, ctx0, steps);
          expect(expectBracket(p, seqs, ctx0, budget, 2_000_000_000)).toBe(steps);
          if (steps > 0)
            expect(expectBracket(p, seqs, ctx0, budget * (1 - 1e-12), 2_000_000_000)).toBeLessThanOrEqual(steps);
        },
      ),
      { numRuns: 300 },
    );
  });

  it("handles the max(T_w, k_lin·T) flip: T = seqs is fixed within a run, so the branch never flips inside one", () => {
    // Around each preset's flip point the per-step base changes slope, but every step of one run is on the same side.
    for (const p of [H8, H70, H20]) {
      const flip = p.weightStreamMs / p.kLinMs;
      for (const seqs of [Math.floor(flip) - 1, Math.floor(flip), Math.ceil(flip), Math.ceil(flip) + 1]) {
        const steps = 5000;
        let sum = 0;
        for (let i = 0; i < steps; i++) sum += stepTimeMs(p, seqs, 1000 * seqs + i * seqs, 0, 0);
        expect(decodeRunMs(p, seqs, 1000 * seqs, steps)).toBeCloseTo(sum, 6);
        for (const budget of [0, 1, sum / 3, sum, sum * 7]) expectBracket(p, seqs, 1000 * seqs, budget, 1_000_000);
      }
    }
  });

  it("degenerate inputs: no sequences are free, a zero or negative budget fits nothing, maxSteps caps", () => {
    expect(decodeRunMs(H8, 0, 0, 100)).toBe(0);
    expect(decodeRunMs(H8, 4, 100, 0)).toBe(0);
    expect(decodeStepsWithin(H8, 0, 0, 5, 77)).toBe(77);
    expect(decodeStepsWithin(H8, 4, 100, 0, 77)).toBe(0);
    expect(decodeStepsWithin(H8, 4, 100, -1, 77)).toBe(0);
    expect(decodeStepsWithin(H8, 4, 100, Number.NaN, 77)).toBe(0);
    expect(decodeStepsWithin(H8, 4, 100, 1e12, 77)).toBe(77);
    expect(decodeStepsWithin(H8, 4, 100, Infinity, 77)).toBe(77);
    expect(decodeStepsWithin(H8, 4, 100, 1e6, 0)).toBe(0);
    // One step of 4 sequences at 100 context each on 8B H100: 6.6 + 4.9e-5·400 ms.
    const one = decodeRunMs(H8, 4, 400, 1);
    expect(one).toBeCloseTo(6.6 + 4.9e-5 * 400, 12);
    expect(decodeStepsWithin(H8, 4, 400, one, 10)).toBe(1);
  });
});

// ---- 5. step time, capacity ----

describe("stepTimeMs, attnPairs, KV capacity", () => {
  it("an empty step takes no time; TP1 has no all-reduce term", () => {
    expect(stepTimeMs(H8, 0, 0, 0, 0)).toBe(0);
    expect(stepTimeMs(H70, 0, 0, 0, 0)).toBe(0);
    expect(stepTimeMs(H8, 1, 0, 0, 0)).toBeCloseTo(1.0 + 5.6, 12);
    expect(stepTimeMs(H70, 1, 0, 0, 0)).toBeCloseTo(2.0 + 12.98 + 4.0 + 0.0109, 12);
  });

  it("attnPairs = N·P + N²/2", () => {
    expect(attnPairs(0, 100)).toBe(0);
    expect(attnPairs(128, 2048)).toBe(128 * 2048 + 8192);
    expect(attnPairs(1024, 0)).toBe(524288);
  });

  it("capacities: (HBM × 0.9 − weights) / KV bytes per token", () => {
    const caps = Object.fromEntries(Object.values(PRESETS).map((p) => [p.name, kvCapacityTokens(p)]));
    report.push(`KV capacity (tokens): ${JSON.stringify(caps)}`);
    for (const p of Object.values(PRESETS)) {
      expect(kvCapacityTokens(p)).toBe(Math.floor((p.hbmBytes * 0.9 - p.weightBytes) / p.kvBytesPerToken));
      expect(kvCapacityBlocks(p)).toBe(Math.floor(kvCapacityTokens(p) / 16));
      expect(kvCapacityBlocks(p, 32)).toBe(Math.floor(kvCapacityTokens(p) / 32));
      expect(p.maxNumBatchedTokens).toBe(8192);
      expect(p.maxNumSeqs).toBe(256);
    }
    // Bands that catch unit slips (GB vs GiB, per GPU vs per instance, KiB vs bytes).
    expect(caps["h100-8b"]).toBeGreaterThan(400_000);
    expect(caps["h100-8b"]).toBeLessThan(500_000);
    expect(caps["h100-70b"]).toBeGreaterThan(450_000);
    expect(caps["h100-70b"]).toBeLessThan(550_000);
    expect(caps["h20-72b"]).toBeGreaterThan(650_000);
    expect(caps["h20-72b"]).toBeLessThan(720_000);
    expect(kvCapacityTokens({ ...H8, weightBytes: H8.hbmBytes })).toBe(0);
  });
});

// ---- 6. names and cluster files ----

describe("resolvePreset, resolveLink, parseClusterFile", () => {
  /** The ClusterFileError a parse throws; fails if it throws nothing or something else. */
  const parseError = (json: unknown): ClusterFileError => {
    try {
      parseClusterFile(json, "cluster.json");
    } catch (e) {
      expect(e).toBeInstanceOf(ClusterFileError);
      return e as ClusterFileError;
    }
    throw new Error("expected a ClusterFileError");
  };

  it("resolves built-in and custom names, and lists the known ones when a name is unknown", () => {
    expect(resolvePreset("h20-72b")).toBe(H20);
    const custom = { ...H8, name: "mine" };
    expect(resolvePreset("mine", { mine: custom })).toBe(custom);
    expect(() => resolvePreset("h200-405b")).toThrow(
      'unknown model preset "h200-405b" (known: h100-70b, h100-8b, h20-72b)',
    );
    expect(() => resolvePreset("x", { mine: custom })).toThrow("known: h100-70b, h100-8b, h20-72b, mine");
    expect(() => resolvePreset("toString")).toThrow("unknown model preset");
    expect(resolveLink("ib-ndr")).toBe(LINKS["ib-ndr"]);
    expect(() => resolveLink("ib-xdr")).toThrow('unknown link "ib-xdr" (known: 100gbe, ib-hdr, ib-ndr, nvlink)');
  });

  it("accepts a preset from a base with overrides, links, and leaves other top-level keys alone", () => {
    const { presets, links } = parseClusterFile(
      {
        presets: { "h100-70b-tp8": { base: "h100-70b", tp: 8, hbmBytes: 8 * 85_520_809_984, kLinMs: 0.028 } },
        links: { roce800: { gbPerSecond: 100 } },
        instances: [{ role: "prefill" }],
      },
      "cluster.json",
    );
    const p = presets["h100-70b-tp8"]!;
    expect(p).toMatchObject({
      name: "h100-70b-tp8",
      tp: 8,
      kLinMs: 0.028,
      weightStreamMs: H70.weightStreamMs,
      cArMs: 4.0,
      maxNumSeqs: 256,
    });
    expect(links.roce800).toEqual({ name: "roce800", gbPerSecond: 100 });
    expect(resolvePreset("h100-70b-tp8", presets)).toBe(p);
  });

  it("derives coefficients from hardware and architecture figures: the built-in presets within 8%", () => {
    const specs = {
      "d-8b": {
        tp: 1,
        tFixMs: 1,
        hbmBytes: H8.hbmBytes,
        weightBytes: H8.weightBytes,
        hbmBandwidthGBps: 3350,
        bf16Tflops: 989,
        attnTflops: 300,
        linearParams: LINEAR_PARAMS_LLAMA31_8B,
        layers: 32,
        queryHeads: 32,
        kvHeads: 8,
        headDim: 128,
      },
      "d-70b": {
        tp: 4,
        tFixMs: 2,
        cArMs: 4,
        kArMs: 0.0109,
        hbmBytes: H70.hbmBytes,
        weightBytes: H70.weightBytes,
        hbmBandwidthGBps: 3350,
        bf16Tflops: 989,
        attnTflops: 300,
        linearParams: 80 * (2 * 8192 ** 2 + 2 * 8192 * 1024 + 3 * 8192 * 28672),
        layers: 80,
        queryHeads: 64,
        kvHeads: 8,
        headDim: 128,
      },
      // H20: 4.0 TB/s, 148 TFLOPS. The table's c_attn implies ≈90 TFLOPS of achieved attention throughput per GPU.
      "d-72b": {
        tp: 4,
        tFixMs: 2,
        cArMs: 4,
        kArMs: 0.0109,
        hbmBytes: H20.hbmBytes,
        weightBytes: H20.weightBytes,
        hbmBandwidthGBps: 4000,
        bf16Tflops: 148,
        attnTflops: 90,
        linearParams: 80 * (2 * 8192 ** 2 + 2 * 8192 * 1024 + 3 * 8192 * 29568),
        layers: 80,
        queryHeads: 64,
        kvHeads: 8,
        headDim: 128,
      },
    };
    const { presets } = parseClusterFile({ presets: specs }, "cluster.json");
    const parts: string[] = [];
    for (const [name, builtIn] of [
      ["d-8b", H8],
      ["d-70b", H70],
      ["d-72b", H20],
    ] as const) {
      const d = presets[name]!;
      expect(d.kvBytesPerToken).toBe(builtIn.kvBytesPerToken);
      const errs = (["weightStreamMs", "kLinMs", "kKvMs", "cAttnMs"] as const).map(
        (k) => [k, rel(d[k], builtIn[k])] as const,
      );
      parts.push(`${builtIn.name}: ${errs.map(([k, e]) => `${k} ${pct(e)}`).join(", ")}`);
      for (const [, e] of errs) expect(Math.abs(e)).toBeLessThanOrEqual(0.08);
    }
    report.push(`derived from specs vs table: ${parts.join("; ")}`);
  });

  it("rejects bad fields with the path in the message", () => {
    const cases: [unknown, string][] = [
      [[], "cluster.json: (top level): expected a map, got a list"],
      [{ presets: [] }, "cluster.json: presets: expected a map of name → preset, got a list"],
      [{ presets: { x: 3 } }, "cluster.json: presets.x: expected a map, got 3"],
      [{ presets: { x: { base: "h100-8b", tpp: 2 } } }, "cluster.json: presets.x.tpp: unknown field"],
      [{ presets: { x: { base: "h100-8b", tp: 0 } } }, "cluster.json: presets.x.tp: expected an integer ≥ 1, got 0"],
      [
        { presets: { x: { base: "h100-8b", tp: 1.5 } } },
        "cluster.json: presets.x.tp: expected an integer ≥ 1, got 1.5",
      ],
      [
        { presets: { x: { base: "h100-8b", tp: "4" } } },
        'cluster.json: presets.x.tp: expected an integer ≥ 1, got "4"',
      ],
      [
        { presets: { x: { base: "h100-8b", kLinMs: -1 } } },
        "cluster.json: presets.x.kLinMs: expected a finite number ≥ 0, got -1",
      ],
      [
        { presets: { x: { base: "h100-8b", cAttnMs: null } } },
        "cluster.json: presets.x.cAttnMs: expected a finite number ≥ 0, got null",
      ],
      [
        { presets: { x: { base: "h100-8b", gpuMemoryUtilization: 1.5 } } },
        "cluster.json: presets.x.gpuMemoryUtilization: expected a number in (0, 1]",
      ],
      [
        { presets: { x: { base: "h100-8b", hbmBandwidthGBps: 0 } } },
        "cluster.json: presets.x.hbmBandwidthGBps: expected a finite number > 0, got 0",
      ],
      [
        { presets: { x: { base: "a100-13b" } } },
        'cluster.json: presets.x.base: expected one of h20-72b, h100-70b, h100-8b, got "a100-13b"',
      ],
      [
        { presets: { x: { base: "h100-8b", description: 7 } } },
        "cluster.json: presets.x.description: expected a string, got 7",
      ],
      [{ presets: { x: { tp: 1 } } }, "cluster.json: presets.x.tFixMs: missing (give it or a base preset)"],
      [
        { presets: { x: { tp: 1, tFixMs: 1 } } },
        "cluster.json: presets.x.weightStreamMs: missing (give it, a base preset, or hbmBandwidthGBps and weightBytes)",
      ],
      [
        { presets: { x: { base: "h100-8b", weightBytes: 1e12 } } },
        "cluster.json: presets.x.weightBytes: weights (1000000000000 B) leave no KV cache",
      ],
      [
        { presets: { "h100-8b": { base: "h100-8b" } } },
        'cluster.json: presets.h100-8b: shadows the built-in preset "h100-8b"',
      ],
      [{ presets: { "bad name": { base: "h100-8b" } } }, "cluster.json: presets.bad name: preset names are"],
      [
        { links: { l: { gbPerSecond: -5 } } },
        "cluster.json: links.l.gbPerSecond: expected a finite number > 0, got -5",
      ],
      [{ links: { l: {} } }, "cluster.json: links.l.gbPerSecond: expected a finite number > 0, got nothing"],
      [
        { links: { l: { gbPerSecond: 5, latency: 1 } } },
        "cluster.json: links.l.latency: unknown field (known: gbPerSecond, alphaMs, eta)",
      ],
      [{ links: { nvlink: { gbPerSecond: 5 } } }, 'cluster.json: links.nvlink: shadows the built-in link "nvlink"'],
    ];
    for (const [json, message] of cases) {
      const e = parseError(json);
      expect(e.message.startsWith(message), `${e.message}\n  should start with\n${message}`).toBe(true);
    }
    expect(parseError({ presets: { x: { base: "h100-8b", tp: 0 } } }).path).toBe("presets.x.tp");
  });

  it("accepts a preset given entirely by its fields, and tp 1 needs no all-reduce figures", () => {
    const { presets } = parseClusterFile(
      {
        presets: {
          small: {
            description: "a small model",
            tp: 1,
            tFixMs: 0.5,
            weightStreamMs: 2,
            kLinMs: 0.01,
            kKvMs: 2e-5,
            cAttnMs: 1e-6,
            kvBytesPerToken: 65536,
            hbmBytes: 48e9,
            weightBytes: 4e9,
            maxNumBatchedTokens: 2048,
          },
        },
      },
      "c.json",
    );
    expect(presets.small).toEqual({
      name: "small",
      description: "a small model",
      tp: 1,
      tFixMs: 0.5,
      weightStreamMs: 2,
      kLinMs: 0.01,
      cArMs: 0,
      kArMs: 0,
      kKvMs: 2e-5,
      cAttnMs: 1e-6,
      kvBytesPerToken: 65536,
      hbmBytes: 48e9,
      weightBytes: 4e9,
      gpuMemoryUtilization: 0.9,
      maxNumBatchedTokens: 2048,
      maxNumSeqs: 256,
    });
    expect(parseClusterFile({}, "c.json")).toEqual({ presets: {}, links: {} });
  });
});
