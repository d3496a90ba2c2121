// The policies compared on the same arrivals: DolphinRouting's learned table and the baselines exactly as
// shared/docs/reference-systems.md defines them, plus PPD's own offline table, built as its Algorithm 1 says on the
// same simulator. All route through the core with the same worker choice around the bit.

import type { Summary } from "../sim/metrics.js";
import { simulate } from "../sim/simulator.js";
import type { SimConfig } from "../sim/sim-config.js";
import type { EvalLoad, EvalOutput, PolicyOutcome } from "../report/eval-output.js";
import type { Workload } from "../sim/types.js";
import { withLoad } from "../sim/workload.js";
import { BASELINE_KINDS } from "../generated/abi.js";
import { defaultParams } from "../table/params.js";
import { ruleTable } from "../table/rule-table.js";
import type { PolicyKind, Table } from "../table/table.js";

/**
 * "dolphin" (a learned kmeans or gmm table) and every other policy by its table kind's name: one name per kind, the
 * baselines in the order of their descriptors' `baseline.order` (spec/abi.json).
 */
export const POLICY_NAMES = ["dolphin", ...BASELINE_KINDS] as const satisfies readonly ("dolphin" | PolicyKind)[];
export type PolicyName = (typeof POLICY_NAMES)[number];
/** Every baseline (all but the learned table): what `dolphin eval` and the explorer compare when given no table. */
export const BASELINE_NAMES: readonly PolicyName[] = POLICY_NAMES.filter((n) => n !== "dolphin");

export function parsePolicies(s: string): PolicyName[] {
  const names = s
    .split(",")
    .map((x) => x.trim())
    .filter(Boolean);
  for (const n of names) {
    if (!(POLICY_NAMES as readonly string[]).includes(n))
      throw new Error(`unknown policy ${JSON.stringify(n)}; known: ${POLICY_NAMES.join(", ")}`);
  }
  if (names.length === 0) throw new Error("give at least one policy");
  return names as PolicyName[];
}

// ---- PPD's offline table (Algorithm 1, Appendix B.1) -------------------------------------------------------

export interface PpdBuild {
  table: Table;
  /** QPS levels that were simulated (the others copy the nearest simulated level) */
  measuredLevels: number[];
  /** turn-2+ requests seen per (context class, ratio class) at the measured levels */
  samples: number;
}

/**
 * For each QPS level near the workload's rate (×½ to ×2; at least the nearest level), runs the workload at that rate
 * twice: every turn through a prefill worker (x = 0) and turn 2+ as local append-prefill (x = 1). For each
 * (context class, input/output ratio class) cell the turn-2+ requests falling in it give mean TTFT and TPOT under
 * both; the cell goes local iff w_ttft·ΔTTFT − w_tpot·ΔTPOT > 0 with relative deltas (TTFT saved, TPOT lost).
 * Cells no request reached stay remote (plain PD). A workload without later turns needs no runs: every cell
 * remote. Differences from the paper: cells are filled from the workload's own requests rather than a synthetic
 * grid, and levels far from the workload's rate are copied, not measured.
 */
