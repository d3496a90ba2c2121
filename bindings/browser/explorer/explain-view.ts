// The explain view: four inputs (prompt length, cached tokens on P and on D, predicted output length), each a slider
// and a number field kept in step, sent to the explain worker as they move; it answers with router.explain (the
// core's features, standardized values, scores against every cluster, the bit and why), shown here. At most one
// request is in flight: while one is, only the latest inputs wait, so a fast slider never queues stale work.

import type { ExplainInputs } from "./explain.js";
import type { ExplainTable, ExplainView, FromExplainWorker, ToExplainWorker } from "./protocol.js";
import { $ } from "./views.js";

const FIELDS: { id: string; key: keyof ExplainInputs }[] = [
  { id: "x-prompt", key: "promptTokens" },
  { id: "x-cached-p", key: "cachedP" },
  { id: "x-cached-d", key: "cachedD" },
  { id: "x-osl", key: "oslHat" },
];
const VALUE_NAMES = ["local", "remote", "rule"];

let worker: Worker;
let nextId = 1;
let inFlight = false;
let waiting: ExplainInputs | null = null;
/** the table the view routes with when the user picks "the opened or trained table" */
let openedTable: Uint8Array | null = null;

function send(m: ToExplainWorker): void {
  worker.postMessage(m);
}

function inputs(): ExplainInputs | null {
  const out: Partial<ExplainInputs> = {};
  for (const f of FIELDS) {
    const text = $<HTMLInputElement>(f.id).value.trim();
    const v = Number(text);
    if (text === "" || !Number.isInteger(v) || v < 0) {
      $("explain-error").textContent =
        `${labelOf(f.id)}: expected a whole number of tokens ≥ 0, got ${JSON.stringify(text)}`;
      return null;
    }
    out[f.key] = v;
  }
  return out as ExplainInputs;
}

const labelOf = (id: string): string => document.querySelector(`label[for="${id}"]`)?.textContent ?? id;

/** Asks for an explanation of the current inputs (or queues them behind the one in flight). */
function request(): void {
  const x = inputs();
  if (!x) return;
  if (inFlight) {
    waiting = x;
    return;
  }
  inFlight = true;
  send({ type: "explain", id: nextId++, inputs: x });
}

/** The cached-token sliders reach up to the prompt length. */
function syncRanges(): void {
  const prompt = Number($<HTMLInputElement>("x-prompt").value) || 0;
  for (const id of ["x-cached-p", "x-cached-d"]) $<HTMLInputElement>(`${id}-range`).max = String(Math.max(prompt, 16));
}

function onMessage(m: FromExplainWorker): void {
  switch (m.type) {
    case "table-set":
      $("explain-error").textContent = "";
      request();
      return;
    case "explained":
      inFlight = false;
      $("explain-error").textContent = "";
      show(m.inputs, m.view);
      break;
    case "error":
      inFlight = false;
      $("explain-error").textContent = m.message;
      break;
  }
  if (waiting) {
    const x = waiting;
    waiting = null;
    inFlight = true;
    send({ type: "explain", id: nextId++, inputs: x });
  }
}

function cells(table: HTMLTableElement, columns: string[], rows: { head: string; cells: string[]; mark?: boolean }[]) {
  const caption = table.caption;
  table.replaceChildren(...(caption ? [caption] : []));
  const head = table.createTHead().insertRow();
  for (const c of columns) {
    const th = document.createElement("th");
    th.scope = "col";
    th.textContent = c;
    head.append(th);
  }
  const body = table.createTBody();
  for (const r of rows) {
    const tr = body.insertRow();
    if (r.mark) tr.className = "chosen";
    const th = document.createElement("th");
    th.scope = "row";
    th.textContent = r.head;
    tr.append(th);
    for (const c of r.cells) tr.insertCell().textContent = c;
  }
}

