// `dolphin calibrate` against live vLLM engines: the grid of probes (prefill by chunk and cached prefix, decode by
// batch and context, mixed steps, KV transfers P → D), each repeated and its median kept, then the step-time fit
// and the cluster file (src/sim/calibration-fit.ts). Step times come from the engine's histograms (probes.ts).

import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import {
  calibratedClusterFile,
  fitStepTime,
  fitTransfer,
  prefillFeatures,
  type EngineFacts,
  type StepFit,
  type StepPoint,
  type TransferFit,
  type TransferPoint,
} from "../../sim/calibration-fit.js";
import { PREFILL_KV_PARAMS } from "../proxy/remote-path.js";
import { attnPairs } from "../../sim/step-time.js";
import { backgroundDecodes, complete, histogramDelta, idle, kvCacheOf, tokenIds } from "./probes.js";

export interface CalibrationGrid {
  /** Prefill chunks: new tokens × cached prefix tokens (multiples of the block size). */
  prefillTokens: number[];
  cachedTokens: number[];
  /** Decode: batch sizes × context tokens, each for `decodeSteps` steps. */
  decodeBatch: number[];
  decodeContext: number[];
  decodeSteps: number;
  /** Mixed steps: `mixedBatch` decodes at `mixedContext` plus one cold prefill of each of `mixedPrefill` tokens. */
  mixedBatch: number[];
  mixedContext: number;
  mixedPrefill: number[];
  /** KV transfers P → D, prompt tokens (1P1D only). */
  transferTokens: number[];
  repeats: number;
}

export const GRIDS: Record<"small" | "full", CalibrationGrid> = {
  small: {
    prefillTokens: [256, 1024, 2000],
    cachedTokens: [0, 1024],
    decodeBatch: [1, 8, 32],
    decodeContext: [256, 1536],
    decodeSteps: 24,
    mixedBatch: [8],
    mixedContext: 256,
    mixedPrefill: [1024],
    transferTokens: [512, 2000],
    repeats: 3,
  },
  full: {
    prefillTokens: [128, 512, 1024, 1536, 2000],
    cachedTokens: [0, 1024, 2048],
    decodeBatch: [1, 4, 16, 32, 64],
    decodeContext: [256, 1024, 2048],
    decodeSteps: 32,
    mixedBatch: [8, 32],
    mixedContext: 1024,
    mixedPrefill: [256, 1024, 1792],
    transferTokens: [256, 1024, 2000, 3000, 4000],
    repeats: 5,
  },
};

export interface CalibrationTarget {
  /** Where step times are measured (the decode engine of 1P1D, or the one engine given). */
  stepUrl: string;
  /** A prefill engine (kv_producer or kv_both) to ship KV from to stepUrl; none: no transfers measured. */
  prefillUrl?: string;
  model: string;
  /** Model figures vLLM's metrics do not carry (from the model's config.json and weights). */
  kvBytesPerToken: number;
  weightBytes: number;
  maxNumBatchedTokens: number;
  maxNumSeqs: number;
}

