// `dolphin report`: eval and load-sweep results (what `dolphin eval --json` prints) as a markdown table and
// hand-written SVG charts — P90 TTFT and TPOT per policy with the paper's published deltas marked, and SLO
// attainment vs load. Every result here is simulated; the markdown and every chart say so.
// No dependencies and no I/O (browser-safe). This file reads the input and puts the report together: the markdown
// is markdown.ts's, the charts p90-chart.ts's and attainment-chart.ts's (on svg.ts); src/report/report-files.ts
// writes the files. The input's type and validator are in src/report/eval-output.ts.

import { ReportError, validateEvalOutput, type EvalOutput } from "./eval-output.js";
import { attainmentVsLoadChart } from "./attainment-chart.js";
import { markdownSweep, markdownTable, md } from "./markdown.js";
import { p90Chart } from "./p90-chart.js";
import { checkSweep } from "./sweep.js";

/**
 * Reads report input: one JSON eval result, a JSON array of them (a load sweep), or JSON lines (one result per
 * line). `source` names the input in errors ("<source>[2]: policies…" for the third element or line).
 */
export function parseReportInput(text: string, source: string): { results: EvalOutput[]; sweeps: EvalOutput[][] } {
  const trimmed = text.trim();
  let whole: unknown;
  try {
    whole = JSON.parse(trimmed);
  } catch {
    const lines = trimmed.split(/\r?\n/).filter((l) => l.trim() !== "");
    const results = lines.map((l, i) => {
      let v: unknown;
      try {
        v = JSON.parse(l);
      } catch {
        throw new ReportError(`${source}: line ${i + 1}: not JSON`);
      }
      return validateEvalOutput(v, `${source}:${i + 1}`);
    });
    return { results, sweeps: [] };
  }
  if (Array.isArray(whole)) {
    const sweep = whole.map((v, i) => validateEvalOutput(v, `${source}[${i}]`));
    checkSweep(sweep, source);
    return { results: [], sweeps: [sweep] };
  }
  return { results: [validateEvalOutput(whole, source)], sweeps: [] };
}

/** A file-name part: lowercase letters, digits, dots and dashes. */
function slug(s: string): string {
  return (
    s
      .toLowerCase()
      .replace(/[^a-z0-9.]+/g, "-")
      .replace(/^[-.]+|-+$/g, "") || "x"
  );
}

/**
 * The report: report.md's text, one P90 chart per result (p90-<workload>-<split>.svg) and one attainment-vs-load
 * chart per sweep (attainment-vs-load-<workload>-<split>.svg), file names made unique. src/report/report-files.ts writes it.
 */
export function buildReport(
  results: EvalOutput[],
  sweeps: EvalOutput[][],
): { markdown: string; svgs: { name: string; svg: string }[] } {
  const used = new Set<string>();
  const unique = (base: string): string => {
    let name = `${base}.svg`;
    for (let i = 2; used.has(name); i++) name = `${base}-${i}.svg`;
    used.add(name);
    return name;
  };
  const svgs: { name: string; svg: string }[] = [];
  const parts: string[] = [
    "# dolphin report (simulated)",
    "",
    "Every number below comes from the discrete-event simulator, not a real cluster. The paper's figures " +
      "(real cluster, Qwen 72B on H20 nodes, vs Dynamo's rule) are quoted for orientation only.",
    "",
  ];
  for (const r of results) {
    const name = unique(`p90-${slug(r.workload)}-${slug(r.split)}`);
    svgs.push({ name, svg: p90Chart(r) });
    parts.push(
      markdownTable([r]),
      `![P90 TTFT and TPOT per policy, ${md(r.workload)} ${md(r.split)} (simulated)](${name})`,
      "",
    );
  }
  for (const sweep of sweeps) {
    const first = sweep[0];
    if (!first) continue;
    const name = unique(`attainment-vs-load-${slug(first.workload)}-${slug(first.split)}`);
    svgs.push({ name, svg: attainmentVsLoadChart(sweep) });
    parts.push(
      markdownSweep(sweep),
      `![SLO attainment vs load, ${md(first.workload)} ${md(first.split)} (simulated)](${name})`,
      "",
    );
  }
  return { markdown: parts.join("\n"), svgs };
}
