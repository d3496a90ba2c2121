// One routing decision per inference request: the prompt as the router reads it (token ids from the workers'
// /tokenize in precise mode, else text), the conversation's turn and PPD pin, the load signals, one Router call.

import { CoreError, ErrorCode } from "../../contract/errors.js";
import type { Router } from "../../router/router.js";
import type { Decision, RouteRequest } from "../../router/types.js";
import { isPlainObject } from "../../contract/values.js";
import type { ServeConfig } from "../config.js";
import { HttpError } from "../http-toolkit.js";
import type { Logger } from "./log.js";
import { QpsWindow } from "../../router/qps-window.js";
import {
  classify,
  parseJson,
  readUpstream,
  UpstreamError,
  upstreamRequest,
  WorkerRejection,
  type Agents,
} from "./upstream.js";
import type { ProxyMetrics } from "./metrics.js";
import { ServeDriftGuard } from "./drift.js";
import { chatText, positiveInt, sessionKey, type Endpoint } from "./openai.js";
import type { WorkerRegistry } from "./registry.js";
import type { RequestContext } from "./request-context.js";
import type { Session, Sessions } from "./sessions.js";

/** Extra chat-request keys that change the prompt vLLM's /tokenize renders. */
const TOKENIZE_CHAT_KEYS = [
  "add_generation_prompt",
  "continue_final_message",
  "add_special_tokens",
  "chat_template",
  "chat_template_kwargs",
  "tools",
];

export type RoutingPrompt = { tokens: number[] } | { text: string };

export interface Routed {
  decision: Decision;
  session: Session;
  turn: number;
  /** The decode worker was pinned (a PPD conversation's later turn): it may not be swapped for another. */
  pinned: boolean;
}

export class Routing {
  private readonly qps = new QpsWindow();
  private tokenizeTurn = 0;
  /** Learned tables: each cluster checked against its fallback rule in production (null when drift.enabled is off). */
  private readonly drift: ServeDriftGuard | null;

  constructor(
    private readonly config: ServeConfig,
    private readonly router: Router,
    private readonly registry: WorkerRegistry,
    private readonly sessions: Sessions,
    private readonly agents: Agents,
    private readonly metrics: ProxyMetrics,
    private readonly log: Logger,
    private readonly maxPromptTokens: number,
  ) {
    this.drift = config.drift.enabled ? new ServeDriftGuard(config.drift, router, metrics, log) : null;
  }

  /**
   * The decision for a validated request; null when the client left first. At once (no promise) unless the prompt
   * goes to a worker's /tokenize first (precise mode): the approximate path's awaits were CPU on every request.
   */
  route(
    ctx: RequestContext,
    endpoint: Endpoint,
    body: Record<string, unknown>,
  ): Routed | null | Promise<Routed | null> {
    const prompt = this.givenPrompt(endpoint, body);
    if (this.config.mode === "precise" && "text" in prompt) return this.routeTokenized(ctx, endpoint, body, prompt);
    if (ctx.clientGone) return null;
    return this.decide(ctx, endpoint, body, prompt);
  }

  /** Precise mode: the prompt as the workers' tokenizer reads it (its text when /tokenize fails). */
  private async routeTokenized(
    ctx: RequestContext,
    endpoint: Endpoint,
    body: Record<string, unknown>,
    text: { text: string },
  ): Promise<Routed | null> {
    const tokens = await this.tokenize(ctx, endpoint, body);
    if (ctx.clientGone) return null;
    return this.decide(ctx, endpoint, body, tokens ? { tokens } : text);
  }

  /** The prompt as the request gives it: the token ids a completions request gave, else its text. */
  private givenPrompt(endpoint: Endpoint, body: Record<string, unknown>): RoutingPrompt {
    const prompt = body["prompt"];
    if (endpoint === "completions") {
      const first =
        Array.isArray(prompt) && (typeof prompt[0] === "string" || Array.isArray(prompt[0])) ? prompt[0] : prompt;
      if (Array.isArray(first)) return { tokens: first.slice(0, this.maxPromptTokens) as number[] };
    }
    const text =
      endpoint === "chat"
        ? chatText(body["messages"] as unknown[])
        : String(Array.isArray(prompt) ? prompt[0] : prompt);
    return { text };
  }

