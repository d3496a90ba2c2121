// `dolphin start` (npm start): the main job, learning tables on the default simulated cluster and comparing
// every policy.

import { loadCoreModule } from "../../bindings/node/index.js";
import { runMainJob } from "../learn/main-job.js";
import { intOption, progress, type Command } from "./args.js";

export const command: Command = {
  usage: `dolphin start [--out DIR] [--requests N (default 2000 per part)] [--seed N]

Learns DolphinRouting tables for the hybrid workload (ArXiv-like, L-Eval-like, HumanEval-like requests) on a
simulated h20-72b cluster (Qwen2.5-72B TP4 on H20, the paper's hardware) for the 3P1D and 2P2D splits at the saturated
load, evaluates them against every baseline on other arrivals of the same workload, prints the side-by-side table
with the paper's published deltas, and writes the tables, the evaluation JSON and the report (markdown + SVG) into
--out (default out/). Every figure is simulated.`,
  options: { out: { type: "string" }, requests: { type: "string" }, seed: { type: "string" } },
  async run(v) {
    return runMainJob({
      module: loadCoreModule(),
      outDir: String(v["out"] ?? "out"),
      requests: intOption(v["requests"], "requests", 50, 100_000, 2000),
      seed: intOption(v["seed"], "seed", 0, 2 ** 31 - 1, 1),
      progress,
      print: (t) => process.stdout.write(t),
    });
  },
};
