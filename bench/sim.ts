// `dolphin bench sim`: how fast the simulator runs the Mooncake dev trace on h100-8b 2P2D at trace load, routed by
// the WebAssembly core under Dynamo's rule. Wall time of the simulation alone (loading the trace is reported apart).

import { ruleTable } from "../src/table.js";
import { parseSlo } from "../src/sim/metrics.js";
import { PRESETS } from "../src/sim/perf.js";
import { parseSplit, simulate } from "../src/sim/simulator.js";
import { readMooncake } from "../src/sim/workload-files.js";

export interface SimBenchResult {
  requests: number;
  simulated_s: number;
  wall_s: number;
  requests_per_wall_s: number;
  speedup_vs_realtime: number;
  load_s: number;
  trace: string;
  cluster: string;
  split: string;
  policy: string;
}

export function runSimBench(tracePath: string, module: WebAssembly.Module): SimBenchResult {
  const t0 = performance.now();
  const workload = readMooncake(tracePath);
  const t1 = performance.now();
  const result = simulate(workload, {
    preset: PRESETS["h100-8b"],
    split: parseSplit("2P2D"),
    slo: parseSlo("taichi-a"),
    table: ruleTable("dynamo-isl"),
    module,
  });
  const wall = (performance.now() - t1) / 1000;
  const simulated = result.simulatedMs / 1000;
  const r3 = (x: number) => Math.round(x * 1000) / 1000;
  return {
    requests: workload.requests.length,
    simulated_s: r3(simulated),
    wall_s: r3(wall),
    requests_per_wall_s: Math.round(workload.requests.length / wall),
    speedup_vs_realtime: Math.round(simulated / wall),
    load_s: r3((t1 - t0) / 1000),
    trace: tracePath,
    cluster: "h100-8b",
    split: "2P2D",
    policy: "dynamo-isl",
  };
}
