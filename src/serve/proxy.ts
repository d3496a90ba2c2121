// `dolphin serve`: an HTTP proxy that speaks the OpenAI API to clients and vLLM's disaggregated-prefill protocol
// (NixlConnector, shared/docs/reference-systems.md) to workers. Every request goes through one Router call; the
// router's view of every worker's cache is kept current by KV events (precise mode) or by the proxy's own decisions
// (approximate mode). Workers come from the config and from POST /admin/workers heartbeats; a worker that fails is
// taken out of rotation until its /health answers again. docs/serving.md describes the endpoints and the config.
//
// This file puts the proxy together and routes its HTTP requests; each concern is a module of proxy/:
//   registry.ts         the workers, in rotation or not, and the load the proxy's requests put on them
//   health.ts           heartbeat expiry, active /health checks of workers in rotation, probes of those out of it
//   kv-feed.ts          KV events (ZMQ subscriptions with replay, POSTed batches) into the index, via kv-ingest.ts
//   cache-evidence.ts   precise mode: an answer's reported cached tokens beyond the index's prediction stored in it
//   routing.ts          the prompt as the router reads it, the conversation, one Router call
//   client-keys.ts      who may call: client API keys (auth.keys_file), per-key limits, 401 and 429
//   demand.ts           signals for autoscalers: per role, queued and in-flight prefill tokens, decode sequences, rates
//   admission.ts        load shedding: in-flight and queue limits, 503 with Retry-After
//   worker-admission.ts the same per worker: a full worker's request goes to another with room, or waits
//   connections.ts      the client-connection limit (short of the fd limit): past it, 503 and close
//   inference.ts        an inference request from body to answer, its log line and metrics
//   remote-path.ts      the worker calls: prefill → decode (NixlConnector), the decode call, streaming
//   abandoned.ts        a client gone after its prefill: the handoff released through the decode worker
//   stream-relay.ts     a decode stream relayed to the client; what an answer's usage tells the request
//   cached-tokens.ts    the remote path's client usage: the prefill worker's cached tokens, not the decode's
//   admin.ts            /admin/*
//   metrics.ts          /metrics (prom-client)
//   openai.ts           the OpenAI request as the proxy reads it, and its error dialect
//   upstream.ts         calls to workers: keep-alive agents, timeouts, failure classification, usage sniffing
//   log.ts              JSON log lines
//   decisions.ts, request-context.ts, sessions.ts: the records, per-request state and conversations they share
// The HTTP toolkit (errors, body limits, route table) is http-toolkit.ts, shared with the emulated worker.

import http from "node:http";
import { readFileSync } from "node:fs";
import { loadCoreModule } from "../core/core-file.js";
import { Router } from "../router/router.js";
import { encodeTable } from "../table/codec.js";
import type { Table } from "../table/table.js";
import { parseConfig, type ServeConfig, type ServeConfigInput } from "./config.js";
import { loadConfigTable } from "./config-files.js";
import { closeServer, HttpError, listen, pathOf, RouteTable, sendError, sendJson, urlHost } from "./http-toolkit.js";
import { Logger } from "./proxy/log.js";
import { sendMetrics } from "./prometheus.js";
import { keepAliveAgents, WorkerRejection } from "./proxy/upstream.js";
import { AdminApi } from "./proxy/admin.js";
import { DecisionLog } from "./proxy/decisions.js";
import { checkWorkers, expireWorkers, probeDownWorkers } from "./proxy/health.js";
import { Inference } from "./proxy/inference.js";
import { Admission, ShedLog } from "./proxy/admission.js";
import { WorkerAdmission } from "./proxy/worker-admission.js";
import { ConnectionGuard } from "./proxy/connections.js";
import { KvEventFeed } from "./proxy/kv-feed.js";
import { CacheEvidence } from "./proxy/cache-evidence.js";
import { rootHash } from "../hashing/hashes.js";
import { ProxyMetrics } from "./proxy/metrics.js";
import { ENDPOINT_PATHS, OPENAI_ERRORS } from "./proxy/openai.js";
import { WorkerRegistry } from "./proxy/registry.js";
import { WorkerCalls } from "./proxy/remote-path.js";
import { RequestContext } from "./proxy/request-context.js";
import { Routing } from "./proxy/routing.js";
import { Sessions } from "./proxy/sessions.js";
import { ClientKeys } from "./proxy/client-keys.js";
import { Demand } from "./proxy/demand.js";
import { AbandonedPrefills } from "./proxy/abandoned.js";
import { TableWatch } from "./proxy/table-watch.js";

export interface ProxyOptions {
  /** The compiled core (default: build/core.wasm via the Node entry). */
  module?: WebAssembly.Module;
  /** Where log lines go (default: stderr). */
  log?: (line: string) => void;
}

