// Per-worker admission: at most `admission.max_inflight_per_worker` requests are bound for one worker at once (a
// decode place is held from the routing decision to the end of the answer, a prefill place for the prefill call), so
// a worker the router favours (a hot prefix, a pinned conversation) cannot take the whole global allowance. When the
// chosen worker is full, the request
//   1. goes to the least-busy other worker of the role with room, unless the routing pinned it (a PPD conversation's
//      later turns hold their context on one decode worker); a decode place is taken before the prefill step, so
//      the KV handoff is made for the worker that will decode;
//   2. a prefill with nowhere to go is done locally on the decode worker when fallback_local allows (Dynamo's
//      conditional disaggregation does the same when the prefill queue is long);
//   3. else waits for a place, first come first served, at most `max_queued_per_worker` of them and
//      `queue_timeout_ms` each; past that it is answered 503 `overloaded` with Retry-After, like the global limit.
// Counted in /metrics: dolphin_worker_full_total{stage, outcome}, dolphin_shed_total{reason="worker_…"}, and the
// per-worker gauges.

import type { ServeConfig } from "../config.js";
import { HttpError } from "../http-toolkit.js";
import { overloaded, waitForPlace, type Waiter } from "./admission.js";
import type { ProxyMetrics } from "./metrics.js";
import type { WorkerState } from "./registry.js";
import type { RequestContext } from "./request-context.js";

export type WorkerStage = "decode" | "prefill";

/** One worker's places: those taken, and the requests waiting for one (FIFO). */
class WorkerPlaces {
  taken = 0;
  readonly queue: Waiter[] = [];
}

/** A place held on a worker; `release` gives it back (once; at the latest when the response closes). */
export interface WorkerPlace {
  worker: string;
  release(): void;
}

export class WorkerAdmission {
  private readonly places = new Map<string, WorkerPlaces>();
  /** Requests shed waiting for a place, by the stage of the place (the autoscaler's shed rate per role, demand.ts). */
  readonly shedAt: Record<WorkerStage, number> = { decode: 0, prefill: 0 };

  constructor(
    private readonly limits: ServeConfig["admission"],
    private readonly metrics: ProxyMetrics,
  ) {}

  /** Requests holding a place on this worker. */
  inflight(id: string): number {
    return this.places.get(id)?.taken ?? 0;
  }

  /** Requests waiting for a place on this worker. */
  queued(id: string): number {
    return this.places.get(id)?.queue.length ?? 0;
  }

  hasRoom(id: string): boolean {
    const p = this.places.get(id);
    return !p || (p.taken < this.limits.max_inflight_per_worker && p.queue.length === 0);
  }

  /**
   * A place on `id`, or on the least-busy of `alternatives` with room when `id` is full (a spill), or, with
   * `orLocal`, null when no worker has room (the caller prefills locally); otherwise waits in `id`'s queue. Throws the
   * 503 to answer when the queue is full or the wait runs out.
   */
  async enter(
    ctx: RequestContext,
    stage: WorkerStage,
    id: string,
    alternatives: readonly WorkerState[],
    orLocal = false,
  ): Promise<WorkerPlace | null> {
    if (this.hasRoom(id)) return this.take(ctx, id);
    const spill = this.withRoom(alternatives);
    if (spill) {
      this.metrics.workerFull.inc({ outcome: "spilled", stage });
      return this.take(ctx, spill);
    }
    if (orLocal) {
      this.metrics.workerFull.inc({ outcome: "local", stage });
      return null;
    }
    const p = this.placesOf(id);
    if (p.queue.length >= this.limits.max_queued_per_worker) {
      this.metrics.workerFull.inc({ outcome: "shed", stage });
      throw this.shed("worker_queue_full", id, stage);
    }
    this.metrics.workerFull.inc({ outcome: "queued", stage });
    const admitted = await waitForPlace(p.queue, ctx, this.limits.queue_timeout_ms, () =>
      this.shed("worker_queue_timeout", id, stage),
    );
    // next() counted the place already
    return admitted ? this.hold(ctx, id, p) : null;
  }

  /** A place on the first of `candidates` with room, without waiting (a retry's destination); null when all are full. */
  tryEnter(ctx: RequestContext, candidates: readonly WorkerState[]): WorkerPlace | null {
    const id = candidates.find((w) => this.hasRoom(w.spec.id))?.spec.id;
    return id === undefined ? null : this.take(ctx, id);
  }

  /** The least-busy worker of `candidates` with room (ties: the caller's order). */
  private withRoom(candidates: readonly WorkerState[]): string | null {
    let best: string | null = null;
    let bestTaken = Infinity;
    for (const w of candidates) {
      const id = w.spec.id;
      if (!this.hasRoom(id)) continue;
      const taken = this.inflight(id);
      if (taken < bestTaken) {
        best = id;
        bestTaken = taken;
      }
    }
    return best;
  }

  private placesOf(id: string): WorkerPlaces {
    let p = this.places.get(id);
    if (!p) this.places.set(id, (p = new WorkerPlaces()));
    return p;
  }

  private take(ctx: RequestContext, id: string): WorkerPlace {
    const p = this.placesOf(id);
    p.taken++;
    return this.hold(ctx, id, p);
  }

  /** The place is given back once: by release(), or when the response closes (at once if it has closed already). */
  private hold(ctx: RequestContext, id: string, p: WorkerPlaces): WorkerPlace {
    let held = true;
    const release = (): void => {
      if (!held) return;
      held = false;
      p.taken--;
      this.next(id, p);
    };
    if (ctx.closed) release();
    else ctx.releases.push(release);
    return { worker: id, release };
  }

  /** Gives a freed place to the longest-waiting request; forgets a worker with nothing taken or waiting. */
  private next(id: string, p: WorkerPlaces): void {
    if (p.taken < this.limits.max_inflight_per_worker) {
      const waiter = p.queue.shift();
      if (waiter) {
        p.taken++;
        waiter.admit();
        return;
      }
    }
    if (p.taken === 0 && p.queue.length === 0) this.places.delete(id);
  }

  private shed(reason: "worker_queue_full" | "worker_queue_timeout", id: string, stage: WorkerStage): HttpError {
    this.shedAt[stage]++;
    const {
      max_inflight_per_worker: most,
      max_queued_per_worker: queue,
      queue_timeout_ms,
      retry_after_s,
    } = this.limits;
    return overloaded(
      this.metrics,
      reason,
      reason === "worker_queue_full"
        ? `worker ${id} is at capacity (${most} requests in flight, ${queue} queued) and no other worker can take the request`
        : `no place on worker ${id} freed up within ${queue_timeout_ms} ms`,
      retry_after_s,
    );
  }
}
