// Admission control: at most `max_inflight` inference requests are worked on at once; the next `max_queued` wait
// (first come, first served) at most `queue_timeout_ms` for a place; beyond that a request is shed at once with an
// OpenAI-style 503 and `Retry-After`, before its body is read, so an overload costs the proxy little memory and the
// client learns fast (rather than a reset from an overflowing accept queue, issue 14). Counted in /metrics.

import type { ServeConfig } from "../config.js";
import { HttpError } from "../http-toolkit.js";
import type { ProxyMetrics } from "./metrics.js";
import type { RequestContext } from "./request-context.js";

interface Waiter {
  admit(): void;
  timer: NodeJS.Timeout;
}

export type ShedReason = "queue_full" | "queue_timeout";

export class Admission {
  /** Requests admitted and not yet answered. */
  active = 0;
  private readonly queue: Waiter[] = [];

  constructor(
    private readonly limits: ServeConfig["admission"],
    private readonly metrics: ProxyMetrics,
  ) {}

  get queued(): number {
    return this.queue.length;
  }

  /**
   * Resolves once the request may be worked on (its place is given back when its response closes); throws the 503 to
   * answer when the queue is full or the wait runs out. A client that leaves while queued gives its place up.
   */
  async enter(ctx: RequestContext): Promise<void> {
    if (this.active < this.limits.max_inflight && this.queue.length === 0) {
      this.take(ctx);
      return;
    }
    if (this.queue.length >= this.limits.max_queued) throw this.shed("queue_full");
    const admitted = await new Promise<boolean>((resolve, reject) => {
      const waiter: Waiter = {
        admit: () => {
          clearTimeout(waiter.timer);
          resolve(true);
        },
        timer: setTimeout(() => {
          this.leaveQueue(waiter);
          reject(this.shed("queue_timeout"));
        }, this.limits.queue_timeout_ms),
      };
      this.queue.push(waiter);
      ctx.res.once("close", () => {
        if (this.leaveQueue(waiter)) {
          clearTimeout(waiter.timer);
          resolve(false); // the handler sees ctx.clientGone and stops
        }
      });
    });
    // next() counted the place already, so no newcomer could take it meanwhile
    if (admitted) this.hold(ctx);
  }

  private take(ctx: RequestContext): void {
    this.active++;
    this.hold(ctx);
  }

  /** The place is given back once, when the response closes (at once if it has closed already). */
  private hold(ctx: RequestContext): void {
    let held = true;
    const release = (): void => {
      if (!held) return;
      held = false;
      this.active--;
      this.next();
    };
    if (ctx.closed) release();
    else ctx.releases.push(release);
  }

  /** Gives a freed place to the longest-waiting request. */
  private next(): void {
    if (this.active >= this.limits.max_inflight) return;
    const waiter = this.queue.shift();
    if (!waiter) return;
    this.active++;
    waiter.admit();
  }

  private leaveQueue(waiter: Waiter): boolean {
    const i = this.queue.indexOf(waiter);
    if (i < 0) return false;
    this.queue.splice(i, 1);
    return true;
  }

  private shed(reason: ShedReason): HttpError {
    this.metrics.shed.inc({ reason });
    const err = new HttpError(
      503,
      reason === "queue_full"
        ? `the proxy is at capacity (${this.limits.max_inflight} requests in flight, ${this.limits.max_queued} queued); retry after ${this.limits.retry_after_s} s`
        : `no capacity freed up within ${this.limits.queue_timeout_ms} ms; retry after ${this.limits.retry_after_s} s`,
      "server_error",
      "overloaded",
    );
    err.headers = { "retry-after": String(this.limits.retry_after_s) };
    return err;
  }
}
