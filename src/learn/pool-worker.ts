// The worker thread of src/learn/pool.ts (Node only): holds the compiled core it was started with and the workloads
// it has been sent, and runs one task at a time: a candidate table's evaluation (SimEnvironment.evaluate, the same
// code the serial search runs), a saturated-load probe (src/sim/saturation.ts) or a part of the main job
// (src/learn/main-job.ts).

import { parentPort, workerData } from "node:worker_threads";
import type { Workload } from "../sim/types.js";
import type { Table } from "../table/table.js";
import { runMainJobPart, type MainJobPart } from "./main-job.js";
import type { PoolReply, PoolRequest, PoolTask } from "./pool-protocol.js";
import { SimEnvironment } from "./sim-environment.js";
import { probeAttainment, probeWorkload } from "../sim/saturation.js";

const module = (workerData as { module: WebAssembly.Module }).module;
const workloads = new Map<number, Workload>();
/** each workload's saturated-load probe part, cut once (src/sim/saturation.ts) */
const probeParts = new Map<number, Workload>();
const port = parentPort;
if (!port) throw new Error("pool-worker: not started as a worker thread (src/learn/pool.ts starts it)");

function workload(id: number): Workload {
  const w = workloads.get(id);
  if (!w) throw new Error(`pool-worker: workload ${id} was never sent to this worker`);
  return w;
}

async function run(task: PoolTask): Promise<unknown> {
  switch (task.kind) {
    case "evaluate":
      return new SimEnvironment(workload(task.workload), { ...task.base, module }).evaluate(task.table);
    case "log-features":
      return new SimEnvironment(workload(task.workload), { ...task.base, module }).logFeatures();
    case "probe-load": {
      let probe = probeParts.get(task.workload);
      if (!probe) probeParts.set(task.workload, (probe = probeWorkload(workload(task.workload))));
      return probeAttainment(probe, { ...task.base, module }, task.scale);
    }
    case "main-part":
      return runMainJobPart(task.part, module, (line, done) =>
        port!.postMessage({ kind: "progress", line, done } satisfies PoolReply),
      );
  }
}

port.on("message", (request: PoolRequest) => {
  for (const [id, w] of request.workloads) workloads.set(id, w);
  run(request.task).then(
    (value) => port.postMessage({ kind: "result", ok: true, value } satisfies PoolReply),
    (e: Error) =>
      port.postMessage({
        kind: "result",
        ok: false,
        message: String(e?.message ?? e),
        stack: e?.stack,
      } satisfies PoolReply),
  );
});
