// `dolphin serve --emulate nPmD`: a first try without GPUs. Starts n prefill and m decode emulated workers (or
// nR replicas) on ephemeral ports, each publishing vLLM KV events over ZMQ with vLLM's replay socket when zeromq is
// installed (else by POST to the proxy), and the proxy in front of them in precise mode.

import { parseSplit } from "../sim/split.js";
import type { ModelPreset } from "../sim/model-presets.js";
import { startProxy, type CloseOptions, type RunningProxy } from "./proxy.js";
import { startWorker, type WorkerHandle } from "./worker.js";
import type { ServeConfigInput } from "./config.js";
import { loadZeromq } from "./zeromq.js";

export interface Emulated {
  proxy: RunningProxy;
  workers: WorkerHandle[];
  /** Closes the proxy (draining it first for `drainMs`, see CloseOptions), then the workers. */
  close(opts?: CloseOptions): Promise<void>;
}

/** The workers of a split, named as every --emulate and --vllm command names them: R0…, then P0…, then D0…. */
export function splitWorkers(split: string): { id: string; role: "prefill" | "decode" | "both" }[] {
  const s = parseSplit(split);
  const roles: ("prefill" | "decode" | "both")[] = [
    ...Array<"both">(s.replicas).fill("both"),
    ...Array<"prefill">(s.prefill).fill("prefill"),
    ...Array<"decode">(s.decode).fill("decode"),
  ];
  const counts = { both: 0, prefill: 0, decode: 0 };
  return roles.map((role) => ({
    id: `${role === "both" ? "R" : role === "prefill" ? "P" : "D"}${counts[role]++}`,
    role,
  }));
}

export async function startEmulated(o: {
  split: string;
  port: number;
  host?: string;
  preset: ModelPreset;
  timeScale?: number;
  table?: string;
  model?: string;
  module?: WebAssembly.Module;
  log?: (line: string) => void;
  adminToken?: string;
}): Promise<Emulated> {
  const model = o.model ?? "dolphin-emulated";
  const zmq = (await loadZeromq()).zmq !== null;
  const workers: WorkerHandle[] = [];
  const names = splitWorkers(o.split);
  // A start-up failure (a port in use, say) closes whatever had started, so no worker or port outlives it.
  try {
    for (const { id: name, role } of names) {
      workers.push(
        await startWorker({
          role,
          preset: o.preset,
          model,
          workerId: name,
          timeScale: o.timeScale ?? 1,
          ...(zmq ? { kvEventsEndpoint: "tcp://127.0.0.1:*", kvEventsReplayEndpoint: "tcp://127.0.0.1:*" } : {}),
          ...(o.log ? { log: o.log } : {}),
        }),
      );
    }
    const config: ServeConfigInput = {
      model,
      mode: "precise",
      table: o.table ?? "dynamo-isl",
      ...(o.adminToken ? { admin_token: o.adminToken } : {}),
      listen: { host: o.host ?? "127.0.0.1", port: o.port },
      workers: workers.map((w, i) => ({
        id: names[i]!.id,
        url: w.url,
        role: w.role,
        ...(w.kvEventsEndpoint ? { kv_events_endpoint: w.kvEventsEndpoint } : {}),
        ...(w.kvEventsReplayEndpoint ? { kv_events_replay_endpoint: w.kvEventsReplayEndpoint } : {}),
      })),
    };
    const proxy = await startProxy(config, {
      ...(o.module ? { module: o.module } : {}),
      ...(o.log ? { log: o.log } : {}),
    });
    return {
      proxy,
      workers,
      async close(opts?: CloseOptions) {
        await proxy.close(opts);
        await Promise.all(workers.map((w) => w.close()));
      },
    };
  } catch (e) {
    await Promise.all(workers.map((w) => w.close().catch(() => undefined)));
    throw e;
  }
}
