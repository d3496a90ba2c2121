// The explorer page: reads the form, hands each job to the Web Worker (worker.ts), and shows what comes back. It
// computes nothing itself, so the page stays responsive whatever the worker is doing; cancelling a job is ending
// that worker and starting a fresh one.

import { trainingChart } from "./charts.js";
import { setExplainTable, startExplainView } from "./explain-view.js";
import type { WorkloadSource } from "./jobs.js";
import type { FromWorker, ToWorker } from "./protocol.js";
import { readSetup, SetupError, wireSetupForm } from "./setup-form.js";
import { $, clearTable, showComparison, showMap, showSweep, showTable } from "./views.js";
import "./style.css";

const status = $("status");
const progressBar = $<HTMLProgressElement>("progress");
const jobButtons = ["run", "sweep", "train"].map((id) => $<HTMLButtonElement>(id));
const cancelButton = $<HTMLButtonElement>("cancel");

let worker = startWorker();
let nextId = 1;
let current: number | null = null;
/** The workload file the user dropped, used while "dropped file" is selected. */
let droppedWorkload: WorkloadSource | null = null;
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
  for (const b of jobButtons) b.disabled = on;
  cancelButton.disabled = !on;
  progressBar.hidden = !on;
  if (on) progressBar.removeAttribute("value"); // indeterminate until the worker says how far it is
}

function finish(line: string): void {
  current = null;
  busy(false);
  status.textContent = line;
}

type Job = ToWorker extends infer T ? (T extends { id: number } ? Omit<T, "id"> : never) : never;

/** Starts a job with the form's setup; a value the explorer refuses is reported against its field instead. */
function start(make: (setup: ReturnType<typeof readSetup>) => Job, line: string, withTable = false): void {
  const error = $("setup-error");
  let setup;
  try {
    setup = readSetup(droppedWorkload);
    error.textContent = "";
  } catch (e) {
    if (!(e instanceof SetupError)) throw e;
    error.textContent = e.message;
    document.getElementById(e.field)?.focus();
    return;
  }
  const table = withTable && openedTable ? openedTable.slice() : undefined;
  current = nextId++;
  busy(true);
  status.textContent = line;
  send({ ...make(setup), ...(table ? { table } : {}), id: current } as ToWorker, table ? [table.buffer] : []);
}

$("run").addEventListener("click", () => start((setup) => ({ type: "eval", setup }), "Running the simulation…", true));

$("sweep").addEventListener("click", () =>
  start((setup) => ({ type: "sweep", setup }), "Sweeping the load: every policy at five loads…", true),
);

$("train").addEventListener("click", () => {
  start(
    (setup) => ({ type: "train", setup, k: 8, reward: $<HTMLSelectElement>("reward").value as "both" | "paper" }),
    "Training a table…",
  );
  if (current === null) return; // refused: the form says why
  const box = $("train-chart");
  box.replaceChildren();
  trainPlot = trainingChart(box);
  $("download").hidden = true;
  $("train-status").textContent = "Training…";
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
      if (m.fraction !== undefined) progressBar.value = m.fraction;
      return;
    case "train-step": {
      const s = m.progress.step;
      trainPlot?.add(s.round, s.reward, m.progress.best);
      $("train-status").textContent =
        `round ${s.round} (${s.phase}): values ${s.bits.join("")}, reward ${(100 * s.reward).toFixed(1)}%, best ${(100 * m.progress.best).toFixed(1)}%`;
      return;
    }
    case "eval-done":
      showComparison(m.result);
      if (m.result.map) showMap(m.result.map);
      finish(`Done: ${Object.keys(m.result.output.policies).length} policies simulated.`);
      return;
    case "sweep-done":
      showSweep(m.result);
      finish(`Sweep done: ${Object.keys(m.result.attainment).length} policies at ${m.result.points.length} loads.`);
      return;
    case "train-done": {
      const link = $<HTMLAnchorElement>("download");
      link.href = URL.createObjectURL(
        new Blob([m.bytes as Uint8Array<ArrayBuffer>], { type: "application/octet-stream" }),
      );
      link.hidden = false;
      openedTable = m.bytes;
      setExplainTable(m.bytes);
      showTable(m.view);
      $("train-status").textContent =
        `Done: ${m.rounds} rounds, best reward ${(100 * m.bestReward).toFixed(1)}% (simulated). Run compares it with the baselines.`;
      finish("Training finished.");
      return;
    }
    case "table-opened":
      showTable(m.view);
      if (openedTable) setExplainTable(openedTable);
      $("file-status").textContent = `Opened a ${m.view.kind} table.`;
      return;
    case "error":
      if (m.id === tableRequest) {
        openedTable = null;
        setExplainTable(null);
        $("table-error").textContent = m.message;
        clearTable();
        $("file-status").textContent = "The table was rejected.";
        return;
      }
      finish(`Error: ${m.message}`);
      return;
  }
}

wireSetupForm();
startExplainView();

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
  const text = await f.text();
  if (f.name.endsWith(".json") && /^\s*\{\s*"presets"/.test(text)) {
    // a cluster file: the custom model, as `--cluster file.json`
    $<HTMLTextAreaElement>("cluster-file").value = text;
    $<HTMLTextAreaElement>("cluster-file").dispatchEvent(new Event("input"));
    $<HTMLDetailsElement>("custom-model").open = true;
    $("file-status").textContent = `Loaded ${f.name} as the custom model's cluster file.`;
    return;
  }
  droppedWorkload = { file: f.name, text };
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
