// The worker calls of one inference request (vLLM's NixlConnector protocol, shared/docs/reference-systems.md): on the
// remote path, step 1 asks the prefill worker to prefill only and return the KV handoff parameters; step 3 (and the
// whole local path) sends the request to the decode worker, whose answer, streamed or not, goes to the client as it
// arrives. Worker failures are classified here (502, 504, an SSE error event mid-stream) and counted toward the
// worker's ejection (registry.ts). A call that fails before any byte reached the client (refused, reset, 5xx, or its
// worker ejected while it waited) is retried once on another worker of the role, within a retry budget (Envoy's:
// retries in flight ≤ max(min_concurrent, budget_share × requests in flight)). A decode retry elsewhere cannot use
// the KV handoff made for the first decode worker, so it prefills locally (route "fallback"). Once the first byte of
// the answer has gone to the client nothing is retried: a stream cut mid-way ends with an SSE error event. Each call
// holds a place on its worker (worker-admission.ts). A streamed answer is relayed by stream-relay.ts.

import type { ClientRequest, IncomingMessage } from "node:http";
import { isPlainObject } from "../../contract/values.js";
import type { ServeConfig } from "../config.js";
import { withRank } from "../config-workers.js";
import { HttpError } from "../http-toolkit.js";
import {
  classify,
  parseJson,
  readUpstream,
  UpstreamError,
  upstreamRequest,
  usageOf,
  usageOfAnswer,
  type Agents,
} from "./upstream.js";
import { rewriteCachedTokens } from "./cached-tokens.js";
import { clientCachedTokens, noteUsage, StreamRelay } from "./stream-relay.js";
import type { ProxyMetrics } from "./metrics.js";
import { outOfDescriptors } from "./admission.js";
import { ENDPOINT_PATHS, type Endpoint } from "./openai.js";
import type { EjectionCause, WorkerRegistry, WorkerState } from "./registry.js";
import type { RequestContext } from "./request-context.js";
import type { WorkerAdmission, WorkerPlace } from "./worker-admission.js";

const MAX_ERROR_SNIPPET = 300;
/** vLLM's NixlConnector prefill request marks (reference-systems.md, step 1). */
export const PREFILL_KV_PARAMS = {
  do_remote_decode: true,
  do_remote_prefill: false,
  remote_engine_id: null,
  remote_block_ids: null,
  remote_host: null,
  remote_port: null,
};

/**
 * Step 1's body: the client's, marked for a remote decode (PREFILL_KV_PARAMS), not streamed, one output token
 * (max_completion_tokens too when given), without min_tokens and stream_options. The decode-side sidecar
 * (sidecar.ts) sends the same.
 */
export function prefillBody(body: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {
    ...body,
    kv_transfer_params: { ...PREFILL_KV_PARAMS },
    stream: false,
    max_tokens: 1,
  };
  if (out["max_completion_tokens"] !== undefined) out["max_completion_tokens"] = 1;
  delete out["min_tokens"];
  delete out["stream_options"];
  return out;
}

/** A call in progress on a worker, which its ejection may cut. */
interface Cut {
  /** The call's current request (a retry on a fresh connection makes a second); null before the first. */
  request: ClientRequest | null;
  /** The answer has begun reaching the client (a stream): only a frozen worker's ejection cuts it. */
  streaming: boolean;
  /** Why the call was cut, for the client's error. */
  reason: string | null;
  /** A prefill whose answer has begun: the client leaving no longer cuts it (its handoff is released instead). */
  answered: boolean;
}

export class WorkerCalls {
  /** Calls in progress, by worker: cut when the worker is ejected (see workerEjected). */
  private readonly inProgress = new Map<string, Set<Cut>>();
  private retriesInFlight = 0;

  constructor(
    private readonly config: ServeConfig,
    private readonly registry: WorkerRegistry,
    private readonly agents: Agents,
    private readonly metrics: ProxyMetrics,
    private readonly requestsInFlight: () => number,
    private readonly places: WorkerAdmission,
  ) {}

