// Admission control: at most `max_inflight` inference requests are worked on at once; the next `max_queued` wait
// (first come, first served) at most `queue_timeout_ms` for a place; beyond that a request is shed at once with an
// OpenAI-style 503 and `Retry-After`, before its body is read, so an overload costs the proxy little memory and the
// client learns fast (rather than a reset from an overflowing accept queue, issue 14). Counted in /metrics.
//
// Counts alone miss one overload: the proxy's own CPU saturated (fast workers, or `--emulate`'s workers sharing its
// event loop). Then requests wait in the kernel's accept queue and socket buffers, never reach the handler, and
// in-flight stays low while clients time out (measured on a calm machine: 523 in flight of 1,024, nothing queued,
// lag under 200 ms, and 21,288 of 72,000 requests unanswered in 30 s; docs/serving.md). Two signals see it:
//   event-loop utilization  the share of wall time the loop was busy (perf_hooks), smoothed over 100 ms windows.
//                 Once the loop has been saturated (no idle time: smoothed utilization ≥ 0.98, or the limit if
//                 higher) in every window for queue_timeout_ms, with enough requests in flight that requests are
//                 what loads it, a share of new requests is shed, raised by an integral controller until the loop
//                 is busy max_event_loop_utilization of the time and no more: a loop with idle time has read
//                 everything the kernel held, so nothing waits unseen, and the idle share drains what waited
//                 meanwhile. A shed costs a fraction of a proxied request, so the loop catches up. When the load
//                 falls and the share is back at 0, the controller waits for a new sustained saturation.
//                 Why it waits: a loop busy 90 % of the time still has idle time, so nothing waits unseen and
//                 shedding there turns answers that would have come in milliseconds into 503s; only a loop with no
//                 idle time can leave requests unread. And a saturation shorter than queue_timeout_ms (a burst, a
//                 CPU-starved moment on a shared machine) delays what it leaves unread by less than admission's
//                 own queue may delay a request, so it is served, not shed; a longer one is an overload the proxy
//                 cannot catch up with, shed as before (issue 14). Measured (docs/serving.md): at 500 req/s in
//                 front of emulated workers on 2 shared cores, the old rule (shed past 0.9 at once) shed 607 of
//                 3,000 requests in 0.3 s bursts, which this one serves (issue 26).
//   event-loop lag  (Envoy's overload manager, `toobusy`): new requests are shed with a probability rising from 0 at
//                 max_event_loop_lag_ms to 1 at twice that: the backstop for a loop stalled by one long task.

import { monitorEventLoopDelay, performance, type EventLoopUtilization, type IntervalHistogram } from "node:perf_hooks";
import type { ServeConfig } from "../config.js";
import { HttpError } from "../http-toolkit.js";
import { scrapedGauge } from "../prometheus.js";
import type { Logger } from "./log.js";
import type { ProxyMetrics } from "./metrics.js";
import type { RequestContext } from "./request-context.js";

/** The lag monitor's sampling period (perf_hooks' timer, in C++, no JS callback). */
const LAG_RESOLUTION_MS = 10;
/** Every window this long, the window's lag and utilization are folded into their smoothed values (toobusy's factor: a third). */
const WINDOW_MS = 100;
const SMOOTHING = 1 / 3;
/**
 * How fast the utilization controller moves its shed share: by this times (smoothed utilization − limit) per window.
 * At 1 with a limit of 0.9, a loop busy all the time raises the share by 0.1 each 100 ms; an idle one (0.3) lowers it
 * by 0.6. Slow enough not to swing with one busy window (smoothing delays the signal ~300 ms), fast enough that a 2×
 * overload is shed within about a second.
 */
const UTILIZATION_GAIN = 1;
/**
 * The fewest requests in flight for utilization to shed. A loop busy with a few requests is loaded by something else
 * (start-up, a table swap, a test's own code, emulated workers in-process): shedding them would not relieve it.
 * Under a real overload in-flight climbs past this within milliseconds (measured: 364–523 at 2× on a calm machine).
 */
export const UTILIZATION_MIN_INFLIGHT = 32;
/** The most windows one controller step stands for after a gap without requests. */
const MAX_CATCH_UP_WINDOWS = 5;
/**
 * The smoothed utilization at which the loop counts as saturated: no idle time, up to what the 100 ms windows and
 * the timers' own work let the measure reach (a loop busy all the time reads 0.99–1.0; one with a 1 ms gap between
 * 30 ms tasks 0.97, and that gap reads everything the kernel holds).
 */
export const SATURATED_UTILIZATION = 0.98;

/**
 * The event loop as admission control sees it, one per process (every proxy in it shares one loop): its lag, the
 * latest a 10 ms timer fired in a window, beyond its period (a mean would weigh one 1 s stall like one 10 ms tick),
 * and its utilization, the share of the window's wall time it was not waiting for I/O; both smoothed over 100 ms
 * windows. Its timers are unref'd and run for the process's life: ten folds a second cost nothing measurable.
 */
