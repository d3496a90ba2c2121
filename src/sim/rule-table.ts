// A rule policy's table on a simulated preset, from its kind name alone: the reference defaults, plus the one
// parameter Dynamo leaves to the operator (dynamo-load's busy threshold, set against the preset's token budget).
// The one place a kind name becomes a table for `dolphin simulate`, the learner's baselines and the benchmarks.

import { ruleTable } from "../table/rule-table.js";
import type { PolicyKind, Table } from "../table/table.js";
import type { ModelPreset } from "./model-presets.js";

/** Kinds a name alone determines: not the learned kinds, not PPD (its table is built from measurements). */
export type RuleKind = Exclude<PolicyKind, "kmeans" | "gmm" | "ppd">;

export function ruleTableFor(kind: RuleKind, preset: ModelPreset): Table {
  if (kind === "dynamo-load") {
    // busy when more than one step's worth of prefill tokens is queued (Dynamo leaves the threshold to the operator)
    return ruleTable(kind, { prefill_busy_threshold: 1, max_num_batched_tokens: preset.maxNumBatchedTokens });
  }
  return ruleTable(kind);
}
