// POST /v1/chat/completions and /v1/completions, from body to answer: validate, route (routing.ts), record the
// decision, run the remote path's prefill (falling back to local prefill when it fails and fallback_local allows)
// and the decode call (remote-path.ts); when the answer is over, one log line and the request's metrics.

import type { Router } from "../../router/router.js";
import { isPlainObject } from "../../contract/values.js";
import type { ServeConfig } from "../config.js";
import { HttpError, readBody } from "../http-toolkit.js";
import type { Logger } from "./log.js";
import { classify, parseJson, WorkerRejection } from "./upstream.js";
import type { DecisionLog, DecisionRecord } from "./decisions.js";
import type { ProxyMetrics } from "./metrics.js";
import { ENDPOINT_PATHS, OPENAI_ERRORS, validateInference, type Endpoint } from "./openai.js";
import type { WorkerCalls } from "./remote-path.js";
import type { RequestContext } from "./request-context.js";
import type { Routing } from "./routing.js";
import { outOfDescriptors, type Admission } from "./admission.js";
import { askedOptions, askForUsage } from "./stream-usage.js";
import type { CacheEvidence } from "./cache-evidence.js";
import type { Demand } from "./demand.js";
import type { AbandonedPrefills } from "./abandoned.js";

/** The duration histogram's labels, one object per endpoint rather than one per request. */
const DURATION_LABELS: Record<Endpoint, { endpoint: string }> = {
  chat: { endpoint: ENDPOINT_PATHS.chat },
  completions: { endpoint: ENDPOINT_PATHS.completions },
};

export class Inference {
  /** Inference requests in flight (a gauge). */
  inflight = 0;
  private viewOf: Router["table"] | null = null;
  private view: DecisionRecord["table"] | null = null;

  constructor(
    private readonly config: ServeConfig,
    private readonly router: Router,
    private readonly routing: Routing,
    private readonly calls: WorkerCalls,
    private readonly decisions: DecisionLog,
    private readonly metrics: ProxyMetrics,
    private readonly log: Logger,
    private readonly admission: Admission,
    /** Precise mode: reported cached tokens beyond the prediction, stored in the index (null: approximate mode). */
    private readonly evidence: CacheEvidence | null = null,
    /** The autoscaler's signals: a routed prompt's tokens queued until its prefill begins. */
    private readonly demand: Demand | null = null,
    /** A client that left after its prefill: the handoff released through the decode worker. */
    private readonly abandoned: AbandonedPrefills | null = null,
  ) {}

  /**
   * Admission first, synchronously: a request shed throws its 503 from here to the proxy's handler (no promise made
   * for it, the cheapest answer in an overload); one admitted goes on in run().
   */
  handle(ctx: RequestContext, endpoint: Endpoint): Promise<void> {
    this.inflight++;
    ctx.afterClose.push(() => {
      this.inflight--;
      this.finish(ctx, endpoint);
    });
    return this.run(ctx, endpoint, this.admission.enter(ctx));
  }

