// `dolphin tune --live`: the same search as `dolphin train`, with a running proxy as the environment. Each candidate
// table is swapped in through the admin API (PUT /admin/table), the workload is replayed against the proxy at a fixed
// rate (streaming, so TTFT and TPOT are measured at the client), and every request's cluster is read back from the
// proxy's records (GET /admin/decisions, joined on x-request-id) to give per-cluster end-to-end SLO attainment.
//
// Differences from `dolphin train`, stated: the features are logged from a replay under the proxy's current table;
// the clusters use (isl, eff_P, eff_D) only (the proxy has no output-length classifier for live traffic yet); prompts
// are synthesized from the workload's block hashes (one word per block, so shared prefixes stay shared); output
// lengths are capped (maxOutputTokens) to keep a replay short.

import { fitKMeans, fitScaler, standardize } from "../learn/cluster.js";
import { searchBits, type Environment, type Evaluation, type SearchResult } from "../learn/train.js";
import { meetsE2e, type RequestRecord, type Slo } from "../sim/metrics.js";
import type { SimRequest, Workload } from "../sim/types.js";
import { encodeTable, validateTable, type FeatureName, type Table } from "../table.js";

export interface LiveOptions {
  proxyUrl: string;
  adminToken: string;
  model: string;
  workload: Workload;
  /** replay rate, requests per second */
  rate: number;
  slo: Slo;
  k?: number;
  seed?: number;
  maxRounds?: number;
  maxOutputTokens?: number;
  onProgress?: (line: string) => void;
}

interface Outcome {
  id: string;
  ttftMs: number;
  tpotMs: number;
  e2eMs: number;
  outputTokens: number;
  ok: boolean;
}

const WORDS = ["alpha", "bravo", "delta", "echo", "golf", "hotel", "india", "kilo", "lima", "mike", "oscar", "papa", "romeo", "sierra", "tango", "victor"];

/** A prompt whose text shares a prefix exactly where the request's blocks do: a few words per 16-token block. */
export function promptFor(r: SimRequest): string {
  const parts: string[] = [];
  for (let i = 0; i + 1 < r.blocks.length; i += 2) {
    const a = r.blocks[i]!;
    const b = r.blocks[i + 1]!;
    parts.push(`${WORDS[a & 15]}${a >>> 4 & 0xfff} ${WORDS[b & 15]}${b >>> 8 & 0xfff} ${WORDS[(a >>> 16) & 15]}`);
  }
  return parts.join(" ") || "hello";
}

async function replayOne(o: LiveOptions, r: SimRequest): Promise<Outcome> {
  const max = Math.max(1, Math.min(r.outputTokens, o.maxOutputTokens ?? 32));
  const t0 = performance.now();
  const res = await fetch(`${o.proxyUrl}/v1/chat/completions`, {
    method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: o.model, messages: [{ role: "user", content: promptFor(r) }], max_tokens: max, stream: true }),
  });
  const id = res.headers.get("x-request-id") ?? "";
  if (!res.ok || !res.body) return { id, ttftMs: NaN, tpotMs: NaN, e2eMs: NaN, outputTokens: max, ok: false };
  let first = NaN;
  let last = NaN;
  let tokens = 0;
  const decoder = new TextDecoder();
  let buf = "";
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    buf += decoder.decode(chunk, { stream: true });
    let cut: number;
    while ((cut = buf.indexOf("\n\n")) >= 0) {
      const event = buf.slice(0, cut);
      buf = buf.slice(cut + 2);
      if (!event.startsWith("data: ") || event === "data: [DONE]") continue;
      const content = (JSON.parse(event.slice(6)) as { choices?: { delta?: { content?: string } }[] }).choices?.[0]?.delta?.content;
      if (content) {
        const now = performance.now();
        if (Number.isNaN(first)) first = now;
        last = now;
        tokens++;
      }
    }
  }
  const end = performance.now();
  return {
    id, ttftMs: first - t0, tpotMs: tokens > 1 ? (last - first) / (tokens - 1) : 0, e2eMs: end - t0, outputTokens: max,
    ok: tokens > 0,
  };
}

/** Replays the workload against the proxy at the fixed rate (open loop) and waits for every request. */
export async function replay(o: LiveOptions): Promise<Outcome[]> {
  const start = performance.now();
  const gap = 1000 / o.rate;
  return Promise.all(o.workload.requests.map(async (r, i) => {
    const wait = start + i * gap - performance.now();
    if (wait > 0) await new Promise((res) => setTimeout(res, wait));
    return replayOne(o, r);
  }));
}

async function admin(o: LiveOptions, path: string, init: RequestInit = {}): Promise<Response> {
  const res = await fetch(`${o.proxyUrl}${path}`, { ...init, headers: { ...init.headers, authorization: `Bearer ${o.adminToken}` } });
  if (!res.ok) throw new Error(`tune: ${init.method ?? "GET"} ${path}: ${res.status} ${await res.text()}`);
  return res;
}

interface LoggedDecision { id: string; cluster: number | null; path: string; features: { isl: number; effP: number; effD: number; oslHat: number } }

