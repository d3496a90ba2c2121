// The worker calls of one inference request (vLLM's NixlConnector protocol, shared/docs/reference-systems.md): on the
// remote path, step 1 asks the prefill worker to prefill only and return the KV handoff parameters; step 3 (and the
// whole local path) sends the request to the decode worker, whose answer, streamed or not, goes to the client as it
// arrives. Worker failures are classified here (502, 504, an SSE error event mid-stream) and counted toward the
// worker's ejection (registry.ts). A call that fails before any byte reached the client (refused, reset, 5xx, or its
// worker ejected while it waited) is retried once on another worker of the role, within a retry budget (Envoy's:
// retries in flight ≤ max(min_concurrent, budget_share × requests in flight)). A decode retry elsewhere cannot use
// the KV handoff made for the first decode worker, so it prefills locally (route "fallback").

import type { ClientRequest, IncomingMessage } from "node:http";
import { isPlainObject } from "../../values.js";
import type { ServeConfig } from "../config.js";
import { drained, HttpError } from "../http-toolkit.js";
import {
  classify,
  parseJson,
  readUpstream,
  UpstreamError,
  upstreamRequest,
  usageOf,
  usageOfAnswer,
  UsageSniffer,
  type Agents,
} from "./upstream.js";
import type { ProxyMetrics } from "./metrics.js";
import { ENDPOINT_PATHS, type Endpoint } from "./openai.js";
import type { WorkerRegistry, WorkerState } from "./registry.js";
import type { RequestContext } from "./request-context.js";

const MAX_ERROR_SNIPPET = 300;
/** vLLM's NixlConnector prefill request marks (reference-systems.md, step 1). */
const PREFILL_KV_PARAMS = {
  do_remote_decode: true,
  do_remote_prefill: false,
  remote_engine_id: null,
  remote_block_ids: null,
  remote_host: null,
  remote_port: null,
};

type Usage = NonNullable<ReturnType<typeof usageOf>>;

export class WorkerCalls {
  /** Cuts of the calls waiting for a worker's response headers, by worker: run when the worker is ejected (then retried). */
  private readonly waiting = new Map<string, Set<(e: Error) => void>>();
  private retriesInFlight = 0;

  constructor(
    private readonly config: ServeConfig,
    private readonly registry: WorkerRegistry,
    private readonly agents: Agents,
    private readonly metrics: ProxyMetrics,
    private readonly requestsInFlight: () => number,
  ) {}

  /** The worker left rotation: calls still waiting for its answer fail now (and are retried) rather than at request_ms. */
  workerEjected(id: string): void {
    const cuts = this.waiting.get(id);
    if (!cuts) return;
    const e = new UpstreamError("reset", `${id} left rotation while the request waited`);
    for (const cut of [...cuts]) cut(e);
  }

