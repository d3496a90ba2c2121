// A small pool of worker threads that run simulations for the learner (Node only: worker_threads). The search stays
// in the main thread and asks for evaluations; each worker holds the compiled core (a WebAssembly.Module, handed
// over once through workerData) and each workload it has been sent (once per worker), so a candidate costs one
// message with the table and one with its evaluation. The simulator is deterministic, so an evaluation does not
// depend on which worker ran it or how many there are: `--jobs 1` and `--jobs N` give the same tables.
//
// The browser has no pool: there the search calls SimEnvironment.evaluate in turn (src/learn/sim-environment.ts).

import { availableParallelism } from "node:os";
import { Worker } from "node:worker_threads";
import type { OslPredictor, SimConfig } from "../sim/sim-config.js";
import type { Workload } from "../sim/types.js";
import { findSaturatedScaleWith, type Saturation } from "../sim/saturation.js";
import type { Table } from "../table/table.js";
import type { Evaluation } from "./environment.js";
import type { FeatureLog } from "./learning-environment.js";
import { SimEnvironment } from "./sim-environment.js";
import type { MainJobPart, PartRunner } from "./main-job.js";
import type { PoolReply, PoolRequest, PoolTask, PortableSimConfig } from "./pool-protocol.js";

/** The default number of jobs: every core this process may use. */
export const defaultJobs = (): number => availableParallelism();

/**
 * Which tasks a free worker takes first: "chain" ones (a step of a sequential search, which everything after it
 * waits for) before "bulk" ones (independent evaluations that can fill any gap); in order of asking within each.
 */
export type Urgency = "chain" | "bulk";

interface Pending {
  task: PoolTask;
  urgency: Urgency;
  workloads: Map<number, Workload>;
  progress?: ((line: string, done: boolean) => void) | undefined;
  resolve: (value: unknown) => void;
  reject: (error: Error) => void;
}

interface Slot {
  worker: Worker;
  /** ids of the workloads this worker already holds */
  holds: Set<number>;
  busy: Pending | null;
}

/** The worker entry beside this file (compiled: dist/src/learn/pool-worker.js). */
const WORKER_URL = new URL("./pool-worker.js", import.meta.url);

export class WorkerPool {
  readonly size: number;
  private readonly slots: Slot[] = [];
  private readonly queue: Pending[] = [];
  private nextWorkloadId = 1;
  private readonly workloadIds = new WeakMap<Workload, number>();
  private closed = false;

  constructor(jobs: number, module: WebAssembly.Module) {
    if (!Number.isInteger(jobs) || jobs < 1) throw new RangeError(`pool: jobs must be an integer ≥ 1, got ${jobs}`);
    this.size = jobs;
    for (let i = 0; i < jobs; i++) {
      const worker = new Worker(WORKER_URL, { workerData: { module } });
      const slot: Slot = { worker, holds: new Set(), busy: null };
      worker.on("message", (reply: PoolReply) => this.settle(slot, reply));
      worker.on("error", (e) => this.fail(slot, e));
      worker.on("exit", (code) => {
        if (!this.closed) this.fail(slot, new Error(`pool: a worker exited with code ${code}`));
      });
      this.slots.push(slot);
    }
  }

  /** Runs one task on the next free worker; `workloads` are the ones the task names (sent once per worker). */
  run<T>(
    task: PoolTask,
    workloads: Map<number, Workload> = new Map(),
    progress?: (line: string, done: boolean) => void,
    urgency: Urgency = "chain",
  ): Promise<T> {
    if (this.closed) return Promise.reject(new Error("pool: closed"));
    return new Promise<T>((resolve, reject) => {
      const p: Pending = { task, urgency, workloads, progress, resolve: resolve as (v: unknown) => void, reject };
      // a chain task goes ahead of every bulk one (and behind the chain tasks already waiting)
      const at = urgency === "chain" ? this.queue.findIndex((q) => q.urgency === "bulk") : -1;
      if (at < 0) this.queue.push(p);
      else this.queue.splice(at, 0, p);
      this.dispatch();
    });
  }