  /**
   * The worker left rotation: calls of which nothing has reached the client fail now (and are retried) rather than at
   * request_ms. Streams under way are cut only when its health checks failed (a frozen worker sends nothing more,
   * and its stream would wait request_ms); on other causes they may still finish.
   */
  workerEjected(id: string, cause: EjectionCause): void {
    for (const c of this.inProgress.get(id) ?? []) {
      if (c.streaming && cause !== "health_check") continue;
      c.reason = `${id} left rotation (${cause.replace("_", " ")})`;
      c.request?.destroy(abortError());
    }
  }

  /**
   * A place on the request's decode worker before anything is sent (the prefill step included), or on the least-busy
   * other decode worker with room when it is full and the routing did not pin it (a spill: the caller re-points the
   * request); else waits for one, or throws 503.
   */
  enterDecode(ctx: RequestContext, id: string, pinned: boolean): Promise<WorkerPlace | null> {
    // a spill keeps the group: the prefill worker was paired with this one
    const others = pinned ? [] : this.registry.otherDecodeWorkers(id, true);
    return this.places.enter(ctx, "decode", id, others);
  }

  /**
   * One call to a worker; resolves with its response once the headers are in. The call stays cuttable until `done`
   * (the answer read or passed on); a cut by workerEjected is a retryable reset.
   */
  private async call(
    ctx: RequestContext,
    w: WorkerState,
    path: string,
    body: Buffer | string,
    keepAnswer = false,
  ): Promise<{ res: IncomingMessage; cut: Cut; done: () => void }> {
    const t = this.config.timeouts;
    const cut: Cut = { request: null, streaming: false, reason: null, answered: false };
    const set = this.inProgress.get(w.spec.id) ?? new Set<Cut>();
    this.inProgress.set(w.spec.id, set);
    set.add(cut);
    const done = (): void => {
      set.delete(cut);
      if (set.size === 0 && this.inProgress.get(w.spec.id) === set) this.inProgress.delete(w.spec.id);
    };
    try {
      const res = await upstreamRequest(this.agents, `${w.spec.url}${path}`, {
        method: "POST",
        headers: withRank(w.spec, ctx.upstreamHeaders()), // each leg pinned to its worker's rank
        body,
        connectMs: t.connect_ms,
        responseMs: t.request_ms,
        // cut by the client leaving (ClientAbort) or by workerEjected, as an AbortSignal would cut it (destroyed with
        // an AbortError), without an AbortController per request and an AbortSignal.any per call on the hot path
        onRequest: (r) => {
          cut.request = r;
          if (cut.reason !== null) r.destroy(abortError());
          // keepAnswer (a prefill): once its headers are in, the engine has finished and pinned the prompt's blocks
          // for the handoff; the answer is read to its end, so that the handoff can be released (abandoned.ts)
          if (keepAnswer) r.once("response", () => (cut.answered = true));
          ctx.abort.onAbort(() => void (cut.answered || r.destroy(abortError())));
        },
      });
      return { res, cut, done };
    } catch (e) {
      done();
      throw cutError(cut, ctx, e, "while the request waited");
    }
  }

  /**
   * A place for a retry on one of `others` (a worker with room at once: a retry never waits behind the queue) and a
   * retry from the budget; null, counted in dolphin_retries_skipped_total, when there is no other worker, none has
   * room or the budget is spent (the caller then answers the failure).
   */
  private retryPlace(ctx: RequestContext, stage: "prefill" | "decode", others: WorkerState[]): WorkerPlace | null {
    if (others.length === 0) {
      this.metrics.retriesSkipped.inc({ reason: "no_other_worker", stage });
      return null;
    }
    const other = this.places.tryEnter(ctx, others);
    if (!other) {
      this.metrics.retriesSkipped.inc({ reason: "worker_full", stage });
      return null;
    }
    if (!this.takeRetry(stage)) {
      other.release();
      return null;
    }
    return other;
  }