  /**
   * One call to a worker until its response headers; a cut by workerEjected is a retryable reset. The client leaving
   * cuts it at any time (ClientAbort), as an AbortSignal would: the request is destroyed with an AbortError.
   */
  private async call(
    ctx: RequestContext,
    w: WorkerState,
    path: string,
    body: Buffer | string,
  ): Promise<IncomingMessage> {
    const t = this.config.timeouts;
    let req: ClientRequest | null = null;
    const cut = (e: Error): void => void req?.destroy(e);
    const set = this.waiting.get(w.spec.id) ?? new Set<(e: Error) => void>();
    this.waiting.set(w.spec.id, set);
    set.add(cut);
    try {
      return await upstreamRequest(this.agents, `${w.spec.url}${path}`, {
        method: "POST",
        headers: ctx.upstreamHeaders(),
        body,
        connectMs: t.connect_ms,
        responseMs: t.request_ms,
        onRequest: (r) => {
          req = r;
          ctx.abort.onAbort(() => void r.destroy(abortError()));
        },
      });
    } finally {
      set.delete(cut);
      if (set.size === 0) this.waiting.delete(w.spec.id);
    }
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
  ): Promise<{ kvParams: Record<string, unknown>; cachedTokens: number | null; worker: string }> {
    try {
      return { ...(await this.prefill(ctx, endpoint, id, body, effP)), worker: id };
    } catch (e) {
      const err = e as UpstreamError;
      if (ctx.clientGone || !err.retryable) throw e;
      const other = this.registry.otherPrefillWorkers(id)[0];
      if (!other) {
        this.metrics.retriesSkipped.inc({ reason: "no_other_worker", stage: "prefill" });
        throw e;
      }
      if (!this.takeRetry("prefill")) throw e;
      try {
        return { ...(await this.prefill(ctx, endpoint, other.spec.id, body, effP)), worker: other.spec.id };
      } finally {
        this.retriesInFlight--;
      }
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
    const prefillBody: Record<string, unknown> = {
      ...body,
      kv_transfer_params: { ...PREFILL_KV_PARAMS },
      stream: false,
      max_tokens: 1,
    };
    if (prefillBody["max_completion_tokens"] !== undefined) prefillBody["max_completion_tokens"] = 1;
    delete prefillBody["min_tokens"];
    delete prefillBody["stream_options"];
    const release = this.registry.hold(ctx, id, "activePrefillTokens", effP);
    this.registry.prefillsInFlight++;
    const t = this.config.timeouts;
    try {
      if (!w?.healthy) throw new UpstreamError("connect", `prefill worker ${id} left rotation`);
      const res = await this.call(ctx, w, ENDPOINT_PATHS[endpoint], JSON.stringify(prefillBody));
      const buf = await readUpstream(res, t.request_ms);
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
    id: string,
    payload: Buffer | string,
    stream: boolean,
    effD: number,
    localPayload: Buffer | string,
  ): Promise<void> {
    try {
      await this.decodeOnce(ctx, endpoint, id, payload, stream, effD);
      return;
    } catch (e) {
      if (!(e instanceof DecodeFailure) || !e.retryable || ctx.clientGone || ctx.res.headersSent) throw e;
      const other = this.registry.otherDecodeWorkers(id)[0];
      if (!other) {
        this.metrics.retriesSkipped.inc({ reason: "no_other_worker", stage: "decode" });
        throw e;
      }
      if (!this.takeRetry("decode")) throw e;
      const to = other.spec.id;
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
    let res: IncomingMessage;
    try {
      if (!w?.healthy) throw new UpstreamError("connect", `decode worker ${id} left rotation`);
      res = await this.call(ctx, w, ENDPOINT_PATHS[endpoint], payload);
    } catch (e) {
      if (ctx.clientGone) return;
      letGo();
      throw this.decodeFailed(w, id, e, "failed");
    }
    const status = res.statusCode ?? 502;
    const contentType = String(res.headers["content-type"] ?? "application/json");
    if (status < 500) this.registry.upstreamSucceeded(w);
    if (stream && status < 400 && contentType.includes("text/event-stream")) {
      await this.pipeStream(ctx, w!, res, releasePrefill);
      return;
    }
    let buf: Buffer;
    try {
      buf = await readUpstream(res, t.request_ms);
    } catch (e) {
      if (ctx.clientGone) return;
      const failure = this.decodeFailed(w, id, e, "failed mid-response");
      failure.retryable = false; // the worker took the request: it may be running still
      throw failure;
    }
    releasePrefill();
    if (status >= 500) {
      letGo();
      this.registry.upstreamFailed(w, "decode", new UpstreamError("status", `answered ${status}`, status));
      throw new DecodeFailure(502, `decode worker ${id} answered ${status}: ${snippet(buf)}`, "decode_failed", true);
    }
    const usage = usageOfAnswer(buf);
    if (usage) noteUsage(ctx, usage);
    ctx.res.writeHead(status, { "content-type": contentType, "content-length": buf.length });
    ctx.res.end(buf);
  }

  /** The client's answer to a decode call that failed: 504 on a timeout, else 502. */
  private decodeFailed(w: WorkerState | undefined, id: string, e: unknown, what: string): DecodeFailure {
    const err = classify(e, `decode ${id}`);
    this.registry.upstreamFailed(w, "decode", err);
    if (err.kind === "timeout")
      return new DecodeFailure(504, `decode worker ${id}: ${err.message}`, "upstream_timeout", false);
    return new DecodeFailure(502, `decode worker ${id} ${what}: ${err.message}`, "decode_failed", err.retryable);
  }

  /**
   * Passes the decode worker's SSE bytes through as they arrive; a worker dying mid-stream ends it with an error event.
   * 'data' listeners rather than an async iterator (a promise per chunk), one idle timer refreshed per chunk, and the
   * headers flushed alone only when no body byte is in yet (else they leave with the first chunk: one write less).
   */
  private pipeStream(
    ctx: RequestContext,
    w: WorkerState,
    upstream: IncomingMessage,
    releasePrefill: () => void,
  ): Promise<void> {
    const { res } = ctx;
    res.writeHead(upstream.statusCode ?? 200, {
      "content-type": String(upstream.headers["content-type"]),
      "cache-control": "no-cache",
    });
    if (upstream.readableLength === 0) res.flushHeaders();
    const sniffer = new UsageSniffer();
    const idleMs = this.config.timeouts.request_ms;
    // the last two bytes passed on: an error event must start on a line of its own
    let last = 0x0a;
    let beforeLast = 0x0a;
    return new Promise<void>((resolve) => {
      let over = false;
      const timer = setTimeout(
        () => upstream.destroy(new UpstreamError("timeout", `stream stalled for ${idleMs} ms`)),
        idleMs,
      );
      const finish = (): boolean => {
        if (over) return false;
        over = true;
        clearTimeout(timer);
        if (sniffer.usage) noteUsage(ctx, sniffer.usage);
        resolve();
        return true;
      };
      const failed = (e: unknown): void => {
        if (!finish() || ctx.clientGone) return;
        const err = classify(e, `decode ${w.spec.id}`);
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
        const newline = beforeLast === 0x0a && last === 0x0a ? "" : "\n\n";
        res.end(`${newline}data: ${event}\n\ndata: [DONE]\n\n`, () => ctx.req.socket.end());
      };
      upstream.on("data", (chunk: Buffer) => {
        if (over) return;
        timer.refresh();
        releasePrefill();
        if (ctx.clientGone) {
          finish();
          upstream.destroy();
          return;
        }
        sniffer.push(chunk);
        if (chunk.length >= 2) beforeLast = chunk[chunk.length - 2]!;
        else if (chunk.length === 1) beforeLast = last;
        if (chunk.length >= 1) last = chunk[chunk.length - 1]!;
        if (!res.write(chunk)) {
          upstream.pause();
          void drained(res).then(() => upstream.resume());
        }
      });
      upstream.once("end", () => {
        if (finish()) res.end();
      });
      upstream.once("error", failed);
      upstream.once("close", () => {
        if (!upstream.readableEnded)
          failed(Object.assign(new Error("Premature close"), { code: "ERR_STREAM_PREMATURE_CLOSE" }));
      });
    });
  }
}

/** What a cut by the client leaving looks like (classify() reads it as "aborted"), as an AbortSignal's would. */
function abortError(): Error {
  return Object.assign(new Error("The operation was aborted"), { name: "AbortError", code: "ABORT_ERR" });
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

/** What the decode worker reported: its cached tokens (unless the prefill worker's count already stands), its output. */
function noteUsage(ctx: RequestContext, usage: Usage): void {
  if (ctx.record?.route !== "remote" && usage.cached !== null) ctx.reportedTokens = usage.cached;
  if (usage.completion !== null) ctx.completionTokens = usage.completion;
}

function snippet(buf: Buffer): string {
  const s = buf.toString("utf8").replace(/\s+/g, " ").trim();
  return s.length > MAX_ERROR_SNIPPET ? `${s.slice(0, MAX_ERROR_SNIPPET)}…` : s || "(empty body)";
}
