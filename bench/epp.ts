// `dolphin bench epp`: the latency the endpoint-picker path (Envoy → ext_proc to dolphin-epp → ORIGINAL_DST to the
// picked endpoint) adds on loopback over a direct call to the worker, next to what Envoy alone adds on a static
// route to the same worker, both measured in one run; and the picker's own time per pick. A third path is the
// ext_proc exchange alone: the picker's Envoy configuration against dolphin-epp -fixed-endpoint, which answers every
// request with the worker, the same messages as a pick, without parsing the body or calling the core; what the
// picker path adds beyond it is the pick's own cost, and what it adds over Envoy alone is the protocol's.
//
// Processes: the fake OpenAI worker of fake-servers.ts (its own node process), dolphin-epp (build/dolphin-epp; table
// always-local, the worker as its one decode endpoint, approximate mode: the fake worker has no /tokenize, and the
// figure is the protocol's cost, not a tokenizer's), a second dolphin-epp with -fixed-endpoint, and three Envoys
// from .venv (--concurrency 2 each, idle while another is measured): `envoy` routes every request to the worker (the
// baseline), `ext_proc` and `epp` are dolphin gateway's configuration (FULL_DUPLEX_STREAMED request bodies, only :path forwarded, the response skipped, the access log to
// the picker ending each request's loads). The load generator and rotated rounds are bench/envoy.ts's
// (open-loop.ts). Added latency at q = q(path) − q(direct). pick_us: the mean of the picker's
// dolphin_epp_pick_seconds over the measured requests (from the body's end to the pick). Context switches per
// request: each picker process's (all its threads', /proc, Linux only) over its own path's measured runs.

