// `dolphin serve`: an HTTP proxy that speaks the OpenAI API to clients and vLLM's disaggregated-prefill protocol
// (NixlConnector, shared/docs/reference-systems.md) to workers. Every request goes through one Router call; the
// router's view of every worker's cache is kept current by KV events (precise mode) or by the proxy's own decisions
// (approximate mode). Workers come from the config and from POST /admin/workers heartbeats; a worker that fails is
// taken out of rotation until its /health answers again. docs/serving.md describes the endpoints and the config.
//
// The proxy (workers, routing, the inference path, admin) and startProxy; HTTP plumbing, metrics, KV-event ingestion
// and sessions are in http-util.ts, metrics.ts, kv-ingest.ts and sessions.ts.

import http, { type IncomingMessage, type ServerResponse } from "node:http";
import https from "node:https";
import { createHash, randomUUID, timingSafeEqual } from "node:crypto";
import { readFileSync } from "node:fs";
import { loadCoreModule } from "../core-file.js";
import { TEXT_TOKENS_PER_BLOCK } from "../core-api.js";
import { CoreError, ErrorCode } from "../errors.js";
import { decodeEventBatch, KvEventError, type EventBatch } from "../kv-events.js";
import { rootHash, type Hash64 } from "../hashes.js";
import { Router, type Decision, type RouteRequest } from "../router.js";
import { describeTable, encodeTable, type Table } from "../table.js";
import { loadConfigTable, parseConfig, parseWorker, type ServeConfig, type ServeConfigInput, type WorkerConfig } from "./config.js";
import { classify, errorBody, HttpError, isObject, Logger, parseJson, readUpstream, UpstreamError, upstreamRequest, usageOf, UsageSniffer } from "./http-util.js";
import { Metrics, type Labels } from "./metrics.js";
import { EventIngest, loadZmq, type ZmqSubscriber } from "./kv-ingest.js";
import { Sessions, type Session } from "./sessions.js";


export interface ProxyOptions {
  /** The compiled core (default: build/core.wasm via the Node entry). */
  module?: WebAssembly.Module;
  /** Where log lines go (default: stderr). */
  log?: (line: string) => void;
}

export interface RunningProxy {
  url: string;
  port: number;
  close(): Promise<void>;
  router: Router;
}

const QPS_WINDOW_MS = 10_000;
const MAX_ERROR_SNIPPET = 300;
/** Discarding an over-limit request body gives up after this long (then the socket is destroyed). */
const DISCARD_LIMIT_MS = 30_000;
/** Extra chat-request keys that change the prompt vLLM's /tokenize renders. */
const TOKENIZE_CHAT_KEYS = ["add_generation_prompt", "continue_final_message", "add_special_tokens", "chat_template", "chat_template_kwargs", "tools"];
/** vLLM's NixlConnector prefill request marks (reference-systems.md, step 1). */
const PREFILL_KV_PARAMS = {
  do_remote_decode: true, do_remote_prefill: false, remote_engine_id: null, remote_block_ids: null, remote_host: null, remote_port: null,
};

// ---- the proxy -------------------------------------------------------------------------------------------------

interface WorkerState {
  spec: WorkerConfig;
  source: "config" | "registered";
  lastHeartbeatMs: number;
  healthy: boolean;
  removed: boolean;
  probing: boolean;
  activePrefillTokens: number;
  activeDecodeTokens: number;
  ingest: EventIngest;
  subscriber: ZmqSubscriber | null;
  lastSeq: bigint | null;
}

type Endpoint = "chat" | "completions";
const ENDPOINT_PATHS: Record<Endpoint, string> = { chat: "/v1/chat/completions", completions: "/v1/completions" };

interface DecisionRecord {
  id: string;
  ts: string;
  endpoint: string;
  table: { kind: string; checksum: string };
  turn: number;
  path: "local" | "remote";
  route: "local" | "remote" | "fallback";
  reason: string;
  decode_worker: string;
  prefill_worker: string | null;
  cluster: number | null;
  features: Decision["features"];
  matched_blocks: Decision["matchedBlocks"];
  predicted_cached_tokens: number;
  reported_cached_tokens: number | null;
  status: number | null;
  latency_ms: number | null;
  error?: string;
}

/** Per-request state. */
class RequestContext {
  readonly id: string;
  readonly startMs = performance.now();
  readonly abort = new AbortController();
  clientGone = false;
  /** The response is over (sent, or the client left): nothing may be held for it any more. */
  closed = false;
  endpoint = "";
  statusOverride: number | null = null;
  error: string | null = null;
  record: DecisionRecord | null = null;
  decision: Decision | null = null;
  isl = 0;
  predictedTokens = 0;
  reportedTokens: number | null = null;
  completionTokens: number | null = null;
  releases: Array<() => void> = [];

  constructor(readonly req: IncomingMessage, readonly res: ServerResponse) {
    const given = req.headers["x-request-id"];
    this.id = typeof given === "string" && /^[\w.:-]{1,128}$/.test(given) ? given : randomUUID();
  }

  get route(): "local" | "remote" | "fallback" | "none" {
    return this.record?.route ?? "none";
  }
}

class ServeProxy {
  readonly router: Router;
  private readonly config: ServeConfig;
  private readonly log: Logger;
  private readonly metrics = new Metrics();
  private readonly workers = new Map<string, WorkerState>();
  private readonly sessions: Sessions;
  private readonly decisions: DecisionRecord[] = [];
  private readonly arrivals: number[] = [];
  private arrivalsHead = 0;
  private readonly agents = { http: new http.Agent({ keepAlive: true }), https: new https.Agent({ keepAlive: true }) };
  private readonly timers: NodeJS.Timeout[] = [];
  private readonly root: Hash64;
  private readonly maxPromptTokens: number;
  private tableBytes: Uint8Array;
  private inflight = 0;
  private prefillsInFlight = 0;
  private tokenizeTurn = 0;
  private closed = false;
  private zmqWarned = false;

  constructor(config: ServeConfig, table: Table, tableBytes: Uint8Array, module: WebAssembly.Module, log: Logger) {
    this.config = config;
    this.log = log;
    this.tableBytes = tableBytes;
    this.sessions = new Sessions(config.sessions.idle_s * 1000, config.sessions.max);
    this.root = rootHash(config.model);
    // text mode reads bytes / 4 as tokens: room for the largest accepted body
    this.maxPromptTokens = Math.max(1 << 20, Math.ceil(config.max_body_bytes / 4) + 4096);
    this.router = Router.create(table, {
      module,
      workers: [],
      blockSize: config.block_size,
      model: config.model,
      recordDecisions: config.mode === "approximate",
      capacityBlocks: config.capacity_blocks,
      maxWorkers: config.max_workers,
      indexBlocks: config.capacity_blocks * config.max_workers,
      maxPromptTokens: this.maxPromptTokens,
    });
    for (const w of config.workers) this.addWorker(w, "config");
  }

