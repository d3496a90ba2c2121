// The step-time model's coefficients for one model on one instance (ModelPreset): the built-in presets (their
// figures and where they come from: shared/docs/perf-model.md), the KV cache a preset's HBM leaves beside the weights,
// and presets by name (custom ones from a cluster file first: cluster-file.ts). No I/O, no Node built-ins (the
// browser explorer loads this).

/** One model on one instance (tp GPUs). Coefficients in ms; T = decode sequences + new prefill tokens in a step. */
export interface ModelPreset {
  /** "h20-72b" | "h100-70b" | "h100-8b" | a custom name from a cluster file. */
  name: string;
  description: string;
  /** GPUs per instance (tensor parallel degree). */
  tp: number;
  /** Fixed per-step cost: scheduling, kernel launches, sampling. */
  tFixMs: number;
  /** T_w: streaming all weights from HBM once per step; the floor of any step's linear layers. */
  weightStreamMs: number;
  /** Linear-layer compute per token of T (k_lin). */
  kLinMs: number;
  /** Tensor-parallel all-reduce per step (c_ar) and per token of T (k_ar); both 0 at TP1. */
  cArMs: number;
  kArMs: number;
  /** Decode attention: KV reads per context token of every decode sequence in the step (k_kv). */
  kKvMs: number;
  /** Prefill attention per (query, key) pair: N*P + N*N/2 pairs for N new tokens on P cached (c_attn). */
  cAttnMs: number;
  kvBytesPerToken: number;
  /** HBM of all GPUs of the instance. */
  hbmBytes: number;
  /** Weights of the whole model (all GPUs of the instance). */
  weightBytes: number;
  /** Share of HBM vLLM may use (weights + KV cache); vLLM's default 0.9. */
  gpuMemoryUtilization: number;
  /** Chunked-prefill budget: new tokens per step (vLLM max_num_batched_tokens). */
  maxNumBatchedTokens: number;
  /** Sequences per step (vLLM max_num_seqs). */
  maxNumSeqs: number;
}

export type PresetName = "h20-72b" | "h100-70b" | "h100-8b";
export const DEFAULT_PRESET: PresetName = "h20-72b";

const MIB = 1024 * 1024;
const KIB = 1024;
// Device memory as nvidia-smi reports it (the total vLLM's gpu_memory_utilization applies to):
// H100 SXM 80GB shows 81,559 MiB, H20 shows 97,871 MiB.
const H100_HBM_BYTES = 81_559 * MIB;
const H20_HBM_BYTES = 97_871 * MIB;

/** vLLM defaults shared by the presets. */
export const VLLM_DEFAULTS = { gpuMemoryUtilization: 0.9, maxNumBatchedTokens: 8192, maxNumSeqs: 256 } as const;

// Coefficients: shared/docs/perf-model.md, "Coefficients (BF16, ms)". KV bytes per token = 2 (K, V) × layers ×
// KV heads × head dim × 2 bytes. Weights = parameters × 2 bytes (BF16), parameter counts from the models' Hugging Face
// safetensors metadata.
export const PRESETS: Record<PresetName, ModelPreset> = {
  "h20-72b": {
    name: "h20-72b",
    description: "Qwen2.5-72B-Instruct, BF16, TP4 on 4×H20 96 GB (the DolphinRouting paper's setup)",
    tp: 4,
    // H20: 4.0 TB/s HBM, 148 TFLOPS BF16 dense: compute-bound decode above ≈ 29 sequences (T_w / k_lin).
    tFixMs: 2.0,
    weightStreamMs: 10.87,
    kLinMs: 0.373,
    cArMs: 4.0,
    kArMs: 0.0109,
    kKvMs: 2.6e-5,
    cAttnMs: 7.3e-6,
    kvBytesPerToken: 320 * KIB, // 80 layers × 8 KV heads × 128 × 2 × 2 B
    hbmBytes: 4 * H20_HBM_BYTES,
    weightBytes: 72.71e9 * 2, // 72.7 B parameters (Qwen2.5-72B model card) → ≈145 GB
    ...VLLM_DEFAULTS,
  },
  "h100-70b": {
    name: "h100-70b",
    description: "Llama-3.1-70B-Instruct, BF16, TP4 on 4×H100 SXM 80 GB",
    tp: 4,
    // TP4 all-reduce from Vidur's h100_dgx profile: 26.7 ms at 2,048 tokens, c_ar + k_ar × 2048 = 26.3 ms.
    tFixMs: 2.0,
    weightStreamMs: 12.98,
    kLinMs: 0.0559,
    cArMs: 4.0,
    kArMs: 0.0109,
    kKvMs: 3.1e-5,
    cAttnMs: 2.18e-6,
    kvBytesPerToken: 320 * KIB, // 80 layers × 8 KV heads × 128 × 2 × 2 B
    hbmBytes: 4 * H100_HBM_BYTES,
    weightBytes: 70.55e9 * 2, // 70.55 B parameters → ≈141 GB
    ...VLLM_DEFAULTS,
  },
  "h100-8b": {
    name: "h100-8b",
    description: "Llama-3.1-8B-Instruct, BF16, TP1 on 1×H100 SXM 80 GB",
    tp: 1,
    // T_w 5.6 ms: Vidur's H100 linear layers at one token.
    tFixMs: 1.0,
    weightStreamMs: 5.6,
    kLinMs: 0.0228,
    cArMs: 0,
    kArMs: 0,
    kKvMs: 4.9e-5,
    cAttnMs: 1.75e-6,
    kvBytesPerToken: 128 * KIB, // 32 layers × 8 KV heads × 128 × 2 × 2 B
    hbmBytes: H100_HBM_BYTES,
    weightBytes: 8.03e9 * 2, // 8.03 B parameters → ≈16 GB
    ...VLLM_DEFAULTS,
  },
};

/** Tokens of KV cache an instance holds: (HBM × utilisation − weights) / KV bytes per token, floored, ≥ 0. */
export function kvCapacityTokens(p: ModelPreset): number {
  const free = p.hbmBytes * p.gpuMemoryUtilization - p.weightBytes;
  return free > 0 ? Math.floor(free / p.kvBytesPerToken) : 0;
}

/** KV-cache blocks of `blockTokens` tokens (vLLM's 16 by default). */
export function kvCapacityBlocks(p: ModelPreset, blockTokens = 16): number {
  return Math.floor(kvCapacityTokens(p) / blockTokens);
}

/** A preset by name: custom presets (`extra`, from a cluster file) first, then the built-in ones. */
export function resolvePreset(name: string, extra?: Record<string, ModelPreset>): ModelPreset {
  const found =
    (extra && Object.hasOwn(extra, name) ? extra[name] : undefined) ??
    (Object.hasOwn(PRESETS, name) ? PRESETS[name as PresetName] : undefined);
  if (found) return found;
  const known = [...Object.keys(PRESETS), ...Object.keys(extra ?? {})].sort();
  throw new Error(`unknown model preset "${name}" (known: ${known.join(", ")})`);
}
