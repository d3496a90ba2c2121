// The edge of `dolphin report`: writes what src/report/report.ts builds (report.md and its SVG charts) into a folder.
// Kept apart so src/report/report.ts stays free of node:* and loads in a page.

import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { EvalOutput } from "./eval-output.js";
import { buildReport } from "./report.js";

/**
 * Writes report.md and one SVG per result (p90-<workload>-<split>.svg) and per sweep
 * (attainment-vs-load-<workload>-<split>.svg) into `outDir` (created if missing). Returns the markdown and the
 * paths written, report.md first.
 */
export function writeReport(
  results: EvalOutput[],
  sweeps: EvalOutput[][],
  outDir: string,
): { markdown: string; files: string[] } {
  mkdirSync(outDir, { recursive: true });
  const { markdown, svgs } = buildReport(results, sweeps);
  const files = [join(outDir, "report.md")];
  writeFileSync(files[0]!, markdown);
  for (const s of svgs) {
    const path = join(outDir, s.name);
    writeFileSync(path, s.svg);
    files.push(path);
  }
  return { markdown, files };
}