export function buildPpdTable(w: Workload, base: Omit<SimConfig, "table">, weights = { ttft: 1, tpot: 1 }): PpdBuild {
  const p = defaultParams("ppd") as { context_edges: number[]; ratio_edges: number[]; qps_levels: number[] };
  const levels = p.qps_levels;
  const ctxClass = (c: number): number => (c <= p.context_edges[0]! ? 0 : c <= p.context_edges[1]! ? 1 : 2);
  const ratioClass = (r: number): number => {
    let i = 0;
    while (i < p.ratio_edges.length && r > p.ratio_edges[i]!) i++;
    return i;
  };
  const bits = [0, 1, 2].map(() => Array.from({ length: 9 }, () => new Array<number>(levels.length).fill(1)));
  const later = w.requests.filter((r) => r.turn >= 2);
  const measured: number[] = [];
  let samples = 0;
  if (later.length > 0 && w.rate > 0) {
    const near = levels.map((q, i) => [q, i] as const).filter(([q]) => q >= w.rate / 2 && q <= w.rate * 2);
    if (near.length === 0) {
      let best = 0;
      levels.forEach((q, i) => {
        if (Math.abs(q - w.rate) < Math.abs(levels[best]! - w.rate)) best = i;
      });
      near.push([levels[best]!, best]);
    }
    const allLocal = ruleTable("ppd", {
      bits: [0, 1, 2].map(() => Array.from({ length: 9 }, () => new Array<number>(levels.length).fill(0))),
    });
    for (const [q, qi] of near) {
      const wq = withLoad(w, { kind: "rate", rps: q });
      const x0 = simulate(wq, { ...base, table: ruleTable("always-remote") }).records;
      const x1 = simulate(wq, { ...base, table: allLocal }).records;
      const acc = new Map<number, { n: number; t0: number; t1: number; p0: number; p1: number }>();
      for (const r of later) {
        const a = x0[r.id]!;
        const b = x1[r.id]!;
        if (a.failed || b.failed) continue;
        const ctx = r.contextTokens ?? 0;
        const cell = ctxClass(ctx) * 9 + ratioClass(Math.max(r.promptTokens - ctx, 0) / Math.max(r.outputTokens, 1));
        const s = acc.get(cell) ?? { n: 0, t0: 0, t1: 0, p0: 0, p1: 0 };
        s.n++;
        s.t0 += a.ttftMs;
        s.t1 += b.ttftMs;
        s.p0 += a.tpotMs;
        s.p1 += b.tpotMs;
        acc.set(cell, s);
        samples++;
      }
      for (const [cell, s] of acc) {
        const dTtft = s.t0 > 0 ? (s.t0 - s.t1) / s.t0 : 0;
        const dTpot = s.p0 > 0 ? (s.p1 - s.p0) / s.p0 : 0;
        bits[Math.floor(cell / 9)]![cell % 9]![qi] = weights.ttft * dTtft - weights.tpot * dTpot > 0 ? 0 : 1;
      }
      measured.push(q);
    }
    // levels not simulated copy the nearest simulated one
    levels.forEach((q, i) => {
      if (measured.includes(q)) return;
      const nearest = measured.reduce((a, b) => (Math.abs(b - q) < Math.abs(a - q) ? b : a));
      const from = levels.indexOf(nearest);
      for (const byRatio of bits) for (const byQps of byRatio) byQps[i] = byQps[from]!;
    });
  }
  return {
    table: ruleTable(
      "ppd",
      { bits, w_ttft: weights.ttft, w_tpot: weights.tpot },
      {
        provenance: {
          tool: "dolphin-routing (PPD Algorithm 1 on the simulator)",
          created: new Date().toISOString(),
          workload: w.name,
          seed: 0,
        },
      },
    ),
    measuredLevels: measured,
    samples,
  };
}

// ---- evaluation --------------------------------------------------------------------------------------------

/** What an evaluation reports of one policy's run. */
export function policyOutcome(s: Summary): PolicyOutcome {
  return {
    slo_attainment: s.slo_attainment,
    slo_attainment_per_metric: s.slo_attainment_per_metric,
    ttft_ms: s.ttft_ms,
    tpot_ms: s.tpot_ms,
    e2e_ms: s.e2e_ms,
    throughput_tokens_per_s: s.throughput_tokens_per_s,
    local_fraction: s.local_fraction,
    failed: s.failed,
    kv_bytes_transferred: s.kv_bytes_transferred,
    prefix_hit_rate: s.prefix_hit_rate,
  };
}

/** Every policy on the same arrivals. */
export function evaluatePolicies(
  w: Workload,
  base: Omit<SimConfig, "table">,
  tables: Partial<Record<PolicyName, Table>>,
  meta: { split: string; load: EvalLoad },
  overrides: Partial<Record<PolicyName, Partial<SimConfig>>> = {},
): EvalOutput<EvalLoad> {
  const policies: Record<string, PolicyOutcome> = {};
  for (const [name, table] of Object.entries(tables)) {
    if (!table) continue;
    policies[name] = policyOutcome(simulate(w, { ...base, ...overrides[name as PolicyName], table }).summary);
  }
  return {
    workload: w.name,
    cluster: base.preset.name,
    split: meta.split,
    slo: { ttft_ms: base.slo.ttftMs, tpot_ms: base.slo.tpotMs },
    load: meta.load,
    requests: w.requests.length,
    simulated: true,
    policies,
  };
}
