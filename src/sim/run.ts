// Turning user-level choices (workload, cluster, split, SLO, policy, load) into a simulation, shared by the
// `dolphin simulate` command, the benchmarks and the learner. Node only: workloads, tables and cluster files are
// named by path; the saturated load and load scaling are in saturation.ts (browser-safe).

import { existsSync, readFileSync } from "node:fs";
import { KINDS } from "../generated/abi.js";
import { ruleTable } from "../table/rule-table.js";
import { POLICY_KINDS, type PolicyKind, type Table } from "../table/table.js";
import { readTableFile } from "../table/table-file.js";
import { parseSlo, type Slo } from "./metrics.js";
import { DEFAULT_PRESET, resolvePreset, type ModelPreset } from "./model-presets.js";
import { LINKS, resolveLink, type LinkPreset } from "./kv-transfer.js";
import { clusterFromFile } from "./cluster-file.js";
import { ruleTableFor, type RuleKind } from "./rule-table.js";
import { atScale, scaleForLoad } from "./saturation.js";
import { parseSplit, type SplitSpec } from "./split.js";
import { simulate } from "./simulator.js";
import type { SimConfig, SimResult } from "./sim-config.js";
import type { Workload } from "./types.js";
import { parseLoad, type Load, type WorkloadFormat } from "./workload.js";
import { loadWorkload } from "./workload-files.js";

export interface RunOptions {
  workload: string;
  format?: WorkloadFormat;
  /** a preset name or a cluster file (JSON) defining presets and links */
  cluster?: string;
  split: string;
  slo: string;
  policy: string;
  /** table file, for kmeans, gmm and ppd policies (and to override a rule's parameters) */
  table?: string;
  load?: string;
  seed?: number;
  requests?: number;
  link?: string;
  dedupeTransfer?: boolean;
  indexLagMs?: number;
  /** "approximate": the index fed by the router's own decisions, as the Envoy filter's (SimConfig.cacheView). */
  cacheView?: "precise" | "approximate";
  module?: WebAssembly.Module;
}

export interface PreparedRun {
  workload: Workload;
  config: SimConfig;
  /** the load actually applied: the scale factor relative to the workload's own rate */
  loadScale: number;
  load: Load;
}

/** The table a policy name or table file stands for (rule kinds through ruleTableFor). */
export function policyTable(policy: string, preset: ModelPreset, tableFile?: string): Table {
  if (tableFile) {
    const t = readTableFile(tableFile);
    if (
      policy !== "table" &&
      policy !== t.kind &&
      !(policy === "dolphin" && (t.kind === "kmeans" || t.kind === "gmm"))
    ) {
      throw new Error(`policy ${policy} does not match the table's kind ${t.kind}`);
    }
    return t;
  }
  if (!(POLICY_KINDS as readonly string[]).includes(policy)) {
    throw new Error(`unknown policy ${JSON.stringify(policy)}; one of ${POLICY_KINDS.join(", ")}`);
  }
  const kind = policy as PolicyKind;
  const descriptor = KINDS.find((k) => k.name === kind);
  // learned kinds, and the rules whose descriptor says so (ppd's grid), cannot be built from their defaults
  if (descriptor?.learned || descriptor?.needs_table) throw new Error(`${kind} needs a table (a learned or built one)`);
  return ruleTableFor(kind as RuleKind, preset);
}

export function resolveCluster(
  cluster: string | undefined,
  link: string | undefined,
): { preset: ModelPreset; link: LinkPreset } {
  const name = cluster ?? DEFAULT_PRESET;
  let extraLinks: Record<string, LinkPreset> = {};
  let preset: ModelPreset;
  if (existsSync(name) && name.endsWith(".json")) {
    ({ preset, links: extraLinks } = clusterFromFile(readFileSync(name, "utf8"), name));
  } else preset = resolvePreset(name);
  return { preset, link: link ? resolveLink(link, extraLinks) : LINKS["ib-ndr"] };
}

export function prepareRun(o: RunOptions): PreparedRun {
  const { preset, link } = resolveCluster(o.cluster, o.link);
  const split: SplitSpec = parseSplit(o.split);
  const slo: Slo = parseSlo(o.slo);
  const table = policyTable(o.policy, preset, o.table);
  const base = loadWorkload(o.workload, o.format ?? "auto", {
    ...(o.seed !== undefined ? { seed: o.seed } : {}),
    ...(o.requests !== undefined ? { requests: o.requests } : {}),
  });
  const config: SimConfig = {
    preset,
    split,
    slo,
    table,
    link,
    ...(o.dedupeTransfer ? { dedupeTransfer: true } : {}),
    ...(o.indexLagMs ? { indexLagMs: o.indexLagMs } : {}),
    ...(o.cacheView ? { cacheView: o.cacheView } : {}),
    ...(o.module ? { module: o.module } : {}),
  };
  const load = parseLoad(o.load ?? "trace");
  const scale = scaleForLoad(load, base, config);
  return { workload: atScale(base, scale), config, loadScale: scale, load };
}
