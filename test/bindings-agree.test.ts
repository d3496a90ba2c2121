// Cross-language agreement beyond the vectors: seeded random tables (valid and corrupted, some with output-length
// classes and a model), workers, index events, loads, signals and requests (some by output-length class), replayed
// through Node (the Router on the release core), Python (bindings/python/tests/agree.py) and Go
// (bindings/go/internal/agree). Every hash, decision, match and error message must be identical; so must every explain
// sentence, over more scenarios on every rule kind and on guarded learned tables with each fallback rule. A missing
// toolchain fails with how to install it (build/setup.mjs).

import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { Router } from "../src/router/router.js";
import type { Decision } from "../src/router/types.js";
import { decodeTable, encodeTable } from "../src/table/codec.js";
import { ruleTable } from "../src/table/rule-table.js";
import { FALLBACK_KINDS, type Table } from "../src/table/table.js";
import { pairsToHex } from "../src/hashing/hashes.js";
import { instantiateCore } from "../src/core/core.js";
import { loadTableInCore, type TableCoreExports } from "../src/core/core-table.js";
import { TableError } from "../src/table/table.js";
import { coreModule, kmeansTable, PROVENANCE, routerOn } from "./helpers.js";
import {
  explainScenario,
  FEATURES,
  guardedTable,
  int,
  mulberry32,
  pick,
  ruleParams,
  saysOf,
  type Rand,
} from "./bindings-scenarios.js";
import { pythonCommand, goCommand, ROOT } from "./bindings-tools.js";

const SEED = 20261130;
const SCENARIOS = 60;

const CLASS_NAMES = ["short", "medium", "long", "très long", "🐬"] as const;
const OSL_MODEL_FEATURES = ["log_isl", "prefix_reuse", "log_turn", "log_prev_output", "log_max_tokens"] as const;

/** Output-length classes (and sometimes a model over them), drawn from `rc`, the classes' own stream. */
function randomOslFields(rc: Rand): Partial<Table> {
  const c = int(rc, 1, 4);
  const names = CLASS_NAMES.slice(int(rc, 0, CLASS_NAMES.length - c)).slice(0, c);
  const osl_classes = {
    names,
    thresholds: names.slice(1).map((_, i) => 100 * (i + 1)),
    representative: names.map(() => (rc() < 0.5 ? int(rc, 0, 4000) : rc() * 4000)),
  };
  if (rc() < 0.7) return { osl_classes };
  const f = int(rc, 1, OSL_MODEL_FEATURES.length);
  const row = () => Array.from({ length: f }, () => rc() * 2 - 1);
  const osl_model = {
    kind: "logistic" as const,
    features: OSL_MODEL_FEATURES.slice(0, f),
    mean: Array.from({ length: f }, () => rc() * 4),
    std: Array.from({ length: f }, () => 0.5 + rc()),
    weights: names.map(row),
    bias: names.map(() => rc() - 0.5),
  };
  return { osl_classes, osl_model };
}

