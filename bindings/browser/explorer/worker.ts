// The explorer's Web Worker: loads the core (core.wasm, through the browser binding) and runs the simulator and the
// learner off the page's thread, so the page stays responsive; cancelling a run is terminating this worker.

import { decodeTable, describeTable, type Table } from "../../../src/table.js";
import { project2d } from "./cluster-map.js";
import { loadCoreModule, Router, setCoreUrl } from "../index.js";
import { evaluate, trainTable } from "./jobs.js";
import type { FromWorker, TableView, ToWorker } from "./protocol.js";
import coreUrl from "../../../build/core.wasm?url";

interface WorkerScope {
  onmessage: ((e: MessageEvent<ToWorker>) => void) | null;
  postMessage(message: FromWorker, transfer?: Transferable[]): void;
}
const scope = self as unknown as WorkerScope;
const post = (m: FromWorker, transfer: Transferable[] = []): void => scope.postMessage(m, transfer);

setCoreUrl(new URL(coreUrl, self.location.href));

function tableView(t: Table): TableView {
  const map =
    t.centroids && t.bits && t.centroids.length === t.bits.length ? { xy: project2d(t.centroids), bits: t.bits } : null;
  return { kind: t.kind, description: describeTable(t), map };
}

/**
 * A table file checked as every host checks it: loaded into the core (its decoder's error, which names the field, is
 * the one the CLI prints), then read in TypeScript for the description.
 */
async function openTable(bytes: Uint8Array): Promise<TableView> {
  const router = Router.create(bytes, {
    module: await loadCoreModule(),
    workers: [
      { id: "P0", role: "prefill" },
      { id: "D0", role: "decode" },
    ],
  });
  return tableView(router.table);
}

async function handle(m: ToWorker): Promise<void> {
  const progress = (line: string): void => post({ type: "progress", id: m.id, line });
  const module = await loadCoreModule();
  switch (m.type) {
    case "eval": {
      const table = m.table
        ? Router.create(m.table, { module, workers: [{ id: "D0", role: "decode" }] }).table
        : undefined;
      post({
        type: "eval-done",
        id: m.id,
        result: evaluate({ ...m.setup, ...(table ? { table } : {}) }, module, progress),
      });
      return;
    }
    case "train": {
      const r = await trainTable({ ...m.setup, k: m.k }, module, progress, (p) =>
        post({ type: "train-step", id: m.id, progress: p }),
      );
      const view = tableView(decodeTable(r.bytes)); // the file as written (its checksum filled in), before the bytes move
      post({ type: "train-done", id: m.id, bytes: r.bytes, rounds: r.rounds, bestReward: r.bestReward, view }, [
        r.bytes.buffer,
      ]);
      return;
    }
    case "open-table":
      post({ type: "table-opened", id: m.id, view: await openTable(m.bytes) });
      return;
  }
}

scope.onmessage = (e) => {
  handle(e.data).catch((err: unknown) =>
    post({ type: "error", id: e.data.id, message: err instanceof Error ? err.message : String(err) }),
  );
};