  private async run(ctx: RequestContext, endpoint: Endpoint, queued: Promise<void> | undefined): Promise<void> {
    if (queued) await queued;
    if (ctx.clientGone) return;
    const raw = await readBody(ctx.req, this.config.max_body_bytes, OPENAI_ERRORS, this.config.timeouts.body_ms);
    const body = parseJson(raw);
    if (!isPlainObject(body))
      throw new HttpError(
        400,
        raw.length === 0 ? "empty request body" : "request body is not a JSON object",
        "invalid_request_error",
        "invalid_json",
      );
    validateInference(endpoint, body, this.config.model, this.config.max_model_len);
    const routing = this.routing.route(ctx, endpoint, body);
    const routed = routing instanceof Promise ? await routing : routing;
    if (!routed) return;
    const { decision: d, session, turn, pinned } = routed;
    ctx.decision = d;
    ctx.isl = d.features.isl;
    ctx.caller?.charge(ctx.isl);
    const remote = d.path === "remote" && d.prefillWorker !== null && d.prefillWorker !== d.decodeWorker;
    this.demand?.queue(ctx, remote ? d.prefillWorker! : d.decodeWorker, remote ? d.features.effP : d.features.effD);
    // every field written: the log may hand back the object of a finished request (DecisionLog.newRecord)
    const record = this.decisions.newRecord(Date.now());
    record.id = ctx.id;
    record.ts = ""; // written when the record is read (DecisionLog.recent)
    record.endpoint = ENDPOINT_PATHS[endpoint];
    record.table = this.tableView();
    record.turn = turn;
    record.path = d.path;
    record.route = remote ? "remote" : "local";
    record.reason = d.reason;
    record.decode_worker = d.decodeWorker;
    record.prefill_worker = d.prefillWorker;
    record.cluster = d.cluster;
    // copied rather than shared, so that the decision's objects die young with the request
    Object.assign(record.features, d.features);
    Object.assign(record.matched_blocks, d.matchedBlocks);
    record.predicted_cached_tokens = 0;
    record.reported_cached_tokens = null;
    record.status = null;
    record.latency_ms = null;
    ctx.record = record;
    this.metrics.decisions.at(d.path, d.reason).inc();
    // A place on the decode worker before the prefill step, so that a full worker's request spills to another
    // before any KV handoff is made for it (worker-admission.ts).
    const decodePlace = await this.calls.enterDecode(ctx, d.decodeWorker, pinned);
    if (!decodePlace || ctx.clientGone) return;
    record.decode_worker = decodePlace.worker;
    ctx.res.setHeader("x-dolphin-decode-worker", decodePlace.worker);

    let kvParams: unknown;
    if (remote) {
      const prefillWorker = d.prefillWorker!;
      ctx.res.setHeader("x-dolphin-prefill-worker", prefillWorker);
      // the core's cached tokens on the worker, by vLLM's rule (at most isl − 1, in whole blocks)
      record.predicted_cached_tokens = ctx.predictedTokens = d.features.isl - d.features.effP;
      try {
        const p = await this.calls.prefillWithRetry(ctx, endpoint, prefillWorker, body, d.features.effP);
        if (ctx.clientGone) {
          if (p) void this.abandoned?.release(ctx, decodePlace.worker, p.kvParams, "client_gone");
          return;
        }
        if (p === null) {
          // every prefill worker was full: local prefill on the decode worker (counted in dolphin_worker_full_total)
          this.metrics.fallbacks.inc();
          record.route = "fallback";
        } else {
          kvParams = p.kvParams;
          ctx.reportedTokens = p.cachedTokens;
          if (p.worker !== prefillWorker) {
            // retried or spilled elsewhere: that worker's cache, not the one the router predicted for
            ctx.res.setHeader("x-dolphin-prefill-worker", p.worker);
            record.prefill_worker = p.worker;
          }
        }
      } catch (e) {
        if (ctx.clientGone) return;
        const err = classify(e, `prefill ${prefillWorker}`);
        // A request the prefill worker rejects as invalid is the client's error: passed on as it is, never a
        // failure, a fallback or a retry (the decode worker would reject it too).
        if (err.clientMistake && err.body)
          throw new WorkerRejection(err.status, err.body, err.contentType ?? "application/json");
        // the proxy out of descriptors: a local prefill would need one as well
        if (err.kind === "local") throw outOfDescriptors(this.metrics, err);
        this.metrics.prefillFailures.inc({ kind: err.kind });
        if (!this.config.fallback_local) {
          throw new HttpError(
            502,
            `prefill worker ${prefillWorker} failed: ${err.message}`,
            "upstream_error",
            "prefill_failed",
          );
        }
        this.metrics.fallbacks.inc();
        this.log.log("warn", "prefill failed, falling back to local prefill", {
          id: ctx.id,
          worker: prefillWorker,
          error: err.message,
        });
        record.route = "fallback";
        ctx.reportedTokens = null;
      }
    }
    if (record.route !== "remote") {
      record.predicted_cached_tokens = ctx.predictedTokens = d.features.isl - d.features.effD;
    }
    ctx.res.setHeader("x-dolphin-route", record.route);
    // A stream's usage (output tokens for the drift guard, cached tokens for the cache check) comes only with
    // stream_options.include_usage: asked for here when the client did not (stream-usage.ts), its event then taken
    // out of the client's stream.
    const localBody = this.config.ask_stream_usage ? askForUsage(raw, body) : null;
    ctx.usageAsked = localBody !== null;
    let payload: Buffer | string = localBody ?? raw;
    if (kvParams !== undefined)
      payload = JSON.stringify(
        ctx.usageAsked
          ? { ...body, stream_options: askedOptions(body), kv_transfer_params: kvParams }
          : { ...body, kv_transfer_params: kvParams },
      );
    try {
      await this.calls.decode(
        ctx,
        endpoint,
        decodePlace,
        payload,
        body["stream"] === true,
        record.route === "remote" ? 0 : d.features.effD,
        localBody ?? raw,
      );
    } finally {
      // retried on another decode worker, which prefilled locally: the handoff was never pulled
      if (kvParams !== undefined && record.route === "fallback")
        void this.abandoned?.release(ctx, record.decode_worker, kvParams as Record<string, unknown>, "decode_retried");
    }
    if (ctx.completionTokens !== null) session.prevOutputTokens = ctx.completionTokens;
  }

