// The proxy's calls to its workers: keep-alive agents, timeouts, connect-failure classification, and usage sniffing in
// responses and SSE streams.

import http, { type IncomingMessage } from "node:http";
import https from "node:https";
import { isPlainObject } from "../../contract/values.js";
import { bufferedBody } from "../http-toolkit.js";

const MAX_UPSTREAM_BODY_BYTES = 64 << 20;
/** Longest SSE line the usage sniffer buffers. */
const SSE_SNIFF_LINE_BYTES = 1 << 20;

// ---- failures ------------------------------------------------------------------------------------------------

/**
 * How a worker call failed. `local`: the proxy itself could not open the connection (out of file descriptors), which
 * says nothing about the worker: never counted against it, answered 503 (retry later) rather than 502.
 */
export type UpstreamFailure = "connect" | "timeout" | "reset" | "status" | "protocol" | "aborted" | "local";

/** A worker call that failed. `reset`, 5xx `status` and `protocol` count toward the worker's ejection (registry.ts). */
export class UpstreamError extends Error {
  /** The connection was refused: nothing listens at the worker's address (the process is gone). */
  refused = false;

  constructor(
    readonly kind: UpstreamFailure,
    message: string,
    readonly status = 0,
    readonly body?: Buffer,
    readonly contentType?: string,
  ) {
    super(message);
  }

  /** Failed before the worker could have done anything with the request: safe to send it to another worker. */
  get retryable(): boolean {
    return this.kind === "connect" || this.kind === "reset" || (this.kind === "status" && this.status >= 500);
  }
  get workerDown(): boolean {
    return this.kind === "connect" || this.kind === "reset" || (this.kind === "status" && this.status >= 500);
  }

  /** The worker refused the request itself (a 4xx): the client's mistake, never the worker's failure. */
  get clientMistake(): boolean {
    return this.kind === "status" && this.status >= 400 && this.status < 500;
  }
}

/** A worker's 4xx answer, passed on to the client as it is (status, body, content type). */
export class WorkerRejection extends Error {
  constructor(
    readonly status: number,
    readonly body: Buffer,
    readonly contentType: string,
  ) {
    super(`a worker answered ${status}`);
  }
}

// ---- upstream HTTP ---------------------------------------------------------------------------------------------

/** Keep-alive connection pools to the workers, one per scheme. */
export interface Agents {
  http: http.Agent;
  https: https.Agent;
}

export function keepAliveAgents(): Agents {
  return { http: new http.Agent({ keepAlive: true }), https: new https.Agent({ keepAlive: true }) };
}

export interface UpstreamCall {
  method: "GET" | "POST";
  headers?: Record<string, string>;
  body?: Buffer | string;
  connectMs: number;
  /** Until the response headers arrive. */
  responseMs: number;
  signal?: AbortSignal;
  /** Given each ClientRequest the call makes (a retry on a fresh connection makes a second), so it can be cut. */
  onRequest?: (req: http.ClientRequest) => void;
}

/** The proxy's own descriptors are exhausted (per process, per system): a socket could not even be made. */
const OUT_OF_DESCRIPTORS = new Set(["EMFILE", "ENFILE"]);

export const CONNECT_CODES = new Set([
  "ECONNREFUSED",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN",
  "ETIMEDOUT",
  "EADDRNOTAVAIL",
]);

export function classify(e: unknown, where: string): UpstreamError {
  if (e instanceof UpstreamError) return e;
  const err = e as NodeJS.ErrnoException;
  if (err?.name === "AbortError" || err?.code === "ABORT_ERR") return new UpstreamError("aborted", `${where}: aborted`);
  if (err?.code && OUT_OF_DESCRIPTORS.has(err.code))
    return new UpstreamError("local", `${where}: the proxy is out of file descriptors (${err.code})`);
  if (err?.code && CONNECT_CODES.has(err.code)) {
    const failure = new UpstreamError("connect", `${where}: cannot connect (${err.code})`);
    failure.refused = err.code === "ECONNREFUSED";
    return failure;
  }
  return new UpstreamError("reset", `${where}: connection lost (${err?.code ?? err?.message ?? String(e)})`);
}

/** Where a URL points, as http.request's options: parsed once per URL (the workers' few), not once per call. */
interface RequestTarget {
  protocol: string;
  hostname: string;
  port: string;
  path: string;
  auth?: string;
}
const targets = new Map<string, RequestTarget>();
/** Bound on the parsed-URL cache (a worker has a handful of URLs; registrations may come and go). */
const MAX_CACHED_TARGETS = 4096;