class EventLoopMonitor {
  private readonly histogram: IntervalHistogram = monitorEventLoopDelay({ resolution: LAG_RESOLUTION_MS });
  private lastUtilization: EventLoopUtilization = performance.eventLoopUtilization();
  private smoothedLagMs = 0;
  private smoothedUtilization = 0;
  private primed = false;
  /** Windows folded so far: a controller that missed some (no request came) catches up by this count. */
  windows = 0;

  constructor() {
    this.histogram.enable();
    setInterval(() => this.fold(), WINDOW_MS).unref();
  }

  /** The smoothed lag, ms. */
  lagMs(): number {
    return this.smoothedLagMs;
  }

  /** The smoothed utilization, 0–1. */
  utilization(): number {
    return this.smoothedUtilization;
  }

  private fold(): void {
    const h = this.histogram;
    const now = performance.eventLoopUtilization();
    const window = performance.eventLoopUtilization(now, this.lastUtilization);
    this.lastUtilization = now;
    // the first window holds the rest of start-up (a table to load, a module to compile): no load of serving
    if (this.primed) {
      if (h.count > 0) {
        const lag = Math.max(0, h.max / 1e6 - LAG_RESOLUTION_MS);
        this.smoothedLagMs += (lag - this.smoothedLagMs) * SMOOTHING;
      }
      this.smoothedUtilization += (window.utilization - this.smoothedUtilization) * SMOOTHING;
      this.windows++;
    }
    this.primed = true;
    h.reset();
  }
}

let processLoop: EventLoopMonitor | null = null;

/**
 * The share of new requests to shed so that the loop is busy at most `limit` of the time: an integral controller on
 * the smoothed utilization, one step per window, armed only once the loop has been saturated (≥
 * SATURATED_UTILIZATION, or `limit` if higher) for `sustainWindows` windows in a row, and disarmed when its share is
 * back at 0. Pure state, so it is tested apart from any clock.
 */
export class UtilizationShedding {
  /** The share of new requests shed, 0–1. */
  share = 0;
  /** Windows in a row the loop has been saturated while the controller was disarmed. */
  saturatedWindows = 0;
  private readonly saturated: number;

  constructor(
    private readonly limit: number,
    private readonly sustainWindows: number,
  ) {
    this.saturated = Math.max(SATURATED_UTILIZATION, limit);
  }

  /** Whether the controller acts: it sheds, or the loop has been saturated long enough to start. */
  get armed(): boolean {
    return this.share > 0 || this.saturatedWindows >= Math.max(1, this.sustainWindows);
  }

  /** `windows` windows have passed with the loop busy `utilization` of the time (smoothed). */
  step(utilization: number, windows = 1): void {
    if (this.share === 0) {
      this.saturatedWindows = utilization >= this.saturated ? this.saturatedWindows + windows : 0;
      if (!this.armed) return;
    }
    this.share = Math.min(1, Math.max(0, this.share + UTILIZATION_GAIN * windows * (utilization - this.limit)));
    if (this.share === 0) this.saturatedWindows = 0;
  }

  /** Whether to shed the next request, `random` a draw from [0, 1). */
  sheds(random: number): boolean {
    return random < this.share;
  }
}

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
  // No stack: nobody reads a shed answer's, and capturing one was a tenth of a shed's CPU (--cpu-prof, issue 14).
  const stackTraceLimit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  const err = new HttpError(503, `${message}; retry after ${retryAfterS} s`, "server_error", "overloaded");
  Error.stackTraceLimit = stackTraceLimit;
  err.headers = { "retry-after": String(retryAfterS) };
  return err;
}

/**
 * A worker call the proxy could not open for want of file descriptors (UpstreamError "local"): the proxy is
 * overloaded, not the worker failed, so the client gets 503 with Retry-After (counted as shed, reason
 * `file_descriptors`) rather than a 502.
 */
export function outOfDescriptors(metrics: ProxyMetrics, e: Error): HttpError {
  return overloaded(metrics, "file_descriptors", e.message, 1);
}

/** The shortest time between two "shedding" log lines. */
const SHED_LOG_PERIOD_MS = 10_000;

/**
 * One warn line per period for shed requests, with how many were shed since the last line, in place of one line
 * each (their metrics are counted each, in dolphin_shed_total). The first shed after a quiet period logs at once.
 */
export class ShedLog {
  private since = 0;
  private lastMs = -Infinity;

  constructor(private readonly log: Logger) {}

  note(ctx: RequestContext, message: string): void {
    ctx.shed = true;
    this.since++;
    const now = performance.now();
    if (now - this.lastMs < SHED_LOG_PERIOD_MS) return;
    this.log.log("warn", "shedding load", {
      shed: this.since,
      seconds: Number.isFinite(this.lastMs) ? Math.round((now - this.lastMs) / 1000) : 0,
      last: message,
    });
    this.since = 0;
    this.lastMs = now;
  }
}