function show(x: ExplainInputs, v: ExplainView): void {
  const e = v.explanation;
  const d = e.decision;
  const out = $("explain-decision");
  out.textContent =
    `Bit ${d.bit} (${d.bit ? "remote" : "local"} prefill by the policy) → path ${d.path}; reason: ${d.reason}` +
    (d.cluster !== null ? `; cluster c${d.cluster}` : "") +
    ` (${e.kind} table).`;
  out.dataset["bit"] = String(d.bit);
  out.dataset["path"] = d.path;
  out.dataset["reason"] = d.reason;
  out.dataset["cluster"] = d.cluster === null ? "" : String(d.cluster);
  // the loads a version-3 table's load bounds were checked against (prefill "" when no prefill worker was chosen)
  out.dataset["loadPrefill"] = d.load.prefill === null ? "" : String(d.load.prefill);
  out.dataset["loadDecode"] = String(d.load.decode);
  out.dataset["inputs"] = JSON.stringify(x);
  $("explain-why").textContent = `Why: ${e.why}`;
  const f = d.features;
  const z = new Map(e.featureNames.map((name, i) => [name, e.standardized[i]!]));
  cells(
    $<HTMLTableElement>("explain-features"),
    ["feature", "value (tokens)", "standardized"],
    [
      ["isl", "isl", f.isl],
      ["eff_P (uncached on P)", "eff_P", f.effP],
      ["eff_D (uncached on D)", "eff_D", f.effD],
      ["osl_hat", "osl_hat", f.oslHat],
    ].map(([label, name, value]) => ({
      head: String(label),
      cells: [String(value), z.has(String(name)) ? z.get(String(name))!.toFixed(4) : "–"],
    })),
  );
  const clusters = $<HTMLTableElement>("explain-clusters");
  clusters.hidden = e.scores.length === 0;
  const measure = e.kind === "gmm" ? "log-likelihood" : "squared distance";
  cells(
    clusters,
    ["cluster", "value", measure, "OOD bound"],
    e.scores.map((s, c) => ({
      head: `c${c}${c === d.cluster ? " (chosen)" : ""}`,
      cells: [
        VALUE_NAMES[e.bits[c]!] ?? String(e.bits[c]),
        s.toFixed(4),
        v.bounds[c] == null ? "none" : v.bounds[c]!.toFixed(4),
      ],
      mark: c === d.cluster,
    })),
  );
}

/** Which table the view explains with; `bytes` is the opened or trained table (null: none). */
export function setExplainTable(bytes: Uint8Array | null): void {
  openedTable = bytes;
  const select = $<HTMLSelectElement>("explain-table");
  const opened = select.querySelector<HTMLOptionElement>("option[value=opened]")!;
  opened.disabled = bytes === null;
  if (bytes) select.value = "opened";
  else if (select.value === "opened") select.value = "dynamo-isl";
  useSelected();
}

function useSelected(): void {
  const value = $<HTMLSelectElement>("explain-table").value;
  const table: ExplainTable = value === "opened" && openedTable ? { bytes: openedTable.slice() } : { rule: value };
  send({ type: "table", id: nextId++, table });
}

export function startExplainView(): void {
  worker = new Worker(new URL("./explain-worker.ts", import.meta.url), { type: "module" });
  worker.onmessage = (e: MessageEvent<FromExplainWorker>) => onMessage(e.data);
  worker.onerror = (e) => ($("explain-error").textContent = `The explain worker failed: ${e.message}`);
  for (const f of FIELDS) {
    const number = $<HTMLInputElement>(f.id);
    const range = $<HTMLInputElement>(`${f.id}-range`);
    range.addEventListener("input", () => {
      number.value = range.value;
      syncRanges();
      request();
    });
    number.addEventListener("input", () => {
      range.value = number.value;
      syncRanges();
      request();
    });
  }
  $<HTMLSelectElement>("explain-table").addEventListener("change", useSelected);
  syncRanges();
  useSelected(); // the first answer comes when the table is set
}
