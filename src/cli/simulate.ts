// `dolphin simulate`: one workload through a simulated P/D cluster under one policy.

import { existsSync, writeFileSync } from "node:fs";
import { loadCoreModule } from "../../bindings/node/index.js";
import { KINDS } from "../generated/abi.js";
import { policyTable, prepareRun, resolveCluster } from "../sim/run.js";
import { simulate } from "../sim/simulator.js";
import { flag, intOption, progress, UsageError, wrapHelp, type Command } from "./args.js";
import { checkClusterFlags, formatOption } from "./sim-options.js";

// the kinds a run builds from their defaults, and those it needs a table file for (spec/abi.json)
const FROM_DEFAULTS = KINDS.filter((k) => !k.learned && !k.needs_table).map((k) => k.name);
const NEED_TABLE = KINDS.filter((k) => k.learned || k.needs_table).map((k) => k.name);
const needTable = `${NEED_TABLE.slice(0, -1).join(", ")} and ${NEED_TABLE.at(-1)}`;
const POLICIES = `Policies: the table kinds (${FROM_DEFAULTS.join(", ")}; ${needTable} need --table).`;

export const command: Command = {
  usage: `dolphin simulate --workload <name|file> [--format auto|mooncake|azure|lengths] [--cluster <preset|file>]
                --split <nPmD|nR> [--slo <preset|ttft_ms,tpot_ms>] --policy <kind> [--table T]
                [--load trace|xS|R|saturated] [--seed N] [--requests N] [--link nvlink|ib-ndr|ib-hdr|100gbe]
                [--dedupe] [--index-lag-ms MS] [--cache-view precise|approximate] [--json] [--trace-out FILE]

Workloads: hybrid, arxiv, leval, humaneval, multiturn (generated, seeded) or a Mooncake JSONL / Azure CSV / lengths
CSV file. Clusters: h20-72b (default), h100-70b, h100-8b, or a JSON cluster file defining one preset. SLO presets:
${wrapHelp(`taichi-a (5 s, 250 ms), taichi-b (16 s, 60 ms), default (10 s, 100 ms). ${POLICIES}`)}
--load saturated runs at the saturated load: the highest arrival rate at which the cluster, routed by dynamo-isl,
still meets the SLO end to end for 90% of requests (found by search; docs/simulator.md). A run whose median request
misses the TTFT SLO prints a warning: the cluster is overloaded at that rate. The cluster is simulated:
figures carry the step-time model's error (docs/simulator-calibration.md). --trace-out writes one JSON line per request.
--cache-view approximate: the router's index learns only from its own decisions, as the Envoy filter's (docs/envoy.md).`,
  options: {
    workload: { type: "string" },
    format: { type: "string" },
    cluster: { type: "string" },
    split: { type: "string" },
    slo: { type: "string" },
    policy: { type: "string" },
    table: { type: "string" },
    load: { type: "string" },
    seed: { type: "string" },
    requests: { type: "string" },
    link: { type: "string" },
    dedupe: { type: "boolean" },
    "index-lag-ms": { type: "string" },
    "cache-view": { type: "string" },
    json: { type: "boolean" },
    "trace-out": { type: "string" },
  },
  async run(v) {
    for (const k of ["workload", "split", "policy"]) if (!v[k]) throw new UsageError(`--${k} is required`);
    const cacheView = v["cache-view"];
    if (cacheView !== undefined && cacheView !== "precise" && cacheView !== "approximate") {
      throw new UsageError(`--cache-view must be precise or approximate, got ${String(cacheView)}`);
    }
    const format = formatOption(v);
    checkClusterFlags(v);
    const cluster = v["cluster"] !== undefined ? String(v["cluster"]) : undefined;
    const table = v["table"] !== undefined ? String(v["table"]) : undefined;
    if (table !== undefined && !existsSync(table)) throw new Error(`--table: no such file: ${table}`);
    // without a table the policy name alone must make one; with a table, its kind is checked against the name
    if (table === undefined)
      flag("policy", () => policyTable(String(v["policy"]), resolveCluster(cluster, undefined).preset));
    const t0 = performance.now(); // the time reported: everything, the saturated-load search included
    const saturated = String(v["load"] ?? "").trim() === "saturated";
    if (saturated && !v["json"])
      progress(
        "finding the saturated load (the highest rate at which dynamo-isl meets the SLO for 90% of requests)…",
        false,
      );
    const prepared = prepareRun({
      workload: String(v["workload"]),
      format,
      split: String(v["split"]),
      slo: String(v["slo"] ?? "default"),
      policy: String(v["policy"]),
      module: loadCoreModule(),
      ...(cluster !== undefined ? { cluster } : {}),
      ...(table !== undefined ? { table } : {}),
      ...(v["load"] !== undefined ? { load: String(v["load"]) } : {}),
      ...(v["seed"] !== undefined ? { seed: intOption(v["seed"], "seed", 0, 2 ** 31 - 1, 1) } : {}),
      ...(v["requests"] !== undefined ? { requests: intOption(v["requests"], "requests", 1, 10_000_000, 2000) } : {}),
      ...(v["link"] !== undefined ? { link: String(v["link"]) } : {}),
      ...(v["dedupe"] ? { dedupeTransfer: true } : {}),
      ...(v["index-lag-ms"] !== undefined ? { indexLagMs: Number(v["index-lag-ms"]) } : {}),
      ...(cacheView !== undefined ? { cacheView } : {}),
    });
    if (saturated && !v["json"])
      progress(
        `saturated load: ${prepared.workload.rate.toFixed(2)} req/s (×${prepared.loadScale.toFixed(2)} the workload's rate)`,
        true,
      );
    const result = simulate(prepared.workload, prepared.config);
    const wall = (performance.now() - t0) / 1000;
    if (v["trace-out"])
      writeFileSync(String(v["trace-out"]), result.records.map((r) => JSON.stringify(r)).join("\n") + "\n");
    const c = prepared.config;
    const out = {
      workload: prepared.workload.name,
      cluster: c.preset.name,
      split: String(v["split"]),
      slo: { ttft_ms: c.slo.ttftMs, tpot_ms: c.slo.tpotMs },
      policy: c.table.kind,
      load: { spec: String(v["load"] ?? "trace"), scale: prepared.loadScale, rps: prepared.workload.rate },
      simulated: true,
      ...result.summary,
      wall_s: wall,
    };
    if (v["json"]) process.stdout.write(JSON.stringify(out) + "\n");
    else {
      const s = result.summary;
      const ms = (x: number) => (Number.isFinite(x) ? x.toFixed(1) : "-");
      process.stdout.write(
        [
          `simulated cluster: ${c.preset.name} ${out.split}, policy ${out.policy}, workload ${out.workload} (${s.requests} requests at ${prepared.workload.rate.toFixed(2)} req/s)`,
          `SLO ${c.slo.ttftMs} ms / ${c.slo.tpotMs} ms: attainment ${(100 * s.slo_attainment).toFixed(1)}% end to end, ${(100 * s.slo_attainment_per_metric).toFixed(1)}% per metric; failed ${s.failed}`,
          `TTFT ms p50 ${ms(s.ttft_ms.p50)} p90 ${ms(s.ttft_ms.p90)} p99 ${ms(s.ttft_ms.p99)}; TPOT ms p50 ${ms(s.tpot_ms.p50)} p90 ${ms(s.tpot_ms.p90)} p99 ${ms(s.tpot_ms.p99)}`,
          `local ${(100 * s.local_fraction).toFixed(1)}%, prefix hits P ${(100 * s.prefix_hit_rate.prefill).toFixed(1)}% D ${(100 * s.prefix_hit_rate.decode).toFixed(1)}%, ` +
            `KV shipped ${(s.kv_bytes_transferred / 1e9).toFixed(1)} GB, ${s.throughput_tokens_per_s.toFixed(0)} output tokens/s (simulated in ${wall.toFixed(2)} s)`,
        ].join("\n") + "\n",
      );
    }
    const overload = overloadWarning(result.summary, prepared.config.slo.ttftMs, prepared.workload.rate);
    if (overload) process.stderr.write(`dolphin simulate: warning: ${overload}\n`);
    return 0;
  },
};

/**
 * A warning when the median request misses the TTFT SLO: queues grow faster than the cluster drains them, so the
 * figures say more about the queue than about routing (the README's trace on a too-small cluster showed a P50 TTFT
 * of hours without a word).
 */
export function overloadWarning(s: { ttft_ms: { p50: number } }, ttftSloMs: number, rate: number): string | null {
  const p50 = s.ttft_ms.p50;
  if (!(p50 > ttftSloMs)) return null;
  const wait =
    p50 >= 3_600_000
      ? `${(p50 / 3_600_000).toFixed(1)} h`
      : p50 >= 60_000
        ? `${(p50 / 60_000).toFixed(1)} min`
        : `${(p50 / 1000).toFixed(1)} s`;
  return (
    `the cluster is overloaded at ${rate.toFixed(2)} req/s: the median request waits ${wait} for its first token ` +
    `(TTFT SLO ${ttftSloMs / 1000} s). Use more workers (--split, --cluster) or a lower rate (--load x0.5, or --load ` +
    `saturated for the highest rate the cluster sustains).`
  );
}