import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
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
  /** Envoy with ext_proc to dolphin-epp -fixed-endpoint: the exchange without a pick. */
  ext_proc_only_added_latency_ms: Quantiles;
  direct_latency_ms: Quantiles;
  envoy_latency_ms: Quantiles;
  ext_proc_only_latency_ms: Quantiles;
  epp_latency_ms: Quantiles;
  /** Each picker process's context switches (voluntary + not) per request of its path; NaN off Linux. */
  context_switches_per_request: { epp: number; ext_proc_only: number };
  /** epp p50 ≤ envoy p50 + 0.5 ms and epp p99 ≤ 1.5 × envoy p99 (both added latencies). */
  target_met: boolean;
  failed: { direct: number; envoy: number; ext_proc_only: number; epp: number };
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
  const gateways: RunningGatewayEnvoy[] = [];
  const pickers: RunningEpp[] = [];
  try {
    const { decodeUrl } = await startFakeWorker(children);
    const worker = new URL(decodeUrl);
    // an ext_proc path: a picker (the real one, or -fixed-endpoint) and an Envoy of dolphin gateway's configuration
    // in front of it, sharing one directory for their files
    const extProcPath = async (fixedEndpoint?: string): Promise<{ picker: RunningEpp; url: string }> => {
      const sub = join(dir, fixedEndpoint ? "fixed" : "epp");
      mkdirSync(sub);
      const picker = await startEpp({
        dir: sub,
        table: encodeTable(ruleTable("always-local")),
        endpoints: [{ address: worker.host, role: "decode" }],
        model: MODEL,
        mode: "approximate",
        ...(fixedEndpoint ? { fixedEndpoint } : {}),
      });
      pickers.push(picker);
      const gateway = await startGatewayEnvoy(
        {
          listen: { port: 0 },
          admin: { port: 0 },
          epp: { host: picker.host, port: picker.grpcPort },
          fallback: [{ host: worker.hostname, port: Number(worker.port) }],
          concurrency: CONCURRENCY,
        },
        sub,
      );
      gateways.push(gateway);
      return { picker, url: gateway.url };
    };
    const { picker: epp, url: eppUrl } = await extProcPath();
    const { picker: fixed, url: fixedUrl } = await extProcPath(worker.host);
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
    const targets = {
      direct: endpoint("direct", decodeUrl),
      envoy: endpoint("envoy", bare.url),
      ext_proc_only: endpoint("ext_proc_only", fixedUrl),
      epp: endpoint("epp", eppUrl),
    };
    eps.push(...Object.values(targets));
    progress(
      `upstream ${decodeUrl}, envoy ${bare.url}, envoy + ext_proc to dolphin-epp -fixed-endpoint ` +
        `${targets.ext_proc_only.port}, envoy + ext_proc to dolphin-epp ${targets.epp.port}`,
    );
    const processOf = { epp: epp.process.pid, ext_proc_only: fixed.process.pid };
    const metricsUrl = epp.metricsUrl;
    const pickTime = async (): Promise<{ sum: number; count: number }> => {
      const text = await (await fetch(metricsUrl)).text();
      const v = (name: string): number =>
        Number(new RegExp(`^dolphin_epp_pick_seconds_${name} ([\\d.e+-]+)`, "m").exec(text)?.[1] ?? 0);
      return { sum: v("sum"), count: v("count") };
    };
    const mode = async (stream: boolean): Promise<EppModeResult> => {
      const paths = [targets.direct, targets.envoy, targets.ext_proc_only, targets.epp];
      // a picker's switches between the end of the run before and the end of its own path's run (runs follow each
      // other at once): the other paths' runs, when it idles, are not counted
      const switches = { epp: { last: 0, sum: 0, requests: 0 }, ext_proc_only: { last: 0, sum: 0, requests: 0 } };
      const sample = (): void => {
        for (const k of ["epp", "ext_proc_only"] as const) switches[k].last = contextSwitches(processOf[k]);
      };
      sample();
      const { latencies, failed } = await rotatedRounds(paths, plan, stream, progress, (p, s, measured) => {
        if (measured && (p.name === "epp" || p.name === "ext_proc_only")) {
          const c = switches[p.name];
          c.sum += contextSwitches(processOf[p.name]) - c.last;
          c.requests += s.latencies.length + s.failed;
        }
        sample();
      });
      const q = (name: string): Quantiles => quantiles(latencies.get(name)!);
      const direct = q("direct");
      const envoyQ = q("envoy");
      const onlyQ = q("ext_proc_only");
      const eppQ = q("epp");
      const eppAdded = minus(eppQ, direct);
      const envoyAdded = minus(envoyQ, direct);
      const perRequest = (c: { sum: number; requests: number }): number => (c.requests ? r3(c.sum / c.requests) : NaN);
      return {
        epp_added_latency_ms: eppAdded,
        envoy_added_latency_ms: envoyAdded,
        ext_proc_only_added_latency_ms: minus(onlyQ, direct),
        direct_latency_ms: direct,
        envoy_latency_ms: envoyQ,
        ext_proc_only_latency_ms: onlyQ,
        epp_latency_ms: eppQ,
        context_switches_per_request: {
          epp: perRequest(switches.epp),
          ext_proc_only: perRequest(switches.ext_proc_only),
        },
        target_met:
          eppAdded.p50 <= envoyAdded.p50 + P50_EXTRA_LIMIT_MS && eppAdded.p99 <= P99_RATIO_LIMIT * envoyAdded.p99,
        failed: {
          direct: failed.get("direct")!,
          envoy: failed.get("envoy")!,
          ext_proc_only: failed.get("ext_proc_only")!,
          epp: failed.get("epp")!,
        },
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
          "a second dolphin-epp -fixed-endpoint (no pick), three Envoys (.venv, --concurrency 2): a static route, and ext_proc + ORIGINAL_DST + " +
          "the access log to each picker; open-loop load generator in " +
          "the bench process; paths one at a time in rotated rounds; added = quantile(path) − quantile(direct)",
      },
    };
  } finally {
    for (const ep of eps) ep.agent.destroy();
    for (const g of gateways) await g.close();
    await bare?.close();
    for (const p of pickers) await p.close();
    await children.closeAll();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Context switches of a process's threads so far (voluntary and not; /proc/PID/task), NaN where there is no /proc. */
function contextSwitches(pid: number | undefined): number {
  if (pid === undefined) return NaN;
  try {
    let n = 0;
    for (const task of readdirSync(`/proc/${pid}/task`)) {
      const status = readFileSync(`/proc/${pid}/task/${task}/status`, "utf8");
      for (const m of status.matchAll(/^(?:non)?voluntary_ctxt_switches:\s+(\d+)/gm)) n += Number(m[1]);
    }
    return n;
  } catch {
    return NaN; // not Linux, or the thread went between the listing and the read
  }
}

export function formatEppBench(r: EppBenchResult): string {
  const q = (x: Quantiles): string => `${x.p50.toFixed(3)} / ${x.p99.toFixed(3)}`;
  const mode = (name: string, m: EppModeResult): string[] => [
    `${name}: direct ${q(m.direct_latency_ms)} ms, Envoy ${q(m.envoy_latency_ms)}, Envoy + ext_proc alone ` +
      `${q(m.ext_proc_only_latency_ms)}, Envoy + EPP ${q(m.epp_latency_ms)}`,
    `  added over direct (p50 / p99): Envoy ${q(m.envoy_added_latency_ms)} ms, Envoy + ext_proc alone ` +
      `${q(m.ext_proc_only_added_latency_ms)} ms, Envoy + EPP ${q(m.epp_added_latency_ms)} ms: ` +
      `target (p50 ≤ Envoy + ${P50_EXTRA_LIMIT_MS} ms, p99 ≤ ${P99_RATIO_LIMIT} × Envoy) ${m.target_met ? "met" : "MISSED"}` +
      (Object.values(m.failed).some((n) => n > 0) ? ` (failed: ${JSON.stringify(m.failed)})` : ""),
    `  picker context switches per request: dolphin-epp ${m.context_switches_per_request.epp}, ` +
      `-fixed-endpoint ${m.context_switches_per_request.ext_proc_only}`,
  ];
  return [
    `open loop at ${r.rate} req/s, ${r.requests} requests per path and mode in ${r.runtime.rounds} rotated rounds (loopback)`,
    ...mode("non-streaming", r),
    ...mode("streaming", r.streaming),
    `dolphin-epp's time per pick (body end to pick): ${r.pick_us} µs`,
    `${r.runtime.node}, ${r.runtime.cpus} CPUs (${r.runtime.cpu_model}); load generator, Envoys, picker and worker share them`,
  ].join("\n");
}