  // ---- timers ----

  startTimers(): void {
    const every = (ms: number, fn: () => void): void => {
      const t = setInterval(fn, ms);
      t.unref();
      this.timers.push(t);
    };
    const hb = this.config.heartbeat;
    every(Math.max(10, Math.min(1000, (hb.expiry_s * 1000) / 4)), () => this.expireWorkers());
    every(Math.max(10, this.config.health.probe_interval_s * 1000), () => this.probeDownWorkers());
    every(Math.max(1000, Math.min(60_000, this.config.sessions.idle_s * 250)), () => this.sessions.sweep(Date.now()));
    if (this.config.mode === "approximate") {
      // The approximation: the index forgets everything once per period, so an entry lives between 0 and
      // approximate_ttl_s (ttl/2 on average), in place of a per-entry expiry the core does not keep.
      every(this.config.approximate_ttl_s * 1000, () => {
        this.router.index.clear();
        this.metrics.inc("dolphin_index_clears_total");
      });
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const t of this.timers) clearInterval(t);
    for (const w of this.workers.values()) this.closeSubscriber(w);
    this.agents.http.destroy();
    this.agents.https.destroy();
  }

  // ---- workers ----

  private addWorker(spec: WorkerConfig, source: WorkerState["source"]): WorkerState {
    const w: WorkerState = {
      spec, source, lastHeartbeatMs: Date.now(), healthy: true, removed: false, probing: false,
      activePrefillTokens: 0, activeDecodeTokens: 0,
      ingest: new EventIngest(this.config.block_size, this.root, this.config.capacity_blocks * 2),
      subscriber: null, lastSeq: null,
    };
    this.router.addWorker({ id: spec.id, role: spec.role });
    this.workers.set(spec.id, w);
    void this.subscribe(w);
    return w;
  }

  private dropWorker(w: WorkerState, why: string): void {
    if (w.healthy) this.router.removeWorker(w.spec.id);
    w.healthy = false;
    w.removed = true;
    this.closeSubscriber(w);
    this.workers.delete(w.spec.id);
    this.log.log("warn", "worker removed", { worker: w.spec.id, why });
  }

  /** Out of rotation after a failure; the probe puts it back when /health answers. */
  private markDown(w: WorkerState, why: string): void {
    if (!w.healthy || w.removed) return;
    w.healthy = false;
    w.ingest.reset();
    w.lastSeq = null;
    this.router.removeWorker(w.spec.id);
    this.metrics.inc("dolphin_worker_down_total", { worker: w.spec.id });
    this.log.log("warn", "worker out of rotation", { worker: w.spec.id, why });
  }

  private markUp(w: WorkerState): void {
    if (w.healthy || w.removed || this.closed) return;
    this.router.addWorker({ id: w.spec.id, role: w.spec.role });
    w.healthy = true;
    this.pushLoad(w);
    this.metrics.inc("dolphin_worker_up_total", { worker: w.spec.id });
    this.log.log("info", "worker back in rotation", { worker: w.spec.id });
  }

  private expireWorkers(): void {
    const now = Date.now();
    for (const w of [...this.workers.values()]) {
      if (w.source === "registered" && now - w.lastHeartbeatMs > this.config.heartbeat.expiry_s * 1000) {
        this.dropWorker(w, `no heartbeat for ${this.config.heartbeat.expiry_s} s`);
        this.metrics.inc("dolphin_worker_expired_total");
      }
    }
  }

  private probeDownWorkers(): void {
    for (const w of this.workers.values()) {
      if (w.healthy || w.probing) continue;
      w.probing = true;
      const t = this.config.timeouts;
      upstreamRequest(this.agents, `${w.spec.url}/health`, { method: "GET", connectMs: t.connect_ms, responseMs: Math.max(t.connect_ms, 1000) })
        .then(async (res) => {
          await readUpstream(res, Math.max(t.connect_ms, 1000), 1 << 20).catch(() => undefined);
          if (res.statusCode === 200) this.markUp(w);
        })
        .catch(() => undefined)
        .finally(() => { w.probing = false; });
    }
  }

  private pushLoad(w: WorkerState): void {
    if (w.healthy) this.router.setLoad(w.spec.id, { activePrefillTokens: w.activePrefillTokens, activeDecodeTokens: w.activeDecodeTokens });
  }

  /** Adds tokens to a worker's load until the returned function is called (once). */
  private hold(ctx: RequestContext, id: string, field: "activePrefillTokens" | "activeDecodeTokens", tokens: number): () => void {
    const w = this.workers.get(id);
    if (!w || tokens <= 0 || ctx.closed) return () => undefined;
    w[field] += tokens;
    this.pushLoad(w);
    let held = true;
    const release = (): void => {
      if (!held) return;
      held = false;
      w[field] = Math.max(0, w[field] - tokens);
      this.pushLoad(w);
    };
    ctx.releases.push(release);
    return release;
  }

  private healthyDecodeWorkers(): WorkerState[] {
    return [...this.workers.values()].filter((w) => w.healthy && w.spec.role !== "prefill");
  }

  /** A worker call that failed: count it, and take the worker out of rotation when it is down. */
  private upstreamFailed(w: WorkerState | undefined, stage: string, e: UpstreamError): void {
    if (!w || e.kind === "aborted") return;
    this.metrics.inc("dolphin_upstream_errors_total", { worker: w.spec.id, stage, kind: e.kind });
    if (e.workerDown) this.markDown(w, `${stage}: ${e.message}`);
  }

  // ---- KV events ----

  private async subscribe(w: WorkerState): Promise<void> {
    const endpoint = w.spec.kv_events_endpoint;
    if (this.config.mode !== "precise" || !endpoint) return;
    const zmq = await loadZmq();
    if (!zmq) {
      if (!this.zmqWarned) this.log.log("warn", "zeromq is not installed: KV events only via POST /admin/kv-events");
      this.zmqWarned = true;
      return;
    }
    if (w.removed || this.closed) return;
    const sock = new zmq.Subscriber();
    sock.connect(endpoint);
    sock.subscribe();
    w.subscriber = sock;
    this.log.log("info", "subscribed to KV events", { worker: w.spec.id, endpoint });
    try {
      for await (const frames of sock as AsyncIterable<Buffer[]>) this.onZmqMessage(w, frames);
    } catch (e) {
      if (w.subscriber === sock && !this.closed) this.log.log("warn", "KV event subscription ended", { worker: w.spec.id, error: String(e) });
    }
  }

