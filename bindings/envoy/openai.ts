// OpenAI requests as `dolphin serve` reads them in approximate mode (src/serve/proxy.ts: validateInference,
// chatText, routingPrompt), so that the filter and the Node proxy make the same decision for the same prompts, and
// the two bodies of vLLM's NixlConnector protocol built as the Node proxy builds them (prefill: the client's body
// with kv_transfer_params.do_remote_decode, stream false, max_tokens 1; decode: the client's body with the prefill
// answer's kv_transfer_params).

import { appendAscii, appendQuoted, appendText, Bytes, Json, JsonType, Member, memberNamed } from "./json";

export const enum Endpoint { Chat = 0, Completions = 1 }

/** What the router reads from one request; `error` is set (with an HTTP status) when the request is rejected. */
export class Prompt {
  /** UTF-8 text (chat canonical text, or a completions prompt string), or token ids. */
  text: Bytes = new Bytes();
  tokens: Array<u32> = new Array<u32>();
  tokenMode: bool = false;
  turn: i32 = 1;
  /** max_tokens (or max_completion_tokens) when the client set a positive integer, else 0. */
  maxTokens: f64 = 0;
  stream: bool = false;
  status: i32 = 0;
  errorMessage: string = "";
  errorType: string = "invalid_request_error";
  errorCode: string = "";
  /** The parsed body (kept for the remote path's rewrites). */
  json: Json | null = null;
  members: Array<Member> = new Array<Member>();

  reject(status: i32, message: string, code: string): Prompt {
    this.status = status;
    this.errorMessage = message;
    this.errorCode = code;
    return this;
  }
}

/** Reads and checks a request body the way `dolphin serve` does before routing. */
export function readPrompt(endpoint: Endpoint, body: Uint8Array, model: string): Prompt {
  const p = new Prompt();
  const json = new Json(body);
  if (!json.isValid() || json.typeAt(json.root()) != JsonType.Object) {
    return p.reject(400, body.length == 0 ? "empty request body" : "request body is not a JSON object", "invalid_json");
  }
  p.json = json;
  const members = json.members(json.root());
  p.members = members;
  const bad = "invalid_request";
  const m = memberNamed(members, "model");
  if (m) {
    if (json.typeAt(m.start) != JsonType.String) return p.reject(400, "model must be a string", bad);
    if (model.length > 0 && !json.stringEquals(m.start, m.end, model)) {
      const name = json.stringAt(m.start);
      if (name != model) return p.reject(404, "the model `" + name + "` does not exist (this proxy serves `" + model + "`)", "model_not_found");
    }
  }
  const s = memberNamed(members, "stream");
  if (s) {
    const t = json.typeAt(s.start);
    if (t != JsonType.True && t != JsonType.False) return p.reject(400, "stream must be true or false", bad);
    p.stream = t == JsonType.True;
  }
  p.maxTokens = positiveInteger(json, memberNamed(members, "max_tokens"));
  if (p.maxTokens == 0) p.maxTokens = positiveInteger(json, memberNamed(members, "max_completion_tokens"));
  return endpoint == Endpoint.Chat ? readChat(p, json, members) : readCompletion(p, json, members);
}

/** Chat messages as the approximate index hashes them: "role\ncontent\n" per message (proxy.ts chatText). */
function readChat(p: Prompt, json: Json, members: Array<Member>): Prompt {
  const msgs = memberNamed(members, "messages");
  const invalid = "messages must be a non-empty array of message objects";
  if (!msgs || json.typeAt(msgs.start) != JsonType.Array) return p.reject(400, invalid, "invalid_request");
  const items = json.items(msgs.start);
  if (items.length == 0) return p.reject(400, invalid, "invalid_request");
  let userTurns = 0;
  for (let k = 0; k < items.length; k++) {
    if (json.typeAt(unchecked(items[k]).start) != JsonType.Object) return p.reject(400, invalid, "invalid_request");
  }
  for (let k = 0; k < items.length; k++) {
    const fields = json.members(unchecked(items[k]).start);
    const role = memberNamed(fields, "role");
    if (role) {
      const t = json.typeAt(role.start);
      if (t == JsonType.String) {
        if (json.stringEquals(role.start, role.end, "user")) userTurns++;
        json.appendString(role.start, p.text);
      } else if (t != JsonType.Null) json.appendCompact(role.start, role.end, p.text);
    }
    p.text.push(0x0a);
    const content = memberNamed(fields, "content");
    if (content) appendContent(json, content, p.text);
    p.text.push(0x0a);
  }
  // the Node proxy's turn: the number of user messages (1 when there are none; no session store here)
  p.turn = userTurns > 0 ? userTurns : 1;
  return p;
}

