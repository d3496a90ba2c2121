// `dolphin bench routers`: the latency each router a vLLM operator could put in front of P/D workers adds over the
// two calls a P/D request makes anyway, at a fixed open-loop rate, in one run on the same workers (issue 26).
//
// Processes, each its own event loop or binary:
//   workers   emulated 1P2D (`dolphin worker`, one process each, --time-scale 1000 unless given: the model's time
//             shrinks so the figure is the routers' own cost, not the simulated engine's).
//   dolphin   `dolphin serve`, approximate mode (it hashes the request's text: no /tokenize round trip, as
//             vllm-router's cache_aware reads the text), twice: with a table `dolphin train` learned for this
//             cluster (h100-8b 1P2D, hybrid workload) and with the rule dynamo-isl. Both send these prompts remote.
//   vllm-router 0.1.17 in its vLLM P/D mode with --kv-connector nixl, policy cache_aware (its default: prefix-aware
//             on the request text and load-balanced; kv_aware needs a HuggingFace tokenizer equal to the engines',
//             which emulated workers, with a tokenizer of our own, do not have).
//   smg       1.13.0 (`smg launch --pd-disaggregation --backend vllm`, cache_aware): two legs too, but its prefill leg
//             carries no NixlConnector kv_transfer_params (checked against a capturing worker), so the decode
//             worker gets no KV handoff and recomputes the prompt: not vLLM's NIXL P/D; measured, and said so.
//   direct    this process making the two legs itself (routers-load.ts): the baseline.
// Per mode (non-streaming, streaming): a warm-up of every path, then rounds; each round runs every path in turn for
// requests/rounds requests at `rate`, the order rotated by one each round. Added latency at q = q(path) − q(direct).
// A path's two-leg share: requests its prefill worker completed over requests sent (vllm:request_success_total).

import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import { join } from "node:path";
import { Children, MODEL, spawnDolphin, startServeChild, writeServeConfig, type Child } from "./harness.js";
import { directPath, openLoop, routerPath, type LoadPath } from "./routers-load.js";
import {
  peerRouterBinary,
  SMG_VERSION,
  startPeerRouter,
  VLLM_ROUTER_VERSION,
  type RunningPeer,
} from "./routers-peers.js";
import { DOLPHIN, PEERS, summarize, type RouterFigures, type RouterName, type RoutersRun } from "./routers-result.js";
import { minus, quantiles } from "./stats.js";

export interface RoutersBenchOptions {
  /** Requests per path and mode (default 3000; quick 200). */
  requests?: number;
  rate?: number;
  /** The emulated workers' --time-scale (default 1000). */
  timeScale?: number;
  quick?: boolean;
  /** Extra node flags for the dolphin serve children (e.g. --cpu-prof). */
  proxyNodeArgs?: string[];
  progress?: (line: string) => void;
}

const ROUTERS: RouterName[] = [...DOLPHIN, ...PEERS];

const POLICY: Record<RouterName, string> = {
  "dolphin-learned": "learned table (dolphin train, h100-8b 1P2D, hybrid)",
  "dolphin-dynamo-isl": "dynamo-isl",
  "vllm-router": "cache_aware",
  smg: "cache_aware",
};

interface Worker {
  id: string;
  role: "prefill" | "decode";
  url: string;
}

async function startWorkers(children: Children, timeScale: number): Promise<Worker[]> {
  const roles: [string, Worker["role"]][] = [
    ["P0", "prefill"],
    ["D0", "decode"],
    ["D1", "decode"],
  ];
  return Promise.all(
    roles.map(async ([id, role]) => {
      const argv = ["worker", "--role", role, "--port", "0", "--time-scale", String(timeScale), "--model", MODEL];
      const child = spawnDolphin(children, `worker ${id}`, [...argv, "--worker-id", id]);
      const url = await children.ready(child, (_o, err) => /serving \S+ at (http:\/\/[^\s,]+)/.exec(err)?.[1]);
      return { id, role, url };
    }),
  );
}