  /** Takes a retry from the budget; false when it is spent (the caller then answers the failure). */
  private takeRetry(stage: string): boolean {
    const { budget_share, min_concurrent } = this.config.retries;
    if (this.retriesInFlight >= Math.max(min_concurrent, Math.floor(budget_share * this.requestsInFlight()))) {
      this.metrics.retriesSkipped.inc({ reason: "budget", stage });
      return false;
    }
    this.retriesInFlight++;
    this.metrics.retries.inc({ stage });
    return true;
  }

  /**
   * Step 1, retried once on the least-loaded other prefill worker when the first fails retryably. Resolves with the
   * worker that prefilled; throws the last failure.
   */
  async prefillWithRetry(
    ctx: RequestContext,
    endpoint: Endpoint,
    id: string,
    body: Record<string, unknown>,
    effP: number,
  ): Promise<{ kvParams: Record<string, unknown>; cachedTokens: number | null; worker: string } | null> {
    // a full prefill worker: another with room, else local prefill when fallback_local allows (null), else wait
    const place = await this.places.enter(
      ctx,
      "prefill",
      id,
      this.registry.otherPrefillWorkers(id),
      this.config.fallback_local,
    );
    if (!place) return null;
    const first = place.worker;
    try {
      return { ...(await this.prefill(ctx, endpoint, first, body, effP)), worker: first };
    } catch (e) {
      place.release();
      const err = e as UpstreamError;
      if (ctx.clientGone || !err.retryable) throw e;
      const other = this.retryPlace(ctx, "prefill", this.registry.otherPrefillWorkers(first));
      if (!other) throw e;
      try {
        return { ...(await this.prefill(ctx, endpoint, other.worker, body, effP)), worker: other.worker };
      } finally {
        this.retriesInFlight--;
        other.release();
      }
    } finally {
      place.release();
    }
  }

  /** Step 1 of the NixlConnector protocol: prefill only, and return the KV handoff parameters. */
  async prefill(
    ctx: RequestContext,
    endpoint: Endpoint,
    id: string,
    body: Record<string, unknown>,
    effP: number,
  ): Promise<{ kvParams: Record<string, unknown>; cachedTokens: number | null }> {
    const w = this.registry.get(id);
    const release = this.registry.hold(ctx, id, "activePrefillTokens", effP);
    this.registry.prefillsInFlight++;
    const t = this.config.timeouts;
    try {
      if (!w?.healthy) throw new UpstreamError("connect", `prefill worker ${id} left rotation`);
      const { res, cut, done } = await this.call(
        ctx,
        w,
        ENDPOINT_PATHS[endpoint],
        JSON.stringify(prefillBody(body)),
        true,
      );
      let buf: Buffer;
      try {
        buf = await readUpstream(res, t.request_ms);
      } catch (e) {
        throw cutError(cut, ctx, e, "while its answer was read");
      } finally {
        done();
      }
      const status = res.statusCode ?? 0;
      if (status >= 400) {
        throw new UpstreamError(
          "status",
          `answered ${status}: ${snippet(buf)}`,
          status,
          buf,
          String(res.headers["content-type"] ?? "application/json"),
        );
      }
      const json = parseJson(buf);
      const kv = isPlainObject(json) ? json["kv_transfer_params"] : undefined;
      if (!isPlainObject(kv)) throw new UpstreamError("protocol", "the prefill response carries no kv_transfer_params");
      this.registry.upstreamSucceeded(w);
      return { kvParams: kv, cachedTokens: usageOf(json)?.cached ?? null };
    } catch (e) {
      const err = classify(e, `prefill ${id}`);
      this.registry.upstreamFailed(w, "prefill", err);
      throw err;
    } finally {
      this.registry.prefillsInFlight--;
      release();
    }
  }