function requestTarget(url: string): RequestTarget {
  let t = targets.get(url);
  if (t) return t;
  const u = new URL(url);
  // as Node's urlToHttpOptions: brackets off an IPv6 host, the default port when none is given
  t = {
    protocol: u.protocol,
    hostname: u.hostname.startsWith("[") ? u.hostname.slice(1, -1) : u.hostname,
    port: u.port,
    path: `${u.pathname}${u.search}`,
  };
  if (u.username || u.password) t.auth = `${decodeURIComponent(u.username)}:${decodeURIComponent(u.password)}`;
  if (targets.size >= MAX_CACHED_TARGETS) targets.clear();
  targets.set(url, t);
  return t;
}

/** One request to a worker; resolves with the response once its headers are in. */
export function upstreamRequest(
  agents: Agents,
  url: string,
  call: UpstreamCall,
  retried = false,
): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const target = requestTarget(url);
    const secure = target.protocol === "https:";
    const headers: Record<string, string | number> = { ...call.headers };
    if (call.body !== undefined) headers["content-length"] = Buffer.byteLength(call.body);
    // one literal rather than spreads (of the target and of an optional signal): a call's options in one shape
    const options: http.RequestOptions & { servername?: string } = {
      protocol: target.protocol,
      hostname: target.hostname,
      port: target.port,
      path: target.path,
      method: call.method,
      headers,
      agent: secure ? agents.https : agents.http,
    };
    if (target.auth !== undefined) options.auth = target.auth;
    // TLS's server name means nothing to plain http: given, the agent does not work one out from the Host header
    if (!secure) options.servername = "";
    if (call.signal) options.signal = call.signal;
    const req = (secure ? https : http).request(options);
    call.onRequest?.(req);
    let settled = false;
    let connectTimer: NodeJS.Timeout | undefined;
    const responseTimer = setTimeout(
      () => fail(new UpstreamError("timeout", `${url}: no response within ${call.responseMs} ms`)),
      call.responseMs,
    );
    const done = (): void => {
      settled = true;
      clearTimeout(responseTimer);
      clearTimeout(connectTimer);
    };
    function fail(e: UpstreamError): void {
      if (settled) return;
      done();
      req.destroy();
      reject(e);
    }
    req.on("socket", (socket) => {
      if (!socket.connecting) return;
      connectTimer = setTimeout(
        () => fail(new UpstreamError("connect", `${url}: no connection within ${call.connectMs} ms`)),
        call.connectMs,
      );
      socket.once("connect", () => clearTimeout(connectTimer));
    });
    req.on("error", (e) => {
      if (settled) return;
      // A kept-alive socket the worker closed meanwhile: retry once on a fresh connection (Node's documented advice).
      if (!retried && req.reusedSocket && (e as NodeJS.ErrnoException).code === "ECONNRESET") {
        done();
        upstreamRequest(agents, url, call, true).then(resolve, reject);
        return;
      }
      fail(classify(e, url));
    });
    req.on("response", (res) => {
      if (settled) {
        res.destroy();
        return;
      }
      done();
      resolve(res);
    });
    req.end(call.body);
  });
}

/**
 * The whole body of a worker's response, with an idle timeout between chunks. Read with 'data' listeners rather than
 * an async iterator (whose promise per chunk showed in the proxy's profile); one timer, refreshed per chunk.
 */
export function readUpstream(res: IncomingMessage, idleMs: number, limit = MAX_UPSTREAM_BODY_BYTES): Promise<Buffer> {
  const whole = bufferedBody(res, limit); // the usual small answer: in whole with its headers
  if (whole) return Promise.resolve(whole);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let ended = false;
    const timer = setTimeout(
      () => res.destroy(new UpstreamError("timeout", `response body stalled for ${idleMs} ms`)),
      idleMs,
    );
    const fail = (e: unknown): void => {
      clearTimeout(timer);
      reject(classify(e, "response body"));
    };
    res.on("data", (chunk: Buffer) => {
      timer.refresh();
      size += chunk.length;
      if (size > limit) res.destroy(new UpstreamError("protocol", `response larger than ${limit} bytes`));
      else chunks.push(chunk);
    });
    res.once("end", () => {
      ended = true;
      clearTimeout(timer);
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    });
    res.once("error", fail);
    res.once("close", () => {
      if (!ended) fail(prematureClose());
    });
  });
}

/** A worker's response closed without an end or an error: what an async iterator reports as a premature close. */
export function prematureClose(): Error {
  return Object.assign(new Error("Premature close"), { code: "ERR_STREAM_PREMATURE_CLOSE" });
}

export function parseJson(buf: Buffer): unknown {
  try {
    return JSON.parse(buf.toString("utf8"));
  } catch {
    return undefined;
  }
}