// `rc` draws everything about output-length classes, so the other draws (from `r`) are the same with or without them
function randomTable(r: Rand, rc: Rand): Uint8Array {
  const kind = pick(r, [
    "kmeans",
    "kmeans",
    "gmm",
    "dynamo-isl",
    "dynamo-load",
    "dynamo-legacy",
    "trtllm",
    "llm-d",
    "always-local",
    "always-remote",
    "ppd",
  ] as const);
  let t: Table;
  if (kind === "kmeans" || kind === "gmm") {
    const k = int(r, 1, 8);
    const d = int(r, 1, 4);
    const centroids = Array.from({ length: k }, () => Array.from({ length: d }, () => r() * 6 - 3));
    const bits = Array.from({ length: k }, () => int(r, 0, 1));
    const scaler = {
      mean: Array.from({ length: d }, () => 3 + r() * 6),
      std: Array.from({ length: d }, () => 0.5 + r() * 3),
    };
    const extra: Partial<Table> = { scaler, features: [...FEATURES].slice(0, d) };
    if (kind === "gmm") {
      extra.kind = "gmm";
      extra.weights = Array.from({ length: k }, () => 1 / k);
      extra.variances = Array.from({ length: k }, () => Array.from({ length: d }, () => 0.2 + r() * 2));
    }
    t = kmeansTable(centroids, bits, extra);
  } else if (kind === "ppd") {
    const bits = Array.from({ length: 3 }, () =>
      Array.from({ length: 9 }, () => Array.from({ length: 2 }, () => int(r, 0, 1))),
    );
    t = ruleTable("ppd", { qps_levels: [1, 4], bits }, { provenance: PROVENANCE });
  } else {
    t = ruleTable(kind, ruleParams(r)[kind], { provenance: PROVENANCE });
  }
  if (rc() < 0.6) t = { ...t, ...randomOslFields(rc) };
  const bytes = encodeTable(t);
  // one table in five is corrupted: a random byte changed, so the three hosts must give the same table error
  if (r() < 0.2) bytes[int(r, 0, bytes.length - 1)] = int(r, 0, 255);
  return bytes;
}

const TEXT_UNITS = [
  "system: you are helpful. ",
  "🐬 dolphins ",
  "预填充与解码 ",
  "user: tell me about caches\n",
  "ä",
  "x",
];

function randomScenario(r: Rand, rc: Rand): Record<string, unknown> {
  const roles = ["decode", "prefill", "both"] as const;
  const workers = Array.from({ length: int(r, 1, 5) }, (_, i) => ({
    id: `w${i}`,
    role: i === 0 ? "decode" : pick(r, roles),
    capacity_blocks: int(r, 8, 400),
  }));
  const base = Array.from({ length: int(r, 0, 1500) }, () => int(r, 0, 152063));
  const prompts: ({ tokens: number[] } | { text: string })[] = [];
  for (let i = 0; i < 3; i++)
    prompts.push({
      tokens: [
        ...base.slice(0, int(r, 0, base.length)),
        ...Array.from({ length: int(r, 0, 300) }, () => int(r, 0, 2 ** 32 - 1)),
      ],
    });
  const textBase = Array.from({ length: int(r, 0, 60) }, () => pick(r, TEXT_UNITS)).join("");
  for (let i = 0; i < 2; i++)
    prompts.push({ text: textBase + Array.from({ length: int(r, 0, 20) }, () => pick(r, TEXT_UNITS)).join("") });
  const steps: Record<string, unknown>[] = [];
  for (let i = 0; i < 14; i++) {
    const op = pick(r, [
      "store",
      "store",
      "remove",
      "load",
      "signals",
      "match",
      "route",
      "route",
      "route",
      "route",
    ] as const);
    const worker = r() < 0.05 ? "nobody" : pick(r, workers).id;
    const prompt = int(r, 0, prompts.length - 1);
    if (op === "store" || op === "remove") steps.push({ op, worker, prompt, blocks: int(r, 0, 120) });
    else if (op === "load")
      steps.push({ op, worker, prefill: r() < 0.05 ? -1 : int(r, 0, 5000), decode: int(r, 0, 5000) });
    else if (op === "signals") steps.push({ op, prefill_queue: int(r, 0, 6), qps: r() * 20 });
    else if (op === "match") steps.push({ op, prompt });
    else {
      const step: Record<string, unknown> = {
        op,
        prompt,
        mode: r() < 0.25 ? "hashes" : "prompt",
        turn: int(r, 1, 4),
        context_tokens: r() < 0.5 ? -1 : int(r, 0, 3000),
        prompt_tokens: r() < 0.3 ? int(r, 0, 3000) : 0,
      };
      if (r() < 0.9) step["osl_hat"] = r() < 0.05 ? -2 : int(r, 0, 2000);
      if (rc() < 0.4) {
        // a class by name or index (some not in the table); mostly without osl_hat, which would win
        step["osl_class"] = rc() < 0.5 ? pick(rc, CLASS_NAMES) : int(rc, -1, 4);
        if (rc() < 0.7) delete step["osl_hat"];
      }
      if (r() < 0.25) step["pin"] = r() < 0.1 ? "nobody" : pick(r, workers).id;
      steps.push(step);
    }
  }
  return {
    table: Buffer.from(randomTable(r, rc)).toString("base64"),
    workers,
    block_size: pick(r, [1, 4, 16, 16, 32]),
    model: pick(r, ["", "", "llama-3-8b", "Qwen/Qwen2.5 ✓"]),
    salt: pick(r, ["", "", "tenant-a"]),
    record: r() < 0.5,
    load_scale: pick(r, [0, 0.5, 1, 2]),
    prompts,
    steps,
  };
}