  /** An id for a workload, the same for the same object (so a worker receives it once). */
  workloadId(w: Workload): number {
    let id = this.workloadIds.get(w);
    if (id === undefined) {
      id = this.nextWorkloadId++;
      this.workloadIds.set(w, id);
    }
    return id;
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const p of this.queue.splice(0)) p.reject(new Error("pool: closed"));
    await Promise.all(this.slots.map((s) => s.worker.terminate()));
  }

  private dispatch(): void {
    for (const slot of this.slots) {
      if (this.queue.length === 0) return;
      if (slot.busy) continue;
      const p = this.queue.shift()!;
      slot.busy = p;
      const send: [number, Workload][] = [];
      for (const [id, w] of p.workloads)
        if (!slot.holds.has(id)) {
          send.push([id, w]);
          slot.holds.add(id);
        }
      const request: PoolRequest = { task: p.task, workloads: send };
      slot.worker.postMessage(request);
    }
  }

  private settle(slot: Slot, reply: PoolReply): void {
    if (reply.kind === "progress") {
      slot.busy?.progress?.(reply.line, reply.done);
      return;
    }
    const p = slot.busy;
    slot.busy = null;
    if (p) {
      if (reply.ok) p.resolve(reply.value);
      else p.reject(Object.assign(new Error(reply.message), { stack: reply.stack }));
    }
    this.dispatch();
  }

  private fail(slot: Slot, e: Error): void {
    const p = slot.busy;
    slot.busy = null;
    p?.reject(e);
    // a dead worker takes no more tasks: the rest fail rather than wait forever
    this.slots.splice(this.slots.indexOf(slot), 1);
    if (this.slots.length === 0) for (const q of this.queue.splice(0)) q.reject(e);
    else this.dispatch();
  }
}

/**
 * The simulated cluster as an environment whose evaluations run on a pool: the same rewards as SimEnvironment
 * (a worker runs SimEnvironment.evaluate on its own copy of the workload), several at once through evaluateMany.
 */
export class PooledSimEnvironment extends SimEnvironment {
  /**
   * `lookAhead` false: the environment reports one evaluation at a time, so the searches start nothing early (the
   * main job, whose other searches and evaluations keep the pool busy: a run started early would take their core).
   */
  constructor(
    readonly pool: WorkerPool,
    workload: Workload,
    base: Omit<SimConfig, "table">,
    readonly lookAhead = true,
  ) {
    super(workload, base);
  }

  /** as many evaluations at once as the pool has workers (one without the look-ahead) */
  get concurrency(): number {
    return this.lookAhead ? this.pool.size : 1;
  }

  override async evaluate(table: Table): Promise<Evaluation> {
    this.evaluations++;
    const id = this.pool.workloadId(this.workload);
    return this.pool.run<Evaluation>(
      { kind: "evaluate", workload: id, base: portable(this.base), table },
      new Map([[id, this.workload]]),
    );
  }

  /** The feature-logging run on a worker (once per workload and cluster: SimEnvironment.logFeatures' memo). */
  protected override runFeatureLog(): Promise<FeatureLog> {
    const id = this.pool.workloadId(this.workload);
    return this.pool.run<FeatureLog>(
      { kind: "log-features", workload: id, base: portable(this.base) },
      new Map([[id, this.workload]]),
    );
  }

  /** Evaluates the tables at once (as many at a time as the pool has workers); results in the tables' order. */
  async evaluateMany(tables: Table[]): Promise<Evaluation[]> {
    return Promise.all(tables.map((t) => this.evaluate(t)));
  }

  /**
   * A predictor function (the noisy ablation) draws from one random stream across evaluations, so its runs depend
   * on their order: that environment evaluates in turn in this thread, as the serial search does.
   */
  override withOslPredictor(predictor: OslPredictor): SimEnvironment {
    if (typeof predictor === "function") return new SimEnvironment(this.workload, { ...this.base, osl: predictor });
    return new PooledSimEnvironment(this.pool, this.workload, { ...this.base, osl: predictor }, this.lookAhead);
  }
}

/**
 * The saturated load with its probes on the pool (findSaturatedScaleWith): the probe the search needs and the one it
 * guesses it needs next run side by side; the same scale as findSaturatedScale in this thread.
 */
export function pooledSaturation(pool: WorkerPool, w: Workload, base: Omit<SimConfig, "table">): Promise<Saturation> {
  const id = pool.workloadId(w);
  const config = portable(base);
  return findSaturatedScaleWith(w, (scale) =>
    pool.run<number>({ kind: "probe-load", workload: id, base: config, scale }, new Map([[id, w]])),
  );
}

/** The configuration without what a worker has (the module) or cannot receive (a function). */
function portable(base: Omit<SimConfig, "table">): PortableSimConfig {
  const { module: _module, osl, ...rest } = base;
  if (typeof osl === "function") throw new Error("pool: a predictor function cannot run in a worker");
  return { ...rest, ...(osl !== undefined ? { osl } : {}) };
}

/**
 * The main job on the pool (src/learn/main-job.ts): its searches run in this thread and send each candidate's
 * evaluation to the pool; its other parts (the saturated load, each policy's evaluation, the guarded table's) are
 * pool tasks too, the policies' as bulk work that fills the gaps the sequential searches leave.
 */
export function poolParts(pool: WorkerPool, progress: (line: string, done: boolean) => void): PartRunner {
  const urgency = (part: MainJobPart): Urgency => (part.kind === "policy" ? "bulk" : "chain");
  return {
    run: (part) => pool.run({ kind: "main-part", part }, new Map(), progress, urgency(part)),
    // no look-ahead: the job's other searches and evaluations keep the workers busy (see PooledSimEnvironment)
    environment: (workload, base) => new PooledSimEnvironment(pool, workload, base, false),
  };
}