/** usage.prompt_tokens_details.cached_tokens and usage.completion_tokens of an OpenAI response or stream chunk. */
export function usageOf(v: unknown): { cached: number | null; completion: number | null } | null {
  if (!isPlainObject(v) || !isPlainObject(v["usage"])) return null;
  const u = v["usage"];
  const details = u["prompt_tokens_details"];
  const cached =
    isPlainObject(details) && typeof details["cached_tokens"] === "number" ? details["cached_tokens"] : null;
  return { cached, completion: typeof u["completion_tokens"] === "number" ? u["completion_tokens"] : null };
}

/** The key an answer's usage goes under, and the SSE field its events' JSON comes in (stream-usage.ts reads both). */
export const USAGE_KEY = Buffer.from('"usage"');
export const DATA_FIELD = Buffer.from("data:");
const NEWLINE = 0x0a;
const CLOSING_BRACE = 0x7d;

/**
 * usageOf a worker's JSON answer without parsing all of it when it can: vLLM and OpenAI write `usage` last, so the
 * answer's last `"usage"` is found, the object after it read by itself, and taken when only the answer's closing
 * brace follows it (then it is a key of the answer itself: a key inside a string or a nested object would leave
 * more after it). Otherwise the whole answer is parsed.
 */
export function usageOfAnswer(buf: Buffer): ReturnType<typeof usageOf> {
  const at = buf.lastIndexOf(USAGE_KEY);
  if (at < 0) return usageOf(parseJson(buf));
  const start = skipSpace(buf, at + USAGE_KEY.length);
  const valueStart = buf[start] === 0x3a /* : */ ? skipSpace(buf, start + 1) : -1;
  const valueEnd = valueStart < 0 ? -1 : objectEnd(buf, valueStart);
  if (valueEnd > 0) {
    const close = skipSpace(buf, valueEnd);
    if (buf[close] === CLOSING_BRACE && skipSpace(buf, close + 1) === buf.length && keyPosition(buf, at)) {
      try {
        return usageOf({ usage: JSON.parse(buf.toString("utf8", valueStart, valueEnd)) });
      } catch {
        // not what it looked like: the whole answer decides
      }
    }
  }
  return usageOf(parseJson(buf));
}

/** JSON's whitespace: space, line feed, carriage return, tab. */
function isJsonSpace(c: number | undefined): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

/** The first index from `i` that is not JSON whitespace (buf.length when none is). */
export function skipSpace(buf: Buffer, i: number): number {
  while (i < buf.length && isJsonSpace(buf[i])) i++;
  return i;
}

/** A `"` at `at` that follows `{` or `,` (whitespace aside) opens a key. */
function keyPosition(buf: Buffer, at: number): boolean {
  let i = at - 1;
  while (i >= 0 && isJsonSpace(buf[i])) i--;
  return i >= 0 && (buf[i] === 0x2c /* , */ || buf[i] === 0x7b); /* { */
}

/** The end (exclusive) of the JSON object starting at `i`, strings skipped; -1 when there is none. */
function objectEnd(buf: Buffer, i: number): number {
  if (buf[i] !== 0x7b) return -1;
  let depth = 0;
  for (; i < buf.length; i++) {
    const c = buf[i];
    if (c === 0x22 /* " */) {
      for (i++; i < buf.length && buf[i] !== 0x22; i++) if (buf[i] === 0x5c /* \ */) i++;
    } else if (c === 0x7b || c === 0x5b) depth++;
    else if (c === CLOSING_BRACE || c === 0x5d) {
      if (--depth === 0) return i + 1;
    }
  }
  return -1;
}

/**
 * Watches SSE bytes as they pass for a `data:` line carrying usage (stream_options.include_usage). Works on bytes:
 * only a line holding `"usage"` is decoded and parsed (a byte search per chunk); a line cut between chunks is kept.
 */
export class UsageSniffer {
  /** The start of a line whose end has not come yet. */
  private partial: Buffer | null = null;
  usage: { cached: number | null; completion: number | null } | null = null;

  push(chunk: Buffer): void {
    const buf = this.partial ? Buffer.concat([this.partial, chunk]) : chunk;
    this.partial = null;
    let at = buf.indexOf(USAGE_KEY);
    while (at >= 0) {
      const end = buf.indexOf(NEWLINE, at);
      if (end < 0) break;
      this.line(buf.subarray(buf.lastIndexOf(NEWLINE, at) + 1, end));
      at = buf.indexOf(USAGE_KEY, end);
    }
    const rest = buf.lastIndexOf(NEWLINE) + 1;
    if (rest < buf.length && buf.length - rest <= SSE_SNIFF_LINE_BYTES) this.partial = Buffer.from(buf.subarray(rest));
  }

  /** A `data:` line's usage, read as an answer's (usageOfAnswer: the usage object alone when it is the last key). */
  private line(line: Buffer): void {
    if (!DATA_FIELD.equals(line.subarray(0, DATA_FIELD.length))) return;
    const u = usageOfAnswer(line.subarray(DATA_FIELD.length));
    if (u) this.usage = u;
  }
}
