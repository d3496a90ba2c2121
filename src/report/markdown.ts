// The report's markdown: one section per result (the policy table, best SLO attainment first, and dolphin vs
// dynamo-isl beside the paper's figure) and one table per load sweep. Every header says the numbers are simulated.

import type { EvalOutput } from "./eval-output.js";
import { byAttainment, deltasVsBaseline, describeLoad, fmt, ms, pct, signed } from "./numbers.js";
import { PAPER_DELTAS, paperKind } from "./paper.js";
import { policyNames, sweepPoints } from "./sweep.js";

/** Text for a markdown table cell or line: no pipes, no raw HTML. */
export function md(s: string): string {
  return s
    .replace(/\\/g, "\\\\")
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;")
    .replace(/\|/g, "\\|")
    .replace(/\r?\n/g, " ");
}

function headerLine(r: EvalOutput): string {
  return (
    `simulated cluster — workload ${r.workload}, cluster ${r.cluster}, split ${r.split}, ` +
    `SLO TTFT ${r.slo.ttft_ms} ms / TPOT ${r.slo.tpot_ms} ms, load ${describeLoad(r.load)}, ${r.requests} requests`
  );
}

/** "dolphin vs dynamo-isl: P90 TTFT −x.x%, P90 TPOT −y.y%, attainment +z.z points (paper: …)". */
export function comparisonLine(r: EvalOutput, policy = "dolphin", baseline = "dynamo-isl"): string {
  const kind = paperKind(r);
  const paper = kind
    ? `paper, real cluster, ${PAPER_DELTAS[kind].setting}: ${PAPER_DELTAS[kind].text}`
    : "paper: no published figure for this workload";
  if (!r.policies[policy] || !r.policies[baseline]) {
    return `${policy} vs ${baseline}: not available (the result lacks ${r.policies[policy] ? baseline : policy}) (${paper})`;
  }
  const d = deltasVsBaseline(r, policy, baseline);
  return (
    `${policy} vs ${baseline}: P90 TTFT ${pct(d.ttftP90)}, P90 TPOT ${pct(d.tpotP90)}, ` +
    `SLO attainment ${signed(d.attainment, 1)} points (${paper})`
  );
}

/** One section per result: a header saying "simulated", the policy table (best attainment first), the comparison. */
export function markdownTable(results: EvalOutput[]): string {
  const sections = results.map((r) => {
    const rows = byAttainment(r).map(([name, p]) => {
      const cells = [
        name === "dolphin" ? `**${md(name)}**` : md(name),
        fmt(100 * p.slo_attainment, 1),
        ms(p.ttft_ms.p50),
        ms(p.ttft_ms.p90),
        ms(p.ttft_ms.p99),
        ms(p.tpot_ms.p50),
        ms(p.tpot_ms.p90),
        ms(p.tpot_ms.p99),
        fmt(p.throughput_tokens_per_s, 0),
        fmt(100 * p.local_fraction, 1),
        String(p.failed),
      ];
      return `| ${cells.join(" | ")} |`;
    });
    return [
      `## ${md(r.workload)} · ${md(r.cluster)} · ${md(r.split)} (simulated)`,
      "",
      md(headerLine(r)),
      "",
      "| policy | SLO attainment % | TTFT p50 ms | TTFT p90 ms | TTFT p99 ms | TPOT p50 ms | TPOT p90 ms | TPOT p99 ms | tok/s | local % | failed |",
      "|:--|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
      ...rows,
      "",
      md(comparisonLine(r)),
    ].join("\n");
  });
  return sections.join("\n\n") + (sections.length ? "\n" : "");
}

/** A load sweep as markdown: SLO attainment % per policy (rows) at each load (columns). */
export function markdownSweep(sweep: EvalOutput[]): string {
  const points = sweepPoints(sweep);
  const first = points[0]!.r;
  const names = policyNames(sweep);
  const head = `| policy | ${points.map((p) => md(p.label)).join(" | ")} |`;
  const rule = `|:--|${points.map(() => "--:").join("|")}|`;
  const rows = names.map(
    (n) =>
      `| ${n === "dolphin" ? `**${md(n)}**` : md(n)} | ${points
        .map((p) => {
          const pr = p.r.policies[n];
          return pr ? fmt(100 * pr.slo_attainment, 1) : "–";
        })
        .join(" | ")} |`,
  );
  return (
    [
      `## SLO attainment vs load: ${md(first.workload)} · ${md(first.cluster)} · ${md(first.split)} (simulated)`,
      "",
      md(
        `simulated cluster — SLO TTFT ${first.slo.ttft_ms} ms / TPOT ${first.slo.tpot_ms} ms; ${points.length} loads (${points[0]!.axis}); SLO attainment %`,
      ),
      "",
      head,
      rule,
      ...rows,
    ].join("\n") + "\n"
  );
}
