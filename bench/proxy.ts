// `dolphin bench proxy`: the latency `dolphin serve` adds on loopback, next to what a bare pass-through adds, both
// measured in one run against the same constant-latency fake worker, plus the highest rate the proxy sustains.
//
// Processes (each its own event loop, so the load generator does not share one with what it measures; harness.ts):
//   upstream     the fake OpenAI worker of fake-servers.ts: a decode port (every path) and a prefill port (the
//                two-step detail), fixed answers written in the same tick.
//   passthrough  the bare pass-through of fake-servers.ts in front of it: no routing, a keep-alive node:http client.
//   proxy        `node bin/dolphin.js serve --config <tmp>` (via LAUNCH_SCRIPT): approximate mode (no /tokenize round trip), table
//                always-local, one decode worker: every request takes the one-hop local path.
//   proxy-remote the same with always-remote, one prefill + one decode worker: the two-step NixlConnector path
//                (non-streaming only, a detail).
// The load generator runs in this process (open-loop.ts): open loop at a fixed rate, node:http with a keep-alive
// Agent per target, a request's latency to the response's last byte, counted only for a 200 with the whole body.
//
// Fixed-rate measurement: per mode (non-streaming, streaming), a warm-up of every path, then `rounds` rounds (20 in a
// full run: 150 requests, 0.3 s per path and round); each round runs every path in turn for requests/rounds requests
// at `rate`, the order rotated by one each round, so drift and a burst of other work on the machine spread over all
// paths rather than landing on one. One path runs at a time, at the full rate.
// Added latency of a path at quantile q = q(path latencies) − q(direct latencies), q ∈ {p50, p99}: the difference of
// the quantiles (not the quantile of per-request differences, which do not exist in an open loop).
// Highest sustained rate (rate-steps.ts): open-loop steps through the proxy (500, 1000, 1500, 2000, 2500, 3000, 4000,
// …), each `stepS` seconds; a step is good with no failed request, p99 ≤ 50 ms, and completions at ≥ 95 % of the
// rate; a bad step is run once more (one hiccup of a shared machine does not end the search); the answer is the last
// good step before the first step bad twice. Everything shares this machine's cores, the load generator included.
// The result's shape, the medians of several runs and the text: proxy-result.ts.

import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import { join } from "node:path";
import { quantile } from "../src/sim/metrics.js";
import { startFakeWorker, startPassthrough } from "./fake-servers.js";
import { Children, startServe, writeServeConfig } from "./harness.js";
import { endpoint, openLoop, rotatedRounds, type Endpoint, type RunStats } from "./open-loop.js";
import {
  medianOfRuns,
  target,
  type ModeResult,
  type PathCounts,
  type ProxyBenchResult,
  type RateSearch,
  type RateStep,
} from "./proxy-result.js";
import { P99_LIMIT_MS, searchRate } from "./rate-steps.js";
import { minus, quantiles, r3, type Quantiles } from "./stats.js";

export interface ProxyBenchOptions {
  /** Measured requests per path and mode (default 3000; quick 300). */
  requests?: number;
  /** Fixed open-loop rate of the latency measurement (default 500 requests/s). */
  rate?: number;
  /** A short run: small warm-up, two rounds, a two-step rate search, no pass-through search. Not for figures. */
  quick?: boolean;
  /** Whole measurements to run one after another (default 1); the result holds their medians (see `runs`). */
  runs?: number;
  /** Extra node flags for the proxy children (e.g. ["--cpu-prof", "--cpu-prof-dir", dir] to profile). */
  proxyNodeArgs?: string[];
  /** Progress lines (default: none). */
  progress?: (line: string) => void;
}

const FULL_STEPS = [500, 1000, 1500, 2000, 2500, 3000, 4000, 5000, 6000, 7000, 8000, 10_000, 12_000, 16_000];

// ---- the measurements --------------------------------------------------------------------------------------------

interface Plan {
  requests: number;
  rate: number;
  warmup: number;
  rounds: number;
  steps: number[];
  stepS: number;
  passthroughSearch: boolean;
}

class Tally {
  failed = 0;
  first: string | null = null;
  add(s: RunStats): void {
    this.failed += s.failed;
    if (s.failed) this.first ??= s.firstFailure;
  }
}

