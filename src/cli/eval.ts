// `dolphin eval`: every policy on the same simulated arrivals (ones the table was not trained on).

import { existsSync } from "node:fs";
import { KINDS } from "../generated/abi.js";
import { evalJob } from "../learn/job.js";
import { BASELINE_NAMES, parsePolicies } from "../learn/policies.js";
import { readTableFile } from "../table/table-file.js";
import { flag, UsageError, wrapHelp, type Command } from "./args.js";
import { evalWithDriftGuard } from "../learn/served-eval.js";
import { GUARD_DEFAULTS_TEXT, guardLines, parseGuardOptions } from "./eval-guard.js";
import { jobOptions, jobOptionSpecs } from "./sim-options.js";

const DEFAULT_WITHOUT_TABLE = BASELINE_NAMES.join(",");
// every baseline, with its descriptor's note on how an evaluation makes its table (spec/abi.json)
const BASELINES = BASELINE_NAMES.map((name) => {
  const note = KINDS.find((k) => k.name === name)?.baseline?.note;
  return note ? `${name} (${note})` : name;
}).join(", ");

export const command: Command = {
  usage: `dolphin eval --workload <name|file> [--format …] [--cluster <preset|file>] --split <nPmD> [--slo <…>]
            [--table table.msgpack] [--policies dolphin,dynamo-isl,…] [--load saturated|trace|xS|R] [--seed N] [--requests N] [--json]
            [--drift-guard [--guard-options key=value,…]]

${wrapHelp(`Policies: dolphin (needs --table), ${BASELINES}.`)} Evaluated on arrivals the table was not
trained on: a generator with --seed + 1, a trace's second half. Every figure is simulated.

--drift-guard: the table once more on the same arrivals, routed through \`dolphin serve\`'s drift guard and its
mix-shift guard (policy dolphin+guard), with the guard's reverts, hand-overs and when they came (docs/serving.md).
--guard-options overrides its settings (defaults ${GUARD_DEFAULTS_TEXT}; mix=off turns the mix-shift guard off).`,
  options: {
    ...jobOptionSpecs,
    table: { type: "string" },
    policies: { type: "string" },
    json: { type: "boolean" },
    "drift-guard": { type: "boolean" },
    "guard-options": { type: "string" },
  },
  async run(v) {
    const tableFile = v["table"] !== undefined ? String(v["table"]) : undefined;
    if (tableFile && !existsSync(tableFile)) throw new UsageError(`--table: no such file: ${tableFile}`);
    const policies =
      v["policies"] !== undefined
        ? flag("policies", () => parsePolicies(String(v["policies"])))
        : tableFile
          ? undefined
          : parsePolicies(DEFAULT_WITHOUT_TABLE);
    if (!tableFile && policies?.includes("dolphin"))
      throw new Error("--policies dolphin needs --table (a table from dolphin train)");
    const guardOptions = v["drift-guard"] ? parseGuardOptions(v["guard-options"] as string | undefined) : null;
    if (guardOptions && !tableFile) throw new UsageError("--drift-guard needs --table (a learned table)");
    if (!guardOptions && v["guard-options"] !== undefined) throw new UsageError("--guard-options needs --drift-guard");
    const job = jobOptions(v);
    const table = tableFile ? readTableFile(tableFile) : undefined;
    const out: ReturnType<typeof evalJob> & { drift_guard?: unknown } = evalJob({
      ...job,
      ...(policies ? { policies } : {}),
      ...(table ? { table } : {}),
    });
    const guarded = guardOptions && table ? evalWithDriftGuard(job, table, out.load.scale, guardOptions) : null;
    if (guarded) {
      out.policies["dolphin+guard"] = guarded.outcome;
      out.drift_guard = guarded.report;
    }
    if (v["json"]) process.stdout.write(JSON.stringify(out) + "\n");
    else {
      process.stdout.write(
        `simulated: ${out.workload} on ${out.cluster} ${out.split}, ${out.requests} requests at ${out.load.rps.toFixed(2)} req/s, SLO ${out.slo.ttft_ms}/${out.slo.tpot_ms} ms\n`,
      );
      for (const [name, p] of Object.entries(out.policies).sort((a, b) => b[1].slo_attainment - a[1].slo_attainment)) {
        process.stdout.write(
          `${name.padEnd(14)} attainment ${(100 * p.slo_attainment).toFixed(1).padStart(5)}%  P90 TTFT ${p.ttft_ms.p90.toFixed(0).padStart(7)} ms  P90 TPOT ${p.tpot_ms.p90.toFixed(1).padStart(6)} ms  local ${(100 * p.local_fraction).toFixed(0)}%\n`,
        );
      }
      if (guarded && table) process.stdout.write(guardLines(guarded, table).join("\n") + "\n");
    }
    return 0;
  },
};