  /** Precise mode: the workers' own tokenizer (vLLM's POST /tokenize) on the least busy one. Null when it fails. */
  private async tokenize(
    ctx: RequestContext,
    endpoint: Endpoint,
    body: Record<string, unknown>,
  ): Promise<number[] | null> {
    const w = this.registry.tokenizer(this.tokenizeTurn++);
    if (w === null) return null;
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
        method: "POST",
        headers: ctx.upstreamHeaders(),
        body: JSON.stringify(payload),
        connectMs: t.connect_ms,
        responseMs: t.tokenize_ms,
        signal: ctx.abort.signal,
      });
      const buf = await readUpstream(res, t.tokenize_ms);
      const status = res.statusCode ?? 0;
      // The worker's tokenizer rejects the request (e.g. a chat template it cannot render): the client's mistake.
      if (status >= 400 && status < 500)
        throw new WorkerRejection(status, buf, String(res.headers["content-type"] ?? "application/json"));
      if (status >= 400) throw new UpstreamError("status", `/tokenize answered ${status}`, status);
      const json = parseJson(buf);
      const tokens = isPlainObject(json) ? json["tokens"] : undefined;
      if (!Array.isArray(tokens) || !tokens.every((x) => Number.isInteger(x) && x >= 0 && x <= 0xffffffff)) {
        throw new UpstreamError("protocol", "/tokenize answered without a tokens array");
      }
      this.registry.upstreamSucceeded(w);
      return (tokens as number[]).slice(0, this.maxPromptTokens);
    } catch (e) {
      if (ctx.clientGone || e instanceof WorkerRejection) throw e;
      const err = classify(e, `${w.spec.id} /tokenize`);
      this.registry.upstreamFailed(w, "tokenize", err);
      this.metrics.tokenizeFailures.inc({ worker: w.spec.id });
      this.log.log("warn", "tokenize failed, routing on text", { id: ctx.id, worker: w.spec.id, error: err.message });
      return null;
    }
  }

  private decide(
    ctx: RequestContext,
    endpoint: Endpoint,
    body: Record<string, unknown>,
    prompt: RoutingPrompt,
  ): Routed {
    const now = Date.now();
    const session = this.sessions.touch(sessionKey(this.config.model, endpoint, body), now);
    let userTurns = 0;
    if (endpoint === "chat")
      for (const m of body["messages"] as unknown[]) if (isPlainObject(m) && m["role"] === "user") userTurns++;
    session.turns = Math.max(session.turns + 1, userTurns);
    const turn = userTurns > 0 ? userTurns : session.turns;
    const table = this.router.table;
    const maxTokens = positiveInt(body["max_tokens"]) ?? positiveInt(body["max_completion_tokens"]);
    // PPD: later turns stay on the conversation's decode worker, which holds its context.
    const pinned = session.decodeWorker ? this.registry.get(session.decodeWorker) : undefined;
    // One shape for every request (the router reads an undefined field as an absent one): a spread of the prompt and
    // fields added one by one made each request's object a slow, shape-changing one (the proxy's CPU profile).
    const request: RouteRequest = {
      tokens: "tokens" in prompt ? prompt.tokens : undefined,
      text: "text" in prompt ? prompt.text : undefined,
      turn,
      prevOutputTokens: session.prevOutputTokens,
      maxTokens,
      oslHat:
        !table.osl_model && table.features?.includes("osl_hat")
          ? Math.min(maxTokens ?? Infinity, this.config.default_osl_hat)
          : undefined,
      decodeWorker:
        table.kind === "ppd" && turn >= 2 && pinned?.healthy && pinned.spec.role !== "prefill"
          ? pinned.spec.id
          : undefined,
    };
    this.router.setSignals({ prefillQueue: this.registry.prefillsInFlight, qps: this.qps.arrive(performance.now()) });
    let decision: Decision;
    try {
      decision = this.drift ? this.drift.route(ctx, request) : this.router.route(request);
    } catch (e) {
      if (e instanceof CoreError && e.code === ErrorCode.NO_DECODE_WORKER) {
        throw new HttpError(503, "no decode worker is in rotation", "service_unavailable", "no_decode_worker");
      }
      throw e;
    }
    session.decodeWorker = decision.decodeWorker;
    ctx.promptTokens = request.tokens ?? null;
    return { decision, session, turn, pinned: request.decodeWorker !== undefined };
  }
}