export type ShedReason = "queue_full" | "queue_timeout" | "event_loop_lag" | "event_loop_utilization";
// (connections.ts sheds with reason "max_connections", worker-admission.ts with "worker_queue_full" and "_timeout")

export class Admission {
  /** Requests admitted and not yet answered. */
  active = 0;
  private readonly queue: Waiter[] = [];

  /** The process's loop, when lag or utilization sheds (null when both are off). */
  private readonly loop: EventLoopMonitor | null;
  private readonly utilization: UtilizationShedding | null;
  /** The loop's window count when the utilization controller last stepped. */
  private steppedAt = 0;

  constructor(
    private readonly limits: ServeConfig["admission"],
    private readonly metrics: ProxyMetrics,
  ) {
    const lagLimit = limits.max_event_loop_lag_ms;
    const utilizationLimit = limits.max_event_loop_utilization;
    const loop = (this.loop = lagLimit > 0 || utilizationLimit > 0 ? (processLoop ??= new EventLoopMonitor()) : null);
    this.utilization =
      utilizationLimit > 0
        ? new UtilizationShedding(utilizationLimit, Math.ceil(limits.queue_timeout_ms / WINDOW_MS))
        : null;
    this.steppedAt = loop?.windows ?? 0;
    if (loop && lagLimit > 0)
      scrapedGauge(
        metrics.registry,
        "dolphin_event_loop_lag_seconds",
        "The proxy's event-loop lag, smoothed (admission.max_event_loop_lag_ms sheds above it)",
        [],
        () => [[{}, Math.round(loop.lagMs()) / 1000]],
      );
    const utilization = this.utilization;
    if (loop && utilization) {
      scrapedGauge(
        metrics.registry,
        "dolphin_event_loop_utilization",
        "The share of time the proxy's event loop was busy, smoothed (admission.max_event_loop_utilization sheds above it)",
        [],
        () => [[{}, Math.round(loop.utilization() * 1000) / 1000]],
      );
      scrapedGauge(
        metrics.registry,
        "dolphin_shed_share",
        "The share of new requests shed for event-loop utilization",
        [],
        () => [[{}, Math.round(this.stepUtilization(loop, utilization) * 1000) / 1000]],
      );
    }
  }

  get queued(): number {
    return this.queue.length;
  }

  /**
   * Admits the request (its place is given back when its response closes): at once, returning nothing, or after a
   * wait in the queue, returning the promise of it, which rejects with the 503 when the wait runs out. Throws the 503
   * at once when it is shed (a signal, or the queue full): synchronously, so a shed request costs no promise. A client
   * that leaves while queued gives its place up (the promise resolves; the handler sees ctx.clientGone).
   */
  enter(ctx: RequestContext): Promise<void> | undefined {
    const loop = this.loop;
    if (loop) {
      const lagLimit = this.limits.max_event_loop_lag_ms;
      const over = lagLimit > 0 ? loop.lagMs() / lagLimit - 1 : 0;
      if (over > 0 && Math.random() < over) throw this.shed("event_loop_lag");
      const utilization = this.utilization;
      if (
        utilization &&
        this.stepUtilization(loop, utilization) > 0 &&
        this.active + this.queue.length >= UTILIZATION_MIN_INFLIGHT &&
        utilization.sheds(Math.random())
      )
        throw this.shed("event_loop_utilization");
    }
    if (this.active < this.limits.max_inflight && this.queue.length === 0) {
      this.take(ctx);
      return undefined;
    }
    if (this.queue.length >= this.limits.max_queued) throw this.shed("queue_full");
    return waitForPlace(this.queue, ctx, this.limits.queue_timeout_ms, () => this.shed("queue_timeout")).then(
      (admitted) => {
        // next() counted the place already, so no newcomer could take it meanwhile
        if (admitted) this.hold(ctx);
      },
    );
  }

  /** Steps the utilization controller once per window passed since it last did; its shed share. */
  private stepUtilization(loop: EventLoopMonitor, utilization: UtilizationShedding): number {
    const windows = loop.windows - this.steppedAt;
    if (windows > 0) {
      this.steppedAt = loop.windows;
      // only the latest smoothed value is known: a long gap (no requests) counts as a few windows of it
      utilization.step(loop.utilization(), Math.min(windows, MAX_CATCH_UP_WINDOWS));
    }
    return utilization.share;
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
          ? `the proxy is saturated (its event loop ${Math.round(this.loop?.lagMs() ?? 0)} ms behind)`
          : reason === "event_loop_utilization"
            ? `the proxy is saturated (its event loop busy ${Math.round((this.loop?.utilization() ?? 0) * 100)} % of the time)`
            : `no capacity freed up within ${queue_timeout_ms} ms`,
      retry_after_s,
    );
  }
}
