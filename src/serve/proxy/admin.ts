// The admin API (/admin/*, behind `Authorization: Bearer <admin_token>`; 403 when the config has none): the routing
// table (GET, and PUT to swap it), recent decisions, KV events POSTed by workers without ZMQ, and the workers
// (GET the list, POST to register or heartbeat, DELETE /admin/workers/<id> to deregister).

import { timingSafeEqual } from "node:crypto";
import { decodeEventBatch, KvEventError, type EventBatch } from "../../router/kv-events.js";
import type { Router } from "../../router/router.js";
import { describeTable } from "../../table/describe-table.js";
import type { ServeConfig } from "../config.js";
import { parseWorker, type WorkerConfig } from "../config-workers.js";
import { HttpError, readBody, RouteTable, sendBody, sendJson } from "../http-toolkit.js";
import type { Logger } from "./log.js";
import { parseJson } from "./upstream.js";
import type { DecisionLog } from "./decisions.js";
import type { KvEventFeed } from "./kv-feed.js";
import type { ProxyMetrics } from "./metrics.js";
import { OPENAI_ERRORS } from "./openai.js";
import type { WorkerRegistry, WorkerState } from "./registry.js";
import type { RequestContext } from "./request-context.js";

const ADMIN_ERRORS = {
  ...OPENAI_ERRORS,
  notFound: (method: string, path: string) =>
    new HttpError(404, `no admin route ${method} ${path}`, "invalid_request_error", "not_found"),
};

const unknownWorker = (id: string): HttpError =>
  new HttpError(404, `no worker ${JSON.stringify(id)}`, "invalid_request_error", "unknown_worker");

export class AdminApi {
  private readonly routes = new RouteTable<RequestContext>(ADMIN_ERRORS);

  constructor(
    private readonly config: ServeConfig,
    private readonly router: Router,
    private readonly registry: WorkerRegistry,
    private readonly kv: KvEventFeed,
    private readonly decisions: DecisionLog,
    private readonly metrics: ProxyMetrics,
    private readonly log: Logger,
    /** The table's bytes as GET /admin/table serves them (the file's, or the rule table's encoding). */
    private tableBytes: Uint8Array,
  ) {
    this.routes
      .on("/admin/table", { GET: (c) => this.getTable(c), PUT: (c) => this.putTable(c) })
      .on("/admin/decisions", { GET: (c) => this.getDecisions(c) })
      .on("/admin/kv-events", { POST: (c) => this.postKvEvents(c) })
      .on("/admin/workers", { GET: (c) => this.listWorkers(c), POST: (c) => this.registerWorker(c) })
      .on("/admin/workers/*", { DELETE: (c) => this.deregisterWorker(c) });
  }

  /** Every /admin/ request: authorized first, then routed. */
  handle(ctx: RequestContext): Promise<void> | void {
    this.authorize(ctx);
    return this.routes.find(ctx.req.method ?? "GET", ctx.endpoint)(ctx);
  }