export interface CloseOptions {
  /**
   * Drain first: stop accepting connections, let the requests in flight finish for at most this long, then cut what
   * is left (SIGTERM in the CLI). 0 (the default): cut at once.
   */
  drainMs?: number;
}

export interface RunningProxy {
  url: string;
  port: number;
  close(opts?: CloseOptions): Promise<void>;
  router: Router;
}

// ---- the proxy -------------------------------------------------------------------------------------------------

class ServeProxy {
  readonly router: Router;
  private readonly metrics: ProxyMetrics;
  private readonly registry: WorkerRegistry;
  private readonly sessions: Sessions;
  private readonly inference: Inference;
  private readonly admission: Admission;
  private readonly places: WorkerAdmission;
  private readonly agents = keepAliveAgents();
  private readonly routes = new RouteTable<RequestContext>(OPENAI_ERRORS);
  private readonly timers: NodeJS.Timeout[] = [];
  private connections: ConnectionGuard | null = null;
  private readonly shedLog: ShedLog;
  /** Client keys (auth.keys_file), null when anyone may call. */
  private readonly keys: ClientKeys | null;
  private readonly demand: Demand;
  /** table_reload_s: the table file read again when it changes. */
  private readonly tableWatch: TableWatch | null;

  constructor(
    private readonly config: ServeConfig,
    table: Table,
    tableBytes: Uint8Array,
    module: WebAssembly.Module,
    private readonly log: Logger,
  ) {
    this.sessions = new Sessions(config.sessions.idle_s * 1000, config.sessions.max);
    this.shedLog = new ShedLog(log);
    // text mode reads bytes / 4 as tokens: room for the largest accepted body
    const maxPromptTokens = Math.max(1 << 20, Math.ceil(config.max_body_bytes / 4) + 4096);
    const router = (this.router = Router.create(table, {
      module,
      workers: [],
      blockSize: config.block_size,
      model: config.model,
      recordDecisions: config.mode === "approximate",
      capacityBlocks: config.capacity_blocks,
      tierWeights: config.tiers,
      maxWorkers: config.max_workers,
      indexBlocks: config.capacity_blocks * config.max_workers,
      maxPromptTokens,
    }));
    const metrics = (this.metrics = new ProxyMetrics(() => ({
      inflight: this.inference.inflight,
      queued: this.admission.queued,
      sessions: this.sessions.size,
      workers: this.registry.all().map((w) => ({
        id: w.spec.id,
        role: w.spec.role,
        healthy: w.healthy,
        indexBlocks: w.healthy ? router.index.count(w.spec.id) : 0,
        inflight: this.places.inflight(w.spec.id),
        queued: this.places.queued(w.spec.id),
      })),
      table: { kind: router.table.kind, checksum: router.table.checksum },
    })));
    const keysFile = config.auth.keys_file;
    this.keys =
      keysFile === null ? null : new ClientKeys({ ...config.auth, keys_file: keysFile }, metrics.registry, log);
    const kv = new KvEventFeed(config, router, metrics, log);
    const registry = (this.registry = new WorkerRegistry(config, router, kv, metrics, log));
    const decisions = new DecisionLog(config.decisions_kept);
    const routing = new Routing(config, router, registry, this.sessions, this.agents, metrics, log, maxPromptTokens);
    this.admission = new Admission(config.admission, metrics);
    const places = (this.places = new WorkerAdmission(config.admission, metrics));
    const calls = new WorkerCalls(config, registry, this.agents, metrics, () => this.admission.active, places);
    registry.onEject = (id, cause) => calls.workerEjected(id, cause);
    const evidence =
      config.mode === "precise" && config.cache_evidence
        ? new CacheEvidence(router, registry, config.block_size, rootHash(config.model), metrics)
        : null;
    const demand = (this.demand = new Demand(registry, places, metrics));
    this.inference = new Inference(
      config,
      router,
      routing,
      calls,
      decisions,
      metrics,
      log,
      this.admission,
      evidence,
      demand,
      new AbandonedPrefills(config, registry, this.agents, metrics, log),
    );
    const admin = new AdminApi(config, router, registry, kv, decisions, metrics, log, tableBytes);
    this.tableWatch =
      config.table_reload_s > 0 ? new TableWatch(config, (b) => admin.swapTable(b, "file"), metrics, log) : null;
    this.routes
      .on(ENDPOINT_PATHS.chat, { POST: (c) => this.inference.handle(c, "chat") })
      .on(ENDPOINT_PATHS.completions, { POST: (c) => this.inference.handle(c, "completions") })
      .on("/v1/models", {
        GET: (c) =>
          sendJson(c.res, 200, {
            object: "list",
            data: [{ id: config.model, object: "model", created: 0, owned_by: "dolphin-routing" }],
          }),
      })
      .on("/health", { GET: (c) => this.health(c) })
      .on("/metrics", { GET: (c) => sendMetrics(c.res, metrics.registry) })
      .on("/admin/*", { "*": (c) => admin.handle(c) });
    for (const w of config.workers) registry.add(w, "config");
  }