/** proxy.ts contentText: a string as is, text parts joined by "\n", anything else as its JSON. */
function appendContent(json: Json, content: Member, out: Bytes): void {
  const t = json.typeAt(content.start);
  if (t == JsonType.String) {
    json.appendString(content.start, out);
  } else if (t == JsonType.Array) {
    const parts = json.items(content.start);
    for (let k = 0; k < parts.length; k++) {
      if (k > 0) out.push(0x0a);
      const part = unchecked(parts[k]);
      if (json.typeAt(part.start) == JsonType.Object) {
        const fields = json.members(part.start);
        const type = memberNamed(fields, "type");
        const text = memberNamed(fields, "text");
        if (type && text && json.typeAt(type.start) == JsonType.String && json.stringAt(type.start) == "text" &&
          json.typeAt(text.start) == JsonType.String) {
          json.appendString(text.start, out);
          continue;
        }
      }
      json.appendCompact(part.start, part.end, out);
    }
  } else if (t != JsonType.Null) {
    json.appendCompact(content.start, content.end, out);
  }
}

/** A completions prompt: a string (or the first of several), or token ids (the first list of several). */
function readCompletion(p: Prompt, json: Json, members: Array<Member>): Prompt {
  const prompt = memberNamed(members, "prompt");
  const invalid = "prompt must be a string, an array of strings, or token ids";
  if (!prompt) return p.reject(400, invalid, "invalid_request");
  const t = json.typeAt(prompt.start);
  if (t == JsonType.String) {
    json.appendString(prompt.start, p.text);
    return p;
  }
  if (t != JsonType.Array) return p.reject(400, invalid, "invalid_request");
  const items = json.items(prompt.start);
  if (items.length == 0) return p.reject(400, invalid, "invalid_request");
  const first = json.typeAt(unchecked(items[0]).start);
  if (first == JsonType.String) {
    for (let k = 0; k < items.length; k++) if (json.typeAt(unchecked(items[k]).start) != JsonType.String) return p.reject(400, invalid, "invalid_request");
    json.appendString(unchecked(items[0]).start, p.text);
    return p;
  }
  if (first == JsonType.Array) {
    for (let k = 0; k < items.length; k++) {
      const item = unchecked(items[k]);
      if (json.typeAt(item.start) != JsonType.Array || !tokenIds(json, item.start, k == 0 ? p.tokens : null)) {
        return p.reject(400, invalid, "invalid_request");
      }
    }
  } else if (!tokenIds(json, prompt.start, p.tokens)) return p.reject(400, invalid, "invalid_request");
  p.tokenMode = true;
  return p;
}

/** True when the array at `at` holds only integers ≥ 0 (token ids); they are appended to `out` when given. */
function tokenIds(json: Json, at: i32, out: Array<u32> | null): bool {
  const items = json.items(at);
  for (let k = 0; k < items.length; k++) {
    const s = unchecked(items[k]).start;
    if (json.typeAt(s) != JsonType.Number) return false;
    const v = json.numberAt(s);
    if (!(v >= 0 && v == Math.floor(v) && v <= 4294967295)) return false;
    if (out) out.push(<u32>v);
  }
  return true;
}

function positiveInteger(json: Json, m: Member | null): f64 {
  if (!m || json.typeAt(m.start) != JsonType.Number) return 0;
  const v = json.numberAt(m.start);
  return v > 0 && v == Math.floor(v) && v <= 9007199254740991 ? v : 0;
}