  /** The table's kind and checksum as records show them: one object per table, shared by its records. */
  private tableView(): DecisionRecord["table"] {
    const table = this.router.table;
    if (this.viewOf !== table) {
      this.viewOf = table;
      this.view = { kind: table.kind, checksum: table.checksum };
    }
    return this.view!;
  }

  /** One log line and the metrics of a finished inference request. */
  private finish(ctx: RequestContext, endpoint: Endpoint): void {
    const latencyMs = performance.now() - ctx.startMs;
    const status = ctx.statusOverride ?? (ctx.clientGone ? 499 : ctx.res.statusCode);
    const route = ctx.route;
    const path = ENDPOINT_PATHS[endpoint];
    this.metrics.requests.at(path, route, status).inc();
    this.metrics.requestDuration.observe(DURATION_LABELS[endpoint], latencyMs / 1000);
    const r = ctx.record;
    if (r) {
      r.status = status;
      r.latency_ms = Math.round(latencyMs * 10) / 10;
      r.reported_cached_tokens = ctx.reportedTokens;
      if (ctx.error) r.error = ctx.error;
      const m = this.metrics;
      m.promptTokens.at(r.route).inc(ctx.isl);
      m.cachePredictedTokens.at(r.route).inc(ctx.predictedTokens);
      if (this.evidence && ctx.decision) {
        const f = ctx.decision.features;
        if (r.route === "remote") {
          this.evidence.note(r.prefill_worker, ctx.promptTokens, ctx.predictedTokens, ctx.reportedTokens);
          // the decode worker holds at least what it reported: it pulled every block of the prompt it lacked
          this.evidence.note(r.decode_worker, ctx.promptTokens, f.isl - f.effD, ctx.decodeReportedTokens);
        } else this.evidence.note(r.decode_worker, ctx.promptTokens, ctx.predictedTokens, ctx.reportedTokens);
      }
      if (ctx.reportedTokens !== null) {
        m.cacheComparedRequests.at(r.route).inc();
        m.cacheComparedPredictedTokens.at(r.route).inc(ctx.predictedTokens);
        m.cacheReportedTokens.at(r.route).inc(ctx.reportedTokens);
      }
    }
    // a shed answer is one of thousands a second in an overload: a line each would cost more than the answer
    // (Admission's ShedLog writes one line per period instead)
    const level = ctx.shed ? "debug" : status >= 500 ? "warn" : "info";
    if (!this.log.enabled(level)) return; // the line's fields are not even gathered
    const d = ctx.decision;
    this.log.log(level, "request", {
      id: ctx.id,
      ...(ctx.caller ? { key: ctx.caller.name } : {}),
      path,
      status,
      latency_ms: Math.round(latencyMs * 10) / 10,
      route,
      workers: d ? { decode: d.decodeWorker, prefill: route === "remote" ? d.prefillWorker : null } : null,
      cluster: d?.cluster ?? null,
      reason: d?.reason ?? null,
      features: d?.features ?? null,
      predicted_cached_tokens: r ? ctx.predictedTokens : null,
      reported_cached_tokens: ctx.reportedTokens,
      ...(ctx.error ? { error: ctx.error } : {}),
    });
  }
}
