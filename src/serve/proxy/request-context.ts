// One client request while the proxy answers it: its id, its abort signal, the worker load it holds, and what the
// log line and the metrics of its end will say.

import type { IncomingMessage, ServerResponse } from "node:http";
import { randomUUID } from "node:crypto";
import type { Decision } from "../../router/types.js";
import type { DecisionRecord } from "./decisions.js";

/**
 * The client left: its request's worker calls are cut. What an AbortController did, without one per request and an
 * AbortSignal.any per worker call (those and Node's signal listeners were ~5 % of the proxy's CPU per request, bench
 * proxy --cpu-prof): calls register a function to run on abort; the signal exists only for a caller that asks.
 */
export class ClientAbort {
  aborted = false;
  private cuts: Array<() => void> | null = null;
  private controller: AbortController | null = null;

  /** An AbortSignal that follows this abort, made on first use (precise mode's /tokenize call). */
  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.aborted) this.controller.abort();
    }
    return this.controller.signal;
  }

  /** Runs `cut` when the client leaves (at once if it has). */
  onAbort(cut: () => void): void {
    if (this.aborted) cut();
    else (this.cuts ??= []).push(cut);
  }

  abort(): void {
    if (this.aborted) return;
    this.aborted = true;
    this.controller?.abort();
    const cuts = this.cuts;
    this.cuts = null;
    if (cuts) for (const cut of cuts) cut();
  }
}

/** The client key a request came with (client-keys.ts): its name, and where the tokens it spends are charged. */
export interface Caller {
  readonly name: string;
  charge(tokens: number): void;
}

export class RequestContext {
  readonly id: string;
  readonly startMs = performance.now();
  readonly abort = new ClientAbort();
  clientGone = false;
  /** The response is over (sent, or the client left): nothing may be held for it any more. */
  closed = false;
  endpoint = "";
  statusOverride: number | null = null;
  error: string | null = null;
  /** Answered 503 `overloaded` by load shedding: its log line is folded into the periodic "shedding" line. */
  shed = false;
  record: DecisionRecord | null = null;
  decision: Decision | null = null;
  isl = 0;
  predictedTokens = 0;
  reportedTokens: number | null = null;
  /** The remote path's decode worker's reported cached tokens (reportedTokens is the prefill worker's). */
  decodeReportedTokens: number | null = null;
  /** The prompt's token ids as routed (precise mode's /tokenize, or a completions request's ids), else null. */
  promptTokens: ArrayLike<number> | null = null;
  completionTokens: number | null = null;
  /**
   * The proxy asked the decode worker for a stream's usage the client did not ask for (stream-usage.ts): its usage
   * event is taken out of the client's stream.
   */
  usageAsked = false;
  /** The client key that let the request in (auth.keys_file), else null. */
  caller: Caller | null = null;
  /** The Authorization sent to workers: the client's (undefined), the proxy's own (client keys), or none (null). */
  workerAuthorization: string | null | undefined = undefined;
  /** Its prefill has begun (a worker's prefill load is held for it): the demand's queued tokens let it go. */
  prefillStarted: (() => void) | null = null;
  /** Load held on workers for this request, released when the response closes. */
  releases: Array<() => void> = [];
  /**
   * Run once the response has closed, after the releases, in the order added (its log line and metrics, the drift
   * guard's outcome): one 'close' listener per response rather than one each.
   */
  afterClose: Array<() => void> = [];

  constructor(
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
  ) {
    const given = req.headers["x-request-id"];
    this.id = typeof given === "string" && /^[\w.:-]{1,128}$/.test(given) ? given : randomUUID();
  }

  get route(): "local" | "remote" | "fallback" | "none" {
    return this.record?.route ?? "none";
  }

  /** Headers of this request's calls to workers: JSON, its id, and the authorization (the client's, passed on, without client keys). */
  upstreamHeaders(): Record<string, string> {
    const h: Record<string, string> = { "content-type": "application/json", "x-request-id": this.id };
    const auth = this.workerAuthorization === undefined ? this.req.headers["authorization"] : this.workerAuthorization;
    if (typeof auth === "string") h["authorization"] = auth;
    return h;
  }
}
