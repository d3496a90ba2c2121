// Turning user-level choices (workload, cluster, split, SLO, policy, load) into a simulation, shared by the
// `dolphin simulate` command, the benchmarks and the learner. Also defines and finds the saturated load.

import { existsSync, readFileSync } from "node:fs";
import { decodeTable, ruleTable, POLICY_KINDS, type PolicyKind, type Table } from "../table.js";
import { parseSlo, type Slo } from "./metrics.js";
import {
  DEFAULT_PRESET, LINKS, parseClusterFile, resolveLink, resolvePreset, type LinkPreset, type ModelPreset,
} from "./perf.js";
import { parseSplit, simulate, type SimConfig, type SimResult, type SplitSpec } from "./simulator.js";
import type { Workload } from "./types.js";
import { loadWorkload, parseLoad, withLoad, type Load, type WorkloadFormat } from "./workload.js";

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

/** Rule tables for policy names; dynamo-load needs its threshold, set against the preset's token budget. */
export function policyTable(policy: string, preset: ModelPreset, tableFile?: string): Table {
  if (tableFile) {
    if (!existsSync(tableFile)) throw new Error(`--table: no such file: ${tableFile}`);
    const t = decodeTable(readFileSync(tableFile));
    if (policy !== "table" && policy !== t.kind && !(policy === "dolphin" && (t.kind === "kmeans" || t.kind === "gmm"))) {
      throw new Error(`--policy ${policy} does not match the table's kind ${t.kind}`);
    }
    return t;
  }
  if (!(POLICY_KINDS as readonly string[]).includes(policy)) {
    throw new Error(`--policy: unknown policy ${JSON.stringify(policy)}; one of ${POLICY_KINDS.join(", ")}`);
  }
  const kind = policy as PolicyKind;
  if (kind === "kmeans" || kind === "gmm" || kind === "ppd") throw new Error(`--policy ${kind} needs --table (a learned or built table)`);
  if (kind === "dynamo-load") {
    // busy when more than one step's worth of prefill tokens is queued (Dynamo leaves the threshold to the operator)
    return ruleTable(kind, { prefill_busy_threshold: 1, max_num_batched_tokens: preset.maxNumBatchedTokens });
  }
  return ruleTable(kind);
}

export function resolveCluster(cluster: string | undefined, link: string | undefined): { preset: ModelPreset; link: LinkPreset } {
  const name = cluster ?? DEFAULT_PRESET;
  let extraPresets: Record<string, ModelPreset> = {};
  let extraLinks: Record<string, LinkPreset> = {};
  let preset: ModelPreset;
  if (existsSync(name) && name.endsWith(".json")) {
    let json: unknown;
    try {
      json = JSON.parse(readFileSync(name, "utf8"));
    } catch (e) {
      throw new Error(`${name}: not JSON: ${(e as Error).message}`);
    }
    const parsed = parseClusterFile(json, name);
    extraPresets = parsed.presets;
    extraLinks = parsed.links;
    const names = Object.keys(extraPresets);
    if (names.length !== 1) throw new Error(`${name}: a cluster file used as --cluster must define exactly one preset, found ${names.length}`);
    preset = extraPresets[names[0]!]!;
  } else preset = resolvePreset(name, extraPresets);
  return { preset, link: link ? resolveLink(link, extraLinks) : LINKS["ib-ndr"] };
}

export function prepareRun(o: RunOptions): PreparedRun {
  const { preset, link } = resolveCluster(o.cluster, o.link);
  const split: SplitSpec = parseSplit(o.split);
  const slo: Slo = parseSlo(o.slo);
  const table = policyTable(o.policy, preset, o.table);
  const base = loadWorkload(o.workload, o.format ?? "auto", {
    ...(o.seed !== undefined ? { seed: o.seed } : {}), ...(o.requests !== undefined ? { requests: o.requests } : {}),
  });
  const config: SimConfig = {
    preset, split, slo, table, link,
    ...(o.dedupeTransfer ? { dedupeTransfer: true } : {}),
    ...(o.indexLagMs ? { indexLagMs: o.indexLagMs } : {}),
    ...(o.cacheView ? { cacheView: o.cacheView } : {}),
    ...(o.module ? { module: o.module } : {}),
  };
  const load = parseLoad(o.load ?? "trace");
  const scale = scaleForLoad(load, base, config);
  return { workload: atScale(base, scale), config, loadScale: scale, load };
}

/** The arrival-rate scale a load asks for, relative to the workload's own rate (the saturated one is searched for). */
export function scaleForLoad(load: Load, w: Workload, config: Omit<SimConfig, "table">): number {
  switch (load.kind) {
    case "saturated": return findSaturatedScale(w, config).scale;
    case "scale": return load.factor;
    case "rate": return load.rps / w.rate;
    case "trace": return 1;
  }
}

/** The workload with its arrival rate scaled. */
export const atScale = (w: Workload, scale: number): Workload => (scale === 1 ? w : withLoad(w, { kind: "scale", factor: scale }));

export interface Saturation {
  /** arrival-rate scale factor relative to the workload's own rate */
  scale: number;
  /** requests per second at that scale */
  rps: number;
  /** (scale, SLO attainment) probes, in the order tried */
  probes: [number, number][];
}

/** The SLO attainment the reference policy must keep at the saturated load. */
export const SATURATION_ATTAINMENT = 0.9;

/**
 * The saturated load: the highest arrival rate at which the cluster, routed by Dynamo's isl_bounding rule (the
 * reference every policy is compared against), still meets the SLO end to end for 90% of requests — DistServe's
 * goodput rate for that SLO. Above it queues build and attainment collapses; below it routing hardly matters.
 * Found by doubling or halving the workload's rate until the 90% line is bracketed, then 6 bisection steps (to
 * within ~1.1%). The probes use at most the first 1,500 requests to keep the search quick.
 */
export function findSaturatedScale(w: Workload, config: Omit<SimConfig, "table">): Saturation {
  const probeWorkload: Workload = { ...w, requests: w.requests.slice(0, 1500) };
  const probeConfig: SimConfig = { ...config, table: ruleTable("dynamo-isl") };
  const probes: [number, number][] = [];
  const ok = (s: number): boolean => {
    const r: SimResult = simulate(withLoad(probeWorkload, { kind: "scale", factor: s }), probeConfig);
    probes.push([s, r.summary.slo_attainment]);
    return r.summary.slo_attainment >= SATURATION_ATTAINMENT;
  };
  let lo: number;
  let hi: number;
  if (ok(1)) {
    lo = 1;
    hi = 2;
    while (hi < 1024 && ok(hi)) [lo, hi] = [hi, hi * 2];
  } else {
    hi = 1;
    lo = 0.5;
    while (lo > 1 / 1024 && !ok(lo)) [lo, hi] = [lo / 2, lo];
  }
  for (let i = 0; i < 6; i++) {
    const mid = Math.sqrt(lo * hi);
    if (ok(mid)) lo = mid;
    else hi = mid;
  }
  return { scale: lo, rps: w.rate * lo, probes };
}