  /**
   * Step 3 (or the local path): the decode worker answers the client; a stream is passed on as it arrives. A failure
   * before the answer began is retried once on the least-loaded other decode worker with `localPayload` (the
   * client's body: the KV handoff belongs to the first worker), within the retry budget.
   */
  async decode(
    ctx: RequestContext,
    endpoint: Endpoint,
    place: WorkerPlace,
    payload: Buffer | string,
    stream: boolean,
    effD: number,
    localPayload: Buffer | string,
  ): Promise<void> {
    const id = place.worker;
    try {
      await this.decodeOnce(ctx, endpoint, id, payload, stream, effD);
      return;
    } catch (e) {
      if (!(e instanceof DecodeFailure) || !e.retryable || ctx.clientGone || ctx.res.headersSent) throw e;
      const other = this.retryPlace(ctx, "decode", this.registry.otherDecodeWorkers(id));
      if (!other) throw e;
      place.release();
      const to = other.worker;
      ctx.res.setHeader("x-dolphin-decode-worker", to);
      if (ctx.record) {
        ctx.record.decode_worker = to;
        if (ctx.record.route === "remote") {
          ctx.record.route = "fallback";
          ctx.reportedTokens = null;
          ctx.res.setHeader("x-dolphin-route", "fallback");
        }
      }
      try {
        await this.decodeOnce(ctx, endpoint, to, localPayload, stream, ctx.isl);
      } finally {
        this.retriesInFlight--;
      }
    }
  }

  private async decodeOnce(
    ctx: RequestContext,
    endpoint: Endpoint,
    id: string,
    payload: Buffer | string,
    stream: boolean,
    effD: number,
  ): Promise<void> {
    const w = this.registry.get(id);
    const t = this.config.timeouts;
    const releasePrefill = this.registry.hold(ctx, id, "activePrefillTokens", effD);
    const releaseDecode = this.registry.hold(ctx, id, "activeDecodeTokens", ctx.isl);
    const letGo = (): void => {
      releasePrefill();
      releaseDecode();
    };
    let call: Awaited<ReturnType<WorkerCalls["call"]>>;
    try {
      if (!w?.healthy) throw new UpstreamError("connect", `decode worker ${id} left rotation`);
      call = await this.call(ctx, w, ENDPOINT_PATHS[endpoint], payload);
    } catch (e) {
      if (ctx.clientGone) return;
      letGo();
      throw this.decodeFailed(w, id, e, "failed");
    }
    const { res, cut, done } = call;
    const status = res.statusCode ?? 502;
    const contentType = String(res.headers["content-type"] ?? "application/json");
    if (status < 500) this.registry.upstreamSucceeded(w);
    if (stream && status < 400 && contentType.includes("text/event-stream")) {
      cut.streaming = true;
      try {
        await this.pipeStream(ctx, w!, res, cut, releasePrefill);
      } finally {
        done();
      }
      return;
    }
    let buf: Buffer;
    try {
      buf = await readUpstream(res, t.request_ms);
    } catch (e) {
      if (ctx.clientGone) return;
      letGo();
      // Nothing has reached the client yet: a lost connection (the worker died, or was ejected and cut) is retried
      // elsewhere like a failure before the headers. A stalled body (timeout) is not: the worker may still be at work.
      throw this.decodeFailed(w, id, cutError(cut, ctx, e, "while its answer was read"), "failed mid-response");
    } finally {
      done();
    }
    if (status >= 500) {
      letGo();
      this.registry.upstreamFailed(w, "decode", new UpstreamError("status", `answered ${status}`, status));
      throw new DecodeFailure(502, `decode worker ${id} answered ${status}: ${snippet(buf)}`, "decode_failed", true);
    }
    const cached = status < 400 ? clientCachedTokens(ctx) : null;
    const out = cached === null ? buf : rewriteCachedTokens(buf, cached);
    ctx.res.writeHead(status, { "content-type": contentType, "content-length": out.length });
    ctx.res.end(out);
    // Bookkeeping after the answer has left (end() writes it at once): the load it held and its usage are read when
    // the response closes, never in the same tick.
    releasePrefill();
    const usage = usageOfAnswer(buf);
    if (usage) noteUsage(ctx, usage);
  }

