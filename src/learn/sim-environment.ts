// The simulated cluster as the learner's environment: one fixed workload, so every candidate table runs on the same
// arrivals (common random numbers: the simulator is deterministic), and the feature-logging run under Dynamo's rule,
// run once per workload and cluster. A pool runs its simulations on worker threads (src/learn/pool.ts extends it).

import { attainmentByCluster } from "../sim/metrics.js";
import { simulate } from "../sim/simulator.js";
import type { OslPredictor, SimConfig } from "../sim/sim-config.js";
import type { SimRequest, Workload } from "../sim/types.js";
import { ruleTable } from "../table/rule-table.js";
import type { Table } from "../table/table.js";
import type { Evaluation } from "./environment.js";
import type { FeatureLog, LearningEnvironment } from "./learning-environment.js";

/** The simulated cluster as the environment: one fixed workload (the same arrivals for every table). */
export class SimEnvironment implements LearningEnvironment {
  evaluations = 0;
  constructor(
    readonly workload: Workload,
    readonly base: Omit<SimConfig, "table">,
  ) {}

  get describe(): LearningEnvironment["describe"] {
    return { tool: "dolphin-routing train", workload: this.workload.name, slo: this.base.slo };
  }

  async evaluate(table: Table): Promise<Evaluation> {
    this.evaluations++;
    const r = simulate(this.workload, { ...this.base, table });
    return {
      reward: r.summary.slo_attainment,
      byCluster: attainmentByCluster(r.records, this.base.slo),
      records: r.records,
    };
  }

  /**
   * Features as the core computes them, from a run under the rule people use today (Dynamo's), true output lengths.
   * Run once per workload and cluster (the paper's search and the guarded one log the same run); callers only read it.
   */
  logFeatures(): Promise<FeatureLog> {
    let byCluster = featureLogs.get(this.workload);
    if (!byCluster) featureLogs.set(this.workload, (byCluster = new Map()));
    // the run's routing and predictor are fixed (below), so the rest of the configuration names it
    const { module: _module, osl: _osl, ...cluster } = this.base;
    const key = JSON.stringify(cluster);
    let log = byCluster.get(key);
    if (!log) {
      log = this.runFeatureLog();
      byCluster.set(key, log);
      log.catch(() => byCluster.delete(key)); // a failed run is not remembered
    }
    return log;
  }

  /** The feature-logging run itself (a pool runs it on a worker: src/learn/pool.ts). */
  protected async runFeatureLog(): Promise<FeatureLog> {
    const logged = simulate(this.workload, {
      ...this.base,
      table: ruleTable("dynamo-isl"),
      osl: "oracle",
    }).records.filter((r) => !r.failed);
    const prev = previousOutputs(this.workload.requests);
    return {
      policy: "dynamo-isl",
      requests: logged.map((r) => ({
        isl: r.features.isl,
        effP: r.features.effP,
        effD: r.features.effD,
        path: r.path,
        osl: {
          isl: r.features.isl,
          reuse: r.prefixReuse,
          turn: r.turn,
          prevOutput: prev.get(r.id) ?? 0,
          maxTokens: 0,
          outputTokens: r.outputTokens,
        },
      })),
    };
  }

  withOslPredictor(predictor: OslPredictor): SimEnvironment {
    return new SimEnvironment(this.workload, { ...this.base, osl: predictor });
  }
}

/** Feature logs by workload, then by cluster configuration (SimEnvironment.logFeatures). */
const featureLogs = new WeakMap<Workload, Map<string, Promise<FeatureLog>>>();

/** The session's previous output for each request (a feature of the output-length classifier). */
function previousOutputs(requests: SimRequest[]): Map<number, number> {
  const last = new Map<number, number>();
  const out = new Map<number, number>();
  for (const r of requests) {
    if (r.session === undefined) continue;
    const prev = last.get(r.session);
    if (prev !== undefined) out.set(r.id, prev);
    last.set(r.session, r.outputTokens);
  }
  return out;
}