  private closeSubscriber(w: WorkerState): void {
    const s = w.subscriber;
    w.subscriber = null;
    try {
      s?.close();
    } catch {
      // already closed
    }
  }

  /** vLLM frames: (topic, 8-byte big-endian sequence, payload). */
  private onZmqMessage(w: WorkerState, frames: Buffer[]): void {
    const payload = frames[frames.length - 1];
    const seqFrame = frames.length >= 2 ? frames[frames.length - 2] : undefined;
    if (!payload) return;
    if (seqFrame?.length === 8) {
      const seq = seqFrame.readBigUInt64BE(0);
      if (w.lastSeq !== null && seq > w.lastSeq + 1n) {
        this.metrics.inc("dolphin_kv_sequence_gaps_total", { worker: w.spec.id }, Number(seq - w.lastSeq - 1n));
        this.log.log("warn", "KV event batches missed", { worker: w.spec.id, from: String(w.lastSeq + 1n), to: String(seq - 1n) });
      }
      w.lastSeq = seq;
    }
    try {
      this.applyEvents(w, decodeEventBatch(payload), "zmq");
    } catch (e) {
      this.metrics.inc("dolphin_kv_event_errors_total", { worker: w.spec.id });
      this.log.log("debug", "KV event batch rejected", { worker: w.spec.id, error: (e as Error).message });
    }
  }

  private applyEvents(w: WorkerState, batch: EventBatch, source: string): ReturnType<EventIngest["apply"]> {
    if (!w.healthy) return { stored: 0, removed: 0, cleared: 0, unmapped: 0 };
    const n = w.ingest.apply(this.router, w.spec.id, batch);
    const worker = w.spec.id;
    if (n.stored) this.metrics.inc("dolphin_kv_events_total", { worker, source, kind: "stored_blocks" }, n.stored);
    if (n.removed) this.metrics.inc("dolphin_kv_events_total", { worker, source, kind: "removed_blocks" }, n.removed);
    if (n.cleared) this.metrics.inc("dolphin_kv_events_total", { worker, source, kind: "cleared" }, n.cleared);
    if (n.unmapped) this.metrics.inc("dolphin_kv_blocks_unmapped_total", { worker }, n.unmapped);
    return n;
  }

  // ---- HTTP entry ----

  handle(req: IncomingMessage, res: ServerResponse): void {
    const ctx = new RequestContext(req, res);
    res.setHeader("x-request-id", ctx.id);
    res.on("close", () => {
      ctx.closed = true;
      if (!res.writableFinished) {
        ctx.clientGone = true;
        ctx.abort.abort();
      }
      for (const release of ctx.releases) release();
      if (!ctx.record && this.log.enabled("debug")) {
        this.log.log("debug", "request", { id: ctx.id, method: req.method, path: ctx.endpoint, status: res.statusCode, latency_ms: Math.round((performance.now() - ctx.startMs) * 10) / 10 });
      }
    });
    this.dispatch(ctx).catch((e: unknown) => this.fail(ctx, e));
  }

  private async dispatch(ctx: RequestContext): Promise<void> {
    const { req } = ctx;
    const path = (req.url ?? "/").split("?")[0]!;
    const method = req.method ?? "GET";
    ctx.endpoint = path;
    const allow = (...methods: string[]): void => {
      if (!methods.includes(method)) throw new HttpError(405, `${method} is not allowed on ${path} (allowed: ${methods.join(", ")})`, "invalid_request_error", "method_not_allowed");
    };
    if (path === ENDPOINT_PATHS.chat || path === ENDPOINT_PATHS.completions) {
      allow("POST");
      return this.inference(ctx, path === ENDPOINT_PATHS.chat ? "chat" : "completions");
    }
    if (path === "/v1/models") {
      allow("GET");
      return this.sendJson(ctx, 200, { object: "list", data: [{ id: this.config.model, object: "model", created: 0, owned_by: "dolphin-routing" }] });
    }
    if (path === "/health") {
      allow("GET");
      const decode = this.healthyDecodeWorkers().length;
      return this.sendJson(ctx, 200, {
        status: decode > 0 ? "ok" : "degraded",
        workers: { total: this.workers.size, healthy: [...this.workers.values()].filter((w) => w.healthy).length, healthy_decode: decode },
        table: { kind: this.router.table.kind, checksum: this.router.table.checksum },
        mode: this.config.mode,
      });
    }
    if (path === "/metrics") {
      allow("GET");
      ctx.res.writeHead(200, { "content-type": "text/plain; version=0.0.4; charset=utf-8" });
      ctx.res.end(this.renderMetrics());
      return;
    }
    if (path.startsWith("/admin/")) return this.admin(ctx, path, method, allow);
    throw new HttpError(404, `no route for ${method} ${path}`, "invalid_request_error", "not_found");
  }

  /** The error answer for whatever went wrong, unless the answer has begun (then the connection is cut). */
  private fail(ctx: RequestContext, e: unknown): void {
    const { res } = ctx;
    if (ctx.clientGone) return;
    let err: HttpError;
    if (e instanceof HttpError) err = e;
    else {
      err = new HttpError(500, `internal error: ${(e as Error)?.message ?? String(e)}`, "server_error", "internal_error");
      this.log.log("error", "unexpected error", { id: ctx.id, error: (e as Error)?.stack ?? String(e) });
    }
    ctx.error ??= err.message;
    if (res.headersSent) {
      res.destroy();
      return;
    }
    this.sendRaw(ctx, err.status, "application/json", errorBody(err.message, err.type, err.code));
  }

  private sendJson(ctx: RequestContext, status: number, body: unknown): void {
    this.sendRaw(ctx, status, "application/json", JSON.stringify(body));
  }

  private sendRaw(ctx: RequestContext, status: number, contentType: string, body: string | Buffer | Uint8Array): void {
    ctx.res.writeHead(status, { "content-type": contentType, "content-length": Buffer.byteLength(body) });
    ctx.res.end(body);
  }

