// The messages between the explorer page (main.ts) and its Web Worker (worker.ts). Typed once here so both sides agree.

import type { EvalResult, ExplorerSetup, TrainProgress } from "./jobs.js";

export type ToWorker =
  | { type: "eval"; id: number; setup: ExplorerSetup; table?: Uint8Array }
  | { type: "train"; id: number; setup: ExplorerSetup; k: number }
  | { type: "open-table"; id: number; bytes: Uint8Array };

/** What the page shows of a table: its description and, for learned kinds, the centroids mapped to 2-D with their bits. */
export interface TableView {
  kind: string;
  description: string;
  map: { xy: [number, number][]; bits: number[] } | null;
}

export type FromWorker =
  | { type: "progress"; id: number; line: string }
  | { type: "train-step"; id: number; progress: TrainProgress }
  | { type: "eval-done"; id: number; result: EvalResult }
  | { type: "train-done"; id: number; bytes: Uint8Array; rounds: number; bestReward: number; view: TableView }
  | { type: "table-opened"; id: number; view: TableView }
  | { type: "error"; id: number; message: string };
