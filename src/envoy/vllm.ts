// `dolphin envoy --vllm nPmD`: real vLLM engines on this machine (src/serve/vllm/engines.ts) behind Envoy with the
// dolphin filter, which routes in approximate mode (a proxy-wasm filter cannot subscribe to the engines' KV events).

import { SERVED_MODEL, startEngines, stopEngines, type EngineOptions, type VllmEngine } from "../serve/vllm/engines.js";
import { engineSpecs } from "../serve/vllm/cluster.js";
import type { EnvoySetup } from "./config.js";
import { startEnvoy, type EnvoyOptions, type RunningEnvoy } from "./launch.js";

export interface VllmEnvoy {
  envoy: RunningEnvoy;
  engines: VllmEngine[];
  close(): Promise<void>;
}

/** The Envoy setup for running engines (the filter routes in approximate mode: Envoy cannot subscribe to ZMQ). */
export function envoySetupFor(
  engines: VllmEngine[],
  o: { port?: number; adminPort?: number; table?: string; concurrency?: number },
): EnvoySetup {
  return {
    model: SERVED_MODEL,
    table: o.table ?? "dynamo-isl",
    listen: { port: o.port ?? 8000 },
    admin: { port: o.adminPort ?? 9901 },
    concurrency: o.concurrency ?? 2,
    workers: engines.map((e) => ({ id: e.id, role: e.role, url: e.url })),
  };
}

export async function startVllmEnvoy(
  o: EnvoyOptions & {
    split: string;
    port?: number;
    adminPort?: number;
    table?: string;
    concurrency?: number;
    engines?: EngineOptions;
  },
): Promise<VllmEnvoy> {
  const engines = await startEngines(engineSpecs(o.split), o.engines);
  try {
    const envoy = await startEnvoy(envoySetupFor(engines, o), o);
    return {
      envoy,
      engines,
      async close() {
        await envoy.close();
        await stopEngines(engines);
      },
    };
  } catch (e) {
    await stopEngines(engines);
    throw e;
  }
}
