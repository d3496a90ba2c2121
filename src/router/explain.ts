// The sentence `Router.explain` gives for a decision: which rule or cluster gave the bit, and the numbers it
// compared (for a learned table's fallback, why that rule gave it). The words are each kind's descriptor's
// `explain` in spec/abi.json (build/gen-abi.mjs checks every name they use), so a new kind brings its own
// sentence; here only the frame around them and the values they may name.

import { EXPLAIN_VALUES, KINDS, type ExplainClause } from "../generated/abi.js";
import { DEFAULT_FALLBACK, type FallbackKind, type Table } from "../table/table.js";
import type { Decision } from "./types.js";

const KIND_BY_NAME = new Map(KINDS.map((k) => [k.name, k]));

type Value = number | boolean | null;

/** The decision's values a template may name besides the kind's parameters (spec/abi.json "explain_values"). */
const DECISION_VALUES: Record<(typeof EXPLAIN_VALUES)[number], (d: Decision) => Value> = {
  isl: (d) => d.features.isl,
  eff_P: (d) => d.features.effP,
  eff_D: (d) => d.features.effD,
  osl_hat: (d) => d.features.oslHat,
  "eff_D/isl": (d) => d.features.effD / Math.max(d.features.isl, 1),
  load_P: (d) => d.load.prefill ?? -1,
  load_D: (d) => d.load.decode,
  bit: (d) => d.bit,
  local: (d) => d.bit === 0,
  cluster: (d) => d.cluster,
};
const WRITTEN: Partial<Record<string, (v: number) => string>> = { "eff_D/isl": (v) => v.toFixed(3) };

/** A template's `{name}` (a decision value or the rule's parameter), written as a template literal would. */
function valueOf(name: string, d: Decision, params: Record<string, unknown>): unknown {
  const decision = DECISION_VALUES[name as keyof typeof DECISION_VALUES];
  return decision ? decision(d) : params[name];
}

/** Fills `{name}` and `{a × b}` (a product) with the decision's values and the rule's parameters. */
function fill(template: string, d: Decision, params: Record<string, unknown>): string {
  return template.replace(/\{([^}]*)\}/g, (_, inside: string) => {
    const factors = inside.split(" × ");
    if (factors.length === 2)
      return String((valueOf(factors[0]!, d, params) as number) * (valueOf(factors[1]!, d, params) as number));
    const v = valueOf(inside, d, params);
    const write = WRITTEN[inside];
    return write ? write(v as number) : String(v);
  });
}

/** Whether `a op b` holds (a "when" of the spec: op one of <, ≤, >, ≥). */
function holds(when: string, d: Decision, params: Record<string, unknown>): boolean {
  const [a, op, b] = when.split(" ");
  const x = valueOf(a!, d, params) as number;
  const y = valueOf(b!, d, params) as number;
  return op === "<" ? x < y : op === "≤" ? x <= y : op === ">" ? x > y : x >= y;
}

function said(clause: ExplainClause, d: Decision, params: Record<string, unknown>): string {
  if (typeof clause === "string") return fill(clause, d, params);
  // the first alternative that holds; gen-abi.mjs checks the last one has no condition
  const alt = clause.find((a) => typeof a === "string" || holds(a.when, d, params))!;
  return fill(typeof alt === "string" ? alt : alt.say, d, params);
}

/** Why the table gave the decision's bit, in words (`scores`: the engine's distances or log-likelihoods). */
export function explainWhy(t: Table, d: Decision, scores: number[]): string {
  const path = d.path === "remote" ? "remote prefill" : "local prefill";
  if (d.reason === "no-prefill-worker") return `the policy said remote, but no prefill worker is registered: ${path}`;
  if (d.reason === "first-turn") return `PPD: turn 1 always goes through a prefill worker: ${path}`;
  const kind = KIND_BY_NAME.get(t.kind);
  if (kind?.learned) {
    const { nearest, score, beyond } = kind.explain ?? {};
    const c = d.cluster ?? 0;
    const measure = `${score} ${scores[c]?.toFixed(4)}`;
    const fallback = t.fallback ?? DEFAULT_FALLBACK;
    const ruled = `→ rule → ${d.bit === 1 ? "remote" : "local"} because ${ruleClause(fallback.kind, fallback.params, d)} (${fallback.kind})`;
    if (d.reason === "rule-fallback") return `cluster ${c} ${ruled}: ${path}`;
    if (d.reason === "out-of-distribution") {
      const bound = t.ood_bound?.[c];
      return `cluster ${c} is out of distribution (${measure} ${beyond} ${bound}) ${ruled}: ${path}`;
    }
    const lb = t.load_bound;
    if (d.reason === "load-out-of-range" && lb) {
      const over: string[] = [];
      const lp = d.load.prefill;
      if (lp !== null && lp > lb.prefill[c]!) over.push(`prefill load ${lp} > bound ${lb.prefill[c]}`);
      if (d.load.decode > lb.decode[c]!) over.push(`decode load ${d.load.decode} > bound ${lb.decode[c]}`);
      return `cluster ${c} is beyond the load it was trained at (${over.join(" and ")}) ${ruled}: ${path}`;
    }
    return `nearest ${nearest} is cluster ${c} (${measure})${lb ? loadClause(lb.prefill[c]!, lb.decode[c]!, d) : ""} whose bit is ${d.bit}: ${path}`;
  }
  const rule = kind?.explain?.rule;
  return `${rule === undefined ? `${t.kind} rule gives ${d.bit}` : fill(rule, d, t.params ?? {})}: ${path}`;
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
  const clause = KIND_BY_NAME.get(kind)?.explain?.[d.bit === 1 ? "remote" : "local"];
  return clause === undefined ? `${kind} always does` : said(clause, d, p);
}
