// What `train` takes (src/learn/train.ts): the clustering, the output-length mode, the search's settings and the
// guarded search's. Its own file, so `prepare` (prepare.ts), the bit search (bit-search.ts) and `train` share it and
// none of them imports another for it.

import type { FeatureName, Table } from "../table/table.js";
import type { Environment, SearchStep } from "./environment.js";
import type { GuardOptions } from "./guard.js";
import type { LearningEnvironment } from "./learning-environment.js";

/** The guarded search's settings as `train` takes them (GuardOptions, with held-out arrivals and proposed tables). */
export type GuardTraining = Omit<GuardOptions, "heldOut" | "proposals"> & {
  oodQuantile?: number;
  /** per-cluster load bounds and cluster shares in the table (src/learn/load-bounds.ts; default true) */
  loadBounds?: boolean;
  /** the quantile of the tested loads each cluster's bound is (default 1: the maximum; load-bounds.ts says why) */
  loadQuantile?: number;
  /** held-out arrivals for the replication check (GuardOptions.heldOut), given the chosen output-length predictor */
  heldOut?: Environment & Pick<LearningEnvironment, "withOslPredictor">;
  /**
   * Tables proposed to the guard as group moves (GuardOptions.proposals): used where their clusters are the ones
   * learned here (same features, scaler and centroids). Absent: the paper's search proposes one, run under reward
   * "both"'s latency constraint for `proposalRounds` rounds (default 40; 0: no proposal). A promise: the tables are
   * still being learned, and the search waits for them only when it reaches its group moves.
   */
  proposals?: Table[] | Promise<Table[]>;
  proposalRounds?: number;
};

export type OslMode = "model" | "oracle" | { noisy: number };

export interface TrainOptions {
  k?: number;
  algo?: "kmeans" | "gmm";
  seed?: number;
  /** features to cluster on; default all four (drop osl_hat for the ablation), three where outputs are not observed */
  features?: FeatureName[];
  /** per-cluster scanning before the refinement (the paper's scan initialization) */
  scanInit?: boolean;
  epsilon?: number;
  /** refinement stops after this many rounds without improvement */
  patience?: number;
  maxRounds?: number;
  osl?: OslMode;
  /**
   * The guarded search (src/learn/guard.ts): every cluster starts at `rule` and moves off it only on a significant
   * paired gain; the table carries out-of-distribution bounds. Absent: the paper's unguarded bit search.
   */
  guard?: GuardTraining;
  /** what the table says about itself */
  provenance?: { workload: string; split?: string; notes?: string };
  onProgress?: (step: SearchStep, total: { rounds: number; best: number }) => void;
}