  /** The request body, at most max_body_bytes (413 beyond, and the rest is discarded). */
  private readBody(ctx: RequestContext): Promise<Buffer> {
    const { req } = ctx;
    const max = this.config.max_body_bytes;
    const tooLarge = (): HttpError => new HttpError(413, `request body larger than max_body_bytes (${max} bytes)`, "invalid_request_error", "body_too_large");
    const discard = (): void => {
      req.resume();
      const t = setTimeout(() => req.socket.destroy(), DISCARD_LIMIT_MS);
      t.unref();
      req.once("end", () => clearTimeout(t));
    };
    const declared = Number(req.headers["content-length"]);
    if (Number.isFinite(declared) && declared > max) {
      discard();
      return Promise.reject(tooLarge());
    }
    return new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      let size = 0;
      const onData = (c: Buffer): void => {
        size += c.length;
        if (size > max) {
          req.off("data", onData);
          discard();
          reject(tooLarge());
          return;
        }
        chunks.push(c);
      };
      req.on("data", onData);
      req.once("end", () => resolve(Buffer.concat(chunks)));
      req.once("error", (e) => reject(new HttpError(400, `cannot read the request body: ${e.message}`, "invalid_request_error", "bad_body")));
    });
  }

  // ---- routing ----

  /** Arrivals in the last QPS window / its length; old arrivals are skipped by an index and dropped in batches. */
  private qps(now: number): number {
    this.arrivals.push(now);
    while (this.arrivalsHead < this.arrivals.length && this.arrivals[this.arrivalsHead]! < now - QPS_WINDOW_MS) this.arrivalsHead++;
    if (this.arrivalsHead > 4096) {
      this.arrivals.splice(0, this.arrivalsHead);
      this.arrivalsHead = 0;
    }
    return (this.arrivals.length - this.arrivalsHead) / (QPS_WINDOW_MS / 1000);
  }

  /** The prompt as the router reads it: token ids (precise mode, or ids the client gave) or text. */
  private async routingPrompt(ctx: RequestContext, endpoint: Endpoint, body: Record<string, unknown>): Promise<{ tokens: number[] } | { text: string }> {
    const prompt = body["prompt"];
    if (endpoint === "completions") {
      const first = Array.isArray(prompt) && (typeof prompt[0] === "string" || Array.isArray(prompt[0])) ? prompt[0] : prompt;
      if (Array.isArray(first)) return { tokens: first.slice(0, this.maxPromptTokens) as number[] };
    }
    const text = endpoint === "chat" ? chatText(body["messages"] as unknown[]) : String(Array.isArray(prompt) ? prompt[0] : prompt);
    if (this.config.mode !== "precise") return { text };
    const tokens = await this.tokenize(ctx, endpoint, body);
    return tokens ? { tokens } : { text };
  }

  /** Precise mode: the decode workers' own tokenizer (vLLM's POST /tokenize). Null when it fails. */
  private async tokenize(ctx: RequestContext, endpoint: Endpoint, body: Record<string, unknown>): Promise<number[] | null> {
    const candidates = this.healthyDecodeWorkers();
    if (candidates.length === 0) return null;
    const w = candidates[this.tokenizeTurn++ % candidates.length]!;
    const payload: Record<string, unknown> = { model: this.config.model };
    if (endpoint === "chat") {
      payload["messages"] = body["messages"];
      for (const k of TOKENIZE_CHAT_KEYS) if (body[k] !== undefined) payload[k] = body[k];
    } else {
      const prompt = body["prompt"];
      payload["prompt"] = Array.isArray(prompt) ? prompt[0] : prompt;
      if (body["add_special_tokens"] !== undefined) payload["add_special_tokens"] = body["add_special_tokens"];
    }
    const t = this.config.timeouts;
    try {
      const res = await upstreamRequest(this.agents, `${w.spec.url}/tokenize`, {
        method: "POST", headers: this.upstreamHeaders(ctx), body: JSON.stringify(payload),
        connectMs: t.connect_ms, responseMs: t.tokenize_ms, signal: ctx.abort.signal,
      });
      const buf = await readUpstream(res, t.tokenize_ms);
      if ((res.statusCode ?? 0) >= 400) throw new UpstreamError("status", `/tokenize answered ${res.statusCode}`, res.statusCode ?? 0);
      const json = parseJson(buf);
      const tokens = isObject(json) ? json["tokens"] : undefined;
      if (!Array.isArray(tokens) || !tokens.every((x) => Number.isInteger(x) && x >= 0 && x <= 0xffffffff)) {
        throw new UpstreamError("protocol", "/tokenize answered without a tokens array");
      }
      return (tokens as number[]).slice(0, this.maxPromptTokens);
    } catch (e) {
      if (ctx.clientGone) throw e;
      const err = classify(e, `${w.spec.id} /tokenize`);
      this.upstreamFailed(w, "tokenize", err);
      this.metrics.inc("dolphin_tokenize_failures_total", { worker: w.spec.id });
      this.log.log("warn", "tokenize failed, routing on text", { id: ctx.id, worker: w.spec.id, error: err.message });
      return null;
    }
  }

  private decide(ctx: RequestContext, endpoint: Endpoint, body: Record<string, unknown>, prompt: { tokens: number[] } | { text: string }): { decision: Decision; session: Session; turn: number } {
    const now = Date.now();
    const session = this.sessions.touch(sessionKey(this.config.model, endpoint, body), now);
    const userTurns = endpoint === "chat" ? (body["messages"] as unknown[]).filter((m) => isObject(m) && m["role"] === "user").length : 0;
    session.turns = Math.max(session.turns + 1, userTurns);
    const turn = userTurns > 0 ? userTurns : session.turns;
    const table = this.router.table;
    const maxTokens = positiveInt(body["max_tokens"]) ?? positiveInt(body["max_completion_tokens"]);
    const request: RouteRequest = { ...prompt, turn, prevOutputTokens: session.prevOutputTokens };
    if (maxTokens !== undefined) request.maxTokens = maxTokens;
    if (!table.osl_model && table.features?.includes("osl_hat")) request.oslHat = Math.min(maxTokens ?? Infinity, this.config.default_osl_hat);
    // PPD: later turns stay on the conversation's decode worker, which holds its context.
    const pinned = session.decodeWorker ? this.workers.get(session.decodeWorker) : undefined;
    if (table.kind === "ppd" && turn >= 2 && pinned?.healthy && pinned.spec.role !== "prefill") request.decodeWorker = pinned.spec.id;
    this.router.setSignals({ prefillQueue: this.prefillsInFlight, qps: this.qps(performance.now()) });
    let decision: Decision;
    try {
      decision = this.router.route(request);
    } catch (e) {
      if (e instanceof CoreError && e.code === ErrorCode.NO_DECODE_WORKER) {
        throw new HttpError(503, "no decode worker is in rotation", "service_unavailable", "no_decode_worker");
      }
      throw e;
    }
    session.decodeWorker = decision.decodeWorker;
    return { decision, session, turn };
  }

  /** Predicted cached tokens on a worker from its matched blocks (text blocks stand for 16 tokens). */
  private predictedTokens(blocks: number, tokenMode: boolean, isl: number): number {
    return Math.min(blocks * (tokenMode ? this.config.block_size : TEXT_TOKENS_PER_BLOCK), isl);
  }

  private remember(record: DecisionRecord): void {
    if (this.config.decisions_kept === 0) return;
    this.decisions.push(record);
    // trimmed in batches: one splice per decisions_kept records, not one per request
    if (this.decisions.length >= 2 * this.config.decisions_kept) this.decisions.splice(0, this.decisions.length - this.config.decisions_kept);
  }

  // ---- inference ----

  private async inference(ctx: RequestContext, endpoint: Endpoint): Promise<void> {
    this.inflight++;
    ctx.res.once("close", () => {
      this.inflight--;
      this.finishInference(ctx, endpoint);
    });
    const raw = await this.readBody(ctx);
    const body = parseJson(raw);
    if (!isObject(body)) throw new HttpError(400, raw.length === 0 ? "empty request body" : "request body is not a JSON object", "invalid_request_error", "invalid_json");
    validateInference(endpoint, body, this.config.model);
    const prompt = await this.routingPrompt(ctx, endpoint, body);
    if (ctx.clientGone) return;
    const { decision: d, session, turn } = this.decide(ctx, endpoint, body, prompt);
    ctx.decision = d;
    ctx.isl = d.features.isl;
    const tokenMode = "tokens" in prompt;
    const remote = d.path === "remote" && d.prefillWorker !== null && d.prefillWorker !== d.decodeWorker;
    const table = this.router.table;
    const record: DecisionRecord = {
      id: ctx.id, ts: new Date().toISOString(), endpoint: ENDPOINT_PATHS[endpoint], table: { kind: table.kind, checksum: table.checksum },
      turn, path: d.path, route: remote ? "remote" : "local", reason: d.reason, decode_worker: d.decodeWorker,
      prefill_worker: d.prefillWorker, cluster: d.cluster, features: d.features, matched_blocks: d.matchedBlocks,
      predicted_cached_tokens: 0, reported_cached_tokens: null, status: null, latency_ms: null,
    };
    ctx.record = record;
    this.remember(record);
    this.metrics.inc("dolphin_decisions_total", { path: d.path, reason: d.reason });
    ctx.res.setHeader("x-dolphin-decode-worker", d.decodeWorker);

    let kvParams: unknown;
    if (remote) {
      const prefillWorker = d.prefillWorker!;
      ctx.res.setHeader("x-dolphin-prefill-worker", prefillWorker);
      record.predicted_cached_tokens = ctx.predictedTokens = this.predictedTokens(d.matchedBlocks.prefill, tokenMode, d.features.isl);
      try {
        const p = await this.prefill(ctx, endpoint, prefillWorker, body, d.features.effP);
        kvParams = p.kvParams;
        ctx.reportedTokens = p.cachedTokens;
      } catch (e) {
        if (ctx.clientGone) return;
        const err = classify(e, `prefill ${prefillWorker}`);
        this.metrics.inc("dolphin_prefill_failures_total", { kind: err.kind });
        if (!this.config.fallback_local) {
          // A request the prefill worker rejects as invalid is the client's error: pass it on as is.
          if (err.kind === "status" && err.status < 500 && err.body) {
            ctx.res.writeHead(err.status, { "content-type": err.contentType ?? "application/json" });
            ctx.res.end(err.body);
            return;
          }
          throw new HttpError(502, `prefill worker ${prefillWorker} failed: ${err.message}`, "upstream_error", "prefill_failed");
        }
        this.metrics.inc("dolphin_fallbacks_total");
        this.log.log("warn", "prefill failed, falling back to local prefill", { id: ctx.id, worker: prefillWorker, error: err.message });
        record.route = "fallback";
        ctx.reportedTokens = null;
      }
    }
    if (record.route !== "remote") {
      record.predicted_cached_tokens = ctx.predictedTokens = this.predictedTokens(d.matchedBlocks.decode, tokenMode, d.features.isl);
    }
    ctx.res.setHeader("x-dolphin-route", record.route);
    const payload = kvParams === undefined ? raw : JSON.stringify({ ...body, kv_transfer_params: kvParams });
    await this.decode(ctx, endpoint, d.decodeWorker, payload, body["stream"] === true, record.route === "remote" ? 0 : d.features.effD);
    if (ctx.completionTokens !== null) session.prevOutputTokens = ctx.completionTokens;
  }

  private upstreamHeaders(ctx: RequestContext): Record<string, string> {
    const h: Record<string, string> = { "content-type": "application/json", "x-request-id": ctx.id };
    const auth = ctx.req.headers["authorization"];
    if (typeof auth === "string") h["authorization"] = auth;
    return h;
  }

  /** Step 1 of the NixlConnector protocol: prefill only, and return the KV handoff parameters. */
  private async prefill(ctx: RequestContext, endpoint: Endpoint, id: string, body: Record<string, unknown>, effP: number): Promise<{ kvParams: Record<string, unknown>; cachedTokens: number | null }> {
    const w = this.workers.get(id);
    const prefillBody: Record<string, unknown> = { ...body, kv_transfer_params: { ...PREFILL_KV_PARAMS }, stream: false, max_tokens: 1 };
    if (prefillBody["max_completion_tokens"] !== undefined) prefillBody["max_completion_tokens"] = 1;
    delete prefillBody["min_tokens"];
    delete prefillBody["stream_options"];
    const release = this.hold(ctx, id, "activePrefillTokens", effP);
    this.prefillsInFlight++;
    const t = this.config.timeouts;
    try {
      if (!w?.healthy) throw new UpstreamError("connect", `prefill worker ${id} left rotation`);
      const res = await upstreamRequest(this.agents, `${w.spec.url}${ENDPOINT_PATHS[endpoint]}`, {
        method: "POST", headers: this.upstreamHeaders(ctx), body: JSON.stringify(prefillBody),
        connectMs: t.connect_ms, responseMs: t.request_ms, signal: ctx.abort.signal,
      });
      const buf = await readUpstream(res, t.request_ms);
      const status = res.statusCode ?? 0;
      if (status >= 400) {
        throw new UpstreamError("status", `answered ${status}: ${snippet(buf)}`, status, buf, String(res.headers["content-type"] ?? "application/json"));
      }
      const json = parseJson(buf);
      const kv = isObject(json) ? json["kv_transfer_params"] : undefined;
      if (!isObject(kv)) throw new UpstreamError("protocol", "the prefill response carries no kv_transfer_params");
      return { kvParams: kv, cachedTokens: usageOf(json)?.cached ?? null };
    } catch (e) {
      const err = classify(e, `prefill ${id}`);
      this.upstreamFailed(w, "prefill", err);
      throw err;
    } finally {
      this.prefillsInFlight--;
      release();
    }
  }

  /** Step 3 (or the local path): the decode worker answers the client; a stream is passed on as it arrives. */
  private async decode(ctx: RequestContext, endpoint: Endpoint, id: string, payload: Buffer | string, stream: boolean, effD: number): Promise<void> {
    const w = this.workers.get(id);
    const t = this.config.timeouts;
    const releasePrefill = this.hold(ctx, id, "activePrefillTokens", effD);
    this.hold(ctx, id, "activeDecodeTokens", ctx.isl);
    let res: IncomingMessage;
    try {
      if (!w?.healthy) throw new UpstreamError("connect", `decode worker ${id} left rotation`);
      res = await upstreamRequest(this.agents, `${w.spec.url}${ENDPOINT_PATHS[endpoint]}`, {
        method: "POST", headers: this.upstreamHeaders(ctx), body: payload, connectMs: t.connect_ms, responseMs: t.request_ms, signal: ctx.abort.signal,
      });
    } catch (e) {
      if (ctx.clientGone) return;
      const err = classify(e, `decode ${id}`);
      this.upstreamFailed(w, "decode", err);
      if (err.kind === "timeout") throw new HttpError(504, `decode worker ${id}: ${err.message}`, "upstream_error", "upstream_timeout");
      throw new HttpError(502, `decode worker ${id} failed: ${err.message}`, "upstream_error", "decode_failed");
    }
    const status = res.statusCode ?? 502;
    const contentType = String(res.headers["content-type"] ?? "application/json");
    if (stream && status < 400 && contentType.includes("text/event-stream")) {
      await this.pipeStream(ctx, w!, res, releasePrefill);
      return;
    }
    let buf: Buffer;
    try {
      buf = await readUpstream(res, t.request_ms);
    } catch (e) {
      if (ctx.clientGone) return;
      const err = classify(e, `decode ${id}`);
      this.upstreamFailed(w, "decode", err);
      if (err.kind === "timeout") throw new HttpError(504, `decode worker ${id}: ${err.message}`, "upstream_error", "upstream_timeout");
      throw new HttpError(502, `decode worker ${id} failed mid-response: ${err.message}`, "upstream_error", "decode_failed");
    }
    releasePrefill();
    if (status >= 500) {
      this.upstreamFailed(w, "decode", new UpstreamError("status", `answered ${status}`, status));
      throw new HttpError(502, `decode worker ${id} answered ${status}: ${snippet(buf)}`, "upstream_error", "decode_failed");
    }
    const usage = usageOf(parseJson(buf));
    if (usage) this.noteUsage(ctx, usage);
    ctx.res.writeHead(status, { "content-type": contentType, "content-length": buf.length });
    ctx.res.end(buf);
  }

  private noteUsage(ctx: RequestContext, usage: { cached: number | null; completion: number | null }): void {
    if (ctx.record?.route !== "remote" && usage.cached !== null) ctx.reportedTokens = usage.cached;
    if (usage.completion !== null) ctx.completionTokens = usage.completion;
  }

  /** Passes the decode worker's SSE bytes through as they arrive; a worker dying mid-stream ends it with an error event. */
  private async pipeStream(ctx: RequestContext, w: WorkerState, upstream: IncomingMessage, releasePrefill: () => void): Promise<void> {
    const { res } = ctx;
    res.writeHead(upstream.statusCode ?? 200, { "content-type": String(upstream.headers["content-type"]), "cache-control": "no-cache" });
    res.flushHeaders();
    const sniffer = new UsageSniffer();
    const idleMs = this.config.timeouts.request_ms;
    let tail = "\n\n";
    let timer = setTimeout(onIdle, idleMs);
    function onIdle(): void {
      upstream.destroy(new UpstreamError("timeout", `stream stalled for ${idleMs} ms`));
    }
    try {
      for await (const chunk of upstream as AsyncIterable<Buffer>) {
        clearTimeout(timer);
        timer = setTimeout(onIdle, idleMs);
        releasePrefill();
        if (ctx.clientGone) return;
        sniffer.push(chunk);
        tail = (tail + chunk.toString("latin1")).slice(-2);
        if (!res.write(chunk)) await drained(res);
      }
    } catch (e) {
      if (ctx.clientGone) return;
      const err = classify(e, `decode ${w.spec.id}`);
      this.upstreamFailed(w, "decode-stream", err);
      this.metrics.inc("dolphin_stream_errors_total", { kind: err.kind });
      ctx.statusOverride = err.kind === "timeout" ? 504 : 502;
      ctx.error = `decode worker ${w.spec.id} failed mid-stream: ${err.message}`;
      const event = errorBody(ctx.error, "upstream_error", err.kind === "timeout" ? "upstream_timeout" : "decode_failed");
      res.end(`${tail === "\n\n" ? "" : "\n\n"}data: ${event}\n\ndata: [DONE]\n\n`, () => ctx.req.socket.end());
      return;
    } finally {
      clearTimeout(timer);
      if (sniffer.usage) this.noteUsage(ctx, sniffer.usage);
    }
    res.end();
  }

  /** One log line and the metrics of a finished inference request. */
  private finishInference(ctx: RequestContext, endpoint: Endpoint): void {
    const latencyMs = performance.now() - ctx.startMs;
    const status = ctx.statusOverride ?? (ctx.clientGone ? 499 : ctx.res.statusCode);
    const route = ctx.route;
    this.metrics.inc("dolphin_requests_total", { endpoint: ENDPOINT_PATHS[endpoint], status: String(status), route });
    this.metrics.observe("dolphin_request_duration_seconds", { endpoint: ENDPOINT_PATHS[endpoint] }, latencyMs / 1000);
    const r = ctx.record;
    if (r) {
      r.status = status;
      r.latency_ms = Math.round(latencyMs * 10) / 10;
      r.reported_cached_tokens = ctx.reportedTokens;
      if (ctx.error) r.error = ctx.error;
      const path = r.route;
      this.metrics.inc("dolphin_prompt_tokens_total", { path }, ctx.isl);
      this.metrics.inc("dolphin_cache_predicted_tokens_total", { path }, ctx.predictedTokens);
      if (ctx.reportedTokens !== null) {
        this.metrics.inc("dolphin_cache_compared_requests_total", { path });
        this.metrics.inc("dolphin_cache_compared_predicted_tokens_total", { path }, ctx.predictedTokens);
        this.metrics.inc("dolphin_cache_reported_tokens_total", { path }, ctx.reportedTokens);
      }
    }
    const d = ctx.decision;
    this.log.log(status >= 500 ? "warn" : "info", "request", {
      id: ctx.id, path: ENDPOINT_PATHS[endpoint], status, latency_ms: Math.round(latencyMs * 10) / 10, route,
      workers: d ? { decode: d.decodeWorker, prefill: route === "remote" ? d.prefillWorker : null } : null,
      cluster: d?.cluster ?? null, reason: d?.reason ?? null, features: d?.features ?? null,
      predicted_cached_tokens: r ? ctx.predictedTokens : null, reported_cached_tokens: ctx.reportedTokens,
      ...(ctx.error ? { error: ctx.error } : {}),
    });
  }

  // ---- admin ----

  private authorized(ctx: RequestContext): void {
    const token = this.config.admin_token;
    if (token === null) throw new HttpError(403, "admin endpoints are disabled (no admin_token in the config)", "permission_error", "admin_disabled");
    const given = Buffer.from(String(ctx.req.headers["authorization"] ?? ""));
    const expected = Buffer.from(`Bearer ${token}`);
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
      throw new HttpError(401, "admin endpoints need Authorization: Bearer <admin_token>", "authentication_error", "unauthorized");
    }
  }

  private async admin(ctx: RequestContext, path: string, method: string, allow: (...m: string[]) => void): Promise<void> {
    this.authorized(ctx);
    const query = new URLSearchParams((ctx.req.url ?? "").split("?")[1] ?? "");
    if (path === "/admin/table") {
      allow("GET", "PUT");
      if (method === "PUT") return this.putTable(ctx);
      const t = this.router.table;
      const wantsJson = query.get("format") === "json" || String(ctx.req.headers["accept"] ?? "").includes("application/json");
      if (wantsJson) return this.sendJson(ctx, 200, { kind: t.kind, checksum: t.checksum, description: describeTable(t), table: t });
      return this.sendRaw(ctx, 200, "application/msgpack", this.tableBytes);
    }
    if (path === "/admin/decisions") {
      allow("GET");
      const n = Math.max(0, Math.min(Number(query.get("n") ?? 100) || 0, this.decisions.length, this.config.decisions_kept));
      return this.sendJson(ctx, 200, { decisions: n ? this.decisions.slice(-n) : [] });
    }
    if (path === "/admin/kv-events") {
      allow("POST");
      return this.postKvEvents(ctx);
    }
    if (path === "/admin/workers") {
      allow("GET", "POST");
      if (method === "POST") return this.registerWorker(ctx);
      return this.sendJson(ctx, 200, { workers: [...this.workers.values()].map((w) => this.describeWorker(w)) });
    }
    if (path.startsWith("/admin/workers/")) {
      allow("DELETE");
      const id = decodeURIComponent(path.slice("/admin/workers/".length));
      const w = this.workers.get(id);
      if (!w) throw new HttpError(404, `no worker ${JSON.stringify(id)}`, "invalid_request_error", "unknown_worker");
      this.dropWorker(w, "deregistered");
      return this.sendJson(ctx, 200, { id, removed: true });
    }
    throw new HttpError(404, `no admin route ${method} ${path}`, "invalid_request_error", "not_found");
  }

  private async putTable(ctx: RequestContext): Promise<void> {
    const bytes = await this.readBody(ctx);
    const previous = this.router.table;
    try {
      this.router.setTable(new Uint8Array(bytes)); // synchronous: requests already routed finish on the old table
    } catch (e) {
      throw new HttpError(400, `table rejected: ${(e as Error).message}`, "invalid_request_error", "invalid_table");
    }
    this.tableBytes = new Uint8Array(bytes);
    const t = this.router.table;
    this.metrics.inc("dolphin_table_swaps_total");
    this.log.log("info", "table swapped", { from: { kind: previous.kind, checksum: previous.checksum }, to: { kind: t.kind, checksum: t.checksum } });
    this.sendJson(ctx, 200, { kind: t.kind, checksum: t.checksum, description: describeTable(t) });
  }

  private async postKvEvents(ctx: RequestContext): Promise<void> {
    const header = ctx.req.headers["x-dolphin-worker"];
    const id = typeof header === "string" ? header : "";
    const bytes = await this.readBody(ctx);
    if (this.config.mode !== "precise") throw new HttpError(409, "KV events feed the index in precise mode only (the config's mode is approximate)", "invalid_request_error", "wrong_mode");
    if (!id) throw new HttpError(400, "missing header x-dolphin-worker: <worker id>", "invalid_request_error", "missing_worker");
    const w = this.workers.get(id);
    if (!w) throw new HttpError(404, `no worker ${JSON.stringify(id)}`, "invalid_request_error", "unknown_worker");
    if (!w.healthy) throw new HttpError(409, `worker ${JSON.stringify(id)} is out of rotation`, "invalid_request_error", "worker_unavailable");
    let batch: EventBatch;
    try {
      batch = decodeEventBatch(new Uint8Array(bytes));
    } catch (e) {
      this.metrics.inc("dolphin_kv_event_errors_total", { worker: id });
      throw new HttpError(400, e instanceof KvEventError ? e.message : String(e), "invalid_request_error", "invalid_kv_events");
    }
    const n = this.applyEvents(w, batch, "http");
    this.sendJson(ctx, 200, { worker: id, events: batch.events.length, stored_blocks: n.stored, removed_blocks: n.removed, cleared: n.cleared, unmapped_blocks: n.unmapped });
  }

  private async registerWorker(ctx: RequestContext): Promise<void> {
    const raw = await this.readBody(ctx);
    const json = parseJson(raw);
    let spec: WorkerConfig;
    try {
      spec = parseWorker(json, "body");
    } catch (e) {
      throw new HttpError(400, (e as Error).message, "invalid_request_error", "invalid_worker");
    }
    const hb = { heartbeat_interval_s: this.config.heartbeat.interval_s, expiry_s: this.config.heartbeat.expiry_s };
    const existing = this.workers.get(spec.id);
    const same = existing && existing.spec.url === spec.url && existing.spec.role === spec.role && existing.spec.kv_events_endpoint === spec.kv_events_endpoint;
    if (existing && same) {
      existing.lastHeartbeatMs = Date.now();
      return this.sendJson(ctx, 200, { id: spec.id, status: "refreshed", source: existing.source, healthy: existing.healthy, ...hb });
    }
    if (existing?.source === "config") {
      throw new HttpError(409, `worker ${JSON.stringify(spec.id)} is in the config with another url, role or endpoint`, "invalid_request_error", "worker_conflict");
    }
    if (existing) this.dropWorker(existing, "re-registered with a new url, role or endpoint");
    if (this.workers.size >= this.config.max_workers) {
      throw new HttpError(503, `max_workers (${this.config.max_workers}) workers are registered`, "service_unavailable", "too_many_workers");
    }
    this.addWorker(spec, "registered");
    this.log.log("info", "worker registered", { worker: spec.id, url: spec.url, role: spec.role });
    this.sendJson(ctx, 201, { id: spec.id, status: "registered", ...hb });
  }

  private describeWorker(w: WorkerState): Record<string, unknown> {
    return {
      id: w.spec.id, url: w.spec.url, role: w.spec.role, kv_events_endpoint: w.spec.kv_events_endpoint ?? null, source: w.source,
      healthy: w.healthy, last_heartbeat_age_s: w.source === "registered" ? (Date.now() - w.lastHeartbeatMs) / 1000 : null,
      index_blocks: w.healthy ? this.router.index.count(w.spec.id) : 0,
      active_prefill_tokens: w.activePrefillTokens, active_decode_tokens: w.activeDecodeTokens, kv_events_subscribed: w.subscriber !== null,
    };
  }

  private renderMetrics(): string {
    const gauges: Array<[string, Labels, number]> = [["dolphin_inflight_requests", {}, this.inflight], ["dolphin_sessions", {}, this.sessions.size]];
    const counts = new Map<string, number>();
    for (const w of this.workers.values()) {
      const k = `${w.spec.role}/${w.healthy ? "healthy" : "down"}`;
      counts.set(k, (counts.get(k) ?? 0) + 1);
      if (w.healthy) gauges.push(["dolphin_index_blocks", { worker: w.spec.id }, this.router.index.count(w.spec.id)]);
    }
    for (const role of ["prefill", "decode", "both"]) {
      for (const state of ["healthy", "down"]) gauges.push(["dolphin_workers", { role, state }, counts.get(`${role}/${state}`) ?? 0]);
    }
    const t = this.router.table;
    gauges.push(["dolphin_table_info", { kind: t.kind, checksum: t.checksum }, 1]);
    return this.metrics.render(gauges);
  }
}

