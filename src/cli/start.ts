// `dolphin start` (npm start): the main job, learning tables on the default simulated cluster and comparing
// every policy.

import { loadCoreModule } from "../../bindings/node/index.js";
import { runMainJob } from "../learn/main-job.js";
import { poolParts, WorkerPool } from "../learn/pool.js";
import { intOption, progress, type Command } from "./args.js";
import { jobsOption } from "./train.js";

export const command: Command = {
  usage: `dolphin start [--out DIR] [--requests N (default 2000 per part)] [--seed N] [--jobs N]

Learns DolphinRouting tables for the hybrid workload (ArXiv-like, L-Eval-like, HumanEval-like requests) on a
simulated h20-72b cluster (Qwen2.5-72B TP4 on H20, the paper's hardware) for the 3P1D and 2P2D splits at the saturated
load, evaluates them against every baseline on other arrivals of the same workload, prints the side-by-side table
with the paper's published deltas, and writes the tables, the evaluation JSON and the report (markdown + SVG) into
--out (default out/). Every figure is simulated.

--jobs N (default: the number of cores) runs the job's simulations on N worker threads, each as soon as what it
needs exists: both splits at once, every baseline's evaluation as soon as the load is known, the two searches side
by side with their candidates one task each; --jobs 1 runs them in turn in one thread. The figures and files are
the same for every N.`,
  options: {
    out: { type: "string" },
    requests: { type: "string" },
    seed: { type: "string" },
    jobs: { type: "string" },
  },
  async run(v) {
    const module = loadCoreModule();
    const jobs = jobsOption(v["jobs"]);
    const pool = jobs > 1 ? new WorkerPool(jobs, module) : null;
    return runMainJob({
      module,
      ...(pool ? { parts: poolParts(pool, progress) } : {}),
      outDir: String(v["out"] ?? "out"),
      requests: intOption(v["requests"], "requests", 50, 100_000, 2000),
      seed: intOption(v["seed"], "seed", 0, 2 ** 31 - 1, 1),
      progress,
      print: (t) => process.stdout.write(t),
    }).finally(() => pool?.close());
  },
};
