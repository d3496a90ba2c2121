// The sentence `Router.explain` gives for a decision: which rule or cluster gave the bit, and the numbers it
// compared (for a learned table's fallback, why that rule gave it).

import { DEFAULT_FALLBACK, type FallbackKind, type Table } from "../table/table.js";
import type { Decision } from "./types.js";

/** Why the table gave the decision's bit, in words (`scores`: the engine's distances or log-likelihoods). */
export function explainWhy(t: Table, d: Decision, scores: number[]): string {
  const f = d.features;
  const path = d.path === "remote" ? "remote prefill" : "local prefill";
  if (d.reason === "no-prefill-worker") return `the policy said remote, but no prefill worker is registered: ${path}`;
  if (d.reason === "first-turn") return `PPD: turn 1 always goes through a prefill worker: ${path}`;
  if (t.kind === "kmeans" || t.kind === "gmm") {
    const c = d.cluster ?? 0;
    const measure =
      t.kind === "kmeans" ? `squared distance ${scores[c]?.toFixed(4)}` : `log-likelihood ${scores[c]?.toFixed(4)}`;
    const fallback = t.fallback ?? DEFAULT_FALLBACK;
    const ruled = `→ rule → ${d.bit === 1 ? "remote" : "local"} because ${ruleClause(fallback.kind, fallback.params, d)} (${fallback.kind})`;
    if (d.reason === "rule-fallback") return `cluster ${c} ${ruled}: ${path}`;
    if (d.reason === "out-of-distribution") {
      const bound = t.ood_bound?.[c];
      const beyond = t.kind === "kmeans" ? `${measure} > bound ${bound}` : `${measure} < floor ${bound}`;
      return `cluster ${c} is out of distribution (${beyond}) ${ruled}: ${path}`;
    }
    const lb = t.load_bound;
    if (d.reason === "load-out-of-range" && lb) {
      const over: string[] = [];
      const lp = d.load.prefill;
      if (lp !== null && lp > lb.prefill[c]!) over.push(`prefill load ${lp} > bound ${lb.prefill[c]}`);
      if (d.load.decode > lb.decode[c]!) over.push(`decode load ${d.load.decode} > bound ${lb.decode[c]}`);
      return `cluster ${c} is beyond the load it was trained at (${over.join(" and ")}) ${ruled}: ${path}`;
    }
    const nearest = `nearest ${t.kind === "kmeans" ? "centroid" : "component"} is cluster ${c} (${measure})`;
    return `${nearest}${lb ? loadClause(lb.prefill[c]!, lb.decode[c]!, d) : ""} whose bit is ${d.bit}: ${path}`;
  }
  const p = t.params ?? {};
  switch (t.kind) {
    case "dynamo-isl":
      return `Dynamo isl_bounding: eff_D ${f.effD} < ${p["max_local_prefill_tokens"]} and eff_D/isl ${(f.effD / Math.max(f.isl, 1)).toFixed(3)} < ${p["max_local_prefill_ratio"]} is ${d.bit === 0}: ${path}`;
    case "ppd":
      return `PPD: grid cell ${d.cluster} holds ${d.bit}: ${path}`;
    default:
      return `${t.kind} rule gives ${d.bit}: ${path}`;
  }
}

/** The loads as fractions of the cluster's bounds: " at decode load 0.80 and prefill load 0.35 of its bounds,". */
function loadClause(boundP: number, boundD: number, d: Decision): string {
  // a bound of 0 admits only a load of 0: its fraction is 0
  const frac = (load: number, bound: number): string => (bound > 0 ? load / bound : 0).toFixed(2);
  const decode = `decode load ${frac(d.load.decode, boundD)}`;
  if (d.load.prefill === null) return ` at ${decode} of its bound,`;
  return ` at ${decode} and prefill load ${frac(d.load.prefill, boundP)} of its bounds,`;
}

/** Why a rule that decides from the request alone gave the decision's bit (the fallback of a learned table). */
function ruleClause(kind: FallbackKind, p: Record<string, number>, d: Decision): string {
  const { isl, effD } = d.features;
  const remote = d.bit === 1;
  switch (kind) {
    case "dynamo-isl": {
      const tokens = p["max_local_prefill_tokens"]!;
      const ratio = p["max_local_prefill_ratio"]!;
      const r = (effD / Math.max(isl, 1)).toFixed(3);
      if (!remote) return `eff_D ${effD} < ${tokens} and eff_D/isl ${r} < ${ratio}`;
      return effD >= tokens ? `eff_D ${effD} ≥ ${tokens}` : `eff_D/isl ${r} ≥ ${ratio}`;
    }
    case "dynamo-load": {
      const busy = p["prefill_busy_threshold"]! * p["max_num_batched_tokens"]!;
      return remote
        ? `the prefill worker is not busy (≤ ${busy} active tokens) or its load is unknown`
        : `the prefill worker is busy (> ${busy} active tokens)`;
    }
    case "dynamo-legacy":
      return remote
        ? `eff_D ${effD} > ${p["max_local_prefill_length"]} and the prefill queue < ${p["max_prefill_queue_size"]}`
        : `eff_D ${effD} ≤ ${p["max_local_prefill_length"]} or the prefill queue ≥ ${p["max_prefill_queue_size"]}`;
    case "trtllm":
      return remote
        ? `nothing matched on the decode worker or isl − match > ${p["max_local_prefill_length"]}`
        : `isl − match ≤ ${p["max_local_prefill_length"]}`;
    case "llm-d":
      return remote
        ? `isl ${isl} ≥ ${p["prompt_tokens"]} and uncached tokens ≥ ${p["non_cached_tokens"]}`
        : `non_cached_tokens is 0, isl < ${p["prompt_tokens"]} or uncached tokens < ${p["non_cached_tokens"]}`;
    default:
      return `${kind} always does`;
  }
}
