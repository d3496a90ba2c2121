// The simulated-cluster flags that simulate, train, eval and ablate share (workload, format, cluster, link, split,
// SLO, load, seed, requests), checked here at the boundary so a bad value is reported against its flag before any
// work starts.

import { loadCoreModule } from "../../bindings/node/index.js";
import type { JobOptions } from "../learn/job.js";
import { parseSlo } from "../sim/metrics.js";
import { resolveCluster } from "../sim/run.js";
import { parseSplit } from "../sim/split.js";
import { parseLoad, type WorkloadFormat } from "../sim/workload.js";
import { flag, intOption, progress, UsageError, type Values } from "./args.js";

export const jobOptionSpecs = {
  workload: { type: "string" },
  format: { type: "string" },
  cluster: { type: "string" },
  link: { type: "string" },
  split: { type: "string" },
  slo: { type: "string" },
  seed: { type: "string" },
  requests: { type: "string" },
  load: { type: "string" },
} as const;

const FORMATS = ["auto", "mooncake", "azure", "lengths"] as const;

/** --format, checked; "auto" when not given. */
export function formatOption(v: Values): WorkloadFormat {
  const format = String(v["format"] ?? "auto");
  if (!(FORMATS as readonly string[]).includes(format))
    throw new UsageError(`--format must be auto, mooncake, azure or lengths, got ${format}`);
  return format as WorkloadFormat;
}

/** Checks --cluster, --link, --split, --slo and --load with the parsers the simulator will use on them. */
export function checkClusterFlags(v: Values): void {
  const cluster = v["cluster"] !== undefined ? String(v["cluster"]) : undefined;
  flag("cluster", () => resolveCluster(cluster, undefined));
  if (v["link"] !== undefined) flag("link", () => resolveCluster(cluster, String(v["link"])));
  flag("split", () => parseSplit(String(v["split"])));
  flag("slo", () => parseSlo(String(v["slo"] ?? "default")));
  if (v["load"] !== undefined) flag("load", () => parseLoad(String(v["load"])));
}

/** The options train, eval and ablate share. */
export function jobOptions(v: Values): JobOptions {
  for (const k of ["workload", "split"]) if (!v[k]) throw new UsageError(`--${k} is required`);
  const format = formatOption(v);
  checkClusterFlags(v);
  return {
    workload: String(v["workload"]),
    format,
    split: String(v["split"]),
    slo: String(v["slo"] ?? "default"),
    module: loadCoreModule(),
    // quiet under --json: the output is for a program, and a log collecting stderr should hold only errors
    progress: v["json"] ? () => undefined : progress,
    seed: intOption(v["seed"], "seed", 0, 2 ** 31 - 1, 1),
    ...(v["cluster"] !== undefined ? { cluster: String(v["cluster"]) } : {}),
    ...(v["link"] !== undefined ? { link: String(v["link"]) } : {}),
    ...(v["requests"] !== undefined ? { requests: intOption(v["requests"], "requests", 20, 10_000_000, 1000) } : {}),
    ...(v["load"] !== undefined ? { load: String(v["load"]) } : {}),
  };
}
