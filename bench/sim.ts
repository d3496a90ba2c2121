// `dolphin bench sim`: how fast the simulator runs the Mooncake dev trace on h100-8b 2P2D at trace load, routed by
// the WebAssembly core under Dynamo's rule. Wall time of the simulation alone (loading the trace is reported apart).

import { ruleTable } from "../src/table/rule-table.js";
import { parseSlo } from "../src/sim/metrics.js";
import { PRESETS } from "../src/sim/model-presets.js";
import { Rng } from "../src/sim/rng.js";
import { internWorkload } from "../src/sim/shared-block-ids.js";
import { parseSplit } from "../src/sim/split.js";
import { simulate, Simulation } from "../src/sim/simulator.js";
import type { SimRequest, Workload } from "../src/sim/types.js";
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

// ---------------------------------------------------------------------------------------------------------------
// `dolphin bench sim --scale`: how the simulator's cost grows with the cluster. The dev trace is resampled to a
// cluster m times 2P2D's size with m times the requests over the same span of time, so every instance sees about
// the same load at every size and the cost per simulated second shows what the cluster's size adds.

/** The splits `--scale` runs and their requests: 100,000 at 32P32D, in proportion below. */
export const SCALE_SPLITS: readonly { split: string; requests: number }[] = [
  { split: "2P2D", requests: 6_250 },
  { split: "8P8D", requests: 25_000 },
  { split: "32P32D", requests: 100_000 },
];

export interface SimScaleRow {
  split: string;
  requests: number;
  /** simulated cluster time, first arrival to last event */
  simulated_s: number;
  /**
   * wall time to run the workload from its requests: interning its block hashes to ids (intern_s) and the
   * simulation. Resampling the trace is not counted (it makes the workload; a trace file would be read instead).
   */
  wall_s: number;
  /**
   * of wall_s, interning the workload's block hashes to ids: done once per workload and shared by every simulation
   * of it (the learner runs hundreds), so a second simulation of the same requests takes wall_s − intern_s
   */
  intern_s: number;
  /** events (steps, transfers, KV events, arrivals) handled per second of wall time (wall_s) */
  events_per_s: number;
  speedup_vs_realtime: number;
}

/**
 * `requests` Mooncake-like requests from a trace: copies of the trace, each shifted in time by its own random offset
 * (wrapping around the trace's span, so the copy keeps the trace's bursts and prefix sharing), its block hashes salted with its own random word (copies share no cache
 * content, like different applications' prompts); then whole conversations are drawn at random until `requests`
 * are reached (the last one cut after the turns that fit). Seeded: the same seed gives the same workload.
 */
export function resampleTrace(trace: Workload, requests: number, seed: number): Workload {
  if (!(Number.isSafeInteger(requests) && requests >= 1))
    throw new RangeError(`resampleTrace: requests must be an integer ≥ 1, got ${requests}`);
  const base = trace.requests;
  if (base.length === 0) throw new RangeError(`resampleTrace: ${trace.name} has no requests`);
  const first = base[0]!.arrivalMs;
  const span = base[base.length - 1]!.arrivalMs - first;
  const sessions = new Map<number, SimRequest[]>();
  for (const r of base) {
    const key = r.session ?? -1 - r.id; // a request without a session is a conversation of its own
    let turns = sessions.get(key);
    if (!turns) sessions.set(key, (turns = []));
    turns.push(r);
  }
  const conversations = [...sessions.values()];
  const rng = new Rng(seed, 21);
  const copies = Math.ceil(requests / base.length);
  const units: SimRequest[][] = [];
  for (let c = 0; c < copies; c++) {
    const offset = c === 0 ? 0 : rng.next() * span;
    const saltLo = c === 0 ? 0 : rng.u32();
    const saltHi = c === 0 ? 0 : rng.u32();
    for (const turns of conversations) {
      // turns past the end of the span wrap around to its start: a conversation that wraps goes on as a second
      // conversation there (each keeps its turns in order), so the copy covers the span evenly
      const pieces = new Map<number, SimRequest[]>();
      for (const r of turns) {
        let t = r.arrivalMs - first + offset;
        const wrapped = t >= span && span > 0;
        if (wrapped) t -= span;
        const blocks = new Uint32Array(r.blocks.length);
        for (let i = 0; i < blocks.length; i += 2) {
          blocks[i] = (r.blocks[i]! ^ saltLo) >>> 0;
          blocks[i + 1] = (r.blocks[i + 1]! ^ saltHi) >>> 0;
        }
        const key = wrapped ? 1 : 0;
        let piece = pieces.get(key);
        if (!piece) pieces.set(key, (piece = []));
        piece.push({ ...r, arrivalMs: t, blocks });
      }
      for (const piece of pieces.values()) {
        const session = units.length; // a conversation of its own in every copy
        units.push(piece.map((r) => ({ ...r, session })));
      }
    }
  }
  rng.shuffle(units);
  const out: SimRequest[] = [];
  for (const turns of units) {
    if (out.length >= requests) break;
    out.push(...turns.slice(0, requests - out.length));
  }
  out.sort((a, b) => a.arrivalMs - b.arrivalMs);
  const start = out[0]!.arrivalMs;
  out.forEach((r, i) => {
    r.id = i;
    r.arrivalMs -= start;
  });
  const last = out[out.length - 1]!.arrivalMs;
  return {
    name: `${trace.name} resampled to ${requests} requests`,
    requests: out,
    rate: last > 0 ? ((out.length - 1) * 1000) / last : 0,
  };
}

/** Runs the resampled trace on each split (h100-8b, Dynamo's rule, the WebAssembly core). */
export function runSimScaleBench(
  tracePath: string,
  module: WebAssembly.Module,
  splits: readonly { split: string; requests: number }[] = SCALE_SPLITS,
  seed = 1,
): { scale: SimScaleRow[] } {
  const trace = readMooncake(tracePath);
  const r3 = (x: number) => Math.round(x * 1000) / 1000;
  const scale = splits.map(({ split, requests }) => {
    const workload = resampleTrace(trace, requests, seed);
    const tIntern = performance.now();
    internWorkload(workload);
    const t0 = performance.now();
    const sim = new Simulation({
      preset: PRESETS["h100-8b"],
      split: parseSplit(split),
      slo: parseSlo("taichi-a"),
      table: ruleTable("dynamo-isl"),
      module,
    });
    const result = sim.run(workload);
    const wall = (performance.now() - tIntern) / 1000;
    const simulated = result.simulatedMs / 1000;
    return {
      split,
      requests,
      simulated_s: r3(simulated),
      wall_s: r3(wall),
      intern_s: r3((t0 - tIntern) / 1000),
      events_per_s: Math.round(sim.queue.scheduled / wall),
      speedup_vs_realtime: Math.round(simulated / wall),
    };
  });
  return { scale };
}
