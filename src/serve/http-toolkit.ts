// The HTTP toolkit both servers share (the proxy, proxy.ts, and the emulated worker, worker.ts): one error type, one
// request-body reader with a size limit, one route table, JSON answers, and listening. Each server speaks its own
// error dialect (OpenAI's for the proxy, vLLM's for the worker): the dialect shapes the error body and words the
// toolkit's own errors (404, 405, 413), so each server's answers stay what its clients expect.

import type { IncomingMessage, Server, ServerResponse } from "node:http";

/** Discarding an over-limit request body gives up after this long (then the socket is destroyed). */
const DISCARD_LIMIT_MS = 30_000;

/**
 * An error answer: `{"error": {"message", "type", "param"?, "code"}}` with this status. The proxy's code is a string
 * (OpenAI's), the worker's the status number and a `param` (vLLM's); `param` is left out when undefined.
 */
export class HttpError extends Error {
  /** Extra response headers (Retry-After on a 503). */
  headers: Record<string, string> = {};

  constructor(
    readonly status: number,
    message: string,
    readonly type: string,
    readonly code: string | number,
    readonly param?: string | null,
  ) {
    super(message);
  }

  /** The JSON error body. */
  body(): string {
    const { message, type, param, code } = this;
    return JSON.stringify({ error: param === undefined ? { message, type, code } : { message, type, param, code } });
  }
}

/** How a server words the errors the toolkit raises. */
export interface ErrorDialect {
  notFound(method: string, path: string): HttpError;
  methodNotAllowed(method: string, path: string, allowed: readonly string[]): HttpError;
  bodyTooLarge(limitBytes: number): HttpError;
  bodyUnreadable(reason: string): HttpError;
  /** The error code of a body that stopped arriving (408); "request_timeout" when not given. */
  bodyTimeoutCode?: string | number;
}

// ---- answers ---------------------------------------------------------------------------------------------------

/** A whole answer with its content-length; nothing when the answer has begun or the client has gone. */
export function sendBody(
  res: ServerResponse,
  status: number,
  contentType: string,
  body: string | Uint8Array,
  headers: Record<string, string> = {},
): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(status, { "content-type": contentType, "content-length": Buffer.byteLength(body), ...headers });
  res.end(body);
}

export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  sendBody(res, status, "application/json", JSON.stringify(body), headers);
}

export function sendError(res: ServerResponse, e: HttpError): void {
  sendBody(res, e.status, "application/json", e.body(), e.headers);
}

/** Resolves once a full socket buffer has drained (or the response closed). */
export function drained(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      res.off("drain", done);
      res.off("close", done);
      resolve();
    };
    res.on("drain", done);
    res.on("close", done);
  });
}

// ---- requests --------------------------------------------------------------------------------------------------

export function pathOf(req: IncomingMessage): string {
  const url = req.url ?? "/";
  const query = url.indexOf("?");
  return query < 0 ? url : url.slice(0, query);
}

/**
 * The body of a message whose every byte is in already (a small body comes with its headers), taken at once, without
 * listeners, a timer or a promise; null when more is to come, when it is larger than `maxBytes`, or when it is read
 * another way already.
 */
export function bufferedBody(msg: IncomingMessage, maxBytes: number): Buffer | null {
  if (!msg.complete || msg.readableFlowing !== null || msg.readableLength > maxBytes) return null;
  const chunks: Buffer[] = []; // read() gives all that is buffered at once; the read after it ends the stream
  for (let c = msg.read() as Buffer | null; c !== null; c = msg.read() as Buffer | null) chunks.push(c);
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
}

/**
 * The request body, at most `maxBytes` (the dialect's 413 beyond it, from the declared content-length or as the bytes
 * arrive). With `idleMs`, a body whose next chunk takes longer gets 408 and its connection is closed once the answer
 * is out (the rest of the body would follow on it). The rest of an over-limit body is read and dropped, so the connection stays usable, for DISCARD_LIMIT_MS
 * at most.
 */
