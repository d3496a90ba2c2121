// The setup form: reads the cluster and workload controls into an ExplorerSetup, and checks the values a person types
// (a custom SLO, a custom model's cluster file) before any job starts, with a message that names the field. The
// simulator's own parsers check the rest (split, load) in the worker, with the CLI's messages.

import { clusterFromFile } from "../../../src/sim/cluster-file.js";
import { SLO_PRESETS } from "../../../src/sim/metrics.js";
import type { ExplorerSetup, WorkloadSource } from "./jobs.js";

const $ = <T extends HTMLElement>(id: string): T => {
  const el = document.getElementById(id);
  if (!el) throw new Error(`explorer: no element #${id}`);
  return el as T;
};

/** A value a person typed that the explorer refuses: `field` is the control's id, to focus it. */
export class SetupError extends Error {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message);
  }
}

/** The name the custom model's cluster file goes by in messages (the CLI names the file's path). */
export const CUSTOM_MODEL_SOURCE = "custom model";

/** The custom model's preset, checked as `--cluster file.json` checks it; throws SetupError naming the field. */
export function checkClusterFile(text: string): string {
  try {
    return clusterFromFile(text, CUSTOM_MODEL_SOURCE).preset.name;
  } catch (e) {
    throw new SetupError("cluster-file", (e as Error).message);
  }
}

/** "ttft_ms,tpot_ms" from the two SLO fields, each a number of milliseconds > 0. */
function sloValue(): string {
  const preset = $<HTMLSelectElement>("slo").value;
  if (preset !== "custom") return preset;
  const ms = (id: string, name: string): number => {
    const text = $<HTMLInputElement>(id).value.trim();
    const v = Number(text);
    if (text === "" || !Number.isFinite(v) || v <= 0)
      throw new SetupError(id, `SLO ${name}: expected a number of milliseconds > 0, got ${JSON.stringify(text)}`);
    return v;
  };
  return `${ms("slo-ttft", "TTFT")},${ms("slo-tpot", "TPOT")}`;
}

function integer(id: string, name: string, min: number, max: number): number {
  const text = $<HTMLInputElement>(id).value.trim();
  const v = Number(text);
  if (text === "" || !Number.isInteger(v) || v < min || v > max)
    throw new SetupError(id, `${name}: expected an integer from ${min} to ${max}, got ${JSON.stringify(text)}`);
  return v;
}

/** The form as a job's setup; throws SetupError for a value the explorer refuses. */
export function readSetup(dropped: WorkloadSource | null): ExplorerSetup {
  const value = (id: string) => $<HTMLInputElement | HTMLSelectElement>(id).value.trim();
  const workload = value("workload");
  const cluster = value("cluster");
  const custom = cluster === "custom";
  const text = $<HTMLTextAreaElement>("cluster-file").value;
  if (custom) checkClusterFile(text);
  return {
    workload: workload === "file" && dropped ? dropped : { generator: workload },
    ...(custom ? { clusterFile: { name: CUSTOM_MODEL_SOURCE, text } } : { cluster }),
    link: value("link"),
    split: value("split"),
    slo: sloValue(),
    load: value("load") || "saturated",
    seed: integer("seed", "Seed", 0, 2 ** 31 - 1),
    requests: integer("requests", "Requests", 20, 100_000),
  };
}

/** Wires the SLO and model controls: a preset fills the SLO fields, typing in them makes the SLO custom; choosing
 *  the custom model opens its cluster file, which is checked as it is edited. */
export function wireSetupForm(): void {
  const slo = $<HTMLSelectElement>("slo");
  const ttft = $<HTMLInputElement>("slo-ttft");
  const tpot = $<HTMLInputElement>("slo-tpot");
  slo.addEventListener("change", () => {
    const p = SLO_PRESETS[slo.value];
    if (p) {
      ttft.value = String(p.ttftMs);
      tpot.value = String(p.tpotMs);
    }
  });
  for (const field of [ttft, tpot]) field.addEventListener("input", () => (slo.value = "custom"));

  const cluster = $<HTMLSelectElement>("cluster");
  const details = $<HTMLDetailsElement>("custom-model");
  const file = $<HTMLTextAreaElement>("cluster-file");
  const check = $("cluster-check");
  const show = (): void => {
    if (cluster.value !== "custom") {
      check.textContent = "";
      check.classList.remove("error");
      return;
    }
    try {
      check.textContent = `Custom model preset "${checkClusterFile(file.value)}" is valid.`;
      check.classList.remove("error");
    } catch (e) {
      check.textContent = (e as Error).message;
      check.classList.add("error");
    }
  };
  cluster.addEventListener("change", () => {
    if (cluster.value === "custom") details.open = true;
    show();
  });
  file.addEventListener("input", () => {
    cluster.value = "custom";
    show();
  });
}
