// The explorer page: reads the form, hands each job to the Web Worker (worker.ts), and shows what comes back. It
// computes nothing itself, so the page stays responsive whatever the worker is doing.

import { cdfChart, clusterMapChart, scatterChart, trainingChart } from "./charts.js";
import type { EvalResult, ExplorerSetup } from "./jobs.js";
import type { FromWorker, TableView, ToWorker } from "./protocol.js";
import "./style.css";

const $ = <T extends HTMLElement>(id: string): T => {
  const el = document.getElementById(id);
  if (!el) throw new Error(`explorer: no element #${id}`);
  return el as T;
};

const status = $("status");
const runButton = $<HTMLButtonElement>("run");
const trainButton = $<HTMLButtonElement>("train");
const cancelButton = $<HTMLButtonElement>("cancel");

let worker = startWorker();
let nextId = 1;
let current: number | null = null;
/** The workload file the user dropped, used while "dropped file" is selected. */
let droppedWorkload: { file: string; text: string } | null = null;
/** The table the user opened or trained: evaluated as the dolphin policy beside the baselines. */
let openedTable: Uint8Array | null = null;
let trainPlot: ReturnType<typeof trainingChart> | null = null;

function startWorker(): Worker {
  const w = new Worker(new URL("./worker.ts", import.meta.url), { type: "module" });
  w.onmessage = (e: MessageEvent<FromWorker>) => onMessage(e.data);
  w.onerror = (e) => finish(`The worker failed: ${e.message}`);
  return w;
}

function send(m: ToWorker, transfer: Transferable[] = []): void {
  worker.postMessage(m, transfer);
}

function busy(on: boolean): void {
  runButton.disabled = on;
  trainButton.disabled = on;
  cancelButton.disabled = !on;
}

function finish(line: string): void {
  current = null;
  busy(false);
  status.textContent = line;
}

function setupFromForm(): ExplorerSetup {
  const value = (id: string) => $<HTMLInputElement | HTMLSelectElement>(id).value.trim();
  const workload = value("workload");
  return {
    workload: workload === "file" && droppedWorkload ? droppedWorkload : { generator: workload },
    cluster: value("cluster"),
    split: value("split"),
    slo: value("slo"),
    load: value("load") || "saturated",
    seed: Number(value("seed")) || 0,
    requests: Number(value("requests")) || 400,
  };
}

type Job = ToWorker extends infer T ? (T extends { id: number } ? Omit<T, "id"> : never) : never;

function start(m: Job, line: string, transfer: Transferable[] = []): void {
  current = nextId++;
  busy(true);
  status.textContent = line;
  send({ ...m, id: current } as ToWorker, transfer);
}

runButton.addEventListener("click", () => {
  const table = openedTable ? openedTable.slice() : undefined;
  start(
    { type: "eval", setup: setupFromForm(), ...(table ? { table } : {}) },
    "Running the simulation…",
    table ? [table.buffer] : [],
  );
});

trainButton.addEventListener("click", () => {
  const box = $("train-chart");
  box.replaceChildren();
  trainPlot = trainingChart(box);
  $("download").hidden = true;
  $("train-status").textContent = "Training…";
  start({ type: "train", setup: setupFromForm(), k: 8 }, "Training a table…");
});

cancelButton.addEventListener("click", () => {
  worker.terminate(); // the simulator is synchronous: stopping the worker is the only way to stop it mid-run
  worker = startWorker();
  finish("Cancelled.");
});

function onMessage(m: FromWorker): void {
  if (m.id !== current && m.type !== "table-opened" && !(m.type === "error" && m.id < 0)) return; // a cancelled run's late messages
  switch (m.type) {
    case "progress":
      status.textContent = m.line;
      return;
    case "train-step": {
      const s = m.progress.step;
      trainPlot?.add(s.round, s.reward, m.progress.best);
      $("train-status").textContent =
        `round ${s.round} (${s.phase}): bits ${s.bits.join("")}, reward ${(100 * s.reward).toFixed(1)}%, best ${(100 * m.progress.best).toFixed(1)}%`;
      return;
    }
    case "eval-done":
      showComparison(m.result);
      finish(`Done: ${Object.keys(m.result.output.policies).length} policies simulated.`);
      return;
    case "train-done": {
      const link = $<HTMLAnchorElement>("download");
      link.href = URL.createObjectURL(
        new Blob([m.bytes as Uint8Array<ArrayBuffer>], { type: "application/octet-stream" }),
      );
      link.hidden = false;
      openedTable = m.bytes;
      showTable(m.view);
      $("train-status").textContent =
        `Done: ${m.rounds} rounds, best reward ${(100 * m.bestReward).toFixed(1)}% (simulated). Run compares it with the baselines.`;
      finish("Training finished.");
      return;
    }
    case "table-opened":
      showTable(m.view);
      $("file-status").textContent = `Opened a ${m.view.kind} table.`;
      return;
    case "error":
      if (m.id === tableRequest) {
        openedTable = null;
        $("table-error").textContent = m.message;
        $("table-info").textContent = "No table open.";
        $("cluster-map").replaceChildren();
        $("file-status").textContent = "The table was rejected.";
        return;
      }
      finish(`Error: ${m.message}`);
      return;
  }
}

