// `dolphin serve --vllm nPmD`: that many real vLLM engines on this machine (engines.ts) and the Node proxy in
// precise mode in front of them (every engine's KV events, with the replay on subscribe that lets a proxy started
// late see caches filled before it). The same split names as --emulate: R0…, P0…, D0…. `dolphin envoy --vllm` puts
// Envoy in front instead (src/envoy/vllm.ts).

import { splitWorkers } from "../emulate.js";
import type { ServeConfigInput, ServeMode } from "../config.js";
import { startProxy, type CloseOptions, type RunningProxy } from "../proxy.js";
import {
  ENGINE_BLOCK_SIZE,
  ENGINE_CONTEXT,
  pinCores,
  SERVED_MODEL,
  startEngines,
  stopEngines,
  type EngineOptions,
  type EngineSpec,
  type VllmEngine,
} from "./engines.js";

/** The engines of a split, named and pinned: `1P1D` → P0 on core 0, D0 on core 1 (on two cores). */
export function engineSpecs(split: string, numBlocks?: number): EngineSpec[] {
  const workers = splitWorkers(split);
  const cores = pinCores(workers);
  return workers.map(({ id, role }, i) => ({
    id,
    role,
    ...(cores[i] !== undefined ? { core: cores[i] } : {}),
    ...(numBlocks !== undefined ? { numBlocks } : {}),
  }));
}

/** The proxy's config for running engines (precise mode by default: their KV events, replayed on subscribe). */
export function proxyConfigFor(
  engines: VllmEngine[],
  o: { port: number; host?: string; table?: string; mode?: ServeMode; adminToken?: string },
): ServeConfigInput {
  return {
    model: SERVED_MODEL,
    mode: o.mode ?? "precise",
    table: o.table ?? "dynamo-isl",
    block_size: ENGINE_BLOCK_SIZE,
    max_model_len: ENGINE_CONTEXT,
    listen: { host: o.host ?? "127.0.0.1", port: o.port },
    ...(o.adminToken ? { admin_token: o.adminToken } : {}),
    workers: engines.map((e) => ({
      id: e.id,
      url: e.url,
      role: e.role,
      kv_events_endpoint: e.kvEventsEndpoint,
      kv_events_replay_endpoint: e.replayEndpoint,
    })),
  };
}

export interface VllmServe {
  proxy: RunningProxy;
  engines: VllmEngine[];
  close(opts?: CloseOptions): Promise<void>;
}

export async function startVllmServe(o: {
  split: string;
  port: number;
  table?: string;
  mode?: ServeMode;
  adminToken?: string;
  module?: WebAssembly.Module;
  log?: (line: string) => void;
  engines?: EngineOptions;
}): Promise<VllmServe> {
  const engines = await startEngines(engineSpecs(o.split), o.engines);
  try {
    const proxy = await startProxy(proxyConfigFor(engines, o), {
      ...(o.module ? { module: o.module } : {}),
      ...(o.log ? { log: o.log } : {}),
    });
    return {
      proxy,
      engines,
      async close(opts?: CloseOptions) {
        await proxy.close(opts);
        await stopEngines(engines);
      },
    };
  } catch (e) {
    await stopEngines(engines);
    throw e;
  }
}
