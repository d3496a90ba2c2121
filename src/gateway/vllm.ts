// `dolphin gateway --vllm nPmD`: real vLLM engines on this machine, started as dolphin serve --vllm starts them
// (src/serve/vllm/engines.ts: pinned to cores, each a process group, KV events and their replay socket over ZMQ,
// NixlConnector), with the gateway in front (gateway.ts): a sidecar on each decode engine doing the NixlConnector
// two-step, dolphin-epp subscribed to every engine's KV events (block size and model as the engines'), Envoy.

import { engineSpecs } from "../serve/vllm/cluster.js";
import {
  ENGINE_BLOCK_SIZE,
  SERVED_MODEL,
  startEngines,
  type EngineOptions,
  type VllmEngine,
} from "../serve/vllm/engines.js";
import { startGatewayFront, type GatewayBackend, type GatewayFrontOptions, type RunningGateway } from "./gateway.js";

/** An engine as the gateway's backend; `own`: the gateway's close stops it (default true). */
export function vllmBackend(e: VllmEngine, own = true): GatewayBackend {
  return {
    id: e.id,
    role: e.role,
    url: e.url,
    kvEventsEndpoint: e.kvEventsEndpoint,
    kvEventsReplayEndpoint: e.replayEndpoint,
    close: own ? () => e.stop() : async () => undefined,
  };
}

/** The front's options for vLLM engines: their served model and block size. */
export const vllmFront = (o: Omit<GatewayFrontOptions, "model" | "blockSize">): GatewayFrontOptions => ({
  ...o,
  model: SERVED_MODEL,
  blockSize: ENGINE_BLOCK_SIZE,
});

export interface VllmGateway extends RunningGateway {
  engines: VllmEngine[];
}

/** Starts the split's engines (vllmInstall's error, saying to run npm run setup, when vLLM is missing), then the front. */
export async function startVllmGateway(
  o: Omit<GatewayFrontOptions, "model" | "blockSize"> & { split: string; engines?: EngineOptions },
): Promise<VllmGateway> {
  const engines = await startEngines(engineSpecs(o.split), o.engines);
  const g = await startGatewayFront(
    engines.map((e) => vllmBackend(e)),
    vllmFront(o),
  );
  return { ...g, engines };
}
