// Client connections: at most `admission.max_connections` open at once. A process out of file descriptors cannot
// answer anything: libuv then accepts and at once closes each new connection, and the client sees a reset (issue 14:
// 2,833 resets at 3,000 req/s, from a load generator holding ~20,000 connections against a 20,000-fd limit). So the
// proxy stops well short of its limit: a connection opened past it is still accepted, its request is answered 503
// `overloaded` with Retry-After and `connection: close` (its body read first, so closing cannot reset it), and it is
// closed; a connection that sends nothing is closed after a second. Connections already open are never cut.
//
// 0 (the default) takes the limit from the open-file limit: the soft RLIMIT_NOFILE (Linux: /proc/self/limits) less
// one descriptor for each request in flight (its worker connection) and FD_RESERVE for everything else (health
// checks, KV event feeds, table files). Where the limit cannot be read, there is none.

import { readFileSync } from "node:fs";
import type { IncomingMessage, Server } from "node:http";
import type { Socket } from "node:net";
import type { ServeConfig } from "../config.js";
import { scrapedGauge } from "../prometheus.js";
import { overloaded } from "./admission.js";
import type { ProxyMetrics } from "./metrics.js";

/** Descriptors kept for what is not a client connection or a worker call (see above). */
const FD_RESERVE = 256;
/** The fewest connections an automatic limit allows. */
const MIN_AUTO_CONNECTIONS = 64;
/** A connection opened past the limit that sends no request within this long is closed. */
const OVER_LIMIT_IDLE_MS = 1000;
/** The longest wait for the rest of an over-limit request's body before its answer (and the close). */
const OVER_LIMIT_BODY_MS = 1000;

const overLimit = new WeakSet<Socket>();

/** The soft limit on open files (Linux), or null where it cannot be read. */
export function openFileLimit(): number | null {
  try {
    const m = /^Max open files\s+(\d+)/m.exec(readFileSync("/proc/self/limits", "utf8"));
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

/** The connection limit in force: the configured one, or from the open-file limit (Infinity when unknown). */
export function connectionLimit(admission: ServeConfig["admission"], fdLimit = openFileLimit()): number {
  if (admission.max_connections > 0) return admission.max_connections;
  if (fdLimit === null) return Infinity;
  return Math.max(MIN_AUTO_CONNECTIONS, fdLimit - admission.max_inflight - FD_RESERVE);
}

/** Counts the server's client connections and marks those opened past the limit. */
export class ConnectionGuard {
  /** Client connections open. */
  open = 0;
  readonly limit: number;

  constructor(
    server: Server,
    private readonly admission: ServeConfig["admission"],
    private readonly metrics: ProxyMetrics,
  ) {
    this.limit = connectionLimit(admission);
    server.on("connection", (socket: Socket) => {
      if (this.open >= this.limit) {
        overLimit.add(socket);
        // no request yet: nothing unread, so this close is a plain FIN (Node's own timeout handler destroys it)
        socket.setTimeout(OVER_LIMIT_IDLE_MS);
      }
      this.open++;
      socket.once("close", () => this.open--);
    });
    scrapedGauge(metrics.registry, "dolphin_client_connections", "Client connections open", [], () => [
      [{}, this.open],
    ]);
  }

  /** True when `req` came on a connection opened past the limit: answer it with shed(), before anything reads it. */
  refuses(req: IncomingMessage): boolean {
    return overLimit.has(req.socket);
  }

  /** Reads the rest of the request (at most OVER_LIMIT_BODY_MS), then rejects with the 503 that closes it. */
  async shed(req: IncomingMessage): Promise<never> {
    req.socket.setTimeout(0);
    req.resume();
    if (!req.complete)
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, OVER_LIMIT_BODY_MS);
        const done = (): void => {
          clearTimeout(t);
          resolve();
        };
        req.once("end", done);
        req.once("close", done);
      });
    const err = overloaded(
      this.metrics,
      "max_connections",
      `the proxy has ${this.limit} connections open; this one closes after this answer`,
      this.admission.retry_after_s,
    );
    err.headers = { ...err.headers, connection: "close" };
    throw err;
  }
}