  /** Counts `server`'s client connections; requests on those past admission.max_connections get 503 and close. */
  guardConnections(server: http.Server): void {
    this.connections = new ConnectionGuard(server, this.config.admission, this.metrics);
  }

  startTimers(): void {
    const every = (ms: number, fn: () => void): void => {
      const t = setInterval(fn, ms);
      t.unref();
      this.timers.push(t);
    };
    const { config, registry, metrics } = this;
    this.keys?.watch();
    this.demand.start();
    this.tableWatch?.start();
    every(Math.max(10, Math.min(1000, (config.heartbeat.expiry_s * 1000) / 4)), () =>
      expireWorkers(registry, config, metrics),
    );
    every(Math.max(10, config.health.probe_interval_s * 1000), () => probeDownWorkers(registry, config, this.agents));
    every(Math.max(10, config.health.check_interval_s * 1000), () => checkWorkers(registry, config, this.agents));
    every(Math.max(1000, Math.min(60_000, config.sessions.idle_s * 250)), () => this.sessions.sweep(Date.now()));
    if (config.mode === "approximate") {
      // The approximation: the index forgets everything once per period, so an entry lives between 0 and
      // approximate_ttl_s (ttl/2 on average), in place of a per-entry expiry the core does not keep.
      every(config.approximate_ttl_s * 1000, () => {
        this.router.index.clear();
        metrics.indexClears.inc();
      });
    }
  }

  /** Resolves once no inference request is in flight, or after `ms`; the number still in flight. */
  async drain(ms: number): Promise<number> {
    const deadline = performance.now() + ms;
    while (this.inference.inflight > 0 && performance.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    return this.inference.inflight;
  }

  get inflight(): number {
    return this.inference.inflight;
  }

  async close(): Promise<void> {
    for (const t of this.timers) clearInterval(t);
    this.keys?.close();
    this.demand.close();
    this.tableWatch?.close();
    this.registry.close();
    this.agents.http.destroy();
    this.agents.https.destroy();
  }

  handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const ctx = new RequestContext(req, res);
    res.setHeader("x-request-id", ctx.id);
    res.on("close", () => this.closed(ctx));
    ctx.endpoint = pathOf(req);
    let answer: Promise<void> | void;
    try {
      if (this.connections?.refuses(req)) answer = this.connections.shed(req);
      else {
        // client keys before anything else is done for the request (body, /tokenize, a worker call)
        if (this.keys && ctx.endpoint.startsWith("/v1/")) this.keys.admit(ctx);
        answer = this.routes.find(req.method ?? "GET", ctx.endpoint)(ctx);
      }
    } catch (e) {
      this.fail(ctx, e);
      return;
    }
    answer?.catch((e: unknown) => this.fail(ctx, e));
  }

  /** The response is over (sent, or the client left): the request's holds go, then what waits for its end. */
  private closed(ctx: RequestContext): void {
    const { req, res } = ctx;
    ctx.closed = true;
    if (!res.writableFinished) {
      ctx.clientGone = true;
      ctx.abort.abort();
    }
    for (const release of ctx.releases) release();
    if (!ctx.record && this.log.enabled("debug")) {
      this.log.log("debug", "request", {
        id: ctx.id,
        method: req.method,
        path: ctx.endpoint,
        status: res.statusCode,
        latency_ms: Math.round((performance.now() - ctx.startMs) * 10) / 10,
      });
    }
    for (const then of ctx.afterClose) then();
  }

  private health(ctx: RequestContext): void {
    const decode = this.registry.healthyDecodeWorkers().length;
    sendJson(ctx.res, 200, {
      status: decode > 0 ? "ok" : "degraded",
      workers: {
        total: this.registry.size,
        healthy: this.registry.all().filter((w) => w.healthy).length,
        healthy_decode: decode,
      },
      table: { kind: this.router.table.kind, checksum: this.router.table.checksum },
      mode: this.config.mode,
    });
  }