function showTable(view: TableView): void {
  $("table-error").textContent = "";
  $("table-info").textContent = view.description;
  const box = $("cluster-map");
  box.replaceChildren();
  if (view.map) clusterMapChart(box, view.map.xy, view.map.bits);
}

const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
const ms = (x: number) => x.toFixed(x < 100 ? 1 : 0);

function showComparison(r: EvalResult): void {
  const o = r.output;
  $("cmp-meta").textContent =
    `Simulated: ${o.workload} on ${o.cluster} ${o.split}, ${o.requests} requests at ${o.load.rps.toFixed(2)} req/s (load ${o.load.spec}), SLO ${o.slo.ttft_ms}/${o.slo.tpot_ms} ms; ` +
    `computed in this page, ${(Object.values(r.simulateMs).reduce((a, b) => a + b, 0) / 1000).toFixed(1)} s of simulation.`;
  const table = $<HTMLTableElement>("comparison");
  const caption = table.caption;
  table.replaceChildren(...(caption ? [caption] : []));
  const head = table.createTHead().insertRow();
  for (const h of [
    "policy",
    "SLO attainment",
    "TTFT P50 (ms)",
    "TTFT P90",
    "TTFT P99",
    "TPOT P50 (ms)",
    "TPOT P90",
    "TPOT P99",
    "local share",
    "throughput (tok/s)",
    "KV moved (GB)",
  ]) {
    const th = document.createElement("th");
    th.scope = "col";
    th.textContent = h;
    head.append(th);
  }
  const body = table.createTBody();
  const rows = Object.entries(o.policies).sort((a, b) => b[1].slo_attainment - a[1].slo_attainment);
  for (const [name, p] of rows) {
    const tr = body.insertRow();
    tr.dataset["policy"] = name;
    tr.dataset["simulateMs"] = String(r.simulateMs[name] ?? 0);
    const th = document.createElement("th");
    th.scope = "row";
    th.textContent = name;
    tr.append(th);
    for (const v of [
      pct(p.slo_attainment),
      ms(p.ttft_ms.p50),
      ms(p.ttft_ms.p90),
      ms(p.ttft_ms.p99),
      ms(p.tpot_ms.p50),
      ms(p.tpot_ms.p90),
      ms(p.tpot_ms.p99),
      pct(p.local_fraction),
      p.throughput_tokens_per_s.toFixed(0),
      ((p.kv_bytes_transferred ?? 0) / 1e9).toFixed(2),
    ]) {
      tr.insertCell().textContent = v;
    }
  }
  const charts = $("charts");
  charts.replaceChildren();
  const names = rows.map(([n]) => n);
  cdfChart(charts, "TTFT CDF", "TTFT (ms)", Object.fromEntries(names.map((n) => [n, r.points[n]!.ttftSorted])));
  cdfChart(charts, "TPOT CDF", "TPOT (ms)", Object.fromEntries(names.map((n) => [n, r.points[n]!.tpotSorted])));
  const best = names[0];
  if (best) scatterChart(charts, `TTFT against prompt length: ${best}`, r.points[best]!.scatter);
}

// ---- files: a workload (text) or a table (.msgpack) ----------------------------------------------------------------

let tableRequest = -1;

async function openFile(f: File): Promise<void> {
  if (f.name.endsWith(".msgpack")) {
    const bytes = new Uint8Array(await f.arrayBuffer());
    openedTable = bytes.slice();
    tableRequest = -nextId++; // negative ids: table checks are not runs, and a run in progress keeps its id
    $("file-status").textContent = `Checking ${f.name}…`;
    send({ type: "open-table", id: tableRequest, bytes }, [bytes.buffer]);
    return;
  }
  droppedWorkload = { file: f.name, text: await f.text() };
  const select = $<HTMLSelectElement>("workload");
  const option = select.querySelector<HTMLOptionElement>("option[value=file]")!;
  option.disabled = false;
  option.textContent = `dropped file: ${f.name}`;
  select.value = "file";
  $("file-status").textContent = `Loaded ${f.name} (${f.size} bytes): it is parsed when you press Run or Train.`;
}

const drop = $("drop");
drop.addEventListener("dragover", (e) => {
  e.preventDefault();
  drop.classList.add("over");
});
drop.addEventListener("dragleave", () => drop.classList.remove("over"));
drop.addEventListener("drop", (e) => {
  e.preventDefault();
  drop.classList.remove("over");
  const f = e.dataTransfer?.files[0];
  if (f) void openFile(f);
});
drop.addEventListener("keydown", (e) => {
  if (e.key === "Enter" || e.key === " ") {
    e.preventDefault();
    $<HTMLInputElement>("file").click();
  }
});
$<HTMLInputElement>("file").addEventListener("change", (e) => {
  const input = e.target as HTMLInputElement;
  const f = input.files?.[0];
  input.value = ""; // so that choosing the same file again (after fixing it) reads it again
  if (f) void openFile(f);
});
