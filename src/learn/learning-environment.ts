// What the learner needs of an environment beyond the search's (src/learn/environment.ts): a run that logs each
// request's features, and a name and SLO for the tables learned there. The simulator is one (sim-environment.ts), a
// live cluster (src/serve/tune.ts) another.

import type { Slo } from "../sim/metrics.js";
import type { OslPredictor } from "../sim/sim-config.js";
import type { Environment } from "./environment.js";
import type { OslSample } from "./osl.js";

/** An environment the learner also logs features in and names in its tables: what `prepare` needs. */
export interface LearningEnvironment extends Environment {
  /** Runs the workload under the environment's reference routing and reports each request's features. */
  logFeatures(): Promise<FeatureLog>;
  /**
   * The same environment with the router's output-length predictor replaced (the oracle and noisy ablations);
   * absent where the router's predictor cannot be replaced (a live cluster runs its table's model).
   */
  withOslPredictor?(predictor: OslPredictor): Environment;
  /** what the tables learned here say about their origin */
  readonly describe: { tool: string; workload: string; slo: Slo };
}

/** One request of the feature-logging run: the router's features and where the reference routing sent it. */
export interface LoggedRequest {
  isl: number;
  effP: number;
  effD: number;
  path: "local" | "remote";
  /** what the output-length classifier learns from; absent where outputs are not observed (a live cluster) */
  osl?: OslSample;
}

export interface FeatureLog {
  /** the routing the features were logged under ("dynamo-isl", "the proxy's current table") */
  policy: string;
  requests: LoggedRequest[];
}