/** A table `dolphin train` learns for the workers' cluster, written to `file` (a few seconds). */
async function trainTable(children: Children, file: string, quick: boolean): Promise<string> {
  const argv = ["train", "--workload", "hybrid", "--cluster", "h100-8b", "--split", "1P2D", "--jobs", "1"];
  const child = spawnDolphin(children, "train", [...argv, "--requests", quick ? "300" : "1500", "--out", file]);
  const bits = await children.ready(child, (out, err) => /wrote \S+: bits (\S+)/.exec(out + err)?.[1], 300_000);
  // the launcher lives until its stdin closes
  await new Promise<void>((resolve) => {
    if (child.proc.exitCode !== null) return resolve();
    child.proc.once("exit", () => resolve());
    child.proc.stdin!.end();
  });
  return bits;
}

/** Requests the prefill worker has completed (its vllm:request_success_total, summed over labels). */
async function prefillCount(url: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  let n = 0;
  for (const m of text.matchAll(/^vllm:request_success_total(?:\{[^}]*\})? ([\d.e+-]+)$/gm)) n += Number(m[1]);
  return n;
}

interface Tallies {
  latencies: Map<string, number[]>;
  failed: Map<string, number>;
  first: Map<string, string>;
  legs: Map<string, number>;
}

async function measureMode(
  paths: LoadPath[],
  stream: boolean,
  plan: { requests: number; rate: number; rounds: number; warmup: number },
  prefillUrl: string,
  progress: (l: string) => void,
): Promise<Tallies> {
  const t: Tallies = { latencies: new Map(), failed: new Map(), first: new Map(), legs: new Map() };
  for (const p of paths) {
    t.latencies.set(p.name, []);
    t.failed.set(p.name, 0);
    t.legs.set(p.name, 0);
  }
  const once = async (p: LoadPath, n: number, measured: boolean): Promise<void> => {
    const before = await prefillCount(prefillUrl);
    const s = await openLoop(p, n, plan.rate, stream);
    const legs = (await prefillCount(prefillUrl)) - before;
    t.failed.set(p.name, t.failed.get(p.name)! + s.failed);
    if (s.firstFailure && !t.first.has(p.name)) t.first.set(p.name, s.firstFailure);
    if (!measured) return;
    t.latencies.get(p.name)!.push(...s.latencies);
    t.legs.set(p.name, t.legs.get(p.name)! + legs);
  };
  for (const p of paths) await once(p, plan.warmup, false);
  for (let r = 0; r < plan.rounds; r++) {
    const n = Math.floor(plan.requests / plan.rounds) + (r < plan.requests % plan.rounds ? 1 : 0);
    for (let k = 0; k < paths.length; k++) await once(paths[(k + r) % paths.length]!, n, true);
    progress(`${stream ? "streaming" : "non-streaming"}: round ${r + 1}/${plan.rounds} done`);
  }
  return t;
}

