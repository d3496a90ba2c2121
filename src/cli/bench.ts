// `dolphin bench core | sim | proxy | overload | envoy | epp | bindings | peers | routers | mix-shift`: each benchmark is loaded only when asked for (the proxy and
// envoy ones start servers).

import { existsSync, readFileSync } from "node:fs";
import { corePath, loadCoreModule } from "../../bindings/node/index.js";
import { packageFile } from "../core/package-root.js";
import { intOption, UsageError, type Command } from "./args.js";

/** --time-scale of bench overload's emulated workers: a number > 0. */
function timeScaleOption(v: unknown): number {
  const n = Number(v);
  if (!(n > 0 && Number.isFinite(n))) throw new UsageError(`--time-scale must be a number > 0, got ${String(v)}`);
  return n;
}

/** The trace `bench sim` runs by default; shipped in the package (data/README.md). */
const MOONCAKE_DEV = packageFile("data", "traces", "mooncake_conversation_dev.jsonl");

export const command: Command = {
  usage: `dolphin bench core [--json] [--time MS]
dolphin bench sim [--json] [--trace FILE] [--scale]
dolphin bench proxy [--json] [--quick] [--runs N]
dolphin bench proxy --vllm [--json] [--quick] [--rounds N]
dolphin bench overload [--json] [--quick] [--rate R] [--duration S] [--timeout S] [--max-lag MS] [--max-busy PCT]
                       [--workers fake|SPLIT] [--time-scale S] [--generators N] [--connections N]
dolphin bench envoy [--json] [--quick]
dolphin bench epp [--json] [--quick]
dolphin bench bindings [--json]
dolphin bench tiers [--json]
dolphin bench peers [--json] [--quick] [--rounds N]
dolphin bench routers [--json] [--quick] [--runs N] [--time-scale S]
dolphin bench mix-shift [--families a,b] [--windows 100,200,400] [--psi 0.75] [--seed N] [--out FILE.jsonl]

bench sim: simulates the Mooncake dev trace (or --trace) on h100-8b 2P2D at trace load under Dynamo's rule and
prints {"requests", "simulated_s", "wall_s", "requests_per_wall_s", "speedup_vs_realtime"}.
bench sim --scale: the trace resampled (seeded: copies shifted in time with salted prefixes, whole conversations
drawn) to 6,250, 25,000 and 100,000 requests over the same span of time, on 2P2D, 8P8D and 32P32D, so each
instance sees about the same load; prints {"scale": [{"split", "requests", "simulated_s", "wall_s", "intern_s",
"events_per_s", "speedup_vs_realtime"}, ...]}: wall_s is everything running the workload takes, interning its
block hashes to ids included (intern_s of it: once per workload, as the learner does).
bench proxy: loopback only; the latency dolphin serve adds over calling a worker directly and the latency a bare
node:http pass-through adds, at 500 requests/s, plus the highest sustained rate, non-streaming and streaming.
--runs N: N whole measurements (fresh processes each); every figure is then the median of the runs' and "runs"
holds each run's result.
bench proxy --vllm: measured on real vLLM (CPU build, tiny model: npm run setup installs it), 1P1D started for the
run: what dolphin serve adds in precise and approximate mode over calling the decode engine directly (p50, p99, per
round alternated, non-streaming and streaming), and /tokenize's cost alone; --rounds per mode (default 200).
bench overload: loopback only; twice the highest rate the proxy sustains (or 2 × --rate) for --duration s (default
60), against emulated workers in their own processes (--workers, default 1P2D; --time-scale, default 1) or a worker
that answers at once (--workers fake): counts of 200/429/503, resets and hangs (no answer within --timeout s,
default 30), the proxy's memory, and the load generator's own lag (--generators processes, keep-alive pools of
--connections in all, default 4,096; a request it could not send on time is counted apart, not sent);
--max-lag sets admission.max_event_loop_lag_ms (0: no lag shedding), --max-busy admission.max_event_loop_utilization
in percent (0: no utilization shedding).
bench envoy: loopback only; the latency Envoy + the dolphin filter adds over calling a worker directly and the
latency Envoy alone adds (same route), at 500 requests/s, non-streaming and streaming (docs/envoy.md).
bench epp: loopback only; the latency the endpoint-picker path (Envoy, ext_proc to dolphin-epp, ORIGINAL_DST) adds
over calling a worker directly, the latency Envoy alone adds (a static route) and the latency the ext_proc exchange
alone adds (dolphin-epp -fixed-endpoint: no pick), at 500 requests/s, non-streaming and streaming, and the picker's
time per pick: {"epp_added_latency_ms", "envoy_added_latency_ms", "ext_proc_only_added_latency_ms", "streaming",
"pick_us", ...} (docs/gateway.md).
bench bindings: route() of a 20,000-token prompt against 16 workers in Node, Python and Go (the bindings, from a
repository checkout after npm run setup), each with its own call overhead: {"route_20k_tokens_us": {"node",
"python", "go"}} (docs/bindings.md).
bench peers: our core against Dynamo's dynamo-kv-router (Rust) and llm-d's llm-d-kv-cache (Go), through the
harnesses npm run setup builds, alternated in --rounds rounds (default 3): hashing a 20,000-token prompt, matching it
against 16, 256 and 1,024 workers, the whole route where the peer has one, bytes per cached block, and applying
1,000 blocks of KV events; the JSON's last line holds each system's figures and dolphin_over_best_peer
(docs/peers.md).
bench routers: dolphin serve (a learned table and dynamo-isl, approximate mode), vllm-router 0.1.17 (cache_aware)
and smg 1.13.0 (cache_aware), each in P/D mode in front of the same emulated 1P2D workers (--time-scale, default
1000), npm run setup installs the peers: the latency each adds over the two legs made directly at 500 req/s (p50,
p99, non-streaming and streaming), paths alternated in rotated rounds, --runs whole runs (default 3; quick 1). With
--json one line per run, then the summary (medians over the runs, the target: dolphin ≤ the best peer) as the last
line (docs/peers.md).
bench mix-shift (simulated, about a minute): the mix-shift guard's false alarms on each robustness family's own
held-out traffic and its detection on every other family's, per window length, one line each on stderr and, with
--out, one JSON line per (table, traffic, part, window) (docs/serving.md "Mix-shift guard and hand-over").

Measures, in one run with tinybench, medians of: chained hashing of a 20,000-token prompt; matching its 1,250
blocks against 16 workers' prefix indexes; decide (features → cluster → bit) at K = 8 and K = 64; one whole
route call (hash, match, worker choice, features, decide) for the 20,000-token prompt against 16 workers.
Each timing is {"wasm", "ts", "speedup" = ts / wasm}. --time: milliseconds per task (default 1000).`,
  options: {
    json: { type: "boolean" },
    time: { type: "string" },
    trace: { type: "string" },
    quick: { type: "boolean" },
    runs: { type: "string" },
    rate: { type: "string" },
    duration: { type: "string" },
    timeout: { type: "string" },
    "max-lag": { type: "string" },
    "max-busy": { type: "string" },
    workers: { type: "string" },
    "time-scale": { type: "string" },
    generators: { type: "string" },
    connections: { type: "string" },
    scale: { type: "boolean" },
    vllm: { type: "boolean" },
    rounds: { type: "string" },
    families: { type: "string" },
    windows: { type: "string" },
    psi: { type: "string" },
    seed: { type: "string" },
    out: { type: "string" },
  },
  async run(v, pos) {
    if (pos[0] === "sim") {
      if (v["trace"] !== undefined && !existsSync(String(v["trace"])))
        throw new UsageError(`--trace: no such file: ${String(v["trace"])}`);
      const trace = String(v["trace"] ?? MOONCAKE_DEV);
      // the shipped trace missing is a broken install, not a usage error
      if (!existsSync(trace))
        throw new Error(`the default trace is missing: ${trace} (see data/README.md), or give --trace FILE`);
      if (v["scale"]) {
        const { runSimScaleBench } = await import("../../bench/sim.js");
        const r = runSimScaleBench(trace, loadCoreModule());
        process.stdout.write(
          v["json"]
            ? JSON.stringify(r, null, 2) + "\n"
            : r.scale
                .map(
                  (x) =>
                    `${x.split.padEnd(7)} ${String(x.requests).padStart(7)} requests: ${x.simulated_s} s of cluster time in ${x.wall_s} s wall ` +
                    `(${x.events_per_s} events/s, ${x.speedup_vs_realtime}× real time; of it, interning blocks ${x.intern_s} s)`,
                )
                .join("\n") + "\n",
        );
        return 0;
      }
      const { runSimBench } = await import("../../bench/sim.js");
      const r = runSimBench(trace, loadCoreModule());
      process.stdout.write(
        v["json"]
          ? JSON.stringify(r, null, 2) + "\n"
          : `simulated ${r.requests} requests (${r.trace}, ${r.cluster} ${r.split}, ${r.policy}): ${r.simulated_s} s of cluster time in ` +
              `${r.wall_s} s wall (${r.requests_per_wall_s} requests/s, ${r.speedup_vs_realtime}× real time); trace loaded in ${r.load_s} s\n`,
      );
      return 0;
    }
    if (pos[0] === "proxy" && v["vllm"]) {
      const { formatVllmProxyBench, runVllmProxyBench } = await import("../../bench/proxy-vllm.js");
      const r = await runVllmProxyBench({
        ...(v["quick"] ? { quick: true } : {}),
        ...(v["rounds"] !== undefined ? { rounds: intOption(v["rounds"], "rounds", 10, 100_000, 200) } : {}),
        progress: (l) => process.stderr.write(l + "\n"),
      });
      process.stdout.write(v["json"] ? JSON.stringify(r, null, 2) + "\n" : formatVllmProxyBench(r) + "\n");
      return 0;
    }
    if (pos[0] === "proxy") {
      const runs = intOption(v["runs"], "runs", 1, 99, 1);
      const { runProxyBench } = await import("../../bench/proxy.js");
      const { formatProxyBench } = await import("../../bench/proxy-result.js");
      const r = await runProxyBench({
        ...(v["quick"] ? { quick: true } : {}),
        runs,
        progress: (l) => process.stderr.write(l + "\n"),
      });
      process.stdout.write(v["json"] ? JSON.stringify(r, null, 2) + "\n" : formatProxyBench(r) + "\n");
      return 0;
    }
    if (pos[0] === "overload") {
      const { runOverloadBench } = await import("../../bench/overload.js");
      const { formatOverloadBench } = await import("../../bench/overload-result.js");
      const r = await runOverloadBench({
        ...(v["quick"] ? { quick: true } : {}),
        ...(v["rate"] !== undefined ? { rate: intOption(v["rate"], "rate", 1, 1_000_000, 0) } : {}),
        ...(v["duration"] !== undefined ? { durationS: intOption(v["duration"], "duration", 1, 3600, 60) } : {}),
        ...(v["timeout"] !== undefined ? { timeoutS: intOption(v["timeout"], "timeout", 1, 3600, 30) } : {}),
        ...(v["max-lag"] !== undefined
          ? { maxEventLoopLagMs: intOption(v["max-lag"], "max-lag", 0, 60_000, 500) }
          : {}),
        ...(v["max-busy"] !== undefined
          ? { maxEventLoopUtilization: intOption(v["max-busy"], "max-busy", 0, 99, 90) / 100 }
          : {}),
        ...(v["workers"] !== undefined ? { workers: String(v["workers"]) } : {}),
        ...(v["time-scale"] !== undefined ? { timeScale: timeScaleOption(v["time-scale"]) } : {}),
        ...(v["generators"] !== undefined ? { generators: intOption(v["generators"], "generators", 1, 16, 1) } : {}),
        ...(v["connections"] !== undefined
          ? { connections: intOption(v["connections"], "connections", 1, 65_536, 4096) }
          : {}),
        progress: (l) => process.stderr.write(l + "\n"),
      });
      process.stdout.write(v["json"] ? JSON.stringify(r, null, 2) + "\n" : formatOverloadBench(r) + "\n");
      return 0;
    }
    if (pos[0] === "peers") {
      const { formatPeersBench, runPeersBench } = await import("../../bench/peers.js");
      const rounds = intOption(v["rounds"], "rounds", 1, 99, v["quick"] ? 1 : 3);
      const r = runPeersBench(loadCoreModule(), { rounds, slices: v["quick"] ? 3 : 7, sliceMs: v["quick"] ? 10 : 20 });
      process.stdout.write(v["json"] ? JSON.stringify(r) + "\n" : formatPeersBench(r) + "\n");
      return 0;
    }
    if (pos[0] === "routers") {
      const { runRoutersBench } = await import("../../bench/routers.js");
      const { formatRoutersBench } = await import("../../bench/routers-result.js");
      const s = await runRoutersBench({
        ...(v["quick"] ? { quick: true } : {}),
        ...(v["runs"] !== undefined ? { runs: intOption(v["runs"], "runs", 1, 99, 3) } : {}),
        ...(v["time-scale"] !== undefined ? { timeScale: timeScaleOption(v["time-scale"]) } : {}),
        progress: (l) => process.stderr.write(l + "\n"),
        onRun: (r) => {
          if (v["json"]) process.stdout.write(JSON.stringify(r) + "\n");
        },
      });
      process.stdout.write(v["json"] ? JSON.stringify(s) + "\n" : formatRoutersBench(s) + "\n");
      return 0;
    }
    if (pos[0] === "bindings") {
      const { formatBindingsBench, runBindingsBench } = await import("../../bench/bindings.js");
      const r = runBindingsBench(loadCoreModule());
      process.stdout.write(v["json"] ? JSON.stringify(r) + "\n" : formatBindingsBench(r) + "\n");
      return 0;
    }
    if (pos[0] === "envoy") {
      const { formatEnvoyBench, runEnvoyBench } = await import("../../bench/envoy.js");
      const r = await runEnvoyBench({
        ...(v["quick"] ? { quick: true } : {}),
        progress: (l) => process.stderr.write(l + "\n"),
      });
      process.stdout.write(v["json"] ? JSON.stringify(r, null, 2) + "\n" : formatEnvoyBench(r) + "\n");
      return 0;
    }
    if (pos[0] === "epp") {
      const { formatEppBench, runEppBench } = await import("../../bench/epp.js");
      const r = await runEppBench({
        ...(v["quick"] ? { quick: true } : {}),
        progress: (l) => process.stderr.write(l + "\n"),
      });
      process.stdout.write(v["json"] ? JSON.stringify(r, null, 2) + "\n" : formatEppBench(r) + "\n");
      return 0;
    }
    if (pos[0] === "tiers") {
      const { formatTiersBench, runTiersBench } = await import("../../bench/tiers.js");
      const r = runTiersBench(loadCoreModule());
      process.stdout.write(v["json"] ? JSON.stringify(r, null, 2) + "\n" : formatTiersBench(r) + "\n");
      return 0;
    }
    if (pos[0] === "mix-shift") {
      const { runMixShiftBench } = await import("../../bench/mix-shift.js");
      const list = (name: string): string[] | undefined =>
        v[name] === undefined ? undefined : String(v[name]).split(",").filter(Boolean);
      const windows = list("windows")?.map((w) => intOption(w, "windows", 2, 100_000, 200));
      const psi = v["psi"] === undefined ? undefined : Number(v["psi"]);
      if (psi !== undefined && !(psi > 0 && Number.isFinite(psi)))
        throw new UsageError(`--psi must be a number > 0, got ${String(v["psi"])}`);
      await runMixShiftBench(
        {
          ...(list("families") ? { families: list("families")! } : {}),
          ...(windows ? { windows } : {}),
          ...(psi !== undefined ? { psi } : {}),
          ...(v["seed"] !== undefined ? { seed: intOption(v["seed"], "seed", 0, 2 ** 31 - 1, 11) } : {}),
          ...(v["out"] !== undefined ? { out: String(v["out"]) } : {}),
        },
        (l) => process.stderr.write(l + "\n"),
      );
      return 0;
    }
    if (pos[0] !== "core")
      throw new UsageError(
        "what to benchmark? dolphin bench core | sim | proxy | overload | envoy | epp | bindings | peers | routers | tiers | mix-shift",
      );
    const time = intOption(v["time"], "time", 50, 60_000, 1000);
    const { formatCoreBench, runCoreBench } = await import("../../bench/core.js");
    const bytes = readFileSync(corePath());
    const r = await runCoreBench(loadCoreModule(), bytes.length, time);
    process.stdout.write(v["json"] ? JSON.stringify(r, null, 2) + "\n" : formatCoreBench(r) + "\n");
    return 0;
  },
};
