// `dolphin route`: JSON-lines requests in, JSON-lines decisions out, one Router call per line.

import { existsSync } from "node:fs";
import { loadCoreModule } from "../../bindings/node/index.js";
import { Router } from "../router/router.js";
import type { RouteRequest, RouterOptions, WorkerSpec } from "../router/types.js";
import { readTableFile } from "../table/table-file.js";
import { intOption, readStdin, UsageError, type Command } from "./args.js";

export const command: Command = {
  usage: `dolphin route --table T [--workers SPEC] [--block-size N] [--record] < requests.jsonl

Each input line is a request: {"tokens": [...]} or {"text": "..."} or {"block_hashes": ["16 hex", ...],
"prompt_tokens": N}, optionally "osl_hat", "osl_class", "turn", "decode_worker", "context_tokens".
--workers: comma-separated id=role pairs (role prefill, decode or both), default p0=prefill,d0=decode.
--record: store each routed prompt on the chosen workers (the router's own view of the caches), so later
requests see earlier ones' prefixes. A bad line prints {"line": N, "error": "..."} and routing goes on.`,
  options: {
    table: { type: "string" },
    workers: { type: "string" },
    "block-size": { type: "string" },
    record: { type: "boolean" },
  },
  async run(v) {
    if (!v["table"]) throw new UsageError("--table is required");
    const path = String(v["table"]);
    if (!existsSync(path)) throw new UsageError(`--table: no such file: ${path}`);
    const table = readTableFile(path);
    const workers = parseWorkers(String(v["workers"] ?? "p0=prefill,d0=decode"));
    const options: RouterOptions = {
      module: loadCoreModule(),
      workers,
      recordDecisions: Boolean(v["record"]),
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
    return failed ? 1 : 0; // a failure (exit 1), not a usage error
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

/** One input line's JSON as a RouteRequest; a wrong type throws, and that line is reported and skipped. */
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