  /** The error answer for whatever went wrong, unless the answer has begun (then the connection is cut). */
  private fail(ctx: RequestContext, e: unknown): void {
    const { res } = ctx;
    if (ctx.clientGone) return;
    if (e instanceof WorkerRejection && !res.headersSent) {
      ctx.error ??= e.message;
      res.writeHead(e.status, { "content-type": e.contentType, "content-length": e.body.length });
      res.end(e.body);
      return;
    }
    let err: HttpError;
    if (e instanceof HttpError) err = e;
    else {
      err = new HttpError(
        500,
        `internal error: ${(e as Error)?.message ?? String(e)}`,
        "server_error",
        "internal_error",
      );
      this.log.log("error", "unexpected error", { id: ctx.id, error: (e as Error)?.stack ?? String(e) });
    }
    ctx.error ??= err.message;
    if (err.code === "overloaded") this.shedLog.note(ctx, err.message);
    if (res.headersSent) {
      res.destroy();
      return;
    }
    sendError(res, err);
  }
}

/** Longest request line (method, URL, version) answered 431 rather than 414 when the headers overflow. */
const LONGEST_REQUEST_LINE = 8192;

/**
 * The raw answer to a request Node's parser refused: 408 when the headers came too slowly, 414 when the request line
 * alone overflowed the header limit, 431 when the headers did, else 400. The connection closes after it.
 */
export function clientErrorAnswer(e: NodeJS.ErrnoException & { rawPacket?: Buffer }): string {
  let status = "400 Bad Request";
  if (e.code === "ERR_HTTP_REQUEST_TIMEOUT") status = "408 Request Timeout";
  else if (e.code === "HPE_HEADER_OVERFLOW") {
    const raw = e.rawPacket ? e.rawPacket.toString("latin1") : "";
    const lineEnd = raw.indexOf("\r\n");
    status = lineEnd < 0 || lineEnd > LONGEST_REQUEST_LINE ? "414 URI Too Long" : "431 Request Header Fields Too Large";
  }
  return `HTTP/1.1 ${status}\r\nconnection: close\r\ncontent-length: 0\r\n\r\n`;
}

// ---- entry -----------------------------------------------------------------------------------------------------

/** The table the config names, and its bytes (served back by GET /admin/table). */
function initialTable(config: ServeConfig): { table: Table; bytes: Uint8Array } {
  const table = loadConfigTable(config);
  if (table.kind !== config.table) return { table, bytes: new Uint8Array(readFileSync(config.table)) };
  return { table, bytes: encodeTable(table) };
}

/** Starts `dolphin serve`: validates the config, loads the table, listens. `close()` stops everything it started. */
export async function startProxy(
  input: ServeConfig | ServeConfigInput,
  opts: ProxyOptions = {},
): Promise<RunningProxy> {
  const config = parseConfig(input);
  const log = new Logger(config.log_level, opts.log ?? ((line) => process.stderr.write(`${line}\n`)));
  const { table, bytes } = initialTable(config);
  const proxy = new ServeProxy(config, table, bytes, opts.module ?? loadCoreModule(), log);
  const t = config.timeouts;
  const server = http.createServer(
    {
      // Node checks its header and request timeouts on this period: a fraction of the header limit, so 408 comes on time.
      connectionsCheckingInterval: Math.max(50, Math.min(1000, Math.floor(t.headers_ms / 4))),
      headersTimeout: t.headers_ms,
      // The body has its own idle limit (timeouts.body_ms, in readBody); a stream's upload may run long while bytes come.
      requestTimeout: 0,
    },
    (req, res) => proxy.handle(req, res),
  );
  server.keepAliveTimeout = t.keep_alive_ms;
  proxy.guardConnections(server);
  server.on("clientError", (e: NodeJS.ErrnoException & { rawPacket?: Buffer }, socket) => {
    if (socket.writable) socket.end(clientErrorAnswer(e));
    else socket.destroy();
  });
  let port: number;
  try {
    port = await listen(server, config.listen.port, config.listen.host, config.admission.backlog);
  } catch (e) {
    await proxy.close();
    throw e;
  }
  proxy.startTimers();
  const host = urlHost(config.listen.host);
  const url = `http://${host === "0.0.0.0" ? "127.0.0.1" : host === "[::]" ? "[::1]" : host}:${port}`;
  log.log("info", "dolphin serve listening", {
    url,
    model: config.model,
    mode: config.mode,
    table: { kind: table.kind, checksum: table.checksum },
    workers: config.workers.length,
  });
  let closing: Promise<void> | null = null;
  return {
    url,
    port,
    router: proxy.router,
    close: (opts = {}) => {
      closing ??= (async () => {
        const drainMs = opts.drainMs ?? 0;
        if (drainMs > 0) {
          server.close(); // no new connections; idle keep-alive ones close
          server.closeIdleConnections();
          if (proxy.inflight > 0) log.log("info", "draining", { inflight: proxy.inflight, deadline_ms: drainMs });
          const left = await proxy.drain(drainMs);
          if (left > 0) log.log("warn", "drain deadline passed, cutting requests still in flight", { inflight: left });
        }
        await proxy.close();
        await closeServer(server);
      })();
      return closing;
    },
  };
}