// ---- request helpers -------------------------------------------------------------------------------------------

function validateInference(endpoint: Endpoint, body: Record<string, unknown>, model: string): void {
  const bad = (message: string): HttpError => new HttpError(400, message, "invalid_request_error", "invalid_request");
  const m = body["model"];
  if (m !== undefined && typeof m !== "string") throw bad("model must be a string");
  if (typeof m === "string" && m !== model) throw new HttpError(404, `the model \`${m}\` does not exist (this proxy serves \`${model}\`)`, "invalid_request_error", "model_not_found");
  if (body["stream"] !== undefined && typeof body["stream"] !== "boolean") throw bad("stream must be true or false");
  if (endpoint === "chat") {
    const msgs = body["messages"];
    if (!Array.isArray(msgs) || msgs.length === 0 || !msgs.every(isObject)) throw bad("messages must be a non-empty array of message objects");
  } else {
    const p = body["prompt"];
    const ok = typeof p === "string" || (Array.isArray(p) && p.length > 0 &&
      (p.every((x) => typeof x === "string") || p.every((x) => Number.isInteger(x) && x >= 0) ||
        p.every((x) => Array.isArray(x) && x.every((y) => Number.isInteger(y) && y >= 0))));
    if (!ok) throw bad("prompt must be a string, an array of strings, or token ids");
  }
}

