// The messages between the explorer page (main.ts) and its Web Workers (worker.ts runs the simulator and the learner;
// explain-worker.ts routes single requests for the explain view). Typed once here so both sides agree.

import type { Explanation } from "../../../src/router/types.js";
import type { ClusterMapView } from "./cluster-map.js";
import type { ExplainInputs } from "./explain.js";
import type { EvalResult, ExplorerSetup, SweepResult, TrainProgress } from "./jobs.js";
import type { RewardForm } from "../../../src/learn/guard.js";

export type ToWorker =
  | { type: "eval"; id: number; setup: ExplorerSetup; table?: Uint8Array }
  | { type: "sweep"; id: number; setup: ExplorerSetup; table?: Uint8Array }
  | { type: "train"; id: number; setup: ExplorerSetup; k: number; reward: RewardForm }
  | { type: "open-table"; id: number; bytes: Uint8Array };

/** What the page shows of a table: its description and, for learned kinds, its cluster map. */
export interface TableView {
  kind: string;
  description: string;
  map: ClusterMapView | null;
}

export type FromWorker =
  | { type: "progress"; id: number; line: string; fraction?: number }
  | { type: "train-step"; id: number; progress: TrainProgress }
  | { type: "eval-done"; id: number; result: EvalResult }
  | { type: "sweep-done"; id: number; result: SweepResult }
  | { type: "train-done"; id: number; bytes: Uint8Array; rounds: number; bestReward: number; view: TableView }
  | { type: "table-opened"; id: number; view: TableView }
  | { type: "error"; id: number; message: string };

/** The table the explain view routes with: the opened or trained table's bytes, or a rule by kind. */
export type ExplainTable = { bytes: Uint8Array } | { rule: string };

export type ToExplainWorker =
  { type: "table"; id: number; table: ExplainTable } | { type: "explain"; id: number; inputs: ExplainInputs };

export interface ExplainView {
  explanation: Explanation;
  /** per cluster of a learned table: its out-of-distribution bound (v2), or null */
  bounds: (number | null)[];
}

export type FromExplainWorker =
  | { type: "table-set"; id: number; kind: string }
  | { type: "explained"; id: number; inputs: ExplainInputs; view: ExplainView }
  | { type: "error"; id: number; message: string };
