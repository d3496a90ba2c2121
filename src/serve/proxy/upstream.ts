// The proxy's calls to its workers: keep-alive agents, timeouts, connect-failure classification, and usage sniffing in
// responses and SSE streams.

import http, { type IncomingMessage } from "node:http";
import https from "node:https";
import { isPlainObject } from "../../values.js";

const MAX_UPSTREAM_BODY_BYTES = 64 << 20;
/** Longest SSE line the usage sniffer buffers. */
const SSE_SNIFF_LINE_BYTES = 1 << 20;

// ---- failures ------------------------------------------------------------------------------------------------

export type UpstreamFailure = "connect" | "timeout" | "reset" | "status" | "protocol" | "aborted";

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
}

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
  if (err?.code && CONNECT_CODES.has(err.code)) {
    const failure = new UpstreamError("connect", `${where}: cannot connect (${err.code})`);
    failure.refused = err.code === "ECONNREFUSED";
    return failure;
  }
  return new UpstreamError("reset", `${where}: connection lost (${err?.code ?? err?.message ?? String(e)})`);
}

/** One request to a worker; resolves with the response once its headers are in. */
export function upstreamRequest(
  agents: Agents,
  url: string,
  call: UpstreamCall,
  retried = false,
): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const target = new URL(url);
    const secure = target.protocol === "https:";
    const headers: Record<string, string | number> = { ...call.headers };
    if (call.body !== undefined) headers["content-length"] = Buffer.byteLength(call.body);
    const req = (secure ? https : http).request(target, {
      method: call.method,
      headers,
      agent: secure ? agents.https : agents.http,
      ...(call.signal ? { signal: call.signal } : {}),
    });
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

/** The whole body of a worker's response, with an idle timeout between chunks. */
export async function readUpstream(
  res: IncomingMessage,
  idleMs: number,
  limit = MAX_UPSTREAM_BODY_BYTES,
): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  let timer = setTimeout(onIdle, idleMs);
  function onIdle(): void {
    res.destroy(new UpstreamError("timeout", `response body stalled for ${idleMs} ms`));
  }
  try {
    for await (const chunk of res as AsyncIterable<Buffer>) {
      clearTimeout(timer);
      timer = setTimeout(onIdle, idleMs);
      size += chunk.length;
      if (size > limit) throw new UpstreamError("protocol", `response larger than ${limit} bytes`);
      chunks.push(chunk);
    }
  } catch (e) {
    throw classify(e, "response body");
  } finally {
    clearTimeout(timer);
  }
  return Buffer.concat(chunks);
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

/** Watches SSE bytes as they pass for a `data:` line carrying usage (stream_options.include_usage). */
export class UsageSniffer {
  private partial = "";
  private readonly decoder = new TextDecoder();
  usage: { cached: number | null; completion: number | null } | null = null;

  push(chunk: Buffer): void {
    const text = this.partial + this.decoder.decode(chunk, { stream: true });
    const lines = text.split("\n");
    this.partial = lines.pop() ?? "";
    if (this.partial.length > SSE_SNIFF_LINE_BYTES) this.partial = "";
    for (const line of lines) {
      if (!line.startsWith("data:") || !line.includes('"usage"')) continue;
      try {
        const u = usageOf(JSON.parse(line.slice(5)));
        if (u) this.usage = u;
      } catch {
        // not JSON: [DONE] or a partial event; nothing to learn
      }
    }
  }
}
