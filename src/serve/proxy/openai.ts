// The OpenAI API as the proxy reads it: its two inference endpoints, its error dialect, request validation, the
// prompt text the approximate index hashes, and the conversation a request belongs to.

import crypto from "node:crypto";
import { isPlainObject } from "../../contract/values.js";
import { HttpError, type ErrorDialect } from "../http-toolkit.js";

export type Endpoint = "chat" | "completions";
export const ENDPOINT_PATHS: Record<Endpoint, string> = {
  chat: "/v1/chat/completions",
  completions: "/v1/completions",
};

/** OpenAI's error fields: `type` a class of error, `code` a string naming it. */
export const OPENAI_ERRORS: ErrorDialect = {
  notFound: (method, path) =>
    new HttpError(404, `no route for ${method} ${path}`, "invalid_request_error", "not_found"),
  methodNotAllowed: (method, path, allowed) =>
    new HttpError(
      405,
      `${method} is not allowed on ${path} (allowed: ${allowed.join(", ")})`,
      "invalid_request_error",
      "method_not_allowed",
    ),
  bodyTooLarge: (max) =>
    new HttpError(
      413,
      `request body larger than max_body_bytes (${max} bytes)`,
      "invalid_request_error",
      "body_too_large",
    ),
  bodyUnreadable: (reason) =>
    new HttpError(400, `cannot read the request body: ${reason}`, "invalid_request_error", "bad_body"),
};

/** Deepest JSON nesting a request body may have: deeper bodies are not a chat request, and would exhaust the stack of recursive readers. */
export const MAX_BODY_DEPTH = 64;
/** The largest max_tokens the proxy passes on (vLLM's limit is the context length, far below). */
const MAX_OUTPUT_TOKENS = 0x7fffffff;
/** Chat message content: a string, null, or an array of parts. */
const CONTENT_RULE = "a string, null or an array of content parts";

/**
 * Rejects (400 naming the field, or 404 for another model) a request the workers would reject, before any routing: a
 * client's mistake is answered here and never reaches a worker, so it cannot count as a worker failure.
 */
export function validateInference(
  endpoint: Endpoint,
  body: Record<string, unknown>,
  model: string,
  maxModelLen: number | null = null,
): void {
  const bad = (param: string, message: string): HttpError =>
    new HttpError(400, `${param} ${message}`, "invalid_request_error", "invalid_request");
  const depth = nestingDepth(body, MAX_BODY_DEPTH);
  if (depth > MAX_BODY_DEPTH) throw bad("the request body", `is JSON nested deeper than ${MAX_BODY_DEPTH} levels`);
  const m = body["model"];
  if (m !== undefined && typeof m !== "string") throw bad("model", "must be a string");
  if (typeof m === "string" && m !== model)
    throw new HttpError(
      404,
      `the model \`${m}\` does not exist (this proxy serves \`${model}\`)`,
      "invalid_request_error",
      "model_not_found",
    );
  if (body["stream"] !== undefined && typeof body["stream"] !== "boolean") throw bad("stream", "must be true or false");
  for (const key of ["max_tokens", "max_completion_tokens"]) {
    const v = body[key];
    if (v === undefined || v === null) continue;
    if (!(typeof v === "number" && Number.isInteger(v) && v >= 1 && v <= MAX_OUTPUT_TOKENS))
      throw bad(key, `must be an integer in 1–${MAX_OUTPUT_TOKENS}, got ${JSON.stringify(v)}`);
    // vLLM's own check and message (its serving layer): refused here, before a remote prefill is spent on it
    if (maxModelLen !== null && v > maxModelLen)
      throw new HttpError(
        400,
        `${key}=${v} cannot be greater than max_model_len=${maxModelLen}. Please request fewer output tokens.`,
        "invalid_request_error",
        "invalid_request",
      );
  }
  if (endpoint === "chat") {
    const msgs = body["messages"];
    if (!Array.isArray(msgs) || msgs.length === 0 || !msgs.every(isPlainObject))
      throw bad("messages", "must be a non-empty array of message objects");
    msgs.forEach((msg, i) => {
      const role = msg["role"];
      if (typeof role !== "string") throw bad(`messages[${i}].role`, "must be a string");
      const content = msg["content"];
      const ok =
        content === undefined ||
        content === null ||
        typeof content === "string" ||
        (Array.isArray(content) && content.every(isPlainObject));
      if (!ok)
        throw bad(
          `messages[${i}].content`,
          `must be ${CONTENT_RULE}, got ${Array.isArray(content) ? "an array with a non-object part" : typeof content}`,
        );
    });
  } else {
    const p = body["prompt"];
    const tokenId = (x: unknown): boolean => Number.isInteger(x) && (x as number) >= 0 && (x as number) <= 0xffffffff;
    const ok =
      typeof p === "string" ||
      (Array.isArray(p) &&
        p.length > 0 &&
        (p.every((x) => typeof x === "string") ||
          p.every(tokenId) ||
          p.every((x) => Array.isArray(x) && x.length > 0 && x.every(tokenId))));
    if (!ok) throw bad("prompt", "must be a string, an array of strings, or token ids");
  }
}