  /** The client's answer to a failed decode call: 504 on a timeout, 503 if the proxy is out of descriptors, else 502. */
  private decodeFailed(w: WorkerState | undefined, id: string, e: unknown, what: string): HttpError {
    const err = classify(e, `decode ${id}`);
    this.registry.upstreamFailed(w, "decode", err);
    if (err.kind === "local") return outOfDescriptors(this.metrics, err);
    if (err.kind === "timeout")
      return new DecodeFailure(504, `decode worker ${id}: ${err.message}`, "upstream_timeout", false);
    return new DecodeFailure(502, `decode worker ${id} ${what}: ${err.message}`, "decode_failed", err.retryable);
  }

  /**
   * Passes the decode worker's SSE bytes through as they arrive; a worker dying mid-stream ends it with an error event.
   * Read by StreamRelay rather than an async iterator, whose promise per chunk and iterator machinery showed in the
   * proxy's profile; a call cut by the client leaving or by workerEjected (its ClientRequest destroyed, see call())
   * reaches it as the response's error, as it reached the iterator.
   */
  private pipeStream(
    ctx: RequestContext,
    w: WorkerState,
    upstream: IncomingMessage,
    cut: Cut,
    releasePrefill: () => void,
  ): Promise<void> {
    const { res } = ctx;
    res.writeHead(upstream.statusCode ?? 200, {
      "content-type": String(upstream.headers["content-type"]),
      "cache-control": "no-cache",
    });
    // the headers leave alone only when no body byte is in yet (else with the first chunk: one write less)
    if (upstream.readableLength === 0) res.flushHeaders();
    return new Promise((resolve) => {
      new StreamRelay(ctx, upstream, this.config.timeouts.request_ms, releasePrefill, (e, atLineStart) => {
        if (e !== null) this.streamFailed(ctx, w, cut, e, atLineStart);
        resolve();
      });
    });
  }

  /** The worker failed mid-stream: counted, and the client's stream ends with an SSE error event and [DONE]. */
  private streamFailed(ctx: RequestContext, w: WorkerState, cut: Cut, e: unknown, atLineStart: boolean): void {
    const err = classify(cutError(cut, ctx, e), `decode ${w.spec.id}`); // the message says "failed mid-stream"
    this.registry.upstreamFailed(w, "decode-stream", err);
    this.metrics.streamErrors.inc({ kind: err.kind });
    ctx.statusOverride = err.kind === "timeout" ? 504 : 502;
    ctx.error = `decode worker ${w.spec.id} failed mid-stream: ${err.message}`;
    const event = new HttpError(
      ctx.statusOverride,
      ctx.error,
      "upstream_error",
      err.kind === "timeout" ? "upstream_timeout" : "decode_failed",
    ).body();
    ctx.res.end(`${atLineStart ? "" : "\n\n"}data: ${event}\n\ndata: [DONE]\n\n`, () => ctx.req.socket.end());
  }
}

/** A call's failure, as a retryable reset when workerEjected cut it (its abort is the proxy's, not the client's). */
function cutError(cut: Cut, ctx: RequestContext, e: unknown, when = ""): unknown {
  if (cut.reason !== null && !ctx.abort.aborted)
    return new UpstreamError("reset", when ? `${cut.reason} ${when}` : cut.reason);
  return e;
}

/** A decode call that failed, and whether another worker may take the request. */
class DecodeFailure extends HttpError {
  constructor(
    status: number,
    message: string,
    code: string,
    public retryable: boolean,
  ) {
    super(status, message, "upstream_error", code);
  }
}

function snippet(buf: Buffer): string {
  const s = buf.toString("utf8").replace(/\s+/g, " ").trim();
  return s.length > MAX_ERROR_SNIPPET ? `${s.slice(0, MAX_ERROR_SNIPPET)}…` : s || "(empty body)";
}

/** What a cut looks like (classify() reads it as "aborted"), as an AbortSignal's would. */
function abortError(): Error {
  return Object.assign(new Error("The operation was aborted"), { name: "AbortError", code: "ABORT_ERR" });
}
