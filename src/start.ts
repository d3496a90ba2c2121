// The interim main job (`npm start`): route a real trace through every rule policy of the core, each with the
// router's own record of what it sent where, and compare the decision mix and predicted prefix hits. It shows
// the core end to end; SLO outcomes need the simulated cluster of issue 3 and the learner of issue 4.

import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Router } from "./router.js";
import { ruleTable, type PolicyKind } from "./table.js";

export interface StartOptions {
  trace?: string;
  requests: number;
  json: boolean;
  module: WebAssembly.Module;
}

interface TraceRequest {
  promptTokens: number;
  outputTokens: number;
  hashes: Uint32Array;
}

const MOONCAKE_BLOCK_TOKENS = 512;
const DEFAULT_TRACE = join(dirname(fileURLToPath(import.meta.url)), "../../../shared/data/traces/mooncake_conversation_dev.jsonl");

/** Mooncake JSONL: hash_ids are already-chained 512-token block ids; they become (id, tag) hash pairs. */
export function readMooncake(path: string, limit: number): TraceRequest[] {
  const out: TraceRequest[] = [];
  const lines = readFileSync(path, "utf8").split("\n");
  for (let i = 0; i < lines.length && out.length < limit; i++) {
    const line = lines[i]!.trim();
    if (!line) continue;
    let row: { input_length?: unknown; output_length?: unknown; hash_ids?: unknown };
    try {
      row = JSON.parse(line);
    } catch (e) {
      throw new Error(`${path}:${i + 1}: not JSON: ${(e as Error).message}`);
    }
    const ids = row.hash_ids;
    if (!Array.isArray(ids) || !ids.every((x) => Number.isInteger(x) && x >= 0 && x <= 0xffffffff)) {
      throw new Error(`${path}:${i + 1}: hash_ids: expected an array of non-negative integer block ids`);
    }
    if (!Number.isInteger(row.input_length) || !Number.isInteger(row.output_length)) {
      throw new Error(`${path}:${i + 1}: input_length and output_length must be integers`);
    }
    const hashes = new Uint32Array(ids.length * 2);
    ids.forEach((id: number, j: number) => {
      hashes[2 * j] = id;
      hashes[2 * j + 1] = 0x6d6f6f6e; // "moon": keeps trace ids apart from token-derived hashes
    });
    out.push({ promptTokens: row.input_length as number, outputTokens: row.output_length as number, hashes });
  }
  return out;
}

/** A small synthetic stand-in when the shared trace is absent: conversations that extend shared prefixes. */
function synthetic(n: number): TraceRequest[] {
  const out: TraceRequest[] = [];
  let x = 7;
  const rnd = (): number => ((x = (Math.imul(x, 1103515245) + 12345) & 0x7fffffff) / 0x7fffffff);
  for (let i = 0; i < n; i++) {
    const family = Math.floor(rnd() * 40);
    const blocks = 1 + Math.floor(rnd() * 24);
    const hashes = new Uint32Array(blocks * 2);
    for (let j = 0; j < blocks; j++) {
      hashes[2 * j] = j < blocks / 2 ? family * 1000 + j : 1_000_000 + i * 100 + j;
      hashes[2 * j + 1] = 0x73796e74;
    }
    out.push({ promptTokens: blocks * MOONCAKE_BLOCK_TOKENS - Math.floor(rnd() * 400), outputTokens: 50 + Math.floor(rnd() * 600), hashes });
  }
  return out;
}

const POLICIES: PolicyKind[] = ["dynamo-isl", "dynamo-legacy", "trtllm", "always-local", "always-remote"];

export async function runStart(o: StartOptions): Promise<number> {
  const tracePath = o.trace ?? (existsSync(DEFAULT_TRACE) ? DEFAULT_TRACE : undefined);
  const requests = tracePath ? readMooncake(tracePath, o.requests) : synthetic(o.requests);
  const source = tracePath ? `${tracePath} (first ${requests.length} requests)` : `built-in synthetic workload (${requests.length} requests)`;
  const rows = [];
  for (const kind of POLICIES) {
    const router = Router.create(ruleTable(kind), {
      module: o.module, blockSize: MOONCAKE_BLOCK_TOKENS, recordDecisions: true, capacityBlocks: 20_000,
      workers: [
        { id: "prefill-0", role: "prefill" }, { id: "prefill-1", role: "prefill" }, { id: "prefill-2", role: "prefill" },
        { id: "decode-0", role: "decode" },
      ],
    });
    let local = 0;
    let hitD = 0;
    let hitP = 0;
    let isl = 0;
    const t0 = process.hrtime.bigint();
    for (const r of requests) {
      const d = router.route({ blockHashes: r.hashes, promptTokens: r.promptTokens, oslHat: r.outputTokens });
      if (d.path === "local") local++;
      hitD += d.features.isl - d.features.effD;
      hitP += d.features.isl - d.features.effP;
      isl += d.features.isl;
    }
    const us = Number(process.hrtime.bigint() - t0) / 1e3 / requests.length;
    rows.push({
      policy: kind, requests: requests.length, local_fraction: local / requests.length,
      predicted_hit_decode: hitD / isl, predicted_hit_prefill: hitP / isl, route_us_mean: us,
    });
  }
  if (o.json) {
    process.stdout.write(JSON.stringify({ source, split: "3P1D", simulated: false, policies: rows }, null, 2) + "\n");
    return 0;
  }
  const pct = (x: number) => `${(100 * x).toFixed(1)}%`.padStart(8);
  process.stdout.write(
    [
      `dolphin-routing: ${source}, routed through every rule policy of the core (3 prefill + 1 decode workers,`,
      `512-token blocks, caches as the router records them). Not an SLO comparison: no cluster is simulated yet.`,
      "",
      `${"policy".padEnd(16)} ${"local".padStart(8)} ${"hit on D".padStart(8)} ${"hit on P".padStart(8)} ${"µs/route".padStart(9)}`,
      ...rows.map((r) => `${r.policy.padEnd(16)} ${pct(r.local_fraction)} ${pct(r.predicted_hit_decode)} ${pct(r.predicted_hit_prefill)} ${r.route_us_mean.toFixed(2).padStart(9)}`),
      "",
    ].join("\n"),
  );
  return 0;
}
