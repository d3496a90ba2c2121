// `dolphin bench epp`: the latency the endpoint-picker path (Envoy → ext_proc to dolphin-epp → ORIGINAL_DST to the
// picked endpoint) adds on loopback over a direct call to the worker, next to what Envoy alone adds on a static
// route to the same worker, both measured in one run; and the picker's own time per pick.
//
// Processes: the fake OpenAI worker of fake-servers.ts (its own node process), dolphin-epp (build/dolphin-epp; table
// always-local, the worker as its one decode endpoint, approximate mode: the fake worker has no /tokenize, and the
// figure is the protocol's cost, not a tokenizer's) and two Envoys from .venv (--concurrency 2 each, idle while the
// other is measured): `envoy` routes every request to the worker (the baseline), `epp` is dolphin gateway's
// configuration (FULL_DUPLEX_STREAMED request bodies, only :path forwarded, the response skipped, the access log to
// the picker ending each request's loads). The load generator and rotated rounds are bench/envoy.ts's
// (open-loop.ts). Added latency at q = q(path) − q(direct). pick_us: the mean of the picker's
// dolphin_epp_pick_seconds over the measured requests (from the body's end to the pick).

import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import { join } from "node:path";
import { startEnvoy, type RunningEnvoy } from "../src/envoy/launch.js";
import { startGatewayEnvoy, type RunningGatewayEnvoy } from "../src/gateway/envoy.js";
import { startEpp, type RunningEpp } from "../src/gateway/epp.js";
import { encodeTable } from "../src/table/codec.js";
import { ruleTable } from "../src/table/rule-table.js";
import { startFakeWorker } from "./fake-servers.js";
import { Children, MODEL } from "./harness.js";
import { endpoint, rotatedRounds, roundsPlan, type Endpoint, type LoopbackBenchOptions } from "./open-loop.js";
import { minus, quantiles, r3, type Quantiles } from "./stats.js";

export interface EppModeResult {
  epp_added_latency_ms: Quantiles;
  envoy_added_latency_ms: Quantiles;
  direct_latency_ms: Quantiles;
  envoy_latency_ms: Quantiles;
  epp_latency_ms: Quantiles;
  /** epp p50 ≤ envoy p50 + 0.5 ms and epp p99 ≤ 1.5 × envoy p99 (both added latencies). */
  target_met: boolean;
  failed: { direct: number; envoy: number; epp: number };
}

export interface EppBenchResult extends EppModeResult {
  streaming: EppModeResult;
  pick_us: number;
  rate: number;
  requests: number;
  runtime: { node: string; cpus: number; cpu_model: string; envoy_concurrency: number; rounds: number; method: string };
}

export type EppBenchOptions = LoopbackBenchOptions;

const P50_EXTRA_LIMIT_MS = 0.5;
const P99_RATIO_LIMIT = 1.5;
const CONCURRENCY = 2;

