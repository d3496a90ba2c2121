// The explain view's Web Worker: one router (the core, through the browser binding) on one prefill and one decode
// worker, answering one request at a time as the sliders move. Its own worker so that it answers while the other
// worker runs a long simulation.

import { loadCoreModule, Router, setCoreUrl } from "../index.js";
import { ruleTable } from "../../../src/table/rule-table.js";
import { POLICY_KINDS, type PolicyKind } from "../../../src/table/table.js";
import { EXPLAIN_WORKERS, explainRequest } from "./explain.js";
import type { ExplainTable, FromExplainWorker, ToExplainWorker } from "./protocol.js";
import coreUrl from "../../../build/core.wasm?url";

interface WorkerScope {
  onmessage: ((e: MessageEvent<ToExplainWorker>) => void) | null;
  postMessage(message: FromExplainWorker): void;
}
const scope = self as unknown as WorkerScope;
const post = (m: FromExplainWorker): void => scope.postMessage(m);

setCoreUrl(new URL(coreUrl, self.location.href));

let router: Router | null = null;

async function useTable(t: ExplainTable): Promise<Router> {
  let table: Uint8Array | ReturnType<typeof ruleTable>;
  if ("bytes" in t) table = t.bytes;
  else {
    if (!(POLICY_KINDS as readonly string[]).includes(t.rule)) throw new Error(`explain: unknown rule ${t.rule}`);
    table = ruleTable(t.rule as PolicyKind);
  }
  if (router)
    router.setTable(table); // a table the core rejects leaves the previous one in place
  else router = Router.create(table, { module: await loadCoreModule(), workers: [...EXPLAIN_WORKERS] });
  return router;
}

async function handle(m: ToExplainWorker): Promise<void> {
  switch (m.type) {
    case "table": {
      const r = await useTable(m.table);
      post({ type: "table-set", id: m.id, kind: r.table.kind });
      return;
    }
    case "explain": {
      const r = router ?? (await useTable({ rule: "dynamo-isl" }));
      const explanation = explainRequest(r, m.inputs);
      const bounds = explanation.bits.map((_, c) => r.table.ood_bound?.[c] ?? null);
      post({ type: "explained", id: m.id, inputs: m.inputs, view: { explanation, bounds } });
      return;
    }
  }
}

// One message at a time, in order: a table change is in place before the next explain reads it.
let queue: Promise<void> = Promise.resolve();
scope.onmessage = (e) => {
  queue = queue.then(() =>
    handle(e.data).catch((err: unknown) =>
      post({ type: "error", id: e.data.id, message: err instanceof Error ? err.message : String(err) }),
    ),
  );
};