  private authorize(ctx: RequestContext): void {
    const token = this.config.admin_token;
    if (token === null)
      throw new HttpError(
        403,
        "admin endpoints are disabled (no admin_token in the config)",
        "permission_error",
        "admin_disabled",
      );
    const given = Buffer.from(String(ctx.req.headers["authorization"] ?? ""));
    const expected = Buffer.from(`Bearer ${token}`);
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
      throw new HttpError(
        401,
        "admin endpoints need Authorization: Bearer <admin_token>",
        "authentication_error",
        "unauthorized",
      );
    }
  }

  private query(ctx: RequestContext): URLSearchParams {
    return new URLSearchParams((ctx.req.url ?? "").split("?")[1] ?? "");
  }

  private readBody(ctx: RequestContext): Promise<Buffer> {
    return readBody(ctx.req, this.config.max_body_bytes, OPENAI_ERRORS, this.config.timeouts.body_ms);
  }

  // ---- the table ----

  private getTable(ctx: RequestContext): void {
    const t = this.router.table;
    const wantsJson =
      this.query(ctx).get("format") === "json" || String(ctx.req.headers["accept"] ?? "").includes("application/json");
    if (wantsJson)
      return sendJson(ctx.res, 200, { kind: t.kind, checksum: t.checksum, description: describeTable(t), table: t });
    sendBody(ctx.res, 200, "application/msgpack", this.tableBytes);
  }

  private async putTable(ctx: RequestContext): Promise<void> {
    const bytes = await this.readBody(ctx);
    try {
      this.swapTable(new Uint8Array(bytes), "put");
    } catch (e) {
      throw new HttpError(400, `table rejected: ${(e as Error).message}`, "invalid_request_error", "invalid_table");
    }
    const t = this.router.table;
    sendJson(ctx.res, 200, { kind: t.kind, checksum: t.checksum, description: describeTable(t) });
  }

  /**
   * Puts a table in force (PUT /admin/table, or the table file read again: table-watch.ts); a table the core rejects
   * throws and leaves the current one in place.
   */
  swapTable(bytes: Uint8Array, via: "put" | "file"): void {
    const previous = this.router.table;
    this.router.setTable(bytes); // synchronous: requests already routed finish on the old table
    this.tableBytes = bytes;
    const t = this.router.table;
    this.metrics.tableSwaps.inc();
    this.log.log("info", "table swapped", {
      via,
      from: { kind: previous.kind, checksum: previous.checksum },
      to: { kind: t.kind, checksum: t.checksum },
    });
  }

  private getDecisions(ctx: RequestContext): void {
    const n = Number(this.query(ctx).get("n") ?? 100) || 0;
    sendJson(ctx.res, 200, { decisions: this.decisions.recent(n) });
  }

  // ---- KV events ----

  private async postKvEvents(ctx: RequestContext): Promise<void> {
    const header = ctx.req.headers["x-dolphin-worker"];
    const id = typeof header === "string" ? header : "";
    const bytes = await this.readBody(ctx);
    if (this.config.mode !== "precise")
      throw new HttpError(
        409,
        "KV events feed the index in precise mode only (the config's mode is approximate)",
        "invalid_request_error",
        "wrong_mode",
      );
    if (!id)
      throw new HttpError(
        400,
        "missing header x-dolphin-worker: <worker id>",
        "invalid_request_error",
        "missing_worker",
      );
    const w = this.registry.get(id);
    if (!w) throw unknownWorker(id);
    if (!w.healthy)
      throw new HttpError(
        409,
        `worker ${JSON.stringify(id)} is out of rotation`,
        "invalid_request_error",
        "worker_unavailable",
      );
    let batch: EventBatch;
    try {
      batch = decodeEventBatch(new Uint8Array(bytes));
    } catch (e) {
      this.metrics.kvEventErrors.inc({ worker: id });
      throw new HttpError(
        400,
        e instanceof KvEventError ? e.message : String(e),
        "invalid_request_error",
        "invalid_kv_events",
      );
    }
    const n = this.kv.apply(w, batch, "http");
    sendJson(ctx.res, 200, {
      worker: id,
      events: batch.events.length,
      stored_blocks: n.stored,
      removed_blocks: n.removed,
      cleared: n.cleared,
      unmapped_blocks: n.unmapped,
      lower_tier_blocks: n.lower,
      untiered_blocks: n.untiered,
    });
  }

  // ---- workers ----

  private listWorkers(ctx: RequestContext): void {
    sendJson(ctx.res, 200, { workers: this.registry.all().map((w) => this.describeWorker(w)) });
  }

  private async registerWorker(ctx: RequestContext): Promise<void> {
    const json = parseJson(await this.readBody(ctx));
    let spec: WorkerConfig;
    try {
      spec = parseWorker(json, "body");
      if (spec.data_parallel_size !== undefined)
        throw new Error("body.data_parallel_size: register each rank as its own worker (with data_parallel_rank)");
    } catch (e) {
      throw new HttpError(400, (e as Error).message, "invalid_request_error", "invalid_worker");
    }
    const hb = { heartbeat_interval_s: this.config.heartbeat.interval_s, expiry_s: this.config.heartbeat.expiry_s };
    const existing = this.registry.get(spec.id);
    const same =
      existing &&
      existing.spec.url === spec.url &&
      existing.spec.role === spec.role &&
      existing.spec.kv_events_endpoint === spec.kv_events_endpoint &&
      existing.spec.group === spec.group &&
      existing.spec.data_parallel_rank === spec.data_parallel_rank &&
      existing.spec.kv_events_replay_endpoint === spec.kv_events_replay_endpoint;
    if (existing && same) {
      existing.lastHeartbeatMs = Date.now();
      return sendJson(ctx.res, 200, {
        id: spec.id,
        status: "refreshed",
        source: existing.source,
        healthy: existing.healthy,
        ...hb,
      });
    }
    if (existing?.source === "config") {
      throw new HttpError(
        409,
        `worker ${JSON.stringify(spec.id)} is in the config with another url, role or endpoint`,
        "invalid_request_error",
        "worker_conflict",
      );
    }
    if (existing) this.registry.drop(existing, "re-registered with a new url, role or endpoint");
    if (this.registry.size >= this.config.max_workers) {
      throw new HttpError(
        503,
        `max_workers (${this.config.max_workers}) workers are registered`,
        "service_unavailable",
        "too_many_workers",
      );
    }
    this.registry.add(spec, "registered");
    this.log.log("info", "worker registered", { worker: spec.id, url: spec.url, role: spec.role });
    sendJson(ctx.res, 201, { id: spec.id, status: "registered", ...hb });
  }

  private deregisterWorker(ctx: RequestContext): void {
    const id = decodeURIComponent(ctx.endpoint.slice("/admin/workers/".length));
    const w = this.registry.get(id);
    if (!w) throw unknownWorker(id);
    this.registry.drop(w, "deregistered");
    sendJson(ctx.res, 200, { id, removed: true });
  }

  private describeWorker(w: WorkerState): Record<string, unknown> {
    return {
      id: w.spec.id,
      url: w.spec.url,
      role: w.spec.role,
      kv_events_endpoint: w.spec.kv_events_endpoint ?? null,
      group: w.group,
      kv_events_replay_endpoint: w.spec.kv_events_replay_endpoint ?? null,
      source: w.source,
      healthy: w.healthy,
      last_heartbeat_age_s: w.source === "registered" ? (Date.now() - w.lastHeartbeatMs) / 1000 : null,
      index_blocks: w.healthy ? this.router.index.count(w.spec.id) : 0,
      active_prefill_tokens: w.activePrefillTokens,
      active_decode_tokens: w.activeDecodeTokens,
      kv_events_subscribed: w.subscriber !== null,
    };
  }
}
