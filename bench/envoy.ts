// `dolphin bench envoy`: the latency Envoy + the dolphin filter adds on loopback over a direct call to the worker,
// next to what Envoy alone adds on the same route, both measured in one run against the same fake worker.
//
// Processes: the fake OpenAI worker of fake-servers.ts (its own node process; a decode port and a prefill port), and
// three Envoys from the project's .venv (--concurrency 2 each, idle while another is measured):
//   envoy         no filter: the listener's router alone, every request to the worker (the baseline)
//   filter        the filter chain of `dolphin envoy` (wasm → buffer → header_mutation → router) with the table
//                 always-local and one decode worker: every request takes the one-hop local path
//   filter-remote the same with always-remote and a prefill worker: the two-step NixlConnector path (a detail,
//                 non-streaming only)
// The load generator and its open loop at a fixed rate are open-loop.ts's, the rotated rounds bench/proxy.ts's: one
// path at a time at the full rate, the order rotated each round. Added latency at q = q(path) − q(direct).
// filter_us_per_request: the filter's own work in its body callback (parse, catch-up on the shared decision log,
// route), the mean of its dolphin_route_time_us histogram over the measured requests, as Envoy reports it.

import os from "node:os";
import { startEnvoy, type RunningEnvoy } from "../src/envoy/launch.js";
import type { EnvoySetup } from "../src/envoy/config.js";
import { startFakeWorker } from "./fake-servers.js";
import { Children, MODEL } from "./harness.js";
import { endpoint, rotatedRounds, roundsPlan, type Endpoint, type LoopbackBenchOptions } from "./open-loop.js";
import { minus, quantiles, r3, type Quantiles } from "./stats.js";

export interface EnvoyModeResult {
  filter_added_latency_ms: Quantiles;
  envoy_added_latency_ms: Quantiles;
  direct_latency_ms: Quantiles;
  envoy_latency_ms: Quantiles;
  filter_latency_ms: Quantiles;
  /** filter p50 ≤ envoy p50 + 0.3 ms and filter p99 ≤ 1.5 × envoy p99 (both added latencies). */
  target_met: boolean;
  failed: { direct: number; envoy: number; filter: number };
}

export interface EnvoyBenchResult extends EnvoyModeResult {
  streaming: EnvoyModeResult;
  filter_us_per_request: number;
  remote_path: { latency_ms: Quantiles; added_latency_ms: Quantiles; failed: number };
  rate: number;
  requests: number;
  runtime: { node: string; cpus: number; cpu_model: string; envoy_concurrency: number; rounds: number; method: string };
}

export type EnvoyBenchOptions = LoopbackBenchOptions;

const P50_EXTRA_LIMIT_MS = 0.3;
const P99_RATIO_LIMIT = 1.5;
const CONCURRENCY = 2;

