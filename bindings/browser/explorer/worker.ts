// The explorer's Web Worker: loads the core (core.wasm, through the browser binding) and runs the simulator and the
// learner off the page's thread, so the page stays responsive; cancelling a run is terminating this worker.

import { decodeTable } from "../../../src/table/codec.js";
import { describeTable } from "../../../src/table/describe-table.js";
import type { Table } from "../../../src/table/table.js";
import { clusterMap } from "./cluster-map.js";
import { loadCoreModule, Router, setCoreUrl } from "../index.js";
import { evaluate, sweep, trainTable } from "./jobs.js";
import type { FromWorker, TableView, ToWorker } from "./protocol.js";
import coreUrl from "../../../build/core.wasm?url";

interface WorkerScope {
  onmessage: ((e: MessageEvent<ToWorker>) => void) | null;
  postMessage(message: FromWorker, transfer?: Transferable[]): void;
}
const scope = self as unknown as WorkerScope;
const post = (m: FromWorker, transfer: Transferable[] = []): void => scope.postMessage(m, transfer);

setCoreUrl(new URL(coreUrl, self.location.href));

/** A table's description and its cluster map: centroids only (no requests routed yet) unless `map` is given. */
function tableView(t: Table, map: TableView["map"] = clusterMap(t, null, { ttftMs: 0, tpotMs: 0 }, null)): TableView {
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

/** A table file given with a job: read by the core, as every host reads it. */
function tableOf(bytes: Uint8Array | undefined, module: WebAssembly.Module): { table?: Table } {
  return bytes ? { table: Router.create(bytes, { module, workers: [{ id: "D0", role: "decode" }] }).table } : {};
}

async function handle(m: ToWorker): Promise<void> {
  const progress = (line: string, fraction?: number): void =>
    post({ type: "progress", id: m.id, line, ...(fraction !== undefined ? { fraction } : {}) });
  const module = await loadCoreModule();
  switch (m.type) {
    case "eval":
      post({
        type: "eval-done",
        id: m.id,
        result: evaluate({ ...m.setup, ...tableOf(m.table, module) }, module, progress),
      });
      return;
    case "sweep":
      post({
        type: "sweep-done",
        id: m.id,
        result: sweep({ ...m.setup, ...tableOf(m.table, module) }, module, progress),
      });
      return;
    case "train": {
      const r = await trainTable({ ...m.setup, k: m.k, reward: m.reward }, module, progress, (p) =>
        post({ type: "train-step", id: m.id, progress: p }),
      );
      const view = tableView(decodeTable(r.bytes), r.map); // the file as written (its checksum filled in), before the bytes move
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