export async function runEppBench(opts: EppBenchOptions = {}): Promise<EppBenchResult> {
  const plan = roundsPlan(opts);
  const { requests, rate, rounds, progress } = plan;
  const children = new Children();
  const dir = mkdtempSync(join(os.tmpdir(), "dolphin-bench-epp-"));
  const eps: Endpoint[] = [];
  let bare: RunningEnvoy | null = null;
  let gateway: RunningGatewayEnvoy | null = null;
  let epp: RunningEpp | null = null;
  try {
    const { decodeUrl } = await startFakeWorker(children);
    const worker = new URL(decodeUrl);
    epp = await startEpp({
      dir,
      table: encodeTable(ruleTable("always-local")),
      endpoints: [{ address: worker.host, role: "decode" }],
      model: MODEL,
      mode: "approximate",
    });
    bare = await startEnvoy(
      {
        model: MODEL,
        table: "always-local",
        workers: [{ id: "decode-0", role: "decode", url: decodeUrl }],
        listen: { port: 0 },
        admin: { port: 0 },
        concurrency: CONCURRENCY,
      },
      { withoutFilter: true },
    );
    gateway = await startGatewayEnvoy(
      {
        listen: { port: 0 },
        admin: { port: 0 },
        epp: { host: epp.host, port: epp.grpcPort },
        fallback: [{ host: worker.hostname, port: Number(worker.port) }],
        concurrency: CONCURRENCY,
      },
      dir,
    );
    const targets = {
      direct: endpoint("direct", decodeUrl),
      envoy: endpoint("envoy", bare.url),
      epp: endpoint("epp", gateway.url),
    };
    eps.push(...Object.values(targets));
    progress(`upstream ${decodeUrl}, envoy ${bare.url}, envoy + ext_proc to dolphin-epp ${gateway.url}`);
    const metricsUrl = epp.metricsUrl;
    const pickTime = async (): Promise<{ sum: number; count: number }> => {
      const text = await (await fetch(metricsUrl)).text();
      const v = (name: string): number =>
        Number(new RegExp(`^dolphin_epp_pick_seconds_${name} ([\\d.e+-]+)`, "m").exec(text)?.[1] ?? 0);
      return { sum: v("sum"), count: v("count") };
    };
    const mode = async (stream: boolean): Promise<EppModeResult> => {
      const paths = [targets.direct, targets.envoy, targets.epp];
      const { latencies, failed } = await rotatedRounds(paths, plan, stream, progress);
      const q = (name: string): Quantiles => quantiles(latencies.get(name)!);
      const direct = q("direct");
      const envoyQ = q("envoy");
      const eppQ = q("epp");
      const eppAdded = minus(eppQ, direct);
      const envoyAdded = minus(envoyQ, direct);
      return {
        epp_added_latency_ms: eppAdded,
        envoy_added_latency_ms: envoyAdded,
        direct_latency_ms: direct,
        envoy_latency_ms: envoyQ,
        epp_latency_ms: eppQ,
        target_met:
          eppAdded.p50 <= envoyAdded.p50 + P50_EXTRA_LIMIT_MS && eppAdded.p99 <= P99_RATIO_LIMIT * envoyAdded.p99,
        failed: { direct: failed.get("direct")!, envoy: failed.get("envoy")!, epp: failed.get("epp")! },
      };
    };
    const before = await pickTime();
    const plain = await mode(false);
    const streaming = await mode(true);
    const after = await pickTime();
    const cpus = os.cpus();
    return {
      ...plain,
      streaming,
      pick_us: after.count > before.count ? r3((1e6 * (after.sum - before.sum)) / (after.count - before.count)) : NaN,
      rate,
      requests,
      runtime: {
        node: process.version,
        cpus: cpus.length,
        cpu_model: cpus[0]?.model.trim() ?? "unknown",
        envoy_concurrency: CONCURRENCY,
        rounds,
        method:
          "loopback; fake upstream in its own node process, dolphin-epp (approximate mode, always-local, one endpoint), " +
          "two Envoys (.venv, --concurrency 2): a static route and ext_proc + ORIGINAL_DST + the access log to the picker; open-loop load generator in " +
          "the bench process; paths one at a time in rotated rounds; added = quantile(path) − quantile(direct)",
      },
    };
  } finally {
    for (const ep of eps) ep.agent.destroy();
    await gateway?.close();
    await bare?.close();
    await epp?.close();
    await children.closeAll();
    rmSync(dir, { recursive: true, force: true });
  }
}

export function formatEppBench(r: EppBenchResult): string {
  const q = (x: Quantiles): string => `${x.p50.toFixed(3)} / ${x.p99.toFixed(3)}`;
  const mode = (name: string, m: EppModeResult): string[] => [
    `${name}: direct ${q(m.direct_latency_ms)} ms, Envoy ${q(m.envoy_latency_ms)}, Envoy + EPP ${q(m.epp_latency_ms)}`,
    `  added over direct (p50 / p99): Envoy ${q(m.envoy_added_latency_ms)} ms, Envoy + EPP ${q(m.epp_added_latency_ms)} ms: ` +
      `target (p50 ≤ Envoy + ${P50_EXTRA_LIMIT_MS} ms, p99 ≤ ${P99_RATIO_LIMIT} × Envoy) ${m.target_met ? "met" : "MISSED"}` +
      (m.failed.epp + m.failed.envoy + m.failed.direct > 0 ? ` (failed: ${JSON.stringify(m.failed)})` : ""),
  ];
  return [
    `open loop at ${r.rate} req/s, ${r.requests} requests per path and mode in ${r.runtime.rounds} rotated rounds (loopback)`,
    ...mode("non-streaming", r),
    ...mode("streaming", r.streaming),
    `dolphin-epp's time per pick (body end to pick): ${r.pick_us} µs`,
    `${r.runtime.node}, ${r.runtime.cpus} CPUs (${r.runtime.cpu_model}); load generator, Envoys, picker and worker share them`,
  ].join("\n");
}