/** Warm-up, then `rounds` rounds of every path at the fixed rate, the order rotated each round. */
async function fixedRate(paths: Endpoint[], stream: boolean, plan: Plan, tally: Tally, progress: (l: string) => void) {
  const lags: number[] = [];
  const { latencies, failed } = await rotatedRounds(paths, plan, stream, progress, (_, s, measured) => {
    tally.add(s);
    if (measured) lags.push(...s.lags);
  });
  return {
    latencies,
    failed,
    lagP99: r3(
      quantile(
        [...lags].sort((a, b) => a - b),
        0.99,
      ),
    ),
  };
}

async function rateSearch(
  ep: Endpoint,
  stream: boolean,
  plan: Plan,
  tally: Tally,
  progress: (l: string) => void,
): Promise<RateSearch> {
  const steps: RateStep[] = [];
  const { best, limitedBy } = await searchRate(plan.steps, async (rate): Promise<RateSearch["limited_by"] | null> => {
    const n = Math.max(50, Math.round(rate * plan.stepS));
    const s = await openLoop(ep, n, rate, stream);
    tally.add(s);
    const q = quantiles(s.latencies);
    const achieved = Math.round((n - s.failed) / (s.spanMs / 1000));
    const why: RateSearch["limited_by"] | null =
      s.failed > 0 ? "failures" : !(q.p99 <= P99_LIMIT_MS) ? "p99" : achieved < 0.95 * rate ? "throughput" : null;
    steps.push({
      rate,
      requests: n,
      failed: s.failed,
      p50_ms: q.p50,
      p99_ms: q.p99,
      achieved_per_s: achieved,
      good: why === null,
    });
    progress(
      `${ep.name} ${stream ? "streaming" : "non-streaming"} at ${rate}/s: p50 ${q.p50} ms, p99 ${q.p99} ms, ${achieved}/s, ${s.failed} failed`,
    );
    return why;
  });
  return { requests_per_s: best, limited_by: limitedBy ?? "last_step", steps };
}

async function measureMode(
  eps: { direct: Endpoint; passthrough: Endpoint; proxy: Endpoint; remote: Endpoint },
  stream: boolean,
  plan: Plan,
  tally: Tally,
  progress: (l: string) => void,
) {
  const paths = stream
    ? [eps.direct, eps.passthrough, eps.proxy]
    : [eps.direct, eps.passthrough, eps.proxy, eps.remote];
  const fixed = await fixedRate(paths, stream, plan, tally, progress);
  const q = (name: string): Quantiles => quantiles(fixed.latencies.get(name)!);
  const direct = q("direct");
  const passthrough = q("passthrough");
  const proxy = q("proxy");
  const search = await rateSearch(eps.proxy, stream, plan, tally, progress);
  const passSearch = plan.passthroughSearch
    ? await rateSearch(eps.passthrough, stream, plan, tally, progress)
    : undefined;
  const added = minus(proxy, direct);
  const passAdded = minus(passthrough, direct);
  const failed: PathCounts = {
    direct: fixed.failed.get("direct")!,
    passthrough: fixed.failed.get("passthrough")!,
    proxy: fixed.failed.get("proxy")!,
  };
  const mode: ModeResult = {
    added_latency_ms: added,
    passthrough_added_latency_ms: passAdded,
    requests_per_s: search.requests_per_s,
    rate: plan.rate,
    requests: plan.requests,
    direct_latency_ms: direct,
    passthrough_latency_ms: passthrough,
    proxy_latency_ms: proxy,
    target: target(added, passAdded),
    send_lag_p99_ms: fixed.lagP99,
    failed,
    rate_search: search,
    ...(passSearch ? { passthrough_rate_search: passSearch } : {}),
  };
  const remote = stream ? null : { latencies: q("proxy_remote"), failed: fixed.failed.get("proxy_remote")! };
  return { mode, remote, direct };
}