function decisionJSON(d: Decision): Record<string, unknown> {
  return {
    path: d.path,
    bit: d.bit,
    reason: d.reason,
    decode_worker: d.decodeWorker,
    prefill_worker: d.prefillWorker,
    cluster: d.cluster,
    features: { isl: d.features.isl, eff_P: d.features.effP, eff_D: d.features.effD, osl_hat: d.features.oslHat },
    matched_blocks: d.matchedBlocks,
    blocks: d.blocks,
    osl_class: d.oslClass,
    reuse: d.reuse,
    cost: d.cost,
  };
}

/** Node's results: the same replay as agree.py and internal/agree, through the TypeScript Router on the release core. */
function runNode(s: Record<string, unknown>): unknown {
  const workers = s["workers"] as { id: string; role: "decode" | "prefill" | "both"; capacity_blocks: number }[];
  let router: Router;
  try {
    router = routerOn(
      "wasm",
      new Uint8Array(Buffer.from(s["table"] as string, "base64")),
      {
        workers: workers.map((w) => ({ id: w.id, role: w.role, capacityBlocks: w.capacity_blocks })),
        blockSize: s["block_size"] as number,
        model: s["model"] as string,
        salt: s["salt"] as string,
        recordDecisions: s["record"] as boolean,
        ...((s["load_scale"] as number) !== 0 ? { loadScale: s["load_scale"] as number } : {}),
        maxWorkers: 16,
        maxPromptTokens: 1 << 16,
        indexBlocks: 1 << 14,
      },
      "release",
    );
  } catch (e) {
    if (!(e instanceof TableError)) return { load_error: (e as Error).message };
    // the bindings load tables through the core's decoder; Node's Router still decodes in TypeScript (src/table/codec.ts),
    // whose message can differ in wording (see coreTableMessage): compare with what the core's decoder says
    return { load_error: coreTableMessage(new Uint8Array(Buffer.from(s["table"] as string, "base64"))) };
  }
  const prompts = s["prompts"] as ({ tokens: number[] } | { text: string })[];
  const hashesOf = (p: { tokens: number[] } | { text: string }): Uint32Array => router.hash(p);
  const out = { hashes: prompts.map((p) => pairsToHex(hashesOf(p))), steps: [] as unknown[] };
  for (const st of s["steps"] as Record<string, any>[]) {
    try {
      const p = prompts[st["prompt"]]!;
      switch (st["op"]) {
        case "store":
          router.index.store(st["worker"], hashesOf(p).slice(0, 2 * st["blocks"]));
          out.steps.push(null);
          break;
        case "remove":
          router.index.remove(st["worker"], hashesOf(p).slice(0, 2 * st["blocks"]));
          out.steps.push(null);
          break;
        case "load":
          router.setLoad(st["worker"], { activePrefillTokens: st["prefill"], activeDecodeTokens: st["decode"] });
          out.steps.push(null);
          break;
        case "signals":
          router.setSignals({ prefillQueue: st["prefill_queue"], qps: st["qps"] });
          out.steps.push(null);
          break;
        case "match":
          out.steps.push(router.index.match(hashesOf(p)));
          break;
        default: {
          const input = st["mode"] === "hashes" ? { blockHashes: hashesOf(p) } : p;
          const request = {
            ...input,
            turn: st["turn"],
            contextTokens: st["context_tokens"],
            promptTokens: st["prompt_tokens"],
            ...(st["osl_hat"] !== undefined ? { oslHat: st["osl_hat"] } : {}),
            ...(st["osl_class"] !== undefined ? { oslClass: st["osl_class"] } : {}),
            ...(st["pin"] !== undefined ? { decodeWorker: st["pin"] } : {}),
          };
          // an "explain" step gives the sentence alone: the decision is what "route" compares
          out.steps.push(
            st["op"] === "explain" ? { why: router.explain(request).why } : decisionJSON(router.route(request)),
          );
        }
      }
    } catch (e) {
      out.steps.push({ error: (e as Error).message });
    }
  }
  return out;
}