/** Chat messages as the text the approximate index hashes: "role\ncontent\n" per message, text parts joined. */
function chatText(messages: unknown[]): string {
  return messages.map((m) => {
    const msg = m as Record<string, unknown>;
    return `${String(msg["role"] ?? "")}\n${contentText(msg["content"])}\n`;
  }).join("");
}

function contentText(content: unknown): string {
  if (typeof content === "string") return content;
  if (content === null || content === undefined) return "";
  if (Array.isArray(content)) {
    return content.map((p) => (isObject(p) && p["type"] === "text" && typeof p["text"] === "string" ? p["text"] : JSON.stringify(p))).join("\n");
  }
  return JSON.stringify(content);
}

/** A conversation: the model, the client's `user`, and the first user message (chat) or the prompt's first 512 characters. */
function sessionKey(model: string, endpoint: Endpoint, body: Record<string, unknown>): string {
  let first: string;
  if (endpoint === "chat") {
    const msgs = body["messages"] as Array<Record<string, unknown>>;
    first = contentText((msgs.find((m) => m["role"] === "user") ?? msgs[0])?.["content"]);
  } else {
    const p = body["prompt"];
    const one = Array.isArray(p) && (typeof p[0] === "string" || Array.isArray(p[0])) ? p[0] : p;
    first = typeof one === "string" ? one.slice(0, 512) : JSON.stringify((one as number[]).slice(0, 128));
  }
  const user = typeof body["user"] === "string" ? body["user"] : "";
  return createHash("sha1").update(`${model}\0${endpoint}\0${user}\0${first}`).digest("base64");
}