async function runOnce(opts: ProxyBenchOptions): Promise<ProxyBenchResult> {
  const quick = opts.quick ?? false;
  const plan: Plan = {
    requests: opts.requests ?? (quick ? 300 : 3000),
    rate: opts.rate ?? 500,
    warmup: quick ? 50 : 500,
    rounds: quick ? 2 : 20,
    steps: quick ? [500, 1000] : FULL_STEPS,
    stepS: quick ? 0.3 : 1.5,
    passthroughSearch: !quick,
  };
  if (!(Number.isInteger(plan.requests) && plan.requests >= 1))
    throw new Error("bench proxy: requests must be an integer ≥ 1");
  plan.rounds = Math.min(plan.rounds, plan.requests);
  if (!(plan.rate > 0 && Number.isFinite(plan.rate))) throw new Error("bench proxy: rate must be a number > 0");
  const progress = opts.progress ?? (() => undefined);
  const tmp = mkdtempSync(join(os.tmpdir(), "dolphin-bench-proxy-"));
  const children = new Children();
  const eps: Endpoint[] = [];
  try {
    const { decodeUrl, prefillUrl } = await startFakeWorker(children);
    const proxyConfig = (table: string, workers: unknown[]): string =>
      writeServeConfig(join(tmp, `${table}.json`), { table, mode: "approximate", workers });
    const decodeWorker = { id: "decode-0", url: decodeUrl, role: "decode" };
    const serve = (name: string, config: string): Promise<string> =>
      startServe(children, name, config, opts.proxyNodeArgs ?? []);
    const [passUrl, localUrl, remoteUrl] = await Promise.all([
      startPassthrough(children, "passthrough", decodeUrl),
      serve("proxy", proxyConfig("always-local", [decodeWorker])),
      serve(
        "proxy-remote",
        proxyConfig("always-remote", [{ id: "prefill-0", url: prefillUrl, role: "prefill" }, decodeWorker]),
      ),
    ]);
    const targets = {
      direct: endpoint("direct", decodeUrl),
      passthrough: endpoint("passthrough", passUrl),
      proxy: endpoint("proxy", localUrl),
      remote: endpoint("proxy_remote", remoteUrl),
    };
    eps.push(...Object.values(targets));
    progress(
      `upstream ${decodeUrl} (prefill ${prefillUrl}), passthrough ${new URL(passUrl).port}, proxy ${localUrl}, proxy-remote ${remoteUrl}`,
    );

    const tally = new Tally();
    const plain = await measureMode(targets, false, plan, tally, progress);
    const streaming = await measureMode(targets, true, plan, tally, progress);
    const remoteQ = plain.remote!.latencies;
    plain.mode.failed.proxy_remote = plain.remote!.failed;
    const cpus = os.cpus();
    return {
      ...plain.mode,
      streaming: streaming.mode,
      remote_path: {
        latency_ms: remoteQ,
        added_latency_ms: minus(remoteQ, plain.direct),
        requests: plan.requests,
        failed: plain.remote!.failed,
      },
      failed_requests: tally.failed,
      first_failure: tally.first,
      runtime: {
        node: process.version,
        platform: `${process.platform}-${process.arch}`,
        cpus: cpus.length,
        cpu_model: cpus[0]?.model.trim() ?? "unknown",
        quick,
        runs: 1,
        rounds: plan.rounds,
        warmup_per_path: plan.warmup,
        step_s: plan.stepS,
        p99_limit_ms: P99_LIMIT_MS,
        method:
          "loopback; fake upstream, pass-through, proxies each in their own node process; open-loop load generator in the bench " +
          "process (node:http keep-alive, hrtime); paths run one at a time in rotated rounds; added = quantile(path) − quantile(direct)",
      },
    };
  } finally {
    for (const ep of eps) ep.agent.destroy();
    await children.closeAll();
    rmSync(tmp, { recursive: true, force: true });
  }
}

/** The proxy bench, `runs` times over (default once): one run's result, or the medians of several (see `runs`). */
export async function runProxyBench(opts: ProxyBenchOptions = {}): Promise<ProxyBenchResult> {
  const runs = opts.runs ?? 1;
  if (!(Number.isInteger(runs) && runs >= 1)) throw new Error("bench proxy: runs must be an integer ≥ 1");
  const progress = opts.progress ?? (() => undefined);
  const results: ProxyBenchResult[] = [];
  for (let i = 0; i < runs; i++) {
    if (runs > 1) progress(`run ${i + 1}/${runs}`);
    results.push(await runOnce(opts));
  }
  return runs === 1 ? results[0]! : medianOfRuns(results);
}
