// Admission control: at most `max_inflight` inference requests are worked on at once; the next `max_queued` wait
// (first come, first served) at most `queue_timeout_ms` for a place; beyond that a request is shed at once with an
// OpenAI-style 503 and `Retry-After`, before its body is read, so an overload costs the proxy little memory and the
// client learns fast (rather than a reset from an overflowing accept queue, issue 14). Counted in /metrics.
//
// Counts alone miss one overload: the proxy's own CPU saturated (fast workers, or `--emulate`'s workers sharing its
// event loop). Then requests wait in the kernel's accept queue, never reach the handler, and in-flight stays low
// while clients time out (measured: the listen queue at its 4,096 limit within 8 s at 400 req/s, docs/serving.md).
// So, like Envoy's overload manager and `toobusy`, new requests are also shed while the event loop lags: with a
// probability rising from 0 at max_event_loop_lag_ms to 1 at twice that. A shed costs a fraction of a proxied
// request, so the loop catches up and the queue in the kernel drains.

import { monitorEventLoopDelay, type IntervalHistogram } from "node:perf_hooks";
import type { ServeConfig } from "../config.js";
import { HttpError } from "../http-toolkit.js";
import { scrapedGauge } from "../prometheus.js";
import type { ProxyMetrics } from "./metrics.js";
import type { RequestContext } from "./request-context.js";

/** The lag monitor's sampling period (perf_hooks' timer, in C++, no JS callback). */
const LAG_RESOLUTION_MS = 10;
/** Every window this long, the window's lag is folded into the smoothed lag (toobusy's factor: a third). */
const LAG_WINDOW_MS = 100;
const LAG_SMOOTHING = 1 / 3;

/**
 * The event loop's lag, smoothed over 100 ms windows: the latest a 10 ms timer fired in a window, beyond its period
 * (a mean would weigh one 1 s stall like one 10 ms tick). One per process (every proxy in it shares one loop); its
 * timers are unref'd and run for the process's life: ten folds a second cost nothing measurable.
 */
class EventLoopLag {
  private readonly histogram: IntervalHistogram = monitorEventLoopDelay({ resolution: LAG_RESOLUTION_MS });
  private smoothedMs = 0;
  private primed = false;

  constructor() {
    this.histogram.enable();
    setInterval(() => this.fold(), LAG_WINDOW_MS).unref();
  }

  /** The smoothed lag, ms. */
  ms(): number {
    return this.smoothedMs;
  }

  private fold(): void {
    const h = this.histogram;
    // the first window holds the rest of start-up (a table to load, a module to compile): no lag of serving
    if (this.primed && h.count > 0) {
      const lag = Math.max(0, h.max / 1e6 - LAG_RESOLUTION_MS);
      this.smoothedMs += (lag - this.smoothedMs) * LAG_SMOOTHING;
    }
    this.primed = true;
    h.reset();
  }
}

let processLag: EventLoopLag | null = null;

/** A request waiting in a FIFO queue for a place; `admit` is called by whoever frees one (it counts the place). */
export interface Waiter {
  admit(): void;
  timer: NodeJS.Timeout;
}

/**
 * Waits in `queue` for a place, for the global queue here and each worker's (worker-admission.ts): resolves true once
 * admitted, false when the client leaves first (its entry removed, the handler sees ctx.clientGone and stops); rejects
 * with `timedOut()` after `timeoutMs` (its entry removed).
 */
export function waitForPlace(
  queue: Waiter[],
  ctx: RequestContext,
  timeoutMs: number,
  timedOut: () => Error,
): Promise<boolean> {
  return new Promise<boolean>((resolve, reject) => {
    const waiter: Waiter = {
      admit: () => {
        clearTimeout(waiter.timer);
        resolve(true);
      },
      timer: setTimeout(() => {
        leaveQueue(queue, waiter);
        reject(timedOut());
      }, timeoutMs),
    };
    queue.push(waiter);
    ctx.res.once("close", () => {
      if (leaveQueue(queue, waiter)) {
        clearTimeout(waiter.timer);
        resolve(false);
      }
    });
  });
}

/** Takes `waiter` out of `queue`; false if it had left already (admitted, timed out or gone). */
function leaveQueue(queue: Waiter[], waiter: Waiter): boolean {
  const i = queue.indexOf(waiter);
  if (i < 0) return false;
  queue.splice(i, 1);
  return true;
}

/**
 * The answer to a request shed for want of capacity, whoever sheds it (here, worker-admission.ts, connections.ts):
 * counted in dolphin_shed_total under `reason`, an OpenAI-style 503 `overloaded` whose message ends with when to retry,
 * and a `Retry-After` header saying the same.
 */
export function overloaded(metrics: ProxyMetrics, reason: string, message: string, retryAfterS: number): HttpError {
  metrics.shed.inc({ reason });
  const err = new HttpError(503, `${message}; retry after ${retryAfterS} s`, "server_error", "overloaded");
  err.headers = { "retry-after": String(retryAfterS) };
  return err;
}

export type ShedReason = "queue_full" | "queue_timeout" | "event_loop_lag";
// (connections.ts sheds with reason "max_connections", worker-admission.ts with "worker_queue_full" and "_timeout")

export class Admission {
  /** Requests admitted and not yet answered. */
  active = 0;
  private readonly queue: Waiter[] = [];

  private readonly lag: EventLoopLag | null;

  constructor(
    private readonly limits: ServeConfig["admission"],
    private readonly metrics: ProxyMetrics,
  ) {
    this.lag = limits.max_event_loop_lag_ms > 0 ? (processLag ??= new EventLoopLag()) : null;
    const lag = this.lag;
    if (lag)
      scrapedGauge(
        metrics.registry,
        "dolphin_event_loop_lag_seconds",
        "The proxy's event-loop lag, smoothed (admission.max_event_loop_lag_ms sheds above it)",
        [],
        () => [[{}, Math.round(lag.ms()) / 1000]],
      );
  }

  get queued(): number {
    return this.queue.length;
  }

  /**
   * Resolves once the request may be worked on (its place is given back when its response closes); throws the 503 to
   * answer when the queue is full or the wait runs out. A client that leaves while queued gives its place up.
   */
  async enter(ctx: RequestContext): Promise<void> {
    if (this.lag) {
      const over = this.lag.ms() / this.limits.max_event_loop_lag_ms - 1;
      if (over > 0 && Math.random() < over) throw this.shed("event_loop_lag");
    }
    if (this.active < this.limits.max_inflight && this.queue.length === 0) {
      this.take(ctx);
      return;
    }
    if (this.queue.length >= this.limits.max_queued) throw this.shed("queue_full");
    const admitted = await waitForPlace(this.queue, ctx, this.limits.queue_timeout_ms, () =>
      this.shed("queue_timeout"),
    );
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

  private shed(reason: ShedReason): HttpError {
    const { max_inflight, max_queued, queue_timeout_ms, retry_after_s } = this.limits;
    return overloaded(
      this.metrics,
      reason,
      reason === "queue_full"
        ? `the proxy is at capacity (${max_inflight} requests in flight, ${max_queued} queued)`
        : reason === "event_loop_lag"
          ? `the proxy is saturated (its event loop ${Math.round(this.lag?.ms() ?? 0)} ms behind)`
          : `no capacity freed up within ${queue_timeout_ms} ms`,
      retry_after_s,
    );
  }
}
