// `dolphin tune --live`: the same search as `dolphin train`, with a running proxy as the environment. Each candidate
// table is swapped in through the admin API (PUT /admin/table), the workload is replayed against the proxy at a fixed
// rate (streaming, so TTFT and TPOT are measured at the client), and every request's cluster is read back from the
// proxy's records (GET /admin/decisions, joined on x-request-id) to give per-cluster end-to-end SLO attainment.
//
// The learner is `dolphin train`'s own (`train`: `prepare` then `searchBits`, src/learn/train.ts); this module only
// makes the proxy an environment. Differences from the simulated environment, stated: the features are logged from
// a replay under the proxy's current table; the clusters use (isl, eff_P, eff_D) only (output lengths are not
// observed before a request finishes, so there is no output-length classifier for live traffic yet); prompts are
// synthesized from the workload's block hashes (one word per block, so shared prefixes stay shared); output lengths
// are capped (maxOutputTokens) to keep a replay short.

import type { SearchResult } from "../learn/bit-search.js";
import type { Evaluation } from "../learn/environment.js";
import type { FeatureLog, LearningEnvironment } from "../learn/learning-environment.js";
import { train } from "../learn/train.js";
import { meetsE2e, type RequestRecord, type Slo } from "../sim/metrics.js";
import type { SimRequest, Workload } from "../sim/types.js";
import { encodeTable } from "../table/codec.js";
import { CLUSTER_RULE, type Table } from "../table/table.js";

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
  /**
   * "text" (default): chat requests on promptFor's words (the prompt's length in tokens is the tokenizer's);
   * "tokens": completions on token ids from tokensFor (exactly the workload's prompt length, shared prefixes exactly
   * where its blocks are shared), greedy, the output exactly max_tokens long (ignore_eos).
   */
  prompts?: "text" | "tokens";
  /** Salts the token prompts: a fresh salt per replay meets caches that hold none of its blocks. */
  salt?: number;
  /** "even" (default): requests 1/rate apart; "arrivals": at the workload's own arrival times (rate unused). */
  timing?: "even" | "arrivals";
  onProgress?: (line: string) => void;
}

export interface Outcome {
  id: string;
  ttftMs: number;
  tpotMs: number;
  e2eMs: number;
  outputTokens: number;
  ok: boolean;
}

const WORDS = [
  "alpha",
  "bravo",
  "delta",
  "echo",
  "golf",
  "hotel",
  "india",
  "kilo",
  "lima",
  "mike",
  "oscar",
  "papa",
  "romeo",
  "sierra",
  "tango",
  "victor",
];

/** A prompt whose text shares a prefix exactly where the request's blocks do: a few words per 16-token block. */
export function promptFor(r: SimRequest): string {
  const parts: string[] = [];
  for (let i = 0; i + 1 < r.blocks.length; i += 2) {
    const a = r.blocks[i]!;
    const b = r.blocks[i + 1]!;
    parts.push(`${WORDS[a & 15]}${(a >>> 4) & 0xfff} ${WORDS[b & 15]}${(b >>> 8) & 0xfff} ${WORDS[(a >>> 16) & 15]}`);
  }
  return parts.join(" ") || "hello";
}

/** xorshift32 from a seed: the token ids of one block. */
function tokenRun(seed: number, n: number, out: number[]): void {
  let x = seed >>> 0 || 0x9e3779b9;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    out.push(TOKEN_LOW + (x % TOKEN_SPAN));
  }
}
/** Token ids drawn from [10, 8000): inside the tiny model's 8,192-token vocabulary, clear of its special tokens. */
const TOKEN_LOW = 10;
const TOKEN_SPAN = 7990;

/**
 * A prompt of exactly r.promptTokens token ids: each of the request's 16-token blocks drawn from its chained hash
 * (and `salt`), so two prompts share tokens exactly as far as their blocks do; the tokens after the last whole block
 * drawn from the request's id, its own.
 */
export function tokensFor(r: SimRequest, salt = 0): number[] {
  const out: number[] = [];
  const n = r.blocks.length / 2;
  for (let b = 0; b < n; b++) tokenRun(Math.imul(r.blocks[2 * b]! ^ salt, 0x85ebca6b) ^ r.blocks[2 * b + 1]!, 16, out);
  tokenRun(
    Math.imul(r.id + 1, 0xc2b2ae35) ^ Math.imul(salt + 1, 0x27d4eb2f) ^ 0x51ed270b,
    r.promptTokens - out.length,
    out,
  );
  return out;
}

/** The request's body: chat on words, or completions on token ids (LiveOptions.prompts). */
function requestFor(o: LiveOptions, r: SimRequest, max: number): { path: string; body: Record<string, unknown> } {
  if (o.prompts !== "tokens")
    return {
      path: "/v1/chat/completions",
      body: { model: o.model, messages: [{ role: "user", content: promptFor(r) }], max_tokens: max, stream: true },
    };
  return {
    path: "/v1/completions",
    body: {
      model: o.model,
      prompt: tokensFor(r, o.salt),
      max_tokens: max,
      stream: true,
      temperature: 0,
      ignore_eos: true,
      stream_options: { include_usage: true },
    },
  };
}

