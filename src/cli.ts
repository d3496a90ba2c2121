// The `dolphin` command line: hash, route, bench core, start. Every command has --help; errors go to stderr
// with a non-zero exit code and say what was wrong and where (line numbers for JSON-lines input).

import { readFileSync, existsSync } from "node:fs";
import { parseArgs, type ParseArgsConfig } from "node:util";
import { corePath, loadCoreModule } from "../bindings/node/index.js";
import { formatCoreBench, runCoreBench } from "../bench/core.js";
import { Router, type RouteRequest, type RouterOptions, type WorkerSpec } from "./router.js";
import { decodeTable, describeTable, ruleTable } from "./table.js";
import { pairsToHex } from "./hashes.js";
import { runMainJob } from "./learn/main-job.js";
import { evalJob, trainJob, type JobOptions } from "./learn/job.js";
import { parsePolicies } from "./learn/policies.js";
import { startWorker } from "./serve/worker.js";
import { startEmulated } from "./serve/emulate.js";
import { loadConfig } from "./serve/config.js";
import { startProxy } from "./serve/proxy.js";
import { tuneLive } from "./serve/tune.js";
import { loadWorkload } from "./sim/workload.js";
import { parseSlo } from "./sim/metrics.js";
import { ablationMarkdown, runStudy, STUDIES, type AblationRow, type Study } from "./learn/ablate.js";
import { parseReportInput, writeReport, type EvalResult } from "./report.js";
import { encodeTable, FEATURE_NAMES, type FeatureName } from "./table.js";
import { runSimBench } from "../bench/sim.js";
import { formatProxyBench, runProxyBench } from "../bench/proxy.js";
import { ENVOY_OPTIONS, ENVOY_USAGE } from "./envoy/usage.js";
import { prepareRun, resolveCluster } from "./sim/run.js";
import { simulate } from "./sim/simulator.js";
import { writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const MOONCAKE_DEV = join(dirname(fileURLToPath(import.meta.url)), "../../../shared/data/traces/mooncake_conversation_dev.jsonl");

type Options = NonNullable<ParseArgsConfig["options"]>;

interface Command {
  summary: string;
  usage: string;
  options: Options;
  run(values: Record<string, string | boolean | undefined>, positionals: string[]): Promise<number>;
}

class UsageError extends Error {}

function readStdin(): string {
  try {
    return readFileSync(0, "utf8");
  } catch {
    return "";
  }
}

function intOption(v: unknown, name: string, min: number, max: number, dflt: number): number {
  if (v === undefined) return dflt;
  const n = Number(v);
  if (!Number.isInteger(n) || n < min || n > max) throw new UsageError(`--${name} must be an integer in ${min}–${max}, got ${String(v)}`);
  return n;
}

const jobOptionSpecs = {
  workload: { type: "string" }, format: { type: "string" }, cluster: { type: "string" }, link: { type: "string" },
  split: { type: "string" }, slo: { type: "string" }, seed: { type: "string" }, requests: { type: "string" }, load: { type: "string" },
} as const;

const commands: Record<string, Command> = {
  hash: {
    summary: "print the chained block hashes of a prompt (one 16-hex-digit hash per full block)",
    usage: `dolphin hash [--block-size N] [--model M] [--salt S] [--text] < input

Reads a JSON array of token ids on stdin (or raw UTF-8 text with --text) and prints one chained hash per full
block as 16 lowercase hex digits: llm-d's approximate prefix scheme, h_0 = xxh64(model ‖ "\\0" ‖ salt),
token blocks of --block-size ids (default 16), text blocks of 64 bytes. A trailing partial block is not hashed.`,
    options: { "block-size": { type: "string" }, model: { type: "string" }, salt: { type: "string" }, text: { type: "boolean" } },
    async run(v) {
      const blockSize = intOption(v["block-size"], "block-size", 1, 4096, 16);
      const input = readStdin();
      const router = Router.create(ruleTable("always-local"), {
        module: loadCoreModule(), workers: [{ id: "w", role: "decode", capacityBlocks: 0 }], blockSize,
        maxPromptTokens: Math.max(16, Math.ceil(Buffer.byteLength(input) / 4) + 16), indexBlocks: 0,
        ...(v["model"] !== undefined ? { model: String(v["model"]) } : {}), ...(v["salt"] !== undefined ? { salt: String(v["salt"]) } : {}),
      });
      let pairs: Uint32Array;
      if (v["text"]) pairs = router.hash({ text: input });
      else {
        let tokens: unknown;
        try {
          tokens = JSON.parse(input);
        } catch (e) {
          throw new UsageError(`stdin: expected a JSON array of token ids: ${(e as Error).message}`);
        }
        if (!Array.isArray(tokens)) throw new UsageError("stdin: expected a JSON array of token ids");
        tokens.forEach((t, i) => {
          if (!Number.isInteger(t) || t < 0 || t > 0xffffffff) throw new UsageError(`stdin: token [${i}] is not an integer in 0–4294967295: ${JSON.stringify(t)}`);
        });
        pairs = router.hash({ tokens: tokens as number[] });
      }
      const hex = pairsToHex(pairs);
      if (hex.length) process.stdout.write(hex.join("\n") + "\n");
      return 0;
    },
  },
  route: {
    summary: "route JSON-lines requests with a table; print JSON-lines decisions",
    usage: `dolphin route --table T [--workers SPEC] [--block-size N] [--record] < requests.jsonl

Each input line is a request: {"tokens": [...]} or {"text": "..."} or {"block_hashes": ["16 hex", ...],
"prompt_tokens": N}, optionally "osl_hat", "osl_class", "turn", "decode_worker", "context_tokens".
--workers: comma-separated id=role pairs (role prefill, decode or both), default p0=prefill,d0=decode.
--record: store each routed prompt on the chosen workers (the router's own view of the caches), so later
requests see earlier ones' prefixes. A bad line prints {"line": N, "error": "..."} and routing goes on.`,
    options: { table: { type: "string" }, workers: { type: "string" }, "block-size": { type: "string" }, record: { type: "boolean" } },
    async run(v) {
      if (!v["table"]) throw new UsageError("--table is required");
      const path = String(v["table"]);
      if (!existsSync(path)) throw new UsageError(`--table: no such file: ${path}`);
      const table = decodeTable(readFileSync(path));
      const workers = parseWorkers(String(v["workers"] ?? "p0=prefill,d0=decode"));
      const options: RouterOptions = {
        module: loadCoreModule(), workers, recordDecisions: Boolean(v["record"]),
        blockSize: intOption(v["block-size"], "block-size", 1, 4096, 16),
      };
      const router = Router.create(table, options);
      const lines = readStdin().split("\n");
      let failed = 0;
      lines.forEach((line, i) => {
        if (line.trim() === "") return;
        try {
          const d = router.route(toRequest(JSON.parse(line)));
          process.stdout.write(JSON.stringify({ line: i + 1, ...d }) + "\n");
        } catch (e) {
          failed++;
          process.stdout.write(JSON.stringify({ line: i + 1, error: (e as Error).message }) + "\n");
        }
      });
      if (failed) process.stderr.write(`dolphin route: ${failed} line(s) rejected\n`);
      return failed ? 2 : 0;
    },
  },
  bench: {
    summary: "benchmark the core against the TypeScript reference (core), the simulator (sim), or the proxy (proxy)",
    usage: `dolphin bench core [--json] [--time MS]
dolphin bench sim [--json] [--trace FILE]
dolphin bench proxy [--json] [--quick]
dolphin bench envoy [--json] [--quick]

bench sim: simulates the Mooncake dev trace (or --trace) on h100-8b 2P2D at trace load under Dynamo's rule and
prints {"requests", "simulated_s", "wall_s", "requests_per_wall_s", "speedup_vs_realtime"}.
bench proxy: loopback only; the latency dolphin serve adds over calling a worker directly and the latency a bare
node:http pass-through adds, at 500 requests/s, plus the highest sustained rate, non-streaming and streaming.
bench envoy: loopback only; the latency Envoy + the dolphin filter adds over calling a worker directly and the
latency Envoy alone adds (same route), at 500 requests/s, non-streaming and streaming (docs/envoy.md).

Measures, in one run with tinybench, medians of: chained hashing of a 20,000-token prompt; matching its 1,250
blocks against 16 workers' prefix indexes; decide (features → cluster → bit) at K = 8 and K = 64; one whole
route call (hash, match, worker choice, features, decide) for the 20,000-token prompt against 16 workers.
Each timing is {"wasm", "ts", "speedup" = ts / wasm}. --time: milliseconds per task (default 1000).`,
    options: { json: { type: "boolean" }, time: { type: "string" }, trace: { type: "string" }, quick: { type: "boolean" } },
    async run(v, pos) {
      if (pos[0] === "sim") {
        const trace = String(v["trace"] ?? MOONCAKE_DEV);
        if (!existsSync(trace)) throw new UsageError(`--trace: no such file: ${trace}`);
        const r = runSimBench(trace, loadCoreModule());
        process.stdout.write(v["json"] ? JSON.stringify(r, null, 2) + "\n" :
          `simulated ${r.requests} requests (${r.trace}, ${r.cluster} ${r.split}, ${r.policy}): ${r.simulated_s} s of cluster time in ` +
          `${r.wall_s} s wall (${r.requests_per_wall_s} requests/s, ${r.speedup_vs_realtime}× real time); trace loaded in ${r.load_s} s\n`);
        return 0;
      }
      if (pos[0] === "proxy") {
        const r = await runProxyBench({ ...(v["quick"] ? { quick: true } : {}), progress: (l) => process.stderr.write(l + "\n") });
        process.stdout.write(v["json"] ? JSON.stringify(r, null, 2) + "\n" : formatProxyBench(r) + "\n");
        return 0;
      }
      if (pos[0] === "envoy") {
        const { formatEnvoyBench, runEnvoyBench } = await import("../bench/envoy.js");
        const r = await runEnvoyBench({ ...(v["quick"] ? { quick: true } : {}), progress: (l) => process.stderr.write(l + "\n") });
        process.stdout.write(v["json"] ? JSON.stringify(r, null, 2) + "\n" : formatEnvoyBench(r) + "\n");
        return 0;
      }
      if (pos[0] !== "core") throw new UsageError("what to benchmark? dolphin bench core | sim | proxy | envoy");
      const time = intOption(v["time"], "time", 50, 60_000, 1000);
      const bytes = readFileSync(corePath());
      const r = await runCoreBench(loadCoreModule(), bytes.length, time);
      process.stdout.write(v["json"] ? JSON.stringify(r, null, 2) + "\n" : formatCoreBench(r) + "\n");
      return 0;
    },
  },
  simulate: {
    summary: "run a workload through a simulated P/D cluster under one policy",
    usage: `dolphin simulate --workload <name|file> [--format auto|mooncake|azure|lengths] [--cluster <preset|file>]
                --split <nPmD|nR> [--slo <preset|ttft_ms,tpot_ms>] --policy <kind> [--table T]
                [--load trace|xS|R|saturated] [--seed N] [--requests N] [--link nvlink|ib-ndr|ib-hdr|100gbe]
                [--dedupe] [--index-lag-ms MS] [--cache-view precise|approximate] [--json] [--trace-out FILE]

Workloads: hybrid, arxiv, leval, humaneval, multiturn (generated, seeded) or a Mooncake JSONL / Azure CSV / lengths
CSV file. Clusters: h20-72b (default), h100-70b, h100-8b, or a JSON cluster file defining one preset. SLO presets:
taichi-a (5 s, 250 ms), taichi-b (16 s, 60 ms), default (10 s, 100 ms). Policies: the table kinds (dynamo-isl,
dynamo-load, dynamo-legacy, trtllm, llm-d, always-local, always-remote; kmeans, gmm and ppd need --table).
--load saturated finds the rate where throughput stops growing (docs/simulator.md). The cluster is simulated:
figures carry the step-time model's error (docs/simulator-calibration.md). --trace-out writes one JSON line per request.`,
    options: {
      workload: { type: "string" }, format: { type: "string" }, cluster: { type: "string" }, split: { type: "string" },
      slo: { type: "string" }, policy: { type: "string" }, table: { type: "string" }, load: { type: "string" },
      seed: { type: "string" }, requests: { type: "string" }, link: { type: "string" }, dedupe: { type: "boolean" },
      "index-lag-ms": { type: "string" }, "cache-view": { type: "string" }, json: { type: "boolean" }, "trace-out": { type: "string" },
    },
    async run(v) {
      for (const k of ["workload", "split", "policy"]) if (!v[k]) throw new UsageError(`--${k} is required`);
      const format = String(v["format"] ?? "auto");
      if (!["auto", "mooncake", "azure", "lengths"].includes(format)) throw new UsageError(`--format must be auto, mooncake, azure or lengths, got ${format}`);
      const prepared = prepareRun({
        workload: String(v["workload"]), format: format as "auto", split: String(v["split"]), slo: String(v["slo"] ?? "default"),
        policy: String(v["policy"]), module: loadCoreModule(),
        ...(v["cluster"] !== undefined ? { cluster: String(v["cluster"]) } : {}),
        ...(v["table"] !== undefined ? { table: String(v["table"]) } : {}),
        ...(v["load"] !== undefined ? { load: String(v["load"]) } : {}),
        ...(v["seed"] !== undefined ? { seed: intOption(v["seed"], "seed", 0, 2 ** 31 - 1, 1) } : {}),
        ...(v["requests"] !== undefined ? { requests: intOption(v["requests"], "requests", 1, 10_000_000, 2000) } : {}),
        ...(v["link"] !== undefined ? { link: String(v["link"]) } : {}),
        ...(v["dedupe"] ? { dedupeTransfer: true } : {}),
        ...(v["index-lag-ms"] !== undefined ? { indexLagMs: Number(v["index-lag-ms"]) } : {}),
        ...(v["cache-view"] !== undefined ? { cacheView: cacheViewOption(v["cache-view"]) } : {}),
      });
      const t0 = performance.now();
      const result = simulate(prepared.workload, prepared.config);
      const wall = (performance.now() - t0) / 1000;
      if (v["trace-out"]) writeFileSync(String(v["trace-out"]), result.records.map((r) => JSON.stringify(r)).join("\n") + "\n");
      const c = prepared.config;
      const out = {
        workload: prepared.workload.name, cluster: c.preset.name, split: String(v["split"]),
        slo: { ttft_ms: c.slo.ttftMs, tpot_ms: c.slo.tpotMs }, policy: c.table.kind,
        load: { spec: String(v["load"] ?? "trace"), scale: prepared.loadScale, rps: prepared.workload.rate },
        simulated: true, ...result.summary, wall_s: wall,
      };
      if (v["json"]) process.stdout.write(JSON.stringify(out) + "\n");
      else {
        const s = result.summary;
        const ms = (x: number) => (Number.isFinite(x) ? x.toFixed(1) : "-");
        process.stdout.write([
          `simulated cluster: ${c.preset.name} ${out.split}, policy ${out.policy}, workload ${out.workload} (${s.requests} requests at ${prepared.workload.rate.toFixed(2)} req/s)`,
          `SLO ${c.slo.ttftMs} ms / ${c.slo.tpotMs} ms: attainment ${(100 * s.slo_attainment).toFixed(1)}% end to end, ${(100 * s.slo_attainment_per_metric).toFixed(1)}% per metric; failed ${s.failed}`,
          `TTFT ms p50 ${ms(s.ttft_ms.p50)} p90 ${ms(s.ttft_ms.p90)} p99 ${ms(s.ttft_ms.p99)}; TPOT ms p50 ${ms(s.tpot_ms.p50)} p90 ${ms(s.tpot_ms.p90)} p99 ${ms(s.tpot_ms.p99)}`,
          `local ${(100 * s.local_fraction).toFixed(1)}%, prefix hits P ${(100 * s.prefix_hit_rate.prefill).toFixed(1)}% D ${(100 * s.prefix_hit_rate.decode).toFixed(1)}%, ` +
            `KV shipped ${(s.kv_bytes_transferred / 1e9).toFixed(1)} GB, ${s.throughput_tokens_per_s.toFixed(0)} output tokens/s (simulated in ${wall.toFixed(2)} s)`,
        ].join("\n") + "\n");
      }
      return 0;
    },
  },
  table: {
    summary: "describe a table file (validates it, checksum included)",
    usage: "dolphin table <file> [--json]",
    options: { json: { type: "boolean" } },
    async run(v, pos) {
      if (!pos[0]) throw new UsageError("which table file?");
      const t = decodeTable(readFileSync(pos[0]));
      process.stdout.write((v["json"] ? JSON.stringify(t, null, 2) : describeTable(t)) + "\n");
      return 0;
    },
  },
  start: {
    summary: "the main job (npm start): learn tables on the default simulated cluster and compare every policy",
    usage: `dolphin start [--out DIR] [--requests N (default 2000 per part)] [--seed N]

Learns DolphinRouting tables for the hybrid workload (ArXiv-like, L-Eval-like, HumanEval-like requests) on a
simulated h20-72b cluster (Qwen2.5-72B TP4 on H20, the paper's hardware) for the 3P1D and 2P2D splits at the saturated
load, evaluates them against every baseline on other arrivals of the same workload, prints the side-by-side table
with the paper's published deltas, and writes the tables, the evaluation JSON and the report (markdown + SVG) into
--out (default out/). Every figure is simulated.`,
    options: { out: { type: "string" }, requests: { type: "string" }, seed: { type: "string" } },
    async run(v) {
      return runMainJob({
        module: loadCoreModule(), outDir: String(v["out"] ?? "out"),
        requests: intOption(v["requests"], "requests", 50, 100_000, 2000), seed: intOption(v["seed"], "seed", 0, 2 ** 31 - 1, 1),
        progress, print: (t) => process.stdout.write(t),
      });
    },
  },
  train: {
    summary: "learn a routing table on a simulated cluster",
    usage: `dolphin train --workload <name|file> [--format auto|mooncake|azure|lengths] [--cluster <preset|file>]
             --split <nPmD> [--slo <preset|ttft_ms,tpot_ms>] [--k 8] [--algo kmeans|gmm] [--seed N]
             [--load saturated|trace|xS|R] [--requests N] [--osl model|oracle|noisy:P] [--features isl,eff_P,eff_D,osl_hat]
             [--no-scan] --out table.msgpack [--json]

Logs the four features under Dynamo's rule, learns the output-length classifier and the clusters, then searches one
bit per cluster (per-cluster scanning, then epsilon-greedy refinement) for the best end-to-end SLO attainment at the
given load (default: saturated). A generator's training arrivals use --seed; a trace trains on its first half.
Writes the table and prints a report of the search (--json: machine-readable, with the search log).`,
    options: {
      ...jobOptionSpecs, k: { type: "string" }, algo: { type: "string" }, osl: { type: "string" }, features: { type: "string" },
      "no-scan": { type: "boolean" }, out: { type: "string" }, json: { type: "boolean" },
    },
    async run(v) {
      if (!v["out"]) throw new UsageError("--out is required (where to write the table)");
      const algo = String(v["algo"] ?? "kmeans");
      if (algo !== "kmeans" && algo !== "gmm") throw new UsageError(`--algo must be kmeans or gmm, got ${algo}`);
      const r = trainJob({
        ...jobOptions(v), k: intOption(v["k"], "k", 1, 256, 8), algo,
        ...(v["osl"] !== undefined ? { osl: parseOsl(String(v["osl"])) } : {}),
        ...(v["features"] !== undefined ? { features: parseFeatures(String(v["features"])) } : {}),
        ...(v["no-scan"] ? { scanInit: false } : {}),
      });
      writeFileSync(String(v["out"]), r.bytes);
      const report = {
        out: String(v["out"]), simulated: true, rounds: r.result.rounds, best_reward: r.result.bestReward, best_round: r.result.bestRound,
        bits: r.table.bits, cluster_sizes: r.result.clusterSizes, load: { scale: r.scale, rps: r.rps },
        osl_classifier: r.result.osl && { classes: r.result.osl.classes, accuracy: r.result.osl.accuracy, confusion: r.result.osl.confusion },
        wall_s: r.wallS, log: r.result.log.map((x) => ({ round: x.round, phase: x.phase, table: x.bits.join(""), reward: x.reward })),
      };
      process.stdout.write(v["json"] ? JSON.stringify(report) + "\n" :
        `wrote ${report.out}: bits ${report.bits?.join("")} (1 = remote), best simulated SLO attainment ${(100 * r.result.bestReward).toFixed(1)}% ` +
        `after ${r.result.rounds} rounds (first reached in round ${r.result.bestRound}); output-length classifier accuracy ` +
        `${(100 * (r.result.osl?.accuracy.heldOut ?? NaN)).toFixed(1)}% (majority class ${(100 * (r.result.osl?.accuracy.majorityBaseline ?? NaN)).toFixed(1)}%)\n`);
      return 0;
    },
  },
  eval: {
    summary: "evaluate every policy on the same simulated arrivals",
    usage: `dolphin eval --workload <name|file> [--format …] [--cluster <preset|file>] --split <nPmD> [--slo <…>]
            [--table table.msgpack] [--policies dolphin,dynamo,…] [--load saturated|trace|xS|R] [--seed N] [--requests N] [--json]

Policies: dolphin (needs --table), dynamo, dynamo-load, dynamo-legacy, llm-d, trtllm, ppd (its offline table built
with Algorithm 1 on the training part), always-local, always-remote. Evaluated on arrivals the table was not
trained on: a generator with --seed + 1, a trace's second half. Every figure is simulated.`,
    options: { ...jobOptionSpecs, table: { type: "string" }, policies: { type: "string" }, json: { type: "boolean" } },
    async run(v) {
      const tableFile = v["table"] !== undefined ? String(v["table"]) : undefined;
      if (tableFile && !existsSync(tableFile)) throw new UsageError(`--table: no such file: ${tableFile}`);
      const policies = v["policies"] !== undefined ? parsePolicies(String(v["policies"])) : tableFile ? undefined : parsePolicies("dynamo,dynamo-load,dynamo-legacy,llm-d,trtllm,ppd,always-local,always-remote");
      const out = evalJob({
        ...jobOptions(v), ...(policies ? { policies } : {}), ...(tableFile ? { table: decodeTable(readFileSync(tableFile)) } : {}),
      });
      if (v["json"]) process.stdout.write(JSON.stringify(out) + "\n");
      else {
        process.stdout.write(`simulated: ${out.workload} on ${out.cluster} ${out.split}, ${out.requests} requests at ${out.load.rps.toFixed(2)} req/s, SLO ${out.slo.ttft_ms}/${out.slo.tpot_ms} ms\n`);
        for (const [name, p] of Object.entries(out.policies).sort((a, b) => b[1].slo_attainment - a[1].slo_attainment)) {
          process.stdout.write(`${name.padEnd(14)} attainment ${(100 * p.slo_attainment).toFixed(1).padStart(5)}%  P90 TTFT ${p.ttft_ms.p90.toFixed(0).padStart(7)} ms  P90 TPOT ${p.tpot_ms.p90.toFixed(1).padStart(6)} ms  local ${(100 * p.local_fraction).toFixed(0)}%\n`);
        }
      }
      return 0;
    },
  },
  ablate: {
    summary: "the paper's ablations and its open questions, on the simulated cluster",
    usage: `dolphin ablate --study <${STUDIES.join("|")}> --workload <name|file> --split <nPmD> [--cluster …] [--slo …]
              [--seed N] [--requests N] [--load …] [--json]

Studies: k (K = 2, 4, 8, 16), scan (with and without scan initialization), osl-feature (with and without osl_hat),
algo (k-means vs GMM), osl-noise (classifier, oracle, noisy p = 0.2, 0.4), load (one table evaluated from 50% to
120% of saturation), yardstick (K = 8: all 256 tables vs the search). Prints a markdown table (--json: JSON lines).
Every figure is simulated.`,
    options: { ...jobOptionSpecs, study: { type: "string" }, json: { type: "boolean" } },
    async run(v) {
      const study = String(v["study"] ?? "");
      if (!(STUDIES as readonly string[]).includes(study)) throw new UsageError(`--study must be one of ${STUDIES.join(", ")}`);
      const rows: AblationRow[] = [];
      runStudy(study as Study, jobOptions(v), (row) => {
        rows.push(row);
        if (v["json"]) process.stdout.write(JSON.stringify(row) + "\n");
      });
      if (!v["json"]) process.stdout.write(ablationMarkdown(rows) + "\n");
      return 0;
    },
  },
  serve: {
    summary: "run the routing proxy in front of vLLM-style workers (or emulated ones: --emulate 1P1D)",
    usage: `dolphin serve --config serve.json
dolphin serve --emulate <nPmD|nR> [--port N] [--cluster <preset>] [--time-scale S] [--table T]

An OpenAI-compatible proxy (POST /v1/chat/completions, /v1/completions with SSE streaming, GET /v1/models, /health,
/metrics) that routes every request through the core: local prefill on the decode worker, or vLLM's NixlConnector
two-step remote path. The config format is in docs/serving.md. --emulate starts that many emulated workers
(dolphin worker) behind the proxy in one command, for a first try without GPUs; --port defaults to 8000.`,
    options: {
      config: { type: "string" }, emulate: { type: "string" }, port: { type: "string" }, cluster: { type: "string" },
      "time-scale": { type: "string" }, table: { type: "string" },
    },
    async run(v) {
      let close: () => Promise<void>;
      if (v["emulate"] !== undefined) {
        const { preset } = resolveCluster(v["cluster"] !== undefined ? String(v["cluster"]) : "h100-8b", undefined);
        const timeScale = v["time-scale"] !== undefined ? Number(v["time-scale"]) : 1;
        if (!(timeScale > 0 && Number.isFinite(timeScale))) throw new UsageError(`--time-scale must be a number > 0`);
        const e = await startEmulated({
          split: String(v["emulate"]), port: intOption(v["port"], "port", 0, 65535, 8000), preset, timeScale, module: loadCoreModule(),
          ...(v["table"] !== undefined ? { table: String(v["table"]) } : {}),
        });
        process.stderr.write(`dolphin serve: proxy at ${e.proxy.url} in front of ${e.workers.length} emulated workers ` +
          `(${e.workers.map((w) => `${w.workerId} ${w.role} ${w.url}`).join(", ")}); try:\n  curl ${e.proxy.url}/v1/chat/completions ` +
          `-H 'content-type: application/json' -d '{"model":"dolphin-emulated","messages":[{"role":"user","content":"hello"}],"max_tokens":8}'\n`);
        close = () => e.close();
      } else {
        if (!v["config"]) throw new UsageError("give --config serve.json or --emulate nPmD");
        const config = loadConfig(String(v["config"]));
        if (v["port"] !== undefined) config.listen.port = intOption(v["port"], "port", 0, 65535, 8000);
        const p = await startProxy(config, { module: loadCoreModule() });
        process.stderr.write(`dolphin serve: proxy at ${p.url}, ${config.workers.length} configured workers, mode ${config.mode}, table ${config.table}\n`);
        close = () => p.close();
      }
      await new Promise<void>((resolve) => {
        const stop = () => void close().then(resolve);
        process.once("SIGINT", stop);
        process.once("SIGTERM", stop);
      });
      return 0;
    },
  },
  envoy: {
    summary: "run Envoy with the dolphin proxy-wasm filter (in front of emulated workers: --emulate 1P2D)",
    usage: ENVOY_USAGE,
    options: ENVOY_OPTIONS,
    run: async (v) => (await import("./envoy/command.js")).runEnvoyCommand(v),
  },
  tune: {
    summary: "learn a table against a running proxy (live search through the admin API)",
    usage: `dolphin tune --live <proxy-url> --workload <name|file> --rate <req/s> --admin-token T [--model M]
             [--slo <preset|ttft_ms,tpot_ms>] [--k 8] [--requests N] [--max-rounds 30] [--max-output-tokens 32]
             [--seed N] [--out table.msgpack]

The search of dolphin train with the proxy as the environment: logs features by replaying the workload under the
proxy's current table, clusters them (isl, eff_P, eff_D), then for each candidate table swaps it in
(PUT /admin/table), replays the workload at --rate (streaming; TTFT and TPOT measured at the client, so the SLO is
in wall-clock terms), and reads each request's cluster from GET /admin/decisions. Leaves the best table in place.`,
    options: {
      live: { type: "string" }, workload: { type: "string" }, rate: { type: "string" }, "admin-token": { type: "string" },
      model: { type: "string" }, slo: { type: "string" }, k: { type: "string" }, requests: { type: "string" },
      "max-rounds": { type: "string" }, "max-output-tokens": { type: "string" }, seed: { type: "string" }, out: { type: "string" },
    },
    async run(v) {
      for (const k of ["live", "workload", "rate", "admin-token"]) if (!v[k]) throw new UsageError(`--${k} is required`);
      const rate = Number(v["rate"]);
      if (!(rate > 0 && Number.isFinite(rate))) throw new UsageError(`--rate must be a number > 0, got ${String(v["rate"])}`);
      const workload = loadWorkload(String(v["workload"]), "auto", {
        seed: intOption(v["seed"], "seed", 0, 2 ** 31 - 1, 1), requests: intOption(v["requests"], "requests", 2, 1_000_000, 200),
      });
      const r = await tuneLive({
        proxyUrl: String(v["live"]).replace(/\/$/, ""), adminToken: String(v["admin-token"]), model: String(v["model"] ?? "dolphin-emulated"),
        workload, rate, slo: parseSlo(String(v["slo"] ?? "default")), k: intOption(v["k"], "k", 1, 256, 8),
        maxRounds: intOption(v["max-rounds"], "max-rounds", 1, 10_000, 30), maxOutputTokens: intOption(v["max-output-tokens"], "max-output-tokens", 1, 100_000, 32),
        seed: intOption(v["seed"], "seed", 0, 2 ** 31 - 1, 1), onProgress: (l) => process.stderr.write(l + "\n"),
      });
      if (v["out"]) writeFileSync(String(v["out"]), encodeTable(r.table));
      process.stdout.write(JSON.stringify({ bits: r.table.bits, rounds: r.search.log.length, best_reward: r.search.bestReward,
        log: r.search.log.map((s) => ({ round: s.round, phase: s.phase, table: s.bits.join(""), reward: s.reward })) }) + "\n");
      return 0;
    },
  },
  worker: {
    summary: "run an emulated vLLM worker (OpenAI API, P/D protocol, KV events, calibrated timing)",
    usage: `dolphin worker --role prefill|decode|both [--cluster <preset|file>] [--port N] [--host H] [--model NAME]
               [--time-scale S] [--kv-events-port N] [--kv-events-url URL] [--worker-id ID] [--link NAME]

An emulated vLLM worker for trying and testing the proxy without GPUs: /v1/completions and /v1/chat/completions
(streaming or not), /tokenize (a deterministic tokenizer of our own), vLLM's kv_transfer_params protocol (the decode
role pulls KV in the modeled transfer time), continuous batching timed by the calibrated step model (--time-scale S
runs S simulated ms per wall ms), a prefix cache that publishes vLLM EventBatch KV events over ZMQ
(--kv-events-port) and/or by POST (--kv-events-url), and vLLM-style /metrics. Port 8100 by default.`,
    options: {
      role: { type: "string" }, cluster: { type: "string" }, port: { type: "string" }, host: { type: "string" },
      model: { type: "string" }, "time-scale": { type: "string" }, "kv-events-port": { type: "string" },
      "kv-events-url": { type: "string" }, "worker-id": { type: "string" }, link: { type: "string" },
    },
    async run(v) {
      const role = String(v["role"] ?? "both");
      if (!["prefill", "decode", "both"].includes(role)) throw new UsageError(`--role must be prefill, decode or both, got ${role}`);
      const timeScale = v["time-scale"] !== undefined ? Number(v["time-scale"]) : 1;
      if (!(timeScale > 0 && Number.isFinite(timeScale))) throw new UsageError(`--time-scale must be a number > 0, got ${String(v["time-scale"])}`);
      const { preset } = resolveCluster(v["cluster"] !== undefined ? String(v["cluster"]) : "h100-8b", undefined);
      const w = await startWorker({
        role: role as "both", preset, timeScale, port: intOption(v["port"], "port", 0, 65535, 8100),
        ...(v["host"] !== undefined ? { host: String(v["host"]) } : {}),
        ...(v["model"] !== undefined ? { model: String(v["model"]) } : {}),
        ...(v["kv-events-port"] !== undefined ? { kvEventsPort: intOption(v["kv-events-port"], "kv-events-port", 1, 65535, 5557) } : {}),
        ...(v["kv-events-url"] !== undefined ? { kvEventsUrl: String(v["kv-events-url"]) } : {}),
        ...(v["worker-id"] !== undefined ? { workerId: String(v["worker-id"]) } : {}),
        ...(v["link"] !== undefined ? { link: String(v["link"]) } : {}),
      });
      process.stderr.write(`dolphin worker: ${w.role} ${w.preset.name} serving ${w.model} at ${w.url}` +
        (w.kvEventsEndpoint ? `, KV events on ${w.kvEventsEndpoint}` : "") + ` (emulated: timing from the simulator's model)\n`);
      await new Promise<void>((resolve) => {
        const stop = () => void w.close().then(resolve);
        process.once("SIGINT", stop);
        process.once("SIGTERM", stop);
      });
      return 0;
    },
  },
  report: {
    summary: "turn eval results (JSON, JSON lines, or arrays = load sweeps) into markdown and SVG charts",
    usage: `dolphin report <eval.json …> [--out DIR]

Each file holds one eval result (dolphin eval --json), JSON lines of results, or an array of results of one setting
at different loads (a sweep, charted as SLO attainment vs load). Writes report.md and SVG charts (P90 TTFT and TPOT
per policy with the paper's figures marked) into --out (default out/report).`,
    options: { out: { type: "string" } },
    async run(v, pos) {
      if (pos.length === 0) throw new UsageError("give at least one eval result file");
      const results: EvalResult[] = [];
      const sweeps: EvalResult[][] = [];
      for (const f of pos) {
        if (!existsSync(f)) throw new UsageError(`no such file: ${f}`);
        const parsed = parseReportInput(readFileSync(f, "utf8"), f);
        results.push(...parsed.results);
        sweeps.push(...parsed.sweeps);
      }
      const out = String(v["out"] ?? "out/report");
      const r = writeReport(results, sweeps, out);
      process.stdout.write(`wrote ${r.files.join(", ")}\n`);
      return 0;
    },
  },
};


function cacheViewOption(v: unknown): "precise" | "approximate" {
  if (v !== "precise" && v !== "approximate") throw new UsageError(`--cache-view must be precise or approximate, got ${String(v)}`);
  return v;
}

/** The options train and eval share. */
function jobOptions(v: Record<string, string | boolean | undefined>): JobOptions {
  for (const k of ["workload", "split"]) if (!v[k]) throw new UsageError(`--${k} is required`);
  const format = String(v["format"] ?? "auto");
  if (!["auto", "mooncake", "azure", "lengths"].includes(format)) throw new UsageError(`--format must be auto, mooncake, azure or lengths, got ${format}`);
  return {
    workload: String(v["workload"]), format: format as "auto", split: String(v["split"]), slo: String(v["slo"] ?? "default"),
    module: loadCoreModule(), progress,
    seed: intOption(v["seed"], "seed", 0, 2 ** 31 - 1, 1),
    ...(v["cluster"] !== undefined ? { cluster: String(v["cluster"]) } : {}),
    ...(v["link"] !== undefined ? { link: String(v["link"]) } : {}),
    ...(v["requests"] !== undefined ? { requests: intOption(v["requests"], "requests", 20, 10_000_000, 1000) } : {}),
    ...(v["load"] !== undefined ? { load: String(v["load"]) } : {}),
  };
}

function parseOsl(s: string): "model" | "oracle" | { noisy: number } {
  if (s === "model" || s === "oracle") return s;
  const m = /^noisy:([0-9.]+)$/.exec(s);
  const p = m ? Number(m[1]) : NaN;
  if (!(p >= 0 && p <= 1)) throw new UsageError(`--osl must be model, oracle or noisy:P with P in [0, 1], got ${s}`);
  return { noisy: p };
}

function parseFeatures(s: string): FeatureName[] {
  const names = s.split(",").map((x) => x.trim());
  for (const n of names) if (!(FEATURE_NAMES as readonly string[]).includes(n)) throw new UsageError(`--features: unknown feature ${n} (known: ${FEATURE_NAMES.join(", ")})`);
  return names as FeatureName[];
}

/** Progress on stderr: one rewritten line on a terminal, a line per step otherwise (logs, CI). */
function progress(line: string, done: boolean): void {
  if (process.stderr.isTTY) process.stderr.write(`\r\x1b[2K${line}${done ? "\n" : ""}`);
  else if (done || !line.startsWith("  round")) process.stderr.write(line + "\n");
}

function parseWorkers(spec: string): WorkerSpec[] {
  return spec.split(",").map((part, i) => {
    const [id, role] = part.split("=");
    if (!id || (role !== "prefill" && role !== "decode" && role !== "both")) {
      throw new UsageError(`--workers: item ${i + 1} "${part}" is not id=prefill|decode|both`);
    }
    return { id, role };
  });
}

function toRequest(o: unknown): RouteRequest {
  if (o === null || typeof o !== "object" || Array.isArray(o)) throw new Error("request must be a JSON object");
  const r = o as Record<string, unknown>;
  const num = (k: string): number | undefined => {
    if (r[k] === undefined) return undefined;
    if (typeof r[k] !== "number") throw new Error(`${k} must be a number`);
    return r[k] as number;
  };
  const req: RouteRequest = {};
  if (r["tokens"] !== undefined) {
    if (!Array.isArray(r["tokens"])) throw new Error("tokens must be an array of token ids");
    req.tokens = r["tokens"] as number[];
  }
  if (r["text"] !== undefined) {
    if (typeof r["text"] !== "string") throw new Error("text must be a string");
    req.text = r["text"];
  }
  if (r["block_hashes"] !== undefined) {
    if (!Array.isArray(r["block_hashes"])) throw new Error("block_hashes must be an array of 16-hex-digit strings");
    req.blockHashes = r["block_hashes"] as string[];
  }
  const set = <K extends keyof RouteRequest>(key: K, value: RouteRequest[K] | undefined) => {
    if (value !== undefined) req[key] = value;
  };
  set("promptTokens", num("prompt_tokens"));
  set("oslHat", num("osl_hat"));
  set("turn", num("turn"));
  set("contextTokens", num("context_tokens"));
  if (r["osl_class"] !== undefined) set("oslClass", r["osl_class"] as string | number);
  if (r["decode_worker"] !== undefined) set("decodeWorker", String(r["decode_worker"]));
  return req;
}

function help(): string {
  const width = Math.max(...Object.keys(commands).map((c) => c.length));
  return [
    "dolphin: routing core for prefill/decode-disaggregated LLM clusters",
    "",
    "usage: dolphin <command> [options]   (dolphin <command> --help for more)",
    "",
    ...Object.entries(commands).map(([name, c]) => `  ${name.padEnd(width)}  ${c.summary}`),
  ].join("\n");
}

export async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === "--help" || name === "-h" || name === "help") {
    process.stdout.write(help() + "\n");
    return name ? 0 : 1;
  }
  const cmd = commands[name];
  if (!cmd) {
    process.stderr.write(`dolphin: unknown command "${name}"\n\n${help()}\n`);
    return 1;
  }
  try {
    const { values, positionals } = parseArgs({ args: rest, options: { ...cmd.options, help: { type: "boolean", short: "h" } }, allowPositionals: true, strict: true });
    if (values["help"]) {
      process.stdout.write(cmd.usage + "\n");
      return 0;
    }
    return await cmd.run(values as Record<string, string | boolean | undefined>, positionals);
  } catch (e) {
    const err = e as Error & { code?: string };
    const usage = e instanceof UsageError || err.code?.startsWith("ERR_PARSE_ARGS");
    process.stderr.write(`dolphin ${name}: ${err.message}\n${usage ? `\n${cmd.usage}\n` : ""}`);
    return usage ? 1 : 2;
  }
}
