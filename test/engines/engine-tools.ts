// What the real-engine suite shares: proxies in front of running vLLM engines, requests, the engines' Prometheus
// figures, and waiting for KV events to arrive.
import { startProxy, type RunningProxy } from "../../src/serve/proxy.js";
import type { ServeConfigInput, ServeMode } from "../../src/serve/config.js";
import { proxyConfigFor } from "../../src/serve/vllm/cluster.js";
import { SERVED_MODEL, type VllmEngine } from "../../src/serve/vllm/engines.js";
import { coreModule } from "../helpers.js";

export const ADMIN = "engine-suite";
export const MODEL = SERVED_MODEL;

export interface TestProxy extends RunningProxy {
  log: string[];
}

/** What a worker's config says in place of its engine's own addresses (a relay in between). */
export type WorkerVia = Partial<Record<"url" | "kv_events_endpoint", string>>;

/**
 * A proxy in front of `engines` (precise mode, replay on, unless `o` says otherwise); `via` sets a worker's URL or
 * KV-event endpoint to a relay's, by worker id.
 */
export async function proxyFor(
  engines: VllmEngine[],
  o: {
    table?: string;
    mode?: ServeMode;
    replay?: boolean;
    extra?: Partial<ServeConfigInput>;
    via?: Record<string, WorkerVia>;
  } = {},
): Promise<TestProxy> {
  const config = proxyConfigFor(engines, { port: 0, table: o.table ?? "dynamo-isl", mode: o.mode ?? "precise" });
  for (const w of config.workers ?? []) {
    if (o.replay === false) delete w.kv_events_replay_endpoint;
    Object.assign(w, o.via?.[w.id] ?? {});
  }
  const log: string[] = [];
  const p = await startProxy(
    { ...config, admin_token: ADMIN, log_level: "debug", ...o.extra },
    { module: coreModule("release"), log: (l) => void log.push(l) },
  );
  return Object.assign(p, { log });
}

export interface Answer {
  status: number;
  id: string | null;
  route: string | null;
  decode: string | null;
  prefill: string | null;
  text: string;
  json: any;
}

export async function post(url: string, path: string, body: unknown): Promise<Answer> {
  const r = await fetch(`${url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const text = await r.text();
  let json: unknown = null;
  try {
    json = JSON.parse(text);
  } catch {
    // a stream
  }
  return {
    status: r.status,
    id: r.headers.get("x-request-id"),
    route: r.headers.get("x-dolphin-route"),
    decode: r.headers.get("x-dolphin-decode-worker"),
    prefill: r.headers.get("x-dolphin-prefill-worker"),
    text,
    json,
  };
}

/** A completions request on token ids (greedy), as precise mode routes it: on exactly these tokens. */
export const complete = (url: string, prompt: number[], extra: Record<string, unknown> = {}) =>
  post(url, "/v1/completions", { model: MODEL, prompt, max_tokens: 8, temperature: 0, ...extra });

export const chat = (url: string, content: string, extra: Record<string, unknown> = {}) =>
  post(url, "/v1/chat/completions", {
    model: MODEL,
    messages: [{ role: "user", content }],
    max_tokens: 8,
    temperature: 0,
    ...extra,
  });

/** n token ids in [10, 8000) from a seed: distinct seeds give prompts with no common block (calibrate's probes). */
export { tokenIds as tokens } from "../../src/serve/vllm/probes.js";

/**
 * The sum of a Prometheus counter's or gauge's series on a server's /metrics: those that carry every `k="v"` pair of
 * `labels` (`'cause="restart",worker="R0"'`), in any order.
 */
export async function metric(url: string, name: string, labels = ""): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const wanted = labels.match(/\w+="[^"]*"/g) ?? [];
  let sum = 0;
  for (const line of text.split("\n")) {
    if (line.startsWith("#") || !line.startsWith(name)) continue;
    const rest = line.slice(name.length);
    if (rest[0] !== " " && rest[0] !== "{") continue;
    if (!wanted.every((pair) => rest.includes(pair))) continue;
    sum += Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return sum;
}

export async function decisions(p: RunningProxy): Promise<any[]> {
  const r = await fetch(`${p.url}/admin/decisions?n=1000`, { headers: { authorization: `Bearer ${ADMIN}` } });
  const j = (await r.json()) as { decisions: any[] };
  return j.decisions;
}

/** The decision record of one answer (by its x-request-id). */
export async function decisionOf(p: RunningProxy, id: string): Promise<any> {
  return (await decisions(p)).find((d) => d.id === id);
}

export { sleep, waitFor } from "../helpers.js";

/** Blocks of `prompt` the proxy's index holds, by worker. */
export function matched(p: RunningProxy, prompt: number[]): Record<string, number> {
  return p.router.index.match(p.router.hash({ tokens: prompt }));
}

/** Whole blocks of a prompt vLLM can take from cache: at most isl − 1 tokens, in blocks of `blockSize`. */
export const cacheableBlocks = (isl: number, blockSize = 32) => Math.floor((isl - 1) / blockSize);

/** The events of an SSE answer (its `data:` payloads), [DONE] included. */
export const sseData = (text: string) =>
  text
    .split("\n")
    .filter((l) => l.startsWith("data: "))
    .map((l) => l.slice("data: ".length));

/** What the test modules vllm.test.ts runs on its engines (lost-events.ts, client-leaves.ts) are given. */
export interface EngineSuite {
  /** A running engine of the suite by id (P0, D0, R0). */
  engine(id: string): VllmEngine;
  /** A proxy (proxyFor) closed when the suite ends. */
  proxy: typeof proxyFor;
  /** Closes `c` when the suite ends. */
  closeAfter(c: { close(): Promise<void> }): void;
}
