// What the emulated worker reads from a request, checked as vLLM checks it (400 with the offending `param`): the
// prompt (text, token ids, or chat messages), the integer and boolean options, and kv_transfer_params (which side
// of the disaggregated-prefill protocol a request asks for). Errors speak vLLM's dialect: `type` an exception class
// name, `code` the status.

import { describeValue, isPlainObject } from "../../contract/values.js";
import type { JobKind } from "../../sim/instance.js";
import type { WorkerRole } from "../config-workers.js";
import { HttpError, type ErrorDialect } from "../http-toolkit.js";
import { VOCAB_SIZE, chatPrompt, encode, type ChatMessage } from "../tokenizer.js";

export const VLLM_ERRORS: ErrorDialect = {
  notFound: (method, path) => new HttpError(404, `no route ${method} ${path}`, "NotFoundError", 404, null),
  methodNotAllowed: (method, path, allowed) =>
    new HttpError(
      405,
      `${method} is not allowed on ${path} (use ${allowed.join(", ")})`,
      "MethodNotAllowed",
      405,
      null,
    ),
  bodyTooLarge: (max) => new HttpError(413, `request body over ${max} bytes`, "RequestEntityTooLarge", 413, null),
  bodyUnreadable: (reason) => bad(`cannot read the request body: ${reason}`),
};

/** A vLLM-style error of this status. */
export function vllmError(status: number, type: string, message: string, param: string | null = null): HttpError {
  return new HttpError(status, message, type, status, param);
}

export const bad = (message: string, param: string | null = null): HttpError =>
  vllmError(400, "BadRequestError", message, param);

/** The body as a JSON object (400 otherwise). */
export function jsonObject(buf: Buffer): Record<string, unknown> {
  let body: unknown;
  try {
    body = JSON.parse(buf.toString("utf8"));
  } catch (e) {
    throw bad(`invalid JSON body: ${(e as Error).message}`);
  }
  if (!isPlainObject(body)) throw bad(`the body must be a JSON object, got ${describeValue(body)}`);
  return body;
}

/** 404 for a model other than the served one (none given is fine). */
export function checkModel(body: Record<string, unknown>, model: string): void {
  const m = body["model"];
  if (m === undefined || m === null) return;
  if (typeof m !== "string") throw bad(`model must be a string, got ${describeValue(m)}`, "model");
  if (m !== model) throw vllmError(404, "NotFoundError", `The model \`${m}\` does not exist.`, "model");
}

export function optInt(body: Record<string, unknown>, key: string, min: number): number | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < min)
    throw bad(`${key} must be an integer ≥ ${min}, got ${describeValue(v)}`, key);
  return v;
}

export function optBool(body: Record<string, unknown>, key: string): boolean | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "boolean") throw bad(`${key} must be a boolean, got ${describeValue(v)}`, key);
  return v;
}

export function tokenIds(v: unknown[], param: string): number[] {
  v.forEach((t, i) => {
    if (typeof t !== "number" || !Number.isInteger(t) || t < 0 || t >= VOCAB_SIZE) {
      throw bad(`${param}[${i}] must be a token id in 0..${VOCAB_SIZE - 1}, got ${describeValue(t)}`, param);
    }
  });
  return v as number[];
}

/** The prompt of a completions request as token ids. */
export function promptTokens(v: unknown): number[] {
  if (typeof v === "string") return encode(v);
  if (Array.isArray(v)) {
    if (v.length === 0) throw bad("prompt must not be empty", "prompt");
    if (v.every((x) => typeof x === "number")) return tokenIds(v, "prompt");
    if (v.length === 1) {
      const only = v[0];
      if (typeof only === "string") return encode(only);
      if (Array.isArray(only)) return tokenIds(only, "prompt[0]");
    }
    throw bad(
      "prompt must be a string, a list of token ids, or a one-element list of either (batched prompts are not supported)",
      "prompt",
    );
  }
  throw bad(`prompt must be a string or a list of token ids, got ${describeValue(v)}`, "prompt");
}

export function chatMessages(v: unknown): ChatMessage[] {
  if (!Array.isArray(v) || v.length === 0)
    throw bad(`messages must be a non-empty list, got ${describeValue(v)}`, "messages");
  return v.map((m, i) => {
    if (!isPlainObject(m)) throw bad(`messages[${i}] must be an object, got ${describeValue(m)}`, "messages");
    if (typeof m["role"] !== "string" || m["role"] === "")
      throw bad(`messages[${i}].role must be a non-empty string, got ${describeValue(m["role"])}`, "messages");
    const c = m["content"];
    if (c !== undefined && c !== null && typeof c !== "string") {
      if (
        !Array.isArray(c) ||
        !c.every((p) => isPlainObject(p) && (p["text"] === undefined || typeof p["text"] === "string"))
      ) {
        throw bad(
          `messages[${i}].content must be a string, a list of content parts, or null, got ${describeValue(c)}`,
          "messages",
        );
      }
    }
    return m as unknown as ChatMessage;
  });
}

export interface RemoteSource {
  host: string;
  port: number;
  requestId: string;
  /**
   * kv_transfer_params.remote_prefill_cached_tokens when an integer (the prefill engine's own cached tokens, which
   * vLLM's decode engine reports as its usage's cached_tokens; OutputProcessor's RequestState.from_new_request), else
   * null.
   */
  prefillCachedTokens: number | null;
}

