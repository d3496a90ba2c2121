// One request in the emulated worker, from admission to its answer in OpenAI's format: a JSON body when it finishes,
// or SSE chunks as its tokens are decoded (a role chunk first for chat, the usage chunk last with
// stream_options.include_usage, then [DONE]). Output text is deterministic words (tokenizer.ts).

import type http from "node:http";
import type { Job, JobKind } from "../../sim/instance.js";
import type { SimRequest } from "../../sim/types.js";
import { sendJson } from "../http-toolkit.js";
import { decodeToken, outputToken, promptSeed } from "../tokenizer.js";
import type { CompletionRequest, RemoteSource } from "./requests.js";

export class Completion {
  /** the instance's job, once enqueued (to abort it when the client goes away) */
  job?: Job;
  closed = false;
  rejected = false;
  emitted = 0;
  text = "";
  arrivalMs = 0;
  cachedTokens = 0;
  /** what a prefill-only request answers with (the handoff to the decode side) */
  kvParams: Record<string, unknown> | null = null;
  readonly seed: number;
  readonly created = Math.floor(Date.now() / 1000);
  readonly kind: JobKind;
  readonly chat: boolean;
  readonly stream: boolean;
  readonly tokens: number[];
  readonly outputTokens: number;
  readonly remote: RemoteSource | null;

  constructor(
    /** the answer's id: cmpl-… or chatcmpl-… */
    readonly id: string,
    /** unique within this worker: the remote_request_id of a prefill */
    readonly requestId: string,
    private readonly request: CompletionRequest,
    readonly simReq: SimRequest,
    readonly res: http.ServerResponse,
    private readonly model: string,
  ) {
    ({
      kind: this.kind,
      chat: this.chat,
      stream: this.stream,
      tokens: this.tokens,
      outputTokens: this.outputTokens,
      remote: this.remote,
    } = request);
    this.seed = promptSeed(this.tokens);
  }

  /** The client is still there and the answer not over. */
  get live(): boolean {
    return !this.closed && !this.res.writableEnded && !this.res.destroyed;
  }

  /** Writes the SSE headers (once). */
  startStream(): void {
    if (this.res.headersSent) return;
    this.res.writeHead(200, {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache",
      connection: "keep-alive",
    });
    this.res.flushHeaders();
  }

  /** Emits up to n more output tokens (fewer at the end); returns how many. */
  emit(n: number): number {
    let count = 0;
    for (; count < n && this.emitted < this.outputTokens; count++) {
      const text = decodeToken(outputToken(this.seed, this.emitted));
      this.emitted++;
      if (!this.stream) {
        this.text += text;
        continue;
      }
      if (this.chat && this.emitted === 1) {
        this.writeChunk({
          id: this.id,
          object: "chat.completion.chunk",
          created: this.created,
          model: this.model,
          choices: [{ index: 0, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null }],
        });
      }
      const last = this.emitted === this.outputTokens;
      this.writeChunk(
        this.chunkOf(
          text,
          last ? "length" : null,
          last && this.kvParams ? { kv_transfer_params: this.kvParams } : undefined,
        ),
      );
    }
    return count;
  }

  /** The end of the answer: the last SSE chunks, or the whole JSON body. */
  finish(): void {
    if (!this.live) return;
    if (this.stream) {
      this.startStream();
      if (this.request.includeUsage) {
        this.writeChunk({
          id: this.id,
          object: this.chat ? "chat.completion.chunk" : "text_completion",
          created: this.created,
          model: this.model,
          choices: [],
          usage: this.usage(),
        });
      }
      this.res.end("data: [DONE]\n\n");
      return;
    }
    const choice = this.chat
      ? {
          index: 0,
          message: { role: "assistant", content: this.text },
          logprobs: null,
          finish_reason: "length",
          stop_reason: null,
        }
      : {
          index: 0,
          text: this.text,
          logprobs: null,
          finish_reason: "length",
          stop_reason: null,
          prompt_logprobs: null,
        };
    sendJson(this.res, 200, {
      id: this.id,
      object: this.chat ? "chat.completion" : "text_completion",
      created: this.created,
      model: this.model,
      choices: [choice],
      usage: this.usage(),
      kv_transfer_params: this.kvParams,
    });
  }

  private usage(): Record<string, unknown> {
    return {
      prompt_tokens: this.tokens.length,
      total_tokens: this.tokens.length + this.emitted,
      completion_tokens: this.emitted,
      prompt_tokens_details: { cached_tokens: this.cachedTokens },
    };
  }

  private writeChunk(chunk: unknown): void {
    if (!this.live) return;
    this.startStream();
    this.res.write(`data: ${JSON.stringify(chunk)}\n\n`);
  }

  private chunkOf(text: string, finish: string | null, extra?: Record<string, unknown>): Record<string, unknown> {
    const { id, created, model } = this;
    return this.chat
      ? {
          id,
          object: "chat.completion.chunk",
          created,
          model,
          choices: [{ index: 0, delta: { content: text }, logprobs: null, finish_reason: finish }],
          ...extra,
        }
      : {
          id,
          object: "text_completion",
          created,
          model,
          choices: [{ index: 0, text, logprobs: null, finish_reason: finish, stop_reason: null }],
          ...extra,
        };
  }
}