interface StreamChunk {
  choices?: { text?: string; delta?: { content?: string } }[];
  usage?: { completion_tokens?: number } | null;
}

async function replayOne(o: LiveOptions, r: SimRequest): Promise<Outcome> {
  const max = Math.max(1, Math.min(r.outputTokens, o.maxOutputTokens ?? 32));
  const { path, body } = requestFor(o, r, max);
  const t0 = performance.now();
  const res = await fetch(`${o.proxyUrl}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const id = res.headers.get("x-request-id") ?? "";
  if (!res.ok || !res.body) return { id, ttftMs: NaN, tpotMs: NaN, e2eMs: NaN, outputTokens: max, ok: false };
  let first = NaN;
  let last = NaN;
  let tokens = 0;
  let usageTokens = NaN;
  const decoder = new TextDecoder();
  let buf = "";
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    buf += decoder.decode(chunk, { stream: true });
    let cut: number;
    while ((cut = buf.indexOf("\n\n")) >= 0) {
      const event = buf.slice(0, cut);
      buf = buf.slice(cut + 2);
      if (!event.startsWith("data: ") || event === "data: [DONE]") continue;
      const chunk = JSON.parse(event.slice(6)) as StreamChunk;
      if (chunk.usage?.completion_tokens !== undefined) usageTokens = chunk.usage.completion_tokens;
      const choice = chunk.choices?.[0];
      const content = choice?.delta?.content ?? choice?.text;
      if (content) {
        const now = performance.now();
        if (Number.isNaN(first)) first = now;
        last = now;
        tokens++;
      }
    }
  }
  const end = performance.now();
  // the engine's count when it gave one (a token whose text is still an incomplete character streams none)
  const n = Number.isNaN(usageTokens) ? tokens : usageTokens;
  return {
    id,
    ttftMs: first - t0,
    tpotMs: n > 1 ? (last - first) / (n - 1) : 0,
    e2eMs: end - t0,
    outputTokens: max,
    ok: tokens > 0,
  };
}

/** Replays the workload against the proxy (open loop: at the fixed rate, or its arrivals) and waits for every request. */
export async function replay(o: LiveOptions): Promise<Outcome[]> {
  const start = performance.now();
  const gap = 1000 / o.rate;
  const t0 = o.workload.requests[0]?.arrivalMs ?? 0;
  return Promise.all(
    o.workload.requests.map(async (r, i) => {
      const at = o.timing === "arrivals" ? r.arrivalMs - t0 : i * gap;
      const wait = start + at - performance.now();
      if (wait > 0) await new Promise((res) => setTimeout(res, wait));
      return replayOne(o, r);
    }),
  );
}

/**
 * Fails fast, with the fix in the message, unless the proxy at `proxyUrl` answers its admin API to this token: run
 * before anything else (a replay takes minutes; a 401 at its end would waste them).
 */
export async function checkAdminAccess(proxyUrl: string, adminToken: string): Promise<void> {
  let res: Response;
  try {
    res = await fetch(`${proxyUrl}/admin/table`, {
      headers: { authorization: `Bearer ${adminToken}` },
      signal: AbortSignal.timeout(10_000),
    });
  } catch (e) {
    const cause = (e as { cause?: { code?: string } }).cause?.code ?? (e as Error).message;
    throw new Error(
      `cannot reach the proxy at ${proxyUrl} (${cause}): start it first, e.g. dolphin serve --emulate 1P2D --admin-token T`,
    );
  }
  await res.arrayBuffer();
  if (res.status === 403)
    throw new Error(
      `the proxy at ${proxyUrl} has its admin API off (403): restart it with --admin-token T (dolphin serve --emulate … --admin-token T) or set admin_token in its config`,
    );
  if (res.status === 401)
    throw new Error(
      `the proxy at ${proxyUrl} refused the admin token (401): give --admin-token the token the proxy was started with`,
    );
  if (!res.ok)
    throw new Error(`the proxy at ${proxyUrl} answered GET /admin/table with ${res.status}: is it dolphin serve?`);
}

async function admin(
  o: Pick<LiveOptions, "proxyUrl" | "adminToken">,
  path: string,
  init: RequestInit = {},
): Promise<Response> {
  const res = await fetch(`${o.proxyUrl}${path}`, {
    ...init,
    headers: { ...init.headers, authorization: `Bearer ${o.adminToken}` },
  });
  if (!res.ok) throw new Error(`tune: ${init.method ?? "GET"} ${path}: ${res.status} ${await res.text()}`);
  return res;
}

export interface LoggedDecision {
  id: string;
  cluster: number | null;
  path: string;
  reason: string;
  features: { isl: number; effP: number; effD: number; oslHat: number };
}

/** The proxy's decision records of these request ids (GET /admin/decisions). */
export async function decisionsFor(
  o: Pick<LiveOptions, "proxyUrl" | "adminToken">,
  ids: Set<string>,
): Promise<Map<string, LoggedDecision>> {
  const res = await admin(o, `/admin/decisions?n=${Math.max(1000, ids.size * 2)}`);
  const all = ((await res.json()) as { decisions: LoggedDecision[] }).decisions;
  return new Map(all.filter((d) => ids.has(d.id)).map((d) => [d.id, d]));
}

/**
 * Whether the proxy routed a request by the candidate table. The proxy's drift guard routes a share of each learned
 * cluster's requests (its control arm) by the table's fallback rule, recorded as reason `rule-fallback` in a cluster
 * whose value is local or remote: those requests did not try the candidate, so counting them would blur its reward
 * by the rule's. A cluster whose value is the rule (CLUSTER_RULE) is routed by the rule on every request.
 */
export function followedCandidate(d: Pick<LoggedDecision, "cluster" | "reason">, table: Table): boolean {
  if (d.reason !== "rule-fallback" || d.cluster === null) return true;
  return table.bits?.[d.cluster] === CLUSTER_RULE;
}

/** The proxy as the search's environment. */
export class LiveEnvironment implements LearningEnvironment {
  evaluations = 0;
  constructor(private readonly o: LiveOptions) {}

  get describe(): LearningEnvironment["describe"] {
    const o = this.o;
    return {
      tool: "dolphin-routing tune --live",
      workload: `${o.workload.name} live at ${o.rate} req/s via ${o.proxyUrl}`,
      slo: o.slo,
    };
  }

  /**
   * Swaps the table in, replays the workload, and joins each outcome with the proxy's decision record. Requests the
   * drift guard's control arm routed by the rule are replayed (they are load like any other) but not judged.
   */
  async evaluate(table: Table): Promise<Evaluation> {
    this.evaluations++;
    await putTable(this.o, table);
    const outcomes = await replay(this.o);
    const decisions = await decisionsFor(this.o, new Set(outcomes.map((x) => x.id)));
    const byCluster = new Map<number, { requests: number; met: number }>();
    const records: RequestRecord[] = [];
    let met = 0;
    let judged = 0;
    for (const x of outcomes) {
      const d = decisions.get(x.id);
      if (d && !followedCandidate(d, table)) continue;
      judged++;
      const cluster = d?.cluster ?? -1;
      const rec = {
        failed: !x.ok,
        e2eMs: x.e2eMs,
        ttftMs: x.ttftMs,
        tpotMs: x.tpotMs,
        outputTokens: x.outputTokens,
        cluster,
      } as RequestRecord;
      const ok = meetsE2e(rec, this.o.slo);
      if (ok) met++;
      const c = byCluster.get(cluster) ?? { requests: 0, met: 0 };
      c.requests++;
      if (ok) c.met++;
      byCluster.set(cluster, c);
      records.push(rec);
    }
    return { reward: judged ? met / judged : 0, byCluster, records };
  }

  /** A replay under the proxy's current table: each answered request's features and path, from its decision record. */
  async logFeatures(): Promise<FeatureLog> {
    const outcomes = await replay(this.o);
    const decisions = await decisionsFor(this.o, new Set(outcomes.map((x) => x.id)));
    const logged = outcomes.map((x) => decisions.get(x.id)).filter((d): d is LoggedDecision => d !== undefined);
    return {
      policy: "the proxy's current table",
      requests: logged.map((d) => ({
        isl: d.features.isl,
        effP: d.features.effP,
        effD: d.features.effD,
        path: d.path === "remote" ? "remote" : "local",
      })),
    };
  }
}

/** Swaps the proxy's table (PUT /admin/table). */
export async function putTable(o: Pick<LiveOptions, "proxyUrl" | "adminToken">, table: Table): Promise<void> {
  await admin(o, "/admin/table", {
    method: "PUT",
    headers: { "content-type": "application/msgpack" },
    body: Buffer.from(encodeTable(table)),
  });
}

/** `dolphin train`'s learner with the proxy as the environment; leaves the best table in place. */
export async function tuneLive(o: LiveOptions): Promise<{ table: Table; search: SearchResult }> {
  o.onProgress?.(
    `logging features: replaying ${o.workload.requests.length} requests at ${o.rate} req/s under the proxy's current table…`,
  );
  const r = await train(new LiveEnvironment(o), {
    k: o.k ?? 8,
    seed: o.seed ?? 1,
    maxRounds: o.maxRounds ?? 30,
    onProgress: (step) =>
      o.onProgress?.(
        `  round ${step.round}: table ${step.bits.join("")} → live SLO attainment ${(100 * step.reward).toFixed(1)}%`,
      ),
  });
  await putTable(o, r.table);
  return {
    table: r.table,
    search: { best: r.table.bits!, bestReward: r.bestReward, bestRound: r.bestRound, log: r.log },
  };
}
