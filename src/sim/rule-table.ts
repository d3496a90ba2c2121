// A rule policy's table on a simulated preset, from its kind name alone: the reference defaults, plus the parameters
// Dynamo leaves to the operator (dynamo-load's busy threshold, set against the preset's token budget; isl_or_load's
// prefill-busy line, the same, and its decode-busy gate, set against the preset's KV capacity).
// The one place a kind name becomes a table for `dolphin simulate`, the learner's baselines and the benchmarks.

import { ruleTable } from "../table/rule-table.js";
import type { PolicyKind, Table } from "../table/table.js";
import { kvCapacityTokens, type ModelPreset } from "./model-presets.js";

/**
 * isl_or_load's two lines, which Dynamo leaves to the operator, set for the baseline to be as strong as the load sweep
 * (docs/results.md, "The load sweep") found it, on its own, over 54 cells of nine families at five loads and a ramp
 * (the cells where it meets the sweep's targets, simulated): the prefill worker is busy above PREFILL_BUSY_STEPS
 * steps' worth of new tokens (1: 39 cells, 2: 38, 4: 43, 8: 37; at 1 a single long prompt's prefill already counts
 * as busy, so the rule leaves isl_bounding at low load), and the decode worker above DECODE_BUSY_SHARE of its KV
 * capacity in tokens (0.86: 30 cells, 0.43: 43, 0.25: 44, 0.15: 41). Dynamo compares its potential KV blocks with a
 * share of its total (its tests use 0.9); the router's decode load (active prefill + decode tokens) reaches a share
 * of the capacity sooner.
 */
export const PREFILL_BUSY_STEPS = 4;
export const DECODE_BUSY_SHARE = 0.25;

/** Kinds a name alone determines: not the learned kinds, not PPD (its table is built from measurements). */
export type RuleKind = Exclude<PolicyKind, "kmeans" | "gmm" | "ppd">;

export function ruleTableFor(kind: RuleKind, preset: ModelPreset): Table {
  if (kind === "dynamo-load") {
    // busy when more than one step's worth of prefill tokens is queued (Dynamo leaves the threshold to the operator)
    return ruleTable(kind, { prefill_busy_threshold: 1, max_num_batched_tokens: preset.maxNumBatchedTokens });
  }
  if (kind === "dynamo-isl-or-load") {
    return ruleTable(kind, {
      prefill_busy_tokens: PREFILL_BUSY_STEPS * preset.maxNumBatchedTokens,
      decode_busy_tokens: Math.round(DECODE_BUSY_SHARE * kvCapacityTokens(preset)),
    });
  }
  return ruleTable(kind);
}
