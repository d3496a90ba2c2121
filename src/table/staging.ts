// Turns a validated Table into the core's staged form: a kind code, K, the feature count and the Float64Array
// layout that assembly/policy/set-table.ts setTable reads. Derived GMM constants (log-normalisers, inverse variances) are
// computed here, once, so the WebAssembly core and the TypeScript reference use bit-identical numbers.

import { Kind, KINDS, RULE_SLOTS } from "../contract/core-api.js";
import { DEFAULT_FALLBACK, FEATURE_NAMES, OSL_MODEL_FEATURES, type Table } from "./table.js";

export interface StagedTable {
  kind: number;
  k: number;
  dims: number;
  staged: Float64Array;
  /** f64 index of the output-length model's section in `staged`, −1 when the table has none */
  oslAt: number;
}

/** The staged parameters of each rule kind with scalars: their names by `stage` slot (spec/abi.json), RULE_SLOTS
 *  of them ("" where no parameter uses a slot: staged as 0). */
const RULE_PARAMS = new Map(
  KINDS.filter((k) => !k.learned && k.params.some((p) => p.type === "scalar" && p.stage !== undefined)).map((k) => {
    const slots = new Array<string>(RULE_SLOTS).fill("");
    for (const p of k.params) if (p.type === "scalar" && p.stage !== undefined) slots[p.stage] = p.name;
    return [k.name, slots];
  }),
);

/** A rule's staged slots from its parameters (a kind without scalars: RULE_SLOTS zeros). */
function ruleSlots(kind: string, params: Record<string, unknown>): number[] {
  const names = RULE_PARAMS.get(kind) ?? new Array<string>(RULE_SLOTS).fill("");
  return names.map((n) => (n ? num(params[n]) : 0));
}

function num(v: unknown): number {
  return typeof v === "number" ? v : NaN;
}

/** The policy part, then the output-length model (assembly/osl.ts layout: F C idx[F] mean[F] std[F] W[C×F] b[C] rep[C]). */
export function stageTable(t: Table): StagedTable {
  const s = stagePolicy(t);
  const m = t.osl_model;
  const classes = t.osl_classes;
  if (!m || !classes) return { ...s, oslAt: -1 };
  const section = [
    m.features.length,
    classes.names.length,
    ...m.features.map((f) => OSL_MODEL_FEATURES.indexOf(f)),
    ...m.mean,
    ...m.std,
  ];
  for (const row of m.weights) section.push(...row);
  section.push(...m.bias, ...classes.representative);
  const staged = new Float64Array(s.staged.length + section.length);
  staged.set(s.staged);
  staged.set(section, s.staged.length);
  return { ...s, staged, oslAt: s.staged.length };
}

function stagePolicy(t: Table): Omit<StagedTable, "oslAt"> {
  const kind = Kind[t.kind];
  if (t.kind === "kmeans" || t.kind === "gmm") {
    const features = t.features ?? [];
    const centroids = t.centroids ?? [];
    const d = features.length;
    const k = centroids.length;
    const out: number[] = [];
    for (const f of features) out.push(FEATURE_NAMES.indexOf(f));
    out.push(...(t.scaler?.mean ?? []), ...(t.scaler?.std ?? []));
    for (const row of centroids) out.push(...row);
    out.push(...(t.bits ?? []));
    if (t.kind === "gmm") {
      const variances = t.variances ?? [];
      const weights = t.weights ?? [];
      // log w_k − ½ Σ_j log(2π σ²_kj): the score is the full log-density, as docs/table-format.md defines it
      const log2pi = Math.log(2 * Math.PI);
      for (let c = 0; c < k; c++) {
        let logDet = 0;
        for (const v of variances[c] ?? []) logDet += Math.log(v);
        out.push(Math.log(weights[c] ?? NaN) - 0.5 * (logDet + d * log2pi));
      }
      for (const row of variances) for (const v of row) out.push(1 / v);
    }
    // the guard (table version 2; a version-1 table gets the default fallback rule and no bounds)
    const fallback = t.fallback ?? DEFAULT_FALLBACK;
    out.push(Kind[fallback.kind], ...ruleSlots(fallback.kind, fallback.params as Record<string, unknown>));
    const bounds = t.ood_bound ?? [];
    out.push(bounds.length, ...bounds);
    // table version 3: the load bounds (the cluster shares are the host's, not staged)
    const load = t.load_bound;
    if (load) out.push(k, ...load.prefill, ...load.decode);
    else out.push(0);
    return { kind, k, dims: d, staged: Float64Array.from(out) };
  }
  const params = t.params ?? {};
  if (RULE_PARAMS.has(t.kind)) return { kind, k: 0, dims: 0, staged: Float64Array.from(ruleSlots(t.kind, params)) };
  if (t.kind === "ppd") {
    const ctx = params["context_edges"] as number[];
    const ratio = params["ratio_edges"] as number[];
    const qps = params["qps_levels"] as number[];
    const bits = params["bits"] as number[][][];
    const out = [ctx[0] ?? NaN, ctx[1] ?? NaN, ratio.length, ...ratio, qps.length, ...qps];
    for (const byRatio of bits) for (const byQps of byRatio) out.push(...byQps);
    return { kind, k: 0, dims: 0, staged: Float64Array.from(out) };
  }
  return { kind, k: 0, dims: 0, staged: new Float64Array(0) };
}