/**
 * The nesting depth of a JSON value, counted up to `limit + 1`: the walk stops there, so its recursion is at most
 * `limit + 1` deep whatever the body (and allocates nothing, unlike a stack of pairs).
 */
export function nestingDepth(value: unknown, limit: number): number {
  return depthFrom(value, 1, limit);
}

/** The depth of `v` when it sits at depth `d`: 0 for a scalar, else the deepest of `d` and its children's. */
function depthFrom(v: unknown, d: number, limit: number): number {
  if (v === null || typeof v !== "object") return 0;
  let deepest = d;
  if (deepest > limit) return deepest;
  if (Array.isArray(v)) {
    for (const child of v) {
      const c = depthFrom(child, d + 1, limit);
      if (c > deepest && (deepest = c) > limit) return deepest;
    }
  } else {
    const o = v as Record<string, unknown>;
    for (const k in o) {
      const c = depthFrom(o[k], d + 1, limit);
      if (c > deepest && (deepest = c) > limit) return deepest;
    }
  }
  return deepest;
}

/** Chat messages as the text the approximate index hashes: "role\ncontent\n" per message, text parts joined. */
export function chatText(messages: unknown[]): string {
  let text = "";
  for (const m of messages) {
    const msg = m as Record<string, unknown>;
    text += `${String(msg["role"] ?? "")}\n${contentText(msg["content"])}\n`;
  }
  return text;
}

function contentText(content: unknown): string {
  if (typeof content === "string") return content;
  if (content === null || content === undefined) return "";
  if (Array.isArray(content)) {
    return content
      .map((p) =>
        isPlainObject(p) && p["type"] === "text" && typeof p["text"] === "string" ? p["text"] : JSON.stringify(p),
      )
      .join("\n");
  }
  return JSON.stringify(content);
}

/** A conversation: the model, the client's `user`, and the first user message (chat) or the prompt's first 512 characters. */
export function sessionKey(model: string, endpoint: Endpoint, body: Record<string, unknown>): string {
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
  // A short key is kept as it is (the sessions Map hashes it faster than sha1 digests it: ~1 % of the proxy's CPU per
  // request); "\u0001" marks it, which starts no base64 digest, so a raw key and a digest never collide. Built by
  // join(), which writes one flat string: a template literal builds a chain of cons strings, and the Map keeps
  // whichever it is given for the session's life (five cons strings and a copy, ~250 bytes a session, measured with
  // a heap snapshot: most of what each request left on the heap, copied by every scavenge it survived).
  const chars = model.length + endpoint.length + user.length + first.length + 3;
  if (chars <= RAW_SESSION_KEY_CHARS) return [`\u0001${model}`, endpoint, user, first].join("\0");
  return sha1Base64(`${model}\0${endpoint}\0${user}\0${first}`);
}

/** The longest session key kept raw; longer ones are digested, so a session's key costs at most about this much. */
const RAW_SESSION_KEY_CHARS = 96;

/** crypto.hash, one call without a Hash object, where Node has it (20.12+, 21.7+); the same digest either way. */
const oneShotHash = (crypto as { hash?: (algorithm: string, data: string, encoding: "base64") => string }).hash;
const sha1Base64 = oneShotHash
  ? (s: string): string => oneShotHash("sha1", s, "base64")
  : (s: string): string => crypto.createHash("sha1").update(s).digest("base64");

export function positiveInt(v: unknown): number | undefined {
  return typeof v === "number" && Number.isInteger(v) && v > 0 ? v : undefined;
}