// ---- the NixlConnector bodies ----------------------------------------------------------------------------

/** vLLM's prefill-request marks (reference-systems.md, step 1), as JSON.stringify writes them. */
const PREFILL_KV_PARAMS =
  '{"do_remote_decode":true,"do_remote_prefill":false,"remote_engine_id":null,"remote_block_ids":null,"remote_host":null,"remote_port":null}';

/**
 * The prefill request: JSON.stringify({...body, kv_transfer_params: PREFILL_KV_PARAMS, stream: false, max_tokens: 1})
 * with max_completion_tokens set to 1 when present and min_tokens, stream_options removed (proxy.ts prefill()).
 */
export function prefillBody(p: Prompt): Uint8Array {
  const replaced = new Map<string, string>();
  replaced.set("kv_transfer_params", PREFILL_KV_PARAMS);
  replaced.set("stream", "false");
  replaced.set("max_tokens", "1");
  if (memberNamed(p.members, "max_completion_tokens")) replaced.set("max_completion_tokens", "1");
  const dropped = ["min_tokens", "stream_options"];
  return rewrite(p, replaced, ["kv_transfer_params", "stream", "max_tokens"], dropped);
}

/** The decode request after a remote prefill: JSON.stringify({...body, kv_transfer_params: <from the prefill answer>}). */
export function decodeBody(p: Prompt, kvParams: string): Uint8Array {
  const replaced = new Map<string, string>();
  replaced.set("kv_transfer_params", kvParams);
  return rewrite(p, replaced, ["kv_transfer_params"], []);
}

/**
 * The body's members in order (JSON.stringify's: a key keeps its first position, takes its last value), with the
 * values in `replaced` substituted, the keys in `dropped` left out, and the keys of `appended` that the body lacks
 * added at the end in that order.
 */
function rewrite(p: Prompt, replaced: Map<string, string>, appended: Array<string>, dropped: Array<string>): Uint8Array {
  const json = p.json!;
  const out = new Bytes();
  const written = new Set<string>();
  out.push(0x7b);
  for (let k = 0; k < p.members.length; k++) {
    const key = unchecked(p.members[k]).key;
    if (written.has(key) || dropped.includes(key)) continue;
    written.add(key);
    if (out.length > 1) out.push(0x2c);
    appendQuoted(key, out);
    out.push(0x3a);
    if (replaced.has(key)) appendText(replaced.get(key), out);
    else {
      const last = memberNamed(p.members, key)!;
      json.appendCompact(last.start, last.end, out);
    }
  }
  for (let k = 0; k < appended.length; k++) {
    const key = unchecked(appended[k]);
    if (written.has(key)) continue;
    if (out.length > 1) out.push(0x2c);
    appendQuoted(key, out);
    out.push(0x3a);
    appendText(replaced.get(key), out);
  }
  out.push(0x7d);
  return out.toUint8Array();
}

/** The kv_transfer_params object of a prefill answer, compacted, or "" when the answer has none. */
export function kvTransferParams(answer: Uint8Array): string {
  const json = new Json(answer);
  if (!json.isValid() || json.typeAt(json.root()) != JsonType.Object) return "";
  const kv = memberNamed(json.members(json.root()), "kv_transfer_params");
  if (!kv || json.typeAt(kv.start) != JsonType.Object) return "";
  const out = new Bytes();
  json.appendCompact(kv.start, kv.end, out);
  return String.UTF8.decode(out.toUint8Array().buffer);
}

/** An OpenAI-style error body: {"error": {"message", "type", "code"}} (http-util.ts errorBody). */
export function errorBody(message: string, type: string, code: string): ArrayBuffer {
  const out = new Bytes();
  appendAscii('{"error":{"message":', out);
  appendQuoted(message, out);
  appendAscii(',"type":', out);
  appendQuoted(type, out);
  appendAscii(',"code":', out);
  appendQuoted(code, out);
  appendAscii("}}", out);
  return out.toUint8Array().buffer;
}