export async function runEnvoyBench(opts: EnvoyBenchOptions = {}): Promise<EnvoyBenchResult> {
  const plan = roundsPlan(opts);
  const { requests, rate, rounds, progress } = plan;
  const children = new Children();
  const envoys: RunningEnvoy[] = [];
  const eps: Endpoint[] = [];
  try {
    const { decodeUrl, prefillUrl } = await startFakeWorker(children);
    const decode = { id: "decode-0", role: "decode" as const, url: decodeUrl };
    const prefill = { id: "prefill-0", role: "prefill" as const, url: prefillUrl };
    const setup = (table: string, workers: EnvoySetup["workers"]): EnvoySetup => ({
      model: MODEL,
      table,
      workers,
      listen: { port: 0 },
      admin: { port: 0 },
      concurrency: CONCURRENCY,
    });
    const [bare, filter, remote] = await Promise.all([
      startEnvoy(setup("always-local", [decode]), { withoutFilter: true }),
      startEnvoy(setup("always-local", [decode])),
      startEnvoy(setup("always-remote", [prefill, decode])),
    ]);
    envoys.push(bare, filter, remote);
    const targets = {
      direct: endpoint("direct", decode.url),
      envoy: endpoint("envoy", bare.url),
      filter: endpoint("filter", filter.url),
      remote: endpoint("filter_remote", remote.url),
    };
    eps.push(...Object.values(targets));
    progress(`upstream ${decode.url}, envoy ${bare.url}, envoy + filter ${filter.url}, remote path ${remote.url}`);

    const routeTime = async (): Promise<{ sum: number; count: number }> => {
      const text = await (await fetch(`${filter.adminUrl}/stats/prometheus`)).text();
      const v = (name: string): number =>
        Number(new RegExp(`^dolphin_route_time_us_${name}\\{\\} ([\\d.e+]+)`, "m").exec(text)?.[1] ?? 0);
      return { sum: v("sum"), count: v("count") };
    };
    const mode = async (
      stream: boolean,
    ): Promise<{ result: EnvoyModeResult; remote: { latencies: number[]; failed: number } }> => {
      const paths = stream
        ? [targets.direct, targets.envoy, targets.filter]
        : [targets.direct, targets.envoy, targets.filter, targets.remote];
      const { latencies, failed } = await rotatedRounds(paths, plan, stream, progress);
      const q = (name: string): Quantiles => quantiles(latencies.get(name)!);
      const direct = q("direct");
      const envoyQ = q("envoy");
      const filterQ = q("filter");
      const filterAdded = minus(filterQ, direct);
      const envoyAdded = minus(envoyQ, direct);
      return {
        result: {
          filter_added_latency_ms: filterAdded,
          envoy_added_latency_ms: envoyAdded,
          direct_latency_ms: direct,
          envoy_latency_ms: envoyQ,
          filter_latency_ms: filterQ,
          target_met:
            filterAdded.p50 <= envoyAdded.p50 + P50_EXTRA_LIMIT_MS &&
            filterAdded.p99 <= P99_RATIO_LIMIT * envoyAdded.p99,
          failed: { direct: failed.get("direct")!, envoy: failed.get("envoy")!, filter: failed.get("filter")! },
        },
        remote: {
          latencies: stream ? [] : latencies.get("filter_remote")!,
          failed: stream ? 0 : failed.get("filter_remote")!,
        },
      };
    };
    const before = await routeTime();
    const plain = await mode(false);
    const streaming = await mode(true);
    await new Promise((r) => setTimeout(r, 1500)); // the histogram reaches the admin page at the next stats flush
    const after = await routeTime();
    const remoteQ = quantiles(plain.remote.latencies);
    const cpus = os.cpus();
    return {
      ...plain.result,
      streaming: streaming.result,
      filter_us_per_request:
        after.count > before.count ? r3((after.sum - before.sum) / (after.count - before.count)) : NaN,
      remote_path: {
        latency_ms: remoteQ,
        added_latency_ms: minus(remoteQ, plain.result.direct_latency_ms),
        failed: plain.remote.failed,
      },
      rate,
      requests,
      runtime: {
        node: process.version,
        cpus: cpus.length,
        cpu_model: cpus[0]?.model.trim() ?? "unknown",
        envoy_concurrency: CONCURRENCY,
        rounds,
        method:
          "loopback; fake upstream in its own node process, three Envoys (.venv, --concurrency 2); open-loop load generator in " +
          "the bench process (node:http keep-alive, hrtime); paths one at a time in rotated rounds; added = quantile(path) − quantile(direct)",
      },
    };
  } finally {
    for (const ep of eps) ep.agent.destroy();
    await Promise.all(envoys.map((e) => e.close()));
    await children.closeAll();
  }
}

export function formatEnvoyBench(r: EnvoyBenchResult): string {
  const q = (x: Quantiles): string => `${x.p50.toFixed(3)} / ${x.p99.toFixed(3)}`;
  const mode = (name: string, m: EnvoyModeResult): string[] => [
    `${name}: direct ${q(m.direct_latency_ms)} ms, Envoy ${q(m.envoy_latency_ms)}, Envoy + filter ${q(m.filter_latency_ms)}`,
    `  added over direct (p50 / p99): Envoy ${q(m.envoy_added_latency_ms)} ms, Envoy + filter ${q(m.filter_added_latency_ms)} ms: ` +
      `target (p50 ≤ Envoy + ${P50_EXTRA_LIMIT_MS} ms, p99 ≤ ${P99_RATIO_LIMIT} × Envoy) ${m.target_met ? "met" : "MISSED"}`,
  ];
  return [
    `open loop at ${r.rate} req/s, ${r.requests} requests per path and mode in ${r.runtime.rounds} rotated rounds (loopback)`,
    ...mode("non-streaming", r),
    ...mode("streaming", r.streaming),
    `remote path (always-remote: prefill dispatch + decode): ${q(r.remote_path.latency_ms)} ms, ${q(r.remote_path.added_latency_ms)} ms over direct`,
    `filter work per request (parse, log catch-up, route): ${r.filter_us_per_request} µs`,
    `${r.runtime.node}, ${r.runtime.cpus} CPUs (${r.runtime.cpu_model}); load generator, Envoys and worker share them`,
  ].join("\n");
}