/** One whole run: workers, a learned table, every router, both modes. */
export async function runRoutersOnce(opts: RoutersBenchOptions = {}): Promise<RoutersRun> {
  const quick = opts.quick ?? false;
  const requests = opts.requests ?? (quick ? 200 : 3000);
  const plan = {
    requests,
    // --quick checks that every router answers every request on two legs, not how it sheds: a rate a loaded 2-core
    // machine sustains, so a shed 503 does not count as a failure there
    rate: opts.rate ?? (quick ? 100 : 500),
    rounds: Math.min(quick ? 2 : 20, requests),
    warmup: quick ? 50 : 300,
  };
  const timeScale = opts.timeScale ?? 1000;
  if (!(Number.isInteger(requests) && requests >= 1)) throw new Error("bench routers: requests must be an integer ≥ 1");
  if (!(plan.rate > 0 && Number.isFinite(plan.rate))) throw new Error("bench routers: rate must be a number > 0");
  const progress = opts.progress ?? (() => undefined);
  for (const peer of ["vllm-router", "smg"] as const) peerRouterBinary(peer); // missing: say to run npm run setup
  const tmp = mkdtempSync(join(os.tmpdir(), "dolphin-bench-routers-"));
  const children = new Children();
  const peers: RunningPeer[] = [];
  const paths: LoadPath[] = [];
  try {
    const [workers, bits] = await Promise.all([
      startWorkers(children, timeScale),
      trainTable(children, join(tmp, "learned.msgpack"), quick),
    ]);
    const prefill = workers.find((w) => w.role === "prefill")!;
    const decode = workers.filter((w) => w.role === "decode");
    const side = { prefill: prefill.url, decode: decode.map((d) => d.url) };
    const serveChildren = new Map<string, Child>();
    const serve = async (name: string, table: string): Promise<string> => {
      const config = writeServeConfig(join(tmp, `${name}.json`), { table, mode: "approximate", workers });
      const { url, child } = await startServeChild(children, name, config, opts.proxyNodeArgs ?? []);
      serveChildren.set(name, child);
      return url;
    };
    const [learnedUrl, islUrl, vllmRouter, smg] = await Promise.all([
      serve("dolphin-learned", join(tmp, "learned.msgpack")),
      serve("dolphin-dynamo-isl", "dynamo-isl"),
      startPeerRouter("vllm-router", side, POLICY["vllm-router"]),
      startPeerRouter("smg", side, POLICY.smg),
    ]);
    peers.push(vllmRouter, smg);
    paths.push(
      directPath(prefill.url, side.decode),
      routerPath("dolphin-learned", learnedUrl),
      routerPath("dolphin-dynamo-isl", islUrl),
      routerPath("vllm-router", vllmRouter.url),
      routerPath("smg", smg.url),
    );
    progress(`workers ${workers.map((w) => `${w.id} ${w.url}`).join(", ")}; learned table bits ${bits}`);
    const plain = await measureMode(paths, false, plan, prefill.url, progress);
    const streaming = await measureMode(paths, true, plan, prefill.url, progress);
    // a dolphin path with failed requests: its proxy's warnings (ejections, shedding) say why
    for (const [name, child] of serveChildren)
      if (plain.failed.get(name)! + streaming.failed.get(name)! > 0)
        progress(`${name} failed requests; the tail of its log:\n${child.stderrTail().slice(-2000)}`);
    const figures = (name: string): RouterFigures => {
      const mode = (t: Tallies) => {
        const q = quantiles(t.latencies.get(name)!);
        return {
          added_latency_ms: minus(q, quantiles(t.latencies.get("direct")!)),
          latency_ms: q,
          failed: t.failed.get(name)!,
          first_failure: t.first.get(name) ?? null,
          two_leg_share: Math.round((1000 * t.legs.get(name)!) / requests) / 1000,
        };
      };
      return { ...mode(plain), streaming: mode(streaming) };
    };
    const cpus = os.cpus();
    return {
      rate: plan.rate,
      requests,
      rounds: plan.rounds,
      time_scale: timeScale,
      learned_table_bits: bits,
      direct: figures("direct"),
      routers: Object.fromEntries(
        ROUTERS.map((n) => [n, { policy: POLICY[n], ...figures(n) }]),
      ) as RoutersRun["routers"],
      versions: { "vllm-router": VLLM_ROUTER_VERSION, smg: SMG_VERSION, node: process.version },
      commands: { "vllm-router": vllmRouter.argv.join(" "), smg: smg.argv.join(" ") },
      runtime: { cpus: cpus.length, cpu_model: cpus[0]?.model.trim() ?? "unknown", quick },
    };
  } finally {
    for (const p of paths) p.close();
    await Promise.all(peers.map((p) => p.stop()));
    await children.closeAll();
    rmSync(tmp, { recursive: true, force: true });
  }
}

/** `runs` whole runs one after another (each line to `onRun`), then their summary: medians and targets. */
export async function runRoutersBench(
  opts: RoutersBenchOptions & { runs?: number; onRun?: (r: RoutersRun) => void } = {},
) {
  const runs = opts.runs ?? (opts.quick ? 1 : 3);
  if (!(Number.isInteger(runs) && runs >= 1)) throw new Error("bench routers: runs must be an integer ≥ 1");
  const all: RoutersRun[] = [];
  for (let i = 0; i < runs; i++) {
    opts.progress?.(`run ${i + 1}/${runs}`);
    const r = await runRoutersOnce(opts);
    opts.onRun?.(r);
    all.push(r);
  }
  return summarize(all);
}
