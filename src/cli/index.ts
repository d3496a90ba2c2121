// The `dolphin` command line. One module per command, loaded only when that command runs, so `dolphin hash`
// starts without the simulator, the learner or the proxy:
//   hash      chained block hashes of a prompt            route     JSON-lines requests → decisions
//   bench     core / sim / proxy benchmarks               simulate  one workload, one policy, simulated cluster
//   table     describe and validate a table file          start     the main job (npm start)
//   train     learn a table on a simulated cluster        eval      every policy on the same simulated arrivals
//   ablate    the paper's ablations                       serve     the routing proxy (or an emulated cluster)
//   tune      learn a table against a running proxy       worker    an emulated vLLM worker
//   envoy     Envoy with the dolphin proxy-wasm filter      report    eval results → markdown and SVG charts
//   explore   the policy explorer (a web page) on localhost   calibrate  live vLLM engines → a cluster file
//   gateway   Envoy + ext_proc endpoint picker (dolphin-epp) + sidecars
// Every command has --help; errors go to stderr with a non-zero exit code and say what was wrong and where (line
// numbers for JSON-lines input). Exit codes follow the shell's convention: 0 success, 2 a usage error (it names the
// flag and prints the command's usage; also an unknown command, or none), 1 any other failure. `dolphin --version`
// prints the package version.

import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { packageFile } from "../core/package-root.js";
import { UsageError, type Command, type Values } from "./args.js";

interface Entry {
  summary: string;
  load(): Promise<{ command: Command }>;
}

// In the order `dolphin --help` lists them. The import paths are literal so tsc and bundlers see every module.
const commands: Record<string, Entry> = {
  hash: {
    summary: "print the chained block hashes of a prompt (one 16-hex-digit hash per full block)",
    load: () => import("./hash.js"),
  },
  route: {
    summary: "route JSON-lines requests with a table; print JSON-lines decisions",
    load: () => import("./route.js"),
  },
  bench: {
    summary: "benchmark the core against the TypeScript reference (core), the simulator (sim), or the proxy (proxy)",
    load: () => import("./bench.js"),
  },
  simulate: {
    summary: "run a workload through a simulated P/D cluster under one policy",
    load: () => import("./simulate.js"),
  },
  table: { summary: "describe a table file (validates it, checksum included)", load: () => import("./table.js") },
  start: {
    summary: "the main job (npm start): learn tables on the default simulated cluster and compare every policy",
    load: () => import("./start.js"),
  },
  train: { summary: "learn a routing table on a simulated cluster", load: () => import("./train.js") },
  eval: { summary: "evaluate every policy on the same simulated arrivals", load: () => import("./eval.js") },
  ablate: {
    summary: "the paper's ablations and its open questions, on the simulated cluster",
    load: () => import("./ablate.js"),
  },
  serve: {
    summary: "run the routing proxy in front of vLLM-style workers (or emulated ones: --emulate 1P1D)",
    load: () => import("./serve.js"),
  },
  calibrate: {
    summary: "measure live vLLM engines and fit the simulator's step-time model: a cluster file for --cluster",
    load: () => import("./calibrate.js"),
  },
  tune: {
    summary: "learn a table against a running proxy (live search through the admin API)",
    load: () => import("./tune.js"),
  },
  envoy: {
    summary: "run Envoy with the dolphin proxy-wasm filter (in front of emulated workers: --emulate 1P2D)",
    load: () => import("./envoy.js"),
  },
  gateway: {
    summary:
      "run Envoy with the dolphin-epp endpoint picker (ext_proc, GIE's protocol) and decode sidecars: --emulate 1P2D",
    load: () => import("./gateway.js"),
  },
  worker: {
    summary: "run an emulated vLLM worker (OpenAI API, P/D protocol, KV events, calibrated timing)",
    load: () => import("./worker.js"),
  },
  report: {
    summary: "turn eval results (JSON, JSON lines, or arrays = load sweeps) into markdown and SVG charts",
    load: () => import("./report.js"),
  },
  explore: {
    summary: "serve the policy explorer (simulate, compare, train and open tables in a web page) on localhost",
    load: () => import("./explore.js"),
  },
};

function help(): string {
  const width = Math.max(...Object.keys(commands).map((c) => c.length));
  return [
    "dolphin: routing core for prefill/decode-disaggregated LLM clusters",
    "",
    "usage: dolphin <command> [options]   (dolphin <command> --help for more; dolphin --version)",
    "",
    ...Object.entries(commands).map(([name, c]) => `  ${name.padEnd(width)}  ${c.summary}`),
    "",
    "Exit codes: 0 success, 1 failure (the message says what failed and where), 2 usage error (the command's usage follows).",
  ].join("\n");
}

/** Exit codes (documented in `dolphin --help`). */
const EXIT_FAILURE = 1;
const EXIT_USAGE = 2;

function version(): string {
  return (JSON.parse(readFileSync(packageFile("package.json"), "utf8")) as { version: string }).version;
}

export async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === "--version" || name === "-v" || name === "version") {
    process.stdout.write(`dolphin-routing ${version()}\n`);
    return 0;
  }
  if (!name || name === "--help" || name === "-h" || name === "help") {
    process.stdout.write(help() + "\n");
    return name ? 0 : EXIT_USAGE;
  }
  const entry = Object.hasOwn(commands, name) ? commands[name] : undefined;
  if (!entry) {
    process.stderr.write(`dolphin: unknown command "${name}"\n\n${help()}\n`);
    return EXIT_USAGE;
  }
  const { command: cmd } = await entry.load();
  try {
    const { values, positionals } = parseArgs({
      args: rest,
      options: { ...cmd.options, help: { type: "boolean", short: "h" } },
      allowPositionals: true,
      strict: true,
    });
    if (values["help"]) {
      process.stdout.write(cmd.usage + "\n");
      return 0;
    }
    return await cmd.run(values as Values, positionals);
  } catch (e) {
    const err = e as Error & { code?: string };
    const usage = e instanceof UsageError || err.code?.startsWith("ERR_PARSE_ARGS");
    process.stderr.write(`dolphin ${name}: ${err.message}\n${usage ? `\n${cmd.usage}\n` : ""}`);
    return usage ? EXIT_USAGE : EXIT_FAILURE;
  }
}
