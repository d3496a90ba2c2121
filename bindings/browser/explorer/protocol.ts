// The messages between the explorer page (main.ts) and its Web Worker (worker.ts). Typed once here so both sides agree.

import type { EvalResult, ExplorerSetup, TrainProgress } from "./jobs.js";

export type ToWorker =
  | { type: "eval"; id: number; setup: ExplorerSetup; table?: Uint8Array }
  | { type: "train"; id: number; setup: ExplorerSetup; k: number }
  | { type: "open-table"; id: number; bytes: Uint8Array };

export type FromWorker =
  | { type: "progress"; id: number; line: string }
  | { type: "train-step"; id: number; progress: TrainProgress }
  | { type: "eval-done"; id: number; result: EvalResult }
  | { type: "train-done"; id: number; bytes: Uint8Array; rounds: number; bestReward: number; description: string }
  | { type: "table-opened"; id: number; description: string; kind: string }
  | { type: "error"; id: number; message: string };
