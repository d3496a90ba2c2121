// The OpenAI API as the proxy reads it: its two inference endpoints, its error dialect, request validation, the
// prompt text the approximate index hashes, and the conversation a request belongs to.

import { createHash } from "node:crypto";
import { isPlainObject } from "../../values.js";
import { HttpError, type ErrorDialect } from "../http-toolkit.js";

export type Endpoint = "chat" | "completions";
export const ENDPOINT_PATHS: Record<Endpoint, string> = { chat: "/v1/chat/completions", completions: "/v1/completions" };

/** OpenAI's error fields: `type` a class of error, `code` a string naming it. */
export const OPENAI_ERRORS: ErrorDialect = {
  notFound: (method, path) => new HttpError(404, `no route for ${method} ${path}`, "invalid_request_error", "not_found"),
  methodNotAllowed: (method, path, allowed) =>
    new HttpError(405, `${method} is not allowed on ${path} (allowed: ${allowed.join(", ")})`, "invalid_request_error", "method_not_allowed"),
  bodyTooLarge: (max) => new HttpError(413, `request body larger than max_body_bytes (${max} bytes)`, "invalid_request_error", "body_too_large"),
  bodyUnreadable: (reason) => new HttpError(400, `cannot read the request body: ${reason}`, "invalid_request_error", "bad_body"),
};

/** Rejects (400, or 404 for another model) a request the workers would reject, before any routing. */
export function validateInference(endpoint: Endpoint, body: Record<string, unknown>, model: string): void {
  const bad = (message: string): HttpError => new HttpError(400, message, "invalid_request_error", "invalid_request");
  const m = body["model"];
  if (m !== undefined && typeof m !== "string") throw bad("model must be a string");
  if (typeof m === "string" && m !== model) throw new HttpError(404, `the model \`${m}\` does not exist (this proxy serves \`${model}\`)`, "invalid_request_error", "model_not_found");
  if (body["stream"] !== undefined && typeof body["stream"] !== "boolean") throw bad("stream must be true or false");
  if (endpoint === "chat") {
    const msgs = body["messages"];
    if (!Array.isArray(msgs) || msgs.length === 0 || !msgs.every(isPlainObject)) throw bad("messages must be a non-empty array of message objects");
  } else {
    const p = body["prompt"];
    const ok = typeof p === "string" || (Array.isArray(p) && p.length > 0 &&
      (p.every((x) => typeof x === "string") || p.every((x) => Number.isInteger(x) && x >= 0) ||
        p.every((x) => Array.isArray(x) && x.every((y) => Number.isInteger(y) && y >= 0))));
    if (!ok) throw bad("prompt must be a string, an array of strings, or token ids");
  }
}

/** Chat messages as the text the approximate index hashes: "role\ncontent\n" per message, text parts joined. */
export function chatText(messages: unknown[]): string {
  return messages.map((m) => {
    const msg = m as Record<string, unknown>;
    return `${String(msg["role"] ?? "")}\n${contentText(msg["content"])}\n`;
  }).join("");
}

function contentText(content: unknown): string {
  if (typeof content === "string") return content;
  if (content === null || content === undefined) return "";
  if (Array.isArray(content)) {
    return content.map((p) => (isPlainObject(p) && p["type"] === "text" && typeof p["text"] === "string" ? p["text"] : JSON.stringify(p))).join("\n");
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
  return createHash("sha1").update(`${model}\0${endpoint}\0${user}\0${first}`).digest("base64");
}

export function positiveInt(v: unknown): number | undefined {
  return typeof v === "number" && Number.isInteger(v) && v > 0 ? v : undefined;
}
