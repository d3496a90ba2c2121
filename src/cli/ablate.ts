// `dolphin ablate`: the paper's ablations and its open questions, on the simulated cluster.

import { ablationMarkdown, runStudy, STUDIES, type AblationRow, type Study } from "../learn/ablate.js";
import { UsageError, type Command } from "./args.js";
import { jobOptions, jobOptionSpecs } from "./sim-options.js";

export const command: Command = {
  usage: `dolphin ablate --study <${STUDIES.join("|")}> --workload <name|file> --split <nPmD> [--cluster …] [--slo …]
              [--seed N] [--requests N] [--load …] [--json]

Studies: k (K = 2, 4, 8, 16), scan (with and without scan initialization), osl-feature (with and without osl_hat),
algo (k-means vs GMM), osl-noise (classifier, oracle, noisy p = 0.2, 0.4), load (one table evaluated from 50% to
120% of saturation), yardstick (K = 8: all 256 tables vs the search). Prints a markdown table (--json: JSON lines).
Every figure is simulated.`,
  options: { ...jobOptionSpecs, study: { type: "string" }, json: { type: "boolean" } },
  async run(v) {
    const study = String(v["study"] ?? "");
    if (!(STUDIES as readonly string[]).includes(study))
      throw new UsageError(`--study must be one of ${STUDIES.join(", ")}`);
    const rows: AblationRow[] = [];
    await runStudy(study as Study, jobOptions(v), (row) => {
      rows.push(row);
      if (v["json"]) process.stdout.write(JSON.stringify(row) + "\n");
    });
    if (!v["json"]) process.stdout.write(ablationMarkdown(rows) + "\n");
    return 0;
  },
};
