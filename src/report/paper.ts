// The paper's published P90 deltas vs Dynamo's rule (PAPER_DELTAS) and which of its workload kinds a result
// stands for (paperKind): the report quotes them beside every simulated comparison, for orientation only.

import type { EvalOutput } from "./eval-output.js";

export type PaperKind = "hybrid" | "trace" | "single";

export interface PaperDelta {
  /** Relative P90 TTFT change of DolphinRouting vs Dynamo, [best, worst] (negative = better). */
  ttftP90: readonly [number, number];
  /** Relative P90 TPOT change, [best, worst]. */
  tpotP90: readonly [number, number];
  /** The published figure in words. */
  text: string;
  /** The workload it was measured on. */
  setting: string;
  source: string;
}

/**
 * The paper's published P90 deltas vs Dynamo's rule (real cluster: Qwen 72B on H20 nodes, k-means, the two P/D
 * splits it tested, ranges across those splits — the seeds give no per-split figure). Single-type workloads are
 * "level or slightly behind": no number is published, so the marker is Dynamo's own value.
 */
export const PAPER_DELTAS: { readonly hybrid: PaperDelta; readonly trace: PaperDelta; readonly single: PaperDelta } = {
  hybrid: {
    ttftP90: [-0.079, -0.075],
    tpotP90: [-0.101, -0.065],
    text: "P90 TTFT −7.5…−7.9%, P90 TPOT −6.5…−10.1%",
    setting: "hybrid workload, two P/D splits",
    source:
      'seed 000 line 25: "On Hybrid the TTFT drop is 7.5–7.9% and the TPOT drop 6.5–10.1% across the two splits"; seed 001 line 27',
  },
  trace: {
    ttftP90: [-0.065, -0.057],
    tpotP90: [-0.055, -0.026],
    text: "P90 TTFT −5.7…−6.5%, P90 TPOT −2.6…−5.5%",
    setting: "real trace, two P/D splits",
    source: 'seed 000 line 25: "on the real trace it is 5.7–6.5% and 2.6–5.5%"; seed 001 line 27',
  },
  single: {
    ttftP90: [0, 0],
    tpotP90: [0, 0],
    text: "level with Dynamo or slightly behind (no figure published)",
    setting: "single-type benchmarks",
    source: 'seed 000 line 25: "On the three pure benchmarks the router is level with Dynamo or slightly behind"',
  },
};

const SINGLE_TYPE = /arxiv|leval|l-eval|humaneval/i;

/**
 * Which of the paper's workload kinds a result's workload corresponds to: "hybrid"; the single-type benchmarks
 * (arxiv, leval, humaneval); a trace file (any other name); null for multiturn (the paper has no such figure).
 * A result may override with a string field `paper_kind` ("hybrid" | "trace" | "single" | "none").
 */
export function paperKind(r: EvalOutput): PaperKind | null {
  const override = r["paper_kind"];
  if (override === "hybrid" || override === "trace" || override === "single") return override;
  if (override === "none") return null;
  const w = r.workload.toLowerCase();
  if (w === "hybrid") return "hybrid";
  if (w === "multiturn") return null;
  if (SINGLE_TYPE.test(w)) return "single";
  return "trace";
}