export interface Calibration {
  facts: EngineFacts;
  points: StepPoint[];
  transfers: TransferPoint[];
  step: StepFit;
  transfer?: TransferFit;
  seconds: number;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
const spreadOf = (xs: number[]) => (Math.max(...xs) - Math.min(...xs)) / median(xs);

let seedCounter = 1_000_003;
/** A prompt no earlier probe shares a block with. */
const fresh = (n: number) => tokenIds(seedCounter++, n);

/** Runs the grid against the target; `say` gets a line per probe. */
export async function calibrate(
  t: CalibrationTarget,
  grid: CalibrationGrid,
  say: (line: string) => void = () => undefined,
): Promise<Calibration> {
  const t0 = Date.now();
  const { numGpuBlocks, blockSize } = await kvCacheOf(t.stepUrl);
  say(`KV cache (vllm:cache_config_info): ${numGpuBlocks} blocks of ${blockSize} tokens`);
  const url = t.stepUrl;
  const points: StepPoint[] = [];
  const keep = (p: Omit<StepPoint, "measuredMs" | "spread" | "wallMs">, ms: number[], wall: number[]) => {
    const point: StepPoint = {
      ...p,
      measuredMs: median(ms),
      wallMs: median(wall),
      spread: ms.length > 1 ? spreadOf(ms) : 0,
    };
    points.push(point);
    say(
      `  ${point.label}: ${point.measuredMs.toFixed(2)} ms (wall ${point.wallMs!.toFixed(1)} ms, spread ${(100 * point.spread).toFixed(0)}%)`,
    );
    return point;
  };
  // warm-up: the first requests of an engine pay one-off costs
  for (let i = 0; i < 3; i++) await complete(url, t.model, fresh(512));

  say("prefill steps (vllm:request_prefill_time_seconds)");
  for (const cached of grid.cachedTokens) {
    for (const n of grid.prefillTokens) {
      if (cached + n + 1 > 4096 || n > t.maxNumBatchedTokens) continue;
      const ms: number[] = [];
      const wall: number[] = [];
      let hit = cached;
      for (let r = -1; r < grid.repeats; r++) {
        const record = r >= 0; // r = −1: a warm-up of this shape (eager PyTorch on CPU pays for a new shape once)
        // a prefix of `cached` tokens plus one, so that all `cached` are cacheable blocks
        const prefix = fresh(cached + (cached > 0 ? 1 : 0));
        if (cached > 0) await complete(url, t.model, prefix);
        const prompt = [...prefix.slice(0, cached), ...fresh(n)];
        const d = await histogramDelta(url, "vllm:request_prefill_time_seconds", 1, () =>
          complete(url, t.model, prompt),
        );
        hit = d.result.json.usage?.prompt_tokens_details?.cached_tokens ?? 0;
        if (record) ms.push(d.meanMs);
        if (record) wall.push(d.result.wallMs);
      }
      keep(
        { kind: "prefill", label: `prefill ${chunkLabel(n, hit)}`, ...prefillFeatures(n + cached - hit, hit) },
        ms,
        wall,
      );
    }
  }

  say("decode steps (vllm:inter_token_latency_seconds)");
  const decodeAlone = new Map<string, StepPoint>();
  for (const ctx of grid.decodeContext) {
    for (const b of grid.decodeBatch) {
      if (b > t.maxNumSeqs) continue;
      const ms: number[] = [];
      const wall: number[] = [];
      for (let r = -1; r < grid.repeats; r++) {
        const record = r >= 0; // r = −1: a warm-up of this shape (eager PyTorch on CPU pays for a new shape once)
        // each prompt cached first (ctx + 1 tokens: ctx in cache), so the measured steps are decodes
        const prompts = Array.from({ length: b }, () => fresh(ctx + 1));
        await Promise.all(prompts.map((p) => complete(url, t.model, p)));
        const steps = grid.decodeSteps;
        const t1 = performance.now();
        const d = await histogramDelta(url, "vllm:inter_token_latency_seconds", b * (steps - 1), () =>
          Promise.all(prompts.map((p) => complete(url, t.model, p, { max_tokens: steps, ignore_eos: true }))),
        );
        if (record) ms.push(d.meanMs);
        if (record) wall.push((performance.now() - t1) / steps);
      }
      // the context of a sequence at decode step j is ctx + 1 + j, j = 1 … steps − 1: the mean is linear in j
      const meanCtx = ctx + 1 + grid.decodeSteps / 2;
      const p = keep(
        {
          kind: "decode",
          label: `decode ${b} × ${ctx} ctx`,
          decodeSeqs: b,
          decodeContextTokens: b * meanCtx,
          prefillTokens: 0,
          prefillAttnPairs: 0,
        },
        ms,
        wall,
      );
      decodeAlone.set(`${b}/${ctx}`, p);
    }
  }

  say("mixed steps: decodes running + one cold prefill (its vllm:request_prefill_time_seconds)");
  for (const b of grid.mixedBatch) {
    for (const n of grid.mixedPrefill) {
      if (b + n > t.maxNumBatchedTokens) continue;
      const ms: number[] = [];
      const wall: number[] = [];
      let ctxSum = 0;
      for (let r = -1; r < grid.repeats; r++) {
        const record = r >= 0; // r = −1: a warm-up of this shape (eager PyTorch on CPU pays for a new shape once)
        const prompts = Array.from({ length: b }, () => fresh(grid.mixedContext + 1));
        await Promise.all(prompts.map((p) => complete(url, t.model, p)));
        const bg = await backgroundDecodes(url, t.model, prompts);
        const t1 = performance.now();
        try {
          const d = await histogramDelta(url, "vllm:request_prefill_time_seconds", 1, () =>
            complete(url, t.model, fresh(n)),
          );
          if (record) ms.push(d.meanMs);
          if (record) wall.push(d.result.wallMs);
        } finally {
          await bg.stop();
        }
        // the decodes' context when the prefill ran: a few steps after their start, ~(elapsed / step) tokens each
        if (record) ctxSum += b * (grid.mixedContext + 1 + Math.min(50, (performance.now() - t1) / 20));
      }
      const alone = decodeAlone.get(`${b}/${grid.mixedContext}`);
      const p = keep(
        {
          kind: "mixed",
          label: `mixed ${b} decodes × ${grid.mixedContext} ctx + prefill ${n}`,
          decodeSeqs: b,
          decodeContextTokens: ctxSum / grid.repeats,
          prefillTokens: n,
          prefillAttnPairs: attnPairs(n, 0),
        },
        ms,
        wall,
      );
      if (alone)
        say(`    interference: the step is ${(p.measuredMs / alone.measuredMs).toFixed(1)}× the decode step alone`);
    }
  }
  await idle(url);

  const transfers: TransferPoint[] = [];
  if (t.prefillUrl) {
    say("KV transfers P → D (the decode engine's vllm:nixl_xfer_time_seconds)");
    for (const n of grid.transferTokens) {
      if (n + 1 > 4096) continue;
      const ms: number[] = [];
      const remote: number[] = [];
      const local: number[] = [];
      for (let r = -1; r < grid.repeats; r++) {
        const record = r >= 0; // r = −1: a warm-up of this shape (eager PyTorch on CPU pays for a new shape once)
        const prompt = fresh(n);
        const pre = await complete(t.prefillUrl, t.model, prompt, {
          kv_transfer_params: PREFILL_KV_PARAMS,
        });
        const ttft = await histogramDelta(url, "vllm:time_to_first_token_seconds", 1, async () =>
          histogramDelta(url, "vllm:nixl_xfer_time_seconds", 1, () =>
            complete(url, t.model, prompt, { kv_transfer_params: pre.json.kv_transfer_params }),
          ),
        );
        if (record) ms.push(ttft.result.meanMs);
        if (record) remote.push(ttft.meanMs);
        const loc = await histogramDelta(url, "vllm:time_to_first_token_seconds", 1, () =>
          complete(url, t.model, fresh(n)),
        );
        if (record) local.push(loc.meanMs);
      }
      const p: TransferPoint = {
        label: `transfer ${n} tokens`,
        tokens: n,
        measuredMs: median(ms),
        spread: ms.length > 1 ? spreadOf(ms) : 0,
        remoteTtftMs: median(remote),
        localTtftMs: median(local),
      };
      transfers.push(p);
      say(
        `  ${p.label}: ${p.measuredMs.toFixed(2)} ms; decode engine TTFT remote ${p.remoteTtftMs!.toFixed(1)} ms, local prefill ${p.localTtftMs!.toFixed(1)} ms`,
      );
    }
  }

  const facts: EngineFacts = {
    numGpuBlocks,
    blockSize,
    kvBytesPerToken: t.kvBytesPerToken,
    weightBytes: t.weightBytes,
    maxNumBatchedTokens: t.maxNumBatchedTokens,
    maxNumSeqs: t.maxNumSeqs,
  };
  const step = fitStepTime(points);
  const out: Calibration = { facts, points, transfers, step, seconds: (Date.now() - t0) / 1000 };
  if (transfers.length > 0) out.transfer = fitTransfer(transfers, t.kvBytesPerToken);
  return out;
}

const chunkLabel = (n: number, hit: number) => (hit > 0 ? `${n} on ${hit} cached` : `${n} cold`);

/** The cluster file of a calibration (calibratedClusterFile), its provenance naming the engine and the grid. */
export function clusterFileOf(
  c: Calibration,
  name: string,
  provenance: Record<string, unknown>,
): Record<string, unknown> {
  return calibratedClusterFile({
    name,
    description: `calibrated by dolphin calibrate from a live vLLM engine (${String(provenance["engine"] ?? "?")})`,
    facts: c.facts,
    step: c.step,
    points: c.points,
    ...(c.transfer ? { transfer: { fit: c.transfer, points: c.transfers } } : {}),
    provenance: { ...provenance, measured_s: Math.round(c.seconds) },
  });
}

/**
 * What vLLM's metrics do not say about the model, from its folder: KV bytes per token (2 (K, V) × layers × KV heads
 * × head dim × bytes per value, from config.json) and the weights' bytes (the safetensors files).
 */
export function modelFacts(dir: string): { kvBytesPerToken: number; weightBytes: number } {
  const c = JSON.parse(readFileSync(join(dir, "config.json"), "utf8")) as Record<string, unknown>;
  const num = (k: string) => (typeof c[k] === "number" ? (c[k] as number) : undefined);
  const layers = num("num_hidden_layers");
  const heads = num("num_attention_heads");
  const kvHeads = num("num_key_value_heads") ?? heads;
  const headDim =
    num("head_dim") ?? (num("hidden_size") !== undefined && heads ? num("hidden_size")! / heads : undefined);
  if (!layers || !kvHeads || !headDim)
    throw new Error(`${dir}/config.json: no num_hidden_layers, num_key_value_heads and head_dim`);
  const dtype = String(c["dtype"] ?? c["torch_dtype"] ?? "bfloat16");
  const bytes = dtype.includes("32") ? 4 : 2;
  const weightBytes = readdirSync(dir)
    .filter((f) => f.endsWith(".safetensors"))
    .reduce((s, f) => s + statSync(join(dir, f)).size, 0);
  return { kvBytesPerToken: 2 * layers * kvHeads * headDim * bytes, weightBytes };
}
