// `dolphin report`: eval results (JSON, JSON lines, or arrays = load sweeps) into markdown and SVG charts.

import { existsSync, readFileSync } from "node:fs";
import type { EvalOutput } from "../report/eval-output.js";
import { parseReportInput } from "../report/report.js";
import { writeReport } from "../report/report-files.js";
import { UsageError, type Command } from "./args.js";

export const command: Command = {
  usage: `dolphin report <eval.json …> [--out DIR]

Each file holds one eval result (dolphin eval --json), JSON lines of results, or an array of results of one setting
at different loads (a sweep, charted as SLO attainment vs load). Writes report.md and SVG charts (P90 TTFT and TPOT
per policy with the paper's figures marked) into --out (default out/report).`,
  options: { out: { type: "string" } },
  async run(v, pos) {
    if (pos.length === 0) throw new UsageError("give at least one eval result file");
    const results: EvalOutput[] = [];
    const sweeps: EvalOutput[][] = [];
    for (const f of pos) {
      if (!existsSync(f)) throw new UsageError(`no such file: ${f}`);
      const parsed = parseReportInput(readFileSync(f, "utf8"), f);
      results.push(...parsed.results);
      sweeps.push(...parsed.sweeps);
    }
    const out = String(v["out"] ?? "out/report");
    const r = writeReport(results, sweeps, out);
    process.stdout.write(`wrote ${r.files.join(", ")}\n`);
    return 0;
  },
};