/** What kv_transfer_params asks for. */
export function transferKind(v: unknown): { kind: JobKind; remote: RemoteSource | null } {
  if (v === undefined || v === null) return { kind: "local", remote: null };
  if (!isPlainObject(v))
    throw bad(`kv_transfer_params must be an object, got ${describeValue(v)}`, "kv_transfer_params");
  const decodeRemote = v["do_remote_decode"] === true;
  const prefillRemote = v["do_remote_prefill"] === true;
  for (const k of ["do_remote_decode", "do_remote_prefill"]) {
    if (v[k] !== undefined && v[k] !== null && typeof v[k] !== "boolean")
      throw bad(`kv_transfer_params.${k} must be a boolean, got ${describeValue(v[k])}`, "kv_transfer_params");
  }
  if (decodeRemote && prefillRemote)
    throw bad("kv_transfer_params: do_remote_decode and do_remote_prefill cannot both be true", "kv_transfer_params");
  if (decodeRemote) return { kind: "prefill", remote: null };
  if (!prefillRemote) return { kind: "local", remote: null };
  const host = v["remote_host"];
  const port = v["remote_port"];
  const requestId = v["remote_request_id"];
  if (typeof host !== "string" || host === "")
    throw bad(`kv_transfer_params.remote_host must be a host name, got ${describeValue(host)}`, "kv_transfer_params");
  if (typeof port !== "number" || !Number.isInteger(port) || port < 1 || port > 65535)
    throw bad(`kv_transfer_params.remote_port must be a port number, got ${describeValue(port)}`, "kv_transfer_params");
  if (typeof requestId !== "string" || requestId === "")
    throw bad(
      `kv_transfer_params.remote_request_id must be a string, got ${describeValue(requestId)}`,
      "kv_transfer_params",
    );
  const ids = v["remote_block_ids"];
  if (ids !== undefined && ids !== null && !Array.isArray(ids))
    throw bad(`kv_transfer_params.remote_block_ids must be a list, got ${describeValue(ids)}`, "kv_transfer_params");
  const cached = v["remote_prefill_cached_tokens"];
  const prefillCachedTokens = typeof cached === "number" && Number.isSafeInteger(cached) ? cached : null;
  return { kind: "decode", remote: { host, port, requestId, prefillCachedTokens } };
}

/** A completions or chat-completions request as the engine runs it. */
export interface CompletionRequest {
  chat: boolean;
  tokens: number[];
  stream: boolean;
  includeUsage: boolean;
  /** max(max_tokens, min_tokens); 1 for a prefill-only request */
  outputTokens: number;
  kind: JobKind;
  remote: RemoteSource | null;
}

export interface CompletionLimits {
  role: WorkerRole;
  model: string;
  maxModelLen: number;
  defaultMaxTokens: number;
}

/** POST /v1/completions (`prompt`) or /v1/chat/completions (`messages`), checked against this worker's role and limits. */
export function readCompletion(
  body: Record<string, unknown>,
  chat: boolean,
  limits: CompletionLimits,
): CompletionRequest {
  const { role, maxModelLen } = limits;
  checkModel(body, limits.model);
  const tokens = chat ? encode(chatPrompt(chatMessages(body["messages"]))) : promptTokens(body["prompt"]);
  if (tokens.length === 0) throw bad("the prompt must not be empty", "prompt");
  const stream = optBool(body, "stream") ?? false;
  const so = body["stream_options"];
  if (so !== undefined && so !== null && !isPlainObject(so))
    throw bad(`stream_options must be an object, got ${describeValue(so)}`, "stream_options");
  const includeUsage = stream && isPlainObject(so) && so["include_usage"] === true;
  const n = optInt(body, "n", 1);
  if (n !== undefined && n !== 1) throw bad("only n = 1 is supported", "n");
  const maxTokens =
    (chat ? optInt(body, "max_completion_tokens", 1) : undefined) ??
    optInt(body, "max_tokens", 1) ??
    limits.defaultMaxTokens;
  const minTokens = optInt(body, "min_tokens", 0) ?? 0;
  const { kind, remote } = transferKind(body["kv_transfer_params"]);
  if (kind === "prefill" && role === "decode")
    throw bad(
      "this worker's role is decode: it does not run prefill-only requests (kv_transfer_params.do_remote_decode)",
      "kv_transfer_params",
    );
  if (kind === "decode" && role === "prefill")
    throw bad(
      "this worker's role is prefill: it does not run remote-prefilled requests (kv_transfer_params.do_remote_prefill)",
      "kv_transfer_params",
    );
  const outputTokens = kind === "prefill" ? 1 : Math.max(maxTokens, minTokens);
  if (tokens.length + outputTokens > maxModelLen) {
    const what = chat ? "messages" : "prompt";
    throw bad(
      `This model's maximum context length is ${maxModelLen} tokens. However, you requested ${tokens.length + outputTokens} tokens ` +
        `(${tokens.length} in the ${what}, ${outputTokens} in the completion). Please reduce the length of the ${what} or completion.`,
      what,
    );
  }
  return { chat, tokens, stream, includeUsage, outputTokens, kind, remote };
}
