// The `dolphin` command line: hash, route, bench core, start. Every command has --help; errors go to stderr
// with a non-zero exit code and say what was wrong and where (line numbers for JSON-lines input).

import { readFileSync, existsSync } from "node:fs";
import { parseArgs, type ParseArgsConfig } from "node:util";
import { corePath, loadCoreModule } from "../bindings/node/index.js";
import { formatCoreBench, runCoreBench } from "../bench/core.js";
import { Router, type RouteRequest, type RouterOptions, type WorkerSpec } from "./router.js";
import { decodeTable, describeTable, ruleTable } from "./table.js";
import { pairsToHex } from "./hashes.js";
import { runStart } from "./start.js";

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
    summary: "benchmark the core (WASM) against the TypeScript reference: dolphin bench core [--json]",
    usage: `dolphin bench core [--json] [--time MS]

Measures, in one run with tinybench, medians of: chained hashing of a 20,000-token prompt; matching its 1,250
blocks against 16 workers' prefix indexes; decide (features → cluster → bit) at K = 8 and K = 64; one whole
route call (hash, match, worker choice, features, decide) for the 20,000-token prompt against 16 workers.
Each timing is {"wasm", "ts", "speedup" = ts / wasm}. --time: milliseconds per task (default 1000).`,
    options: { json: { type: "boolean" }, time: { type: "string" } },
    async run(v, pos) {
      if (pos[0] !== "core") throw new UsageError("what to benchmark? dolphin bench core");
      const time = intOption(v["time"], "time", 50, 60_000, 1000);
      const bytes = readFileSync(corePath());
      const r = await runCoreBench(loadCoreModule(), bytes.length, time);
      process.stdout.write(v["json"] ? JSON.stringify(r, null, 2) + "\n" : formatCoreBench(r) + "\n");
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
    summary: "the main job (npm start): route a trace through every policy in the core and compare",
    usage: `dolphin start [--trace FILE] [--requests N] [--json]

Until the simulator and the learner land, the main job routes a real trace (Mooncake's conversation trace from
../shared/data when present, else a built-in synthetic workload) through every policy kind of the core, with
the router's own record of the caches, and prints each policy's local/remote mix, predicted prefix hits and
routing time. No SLO figures: those need the simulated cluster (issue 3).`,
    options: { trace: { type: "string" }, requests: { type: "string" }, json: { type: "boolean" } },
    async run(v) {
      return runStart({
        ...(v["trace"] !== undefined ? { trace: String(v["trace"]) } : {}),
        requests: intOption(v["requests"], "requests", 1, 10_000_000, 4000),
        json: Boolean(v["json"]),
        module: loadCoreModule(),
      });
    },
  },
};

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