let tableCore: TableCoreExports | null = null;

/** The message the core's own decoder (loadTable, src/core/core-table.ts) gives for a table, as the bindings report it. */
function coreTableMessage(bytes: Uint8Array): string {
  if (!tableCore) {
    tableCore = instantiateCore(coreModule("release")).exports as unknown as TableCoreExports;
    (tableCore as unknown as { init(w: number, b: number, i: number): number }).init(1, 1 << 20, 16);
  }
  try {
    loadTableInCore(tableCore, bytes);
    return "(accepted by the core's decoder, refused by src/table/codec.ts)";
  } catch (e) {
    return (e as Error).message;
  }
}

function runHost(
  cmd: { command: string; args: string[]; cwd: string; env?: NodeJS.ProcessEnv },
  file: string,
  what: string,
): unknown {
  const r = spawnSync(cmd.command, [...cmd.args, file], {
    cwd: cmd.cwd,
    env: cmd.env ?? process.env,
    encoding: "utf8",
    maxBuffer: 256 << 20,
  });
  if (r.error) throw new Error(`${what}: ${r.error.message}`);
  if (r.status !== 0) throw new Error(`${what} exited with ${r.status}:\n${r.stderr}`);
  return JSON.parse(r.stdout);
}

describe("bindings agree with Node on seeded random scenarios", () => {
  const r = mulberry32(SEED);
  const rc = mulberry32(SEED + 1);
  const scenarios = Array.from({ length: SCENARIOS }, () => randomScenario(r, rc));
  const file = join(mkdtempSync(join(tmpdir(), "dolphin-agree-")), "scenarios.json");
  writeFileSync(file, JSON.stringify(scenarios));
  const node = JSON.parse(JSON.stringify(scenarios.map(runNode)));

  it("the scenarios exercise decisions, errors and table errors", () => {
    const flat = (node as { steps?: unknown[] }[]).flatMap((s) => s.steps ?? []);
    expect(flat.filter((x) => x && typeof x === "object" && "path" in x).length).toBeGreaterThan(100);
    expect(flat.filter((x) => x && typeof x === "object" && "error" in x).length).toBeGreaterThan(5);
    expect((node as object[]).filter((s) => "load_error" in s).length).toBeGreaterThan(2);
  });

  it("the scenarios route by output-length class and meet both class errors", () => {
    const byClass = scenarios.flatMap((s, i) => {
      const steps = (s["steps"] as Record<string, unknown>[]).map((st, j) => [st, node[i].steps?.[j]] as const);
      return steps.filter(([st]) => st["osl_class"] !== undefined && st["osl_hat"] === undefined).map(([, d]) => d);
    });
    const errors = byClass.map((d) => (d && typeof d === "object" && "error" in d ? String(d.error) : ""));
    expect(byClass.filter((d) => d && typeof d === "object" && "path" in d).length).toBeGreaterThan(10);
    expect(errors.filter((e) => e.startsWith("route: unknown oslClass ")).length).toBeGreaterThan(3);
    expect(errors.filter((e) => e === "route: oslClass given but the table has no osl_classes").length).toBeGreaterThan(
      3,
    );
  });

  for (const [name, cmd] of [
    ["Python", pythonCommand(join(ROOT, "bindings/python/tests/agree.py"))],
    ["Go", goCommand("./internal/agree")],
  ] as const) {
    it(`${name}: identical hashes, decisions, matches and messages`, () => {
      const got = runHost(cmd, file, name) as unknown[];
      expect(got.length).toBe(node.length);
      for (let i = 0; i < node.length; i++) expect(got[i], `scenario ${i}`).toEqual(node[i]);
    }, 180_000);
  }
});