export function readBody(req: IncomingMessage, maxBytes: number, dialect: ErrorDialect, idleMs = 0): Promise<Buffer> {
  const discard = (): void => {
    req.resume();
    const t = setTimeout(() => req.socket.destroy(), DISCARD_LIMIT_MS);
    t.unref();
    req.once("end", () => clearTimeout(t));
  };
  const declared = Number(req.headers["content-length"]);
  if (Number.isFinite(declared) && declared > maxBytes) {
    discard();
    return Promise.reject(dialect.bodyTooLarge(maxBytes));
  }
  const whole = bufferedBody(req, maxBytes);
  if (whole) return Promise.resolve(whole);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    /** No more bytes are kept: the body passed the limit (the rest is discarded) or went idle. */
    let dropped = false;
    // one idle timer, restarted by each chunk (discarded ones too)
    const timer =
      idleMs > 0
        ? setTimeout(() => {
            dropped = true;
            reject(
              new HttpError(
                408,
                `request body not received: no bytes for ${idleMs} ms`,
                "invalid_request_error",
                dialect.bodyTimeoutCode ?? "request_timeout",
              ),
            );
            setImmediate(() => req.socket.end());
          }, idleMs)
        : undefined;
    req.on("data", (c: Buffer): void => {
      timer?.refresh();
      if (dropped) return;
      size += c.length;
      if (size > maxBytes) {
        dropped = true;
        discard();
        reject(dialect.bodyTooLarge(maxBytes));
        return;
      }
      chunks.push(c);
    });
    req.once("end", () => {
      clearTimeout(timer);
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    });
    req.once("error", (e) => {
      clearTimeout(timer);
      reject(dialect.bodyUnreadable(e.message));
    });
  });
}

// ---- routes ----------------------------------------------------------------------------------------------------

export type Handler<C> = (c: C) => Promise<void> | void;
/** Handlers by HTTP method; "*" takes any method. */
export type Methods<C> = Readonly<Record<string, Handler<C>>>;

/** Paths to handlers by method: exact paths, and prefixes (a path given ending in "*"), tried in the order added. */
export class RouteTable<C> {
  private readonly exact = new Map<string, Methods<C>>();
  private readonly prefixes: Array<[prefix: string, methods: Methods<C>]> = [];

  constructor(private readonly dialect: ErrorDialect) {}

  on(path: string, methods: Methods<C>): this {
    if (path.endsWith("*")) this.prefixes.push([path.slice(0, -1), methods]);
    else this.exact.set(path, methods);
    return this;
  }

  /** The handler of `method` on `path`; throws the dialect's 404 (no such path) or 405 (not that method). */
  find(method: string, path: string): Handler<C> {
    const methods = this.exact.get(path) ?? this.prefixes.find(([prefix]) => path.startsWith(prefix))?.[1];
    if (!methods) throw this.dialect.notFound(method, path);
    const handler = Object.hasOwn(methods, method) ? methods[method] : methods["*"];
    if (!handler) throw this.dialect.methodNotAllowed(method, path, Object.keys(methods));
    return handler;
  }
}

// ---- listening -------------------------------------------------------------------------------------------------

/** Listens on host:port (0: any free port) and resolves with the port bound. */
export async function listen(server: Server, port: number, host: string, backlog = 511): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    const onError = (e: NodeJS.ErrnoException): void => {
      // One clear line for the usual start-up failures (the CLI prints the message as it is).
      if (e.code === "EADDRINUSE") reject(new Error(`cannot listen on ${urlHost(host)}:${port}: the port is in use`));
      else if (e.code === "EACCES") reject(new Error(`cannot listen on ${urlHost(host)}:${port}: permission denied`));
      else if (e.code === "EADDRNOTAVAIL")
        reject(new Error(`cannot listen on ${urlHost(host)}:${port}: no such local address`));
      else reject(e);
    };
    server.once("error", onError);
    server.listen({ port, host, backlog }, () => {
      server.off("error", onError);
      resolve();
    });
  });
  const address = server.address();
  return typeof address === "object" && address ? address.port : port;
}

/** A host as it stands in a URL (IPv6 addresses in brackets). */
export function urlHost(host: string): string {
  return host.includes(":") && !host.startsWith("[") ? `[${host}]` : host;
}

/** Stops listening and cuts every open connection. */
export function closeServer(server: Server): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeAllConnections();
  return closed;
}
