// What src/learn/pool.ts and its worker thread (pool-worker.ts) say to each other: the tasks, the requests that carry
// them with the workloads a worker lacks, the replies. Types only, in a file of their own so that neither side
// imports the other.

import type { MainJobPart } from "./main-job.js";
import type { SimConfig } from "../sim/sim-config.js";
import type { Workload } from "../sim/types.js";
import type { Table } from "../table/table.js";

/** The simulator configuration a worker can receive: no module (it has its own) and no predictor function. */
export type PortableSimConfig = Omit<SimConfig, "table" | "module" | "osl"> & { osl?: "model" | "oracle" };

export type PoolTask =
  | { kind: "evaluate"; workload: number; base: PortableSimConfig; table: Table }
  | { kind: "log-features"; workload: number; base: PortableSimConfig }
  | { kind: "probe-load"; workload: number; base: PortableSimConfig; scale: number }
  | { kind: "main-part"; part: MainJobPart };

/** What the pool sends: a task, with the workloads it names that this worker does not hold yet. */
export interface PoolRequest {
  task: PoolTask;
  workloads: [number, Workload][];
}

/** What a worker answers: progress lines while a task runs, then its value or its error. */
export type PoolReply =
  | { kind: "progress"; line: string; done: boolean }
  | { kind: "result"; ok: true; value: unknown }
  | { kind: "result"; ok: false; message: string; stack?: string };
