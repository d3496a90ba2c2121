// `dolphin envoy --emulate nPmD`: Envoy with the filter in front of emulated workers (dolphin worker), as
// `dolphin serve --emulate` does for the Node proxy: a first try without GPUs, and the tests' and benchmark's setup.

import { splitWorkers } from "../serve/emulate.js";
import type { ModelPreset } from "../sim/model-presets.js";
import { startWorker, type WorkerHandle } from "../serve/worker.js";
import type { EnvoySetup } from "./config.js";
import { startEnvoy, type EnvoyOptions, type RunningEnvoy } from "./launch.js";

export interface EmulatedEnvoy {
  envoy: RunningEnvoy;
  workers: WorkerHandle[];
  setup: EnvoySetup;
  close(): Promise<void>;
}

export interface EmulatedEnvoyOptions extends EnvoyOptions {
  split: string;
  port?: number;
  adminPort?: number;
  concurrency?: number;
  preset?: ModelPreset | string;
  timeScale?: number;
  table?: string;
  model?: string;
  /** Extra setup fields (fallback_local, prefill_timeout_ms, …). */
  extra?: Partial<EnvoySetup>;
  workerLog?: (line: string) => void;
}

/** Worker names as dolphin serve --emulate gives them: R0…, P0…, D0…. */
export async function startEmulatedWorkers(
  split: string,
  o: { preset?: ModelPreset | string; timeScale?: number; model?: string; log?: (line: string) => void },
): Promise<WorkerHandle[]> {
  const workers: WorkerHandle[] = [];
  for (const { id: name, role } of splitWorkers(split)) {
    workers.push(
      await startWorker({
        role,
        preset: o.preset ?? "h100-8b",
        model: o.model ?? "dolphin-emulated",
        workerId: name,
        timeScale: o.timeScale ?? 1,
        ...(o.log ? { log: o.log } : {}),
      }),
    );
  }
  return workers;
}

export async function startEmulatedEnvoy(o: EmulatedEnvoyOptions): Promise<EmulatedEnvoy> {
  const workers = await startEmulatedWorkers(o.split, { ...o, ...(o.workerLog ? { log: o.workerLog } : {}) });
  const setup: EnvoySetup = {
    model: o.model ?? "dolphin-emulated",
    table: o.table ?? "dynamo-isl",
    listen: { port: o.port ?? 8000 },
    admin: { port: o.adminPort ?? 9901 },
    concurrency: o.concurrency ?? 2,
    workers: workers.map((w) => ({ id: w.workerId, role: w.role, url: w.url })),
    ...o.extra,
  };
  let envoy: RunningEnvoy;
  try {
    envoy = await startEnvoy(setup, o);
  } catch (e) {
    await Promise.all(workers.map((w) => w.close()));
    throw e;
  }
  return {
    envoy,
    workers,
    setup,
    async close() {
      await envoy.close();
      await Promise.all(workers.map((w) => w.close()));
    },
  };
}