function positiveInt(v: unknown): number | undefined {
  return typeof v === "number" && Number.isInteger(v) && v > 0 ? v : undefined;
}

function snippet(buf: Buffer): string {
  const s = buf.toString("utf8").replace(/\s+/g, " ").trim();
  return s.length > MAX_ERROR_SNIPPET ? `${s.slice(0, MAX_ERROR_SNIPPET)}…` : s || "(empty body)";
}

function drained(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      res.off("drain", done);
      res.off("close", done);
      resolve();
    };
    res.on("drain", done);
    res.on("close", done);
  });
}

// ---- entry -----------------------------------------------------------------------------------------------------

/** The table the config names, and its bytes (served back by GET /admin/table). */
function initialTable(config: ServeConfig): { table: Table; bytes: Uint8Array } {
  const table = loadConfigTable(config);
  if (table.kind !== config.table) return { table, bytes: new Uint8Array(readFileSync(config.table)) };
  return { table, bytes: encodeTable(table) };
}

/** Starts `dolphin serve`: validates the config, loads the table, listens. `close()` stops everything it started. */
export async function startProxy(input: ServeConfig | ServeConfigInput, opts: ProxyOptions = {}): Promise<RunningProxy> {
  const config = parseConfig(input);
  const log = new Logger(config.log_level, opts.log ?? ((line) => process.stderr.write(`${line}\n`)));
  const { table, bytes } = initialTable(config);
  const proxy = new ServeProxy(config, table, bytes, opts.module ?? loadCoreModule(), log);
  const server = http.createServer((req, res) => proxy.handle(req, res));
  server.on("clientError", (_e, socket) => {
    if (socket.writable) socket.end("HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n");
    else socket.destroy();
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(config.listen.port, config.listen.host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  proxy.startTimers();
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : config.listen.port;
  const host = config.listen.host.includes(":") ? `[${config.listen.host}]` : config.listen.host;
  const url = `http://${host === "0.0.0.0" ? "127.0.0.1" : host === "[::]" ? "[::1]" : host}:${port}`;
  log.log("info", "dolphin serve listening", { url, model: config.model, mode: config.mode, table: { kind: table.kind, checksum: table.checksum }, workers: config.workers.length });
  let closing: Promise<void> | null = null;
  return {
    url,
    port,
    router: proxy.router,
    close: () => {
      closing ??= (async () => {
        await proxy.close();
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeAllConnections();
        await closed;
      })();
      return closing;
    },
  };
}