async function decisionsFor(o: LiveOptions, ids: Set<string>): Promise<Map<string, LoggedDecision>> {
  const res = await admin(o, `/admin/decisions?n=${Math.max(1000, ids.size * 2)}`);
  const all = ((await res.json()) as { decisions: LoggedDecision[] }).decisions;
  return new Map(all.filter((d) => ids.has(d.id)).map((d) => [d.id, d]));
}

/** The proxy as the search's environment. */
export class LiveEnvironment implements Environment {
  evaluations = 0;
  constructor(private readonly o: LiveOptions) {}

  /** Not used: the live search is asynchronous (see evaluateAsync); present to satisfy the interface. */
  evaluate(): Evaluation {
    throw new Error("LiveEnvironment: use evaluateAsync");
  }

  async evaluateAsync(table: Table): Promise<Evaluation> {
    this.evaluations++;
    await admin(this.o, "/admin/table", { method: "PUT", headers: { "content-type": "application/msgpack" }, body: Buffer.from(encodeTable(table)) });
    const outcomes = await replay(this.o);
    const decisions = await decisionsFor(this.o, new Set(outcomes.map((x) => x.id)));
    const byCluster = new Map<number, { requests: number; met: number }>();
    const records: RequestRecord[] = [];
    let met = 0;
    for (const x of outcomes) {
      const d = decisions.get(x.id);
      const cluster = d?.cluster ?? -1;
      const rec = {
        failed: !x.ok, e2eMs: x.e2eMs, ttftMs: x.ttftMs, tpotMs: x.tpotMs, outputTokens: x.outputTokens, cluster,
      } as RequestRecord;
      const ok = meetsE2e(rec, this.o.slo);
      if (ok) met++;
      const c = byCluster.get(cluster) ?? { requests: 0, met: 0 };
      c.requests++;
      if (ok) c.met++;
      byCluster.set(cluster, c);
      records.push(rec);
    }
    return { reward: outcomes.length ? met / outcomes.length : 0, byCluster, records };
  }
}

const FEATURES: FeatureName[] = ["isl", "eff_P", "eff_D"];

/** Logs features under the proxy's current table, clusters them, and searches the bits live. */
export async function tuneLive(o: LiveOptions): Promise<{ table: Table; search: SearchResult }> {
  const k = o.k ?? 8;
  const seed = o.seed ?? 1;
  o.onProgress?.(`logging features: replaying ${o.workload.requests.length} requests at ${o.rate} req/s under the proxy's current table…`);
  const outcomes = await replay(o);
  const decisions = await decisionsFor(o, new Set(outcomes.map((x) => x.id)));
  const logged = outcomes.map((x) => decisions.get(x.id)).filter((d): d is LoggedDecision => d !== undefined);
  if (logged.length < k) throw new Error(`tune: only ${logged.length} decisions logged; need at least K = ${k}`);
  const rows = logged.map((d) => [d.features.isl, d.features.effP, d.features.effD]);
  const scaler = fitScaler(rows);
  const model = fitKMeans(standardize(rows, scaler), k, { seed });
  const sizes = new Array<number>(k).fill(0);
  const remote = new Array<number>(k).fill(0);
  model.assignments.forEach((c, i) => {
    sizes[c]!++;
    if (logged[i]!.path === "remote") remote[c]!++;
  });
  const initial = sizes.map((n, c) => (remote[c]! * 2 >= n ? 1 : 0));
  const makeTable = (bits: number[]): Table => validateTable({
    format: "dolphin-routing.table", version: 1, kind: "kmeans", features: FEATURES, scaler, centroids: model.centroids, bits,
    slo: { ttft_ms: o.slo.ttftMs, tpot_ms: o.slo.tpotMs },
    provenance: { tool: "dolphin-routing tune --live", created: new Date().toISOString(), workload: `${o.workload.name} live at ${o.rate} req/s via ${o.proxyUrl}`, seed },
    checksum: "xxh64:0000000000000000",
  });
  const env = new LiveEnvironment(o);
  // searchBits is synchronous; run it over a cache of live evaluations, one round trip per new table
  const cache = new Map<string, Evaluation>();
  const sync: Environment = {
    get evaluations() { return env.evaluations; },
    evaluate: (t) => {
      const e = cache.get(t.bits!.join(""));
      if (!e) throw new NeedEvaluation(t);
      return e;
    },
  };
  for (;;) {
    try {
      const search = searchBits(sync, makeTable, initial, { seed, maxRounds: o.maxRounds ?? 30 });
      const table = makeTable(search.best);
      await admin(o, "/admin/table", { method: "PUT", headers: { "content-type": "application/msgpack" }, body: Buffer.from(encodeTable(table)) });
      return { table, search };
    } catch (e) {
      if (!(e instanceof NeedEvaluation)) throw e;
      const ev = await env.evaluateAsync(e.table);
      cache.set(e.table.bits!.join(""), ev);
      o.onProgress?.(`  round ${env.evaluations}: table ${e.table.bits!.join("")} → live SLO attainment ${(100 * ev.reward).toFixed(1)}%`);
    }
  }
}

/** Thrown by the synchronous view when a table has not been evaluated live yet (the search is replayed from the start). */
class NeedEvaluation extends Error {
  constructor(readonly table: Table) {
    super("needs a live evaluation");
  }
}