describe("bindings' explain sentences agree with Node's", () => {
  // random scenarios, then more on each rule kind (random parameters) and on a guarded table of each learned kind and
  // fallback rule; every route is explained instead
  const r = mulberry32(SEED + 2);
  const rc = mulberry32(SEED + 3);
  const scenarios = Array.from({ length: 30 }, () => randomScenario(r, rc));
  for (const kind of [...FALLBACK_KINDS, "ppd"] as const)
    for (let i = 0; i < 10; i++) {
      const ppd = {
        qps_levels: [1, 4],
        bits: [0, 1, 2].map(() => Array.from({ length: 9 }, () => [int(r, 0, 1), int(r, 0, 1)])),
      };
      const params = kind === "ppd" ? ppd : ruleParams(r)[kind];
      scenarios.push(explainScenario(r, encodeTable(ruleTable(kind, params, { provenance: PROVENANCE }))));
    }
  for (const kind of ["kmeans", "gmm"] as const)
    for (const fallback of FALLBACK_KINDS)
      for (let i = 0; i < 16; i++) scenarios.push(explainScenario(r, guardedTable(r, kind, fallback)));
  for (const s of scenarios)
    for (const st of s["steps"] as Record<string, unknown>[]) if (st["op"] === "route") st["op"] = "explain";
  const file = join(mkdtempSync(join(tmpdir(), "dolphin-explain-")), "scenarios.json");
  writeFileSync(file, JSON.stringify(scenarios));
  const node = JSON.parse(JSON.stringify(scenarios.map(runNode))) as { steps?: unknown[] }[];

  it("the sentences cover every kind's reasons and bits, and every fallback rule's on both learned kinds", () => {
    const said = new Set<string>();
    scenarios.forEach((s, i) => {
      let t: Table;
      try {
        t = decodeTable(new Uint8Array(Buffer.from(s["table"] as string, "base64")));
      } catch {
        return; // a corrupted table
      }
      for (const x of node[i]!.steps ?? [])
        if (x && typeof x === "object" && "why" in x)
          said.add(`${t.kind} ${t.fallback?.kind ?? "-"} ${saysOf(String(x.why))}`);
    });
    const missing: string[] = [];
    const want = (x: string): void => void (said.has(x) || missing.push(x));
    const bitsOf = (k: string): string[] =>
      k === "always-local" ? ["local"] : k === "always-remote" ? ["remote"] : ["local", "remote"];
    for (const kind of [...FALLBACK_KINDS, "ppd"]) for (const bit of bitsOf(kind)) want(`${kind} - rule ${bit}`);
    want("ppd - first-turn remote");
    want("always-remote - no-prefill-worker local");
    for (const kind of ["kmeans", "gmm"])
      for (const fallback of FALLBACK_KINDS) {
        for (const bit of ["local", "remote"]) want(`${kind} ${fallback} cluster ${bit}`);
        for (const reason of ["rule-fallback", "out-of-distribution", "load-out-of-range"])
          for (const bit of bitsOf(fallback)) want(`${kind} ${fallback} ${reason} ${fallback} ${bit}`);
      }
    expect(missing).toEqual([]);
  });

  for (const [name, cmd] of [
    ["Python", pythonCommand(join(ROOT, "bindings/python/tests/agree.py"))],
    ["Go", goCommand("./internal/agree")],
  ] as const) {
    it(`${name}: identical sentences`, () => {
      const got = runHost(cmd, file, name) as unknown[];
      expect(got.length).toBe(node.length);
      for (let i = 0; i < node.length; i++) expect(got[i], `scenario ${i}`).toEqual(node[i]);
    }, 180_000);
  }
});
