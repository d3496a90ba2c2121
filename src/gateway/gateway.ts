// `dolphin gateway`: the endpoint-picker deployment on one machine, as a Kubernetes gateway would run it
// (docs/gateway.md): engines publishing KV events over ZMQ (emulated workers here, real vLLM engines in vllm.ts), a
// decode-side sidecar in front of each decode engine (serve/sidecar.ts), dolphin-epp picking in precise mode on
// those events, and Envoy asking it over ext_proc and sending each request to the endpoint it picked.

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { splitWorkers } from "../serve/emulate.js";
import { startSidecar, type RunningSidecar } from "../serve/sidecar.js";
import { startWorker } from "../serve/worker.js";
import { startEpp, type EppEndpoint, type RunningEpp } from "./epp.js";
import { startGatewayEnvoy, type RunningGatewayEnvoy } from "./envoy.js";

/** What the gateway is put in front of: an engine (emulated or vLLM) with its role and KV-event sockets. */
export interface GatewayBackend {
  id: string;
  role: "prefill" | "decode" | "both";
  url: string;
  kvEventsEndpoint: string | null;
  kvEventsReplayEndpoint: string | null;
  /** Stops it (the gateway's close stops the backends it started). */
  close(): Promise<void>;
}

/** The picker, sidecars and Envoy, whatever the engines are. */
export interface GatewayFrontOptions {
  port?: number;
  adminPort?: number;
  /** Table file bytes (msgpack). */
  table: Uint8Array;
  model: string;
  /** The engines' KV block size (the picker's -block-size; default 16). */
  blockSize?: number;
  failOpen?: boolean;
  /** Sidecars' retries of a prefill answered 502/503/504. */
  prefillRetries?: number;
  maxInflight?: number;
  /** The picker's health checks of the endpoints (ms, default 1000). */
  healthMs?: number;
  log?: (line: string) => void;
}

export interface GatewayOptions extends Omit<GatewayFrontOptions, "model"> {
  split: string;
  model?: string;
  preset?: string;
  timeScale?: number;
  /** Worker ZMQ endpoints (KV events and their replay socket) bind here (default tcp://127.0.0.1:*, ephemeral). */
  kvEventsBind?: string;
}

export interface GatewayWorker {
  id: string;
  role: "prefill" | "decode" | "both";
  worker: GatewayBackend;
  /** The sidecar in front of a decode (or both) worker; null for a prefill worker. */
  sidecar: RunningSidecar | null;
  /** The address the picker names: the sidecar's for decode workers, the worker's own for prefill. */
  address: string;
}

export interface RunningGateway {
  url: string;
  adminUrl: string;
  dir: string;
  envoy: RunningGatewayEnvoy;
  epp: RunningEpp;
  workers: GatewayWorker[];
  /** The endpoints file the picker follows, as given to it. */
  endpoints: EppEndpoint[];
  /** Stops Envoy, the picker, the sidecars and the backends, in that order. */
  close(): Promise<void>;
}

const hostPort = (url: string): string => new URL(url).host;

/** `dolphin gateway --emulate nPmD`: emulated workers publishing KV events, and the gateway in front of them. */
export async function startGateway(o: GatewayOptions): Promise<RunningGateway> {
  const model = o.model ?? "dolphin-emulated";
  const backends: GatewayBackend[] = [];
  try {
    for (const { id, role } of splitWorkers(o.split)) {
      const w = await startWorker({
        role,
        preset: o.preset ?? "h100-8b",
        model,
        workerId: id,
        timeScale: o.timeScale ?? 1,
        kvEventsEndpoint: o.kvEventsBind ?? "tcp://127.0.0.1:*",
        kvEventsReplayEndpoint: o.kvEventsBind ?? "tcp://127.0.0.1:*",
        ...(o.log ? { log: o.log } : {}),
      });
      backends.push({
        id,
        role,
        url: w.url,
        kvEventsEndpoint: w.kvEventsEndpoint,
        kvEventsReplayEndpoint: w.kvEventsReplayEndpoint,
        close: () => w.close(),
      });
    }
  } catch (e) {
    for (const b of backends.reverse()) await b.close().catch(() => {});
    throw e;
  }
  return startGatewayFront(backends, { ...o, model });
}

/**
 * The gateway in front of running backends: a sidecar on each decode (or both) backend, dolphin-epp subscribed to
 * every backend's KV events, Envoy asking it. The backends become the gateway's: its close stops them last, and a
 * failure here stops them too.
 */
export async function startGatewayFront(backends: GatewayBackend[], o: GatewayFrontOptions): Promise<RunningGateway> {
  const dir = mkdtempSync(join(tmpdir(), "dolphin-gateway-"));
  const stops: (() => Promise<void>)[] = backends.map((b) => () => b.close());
  const stopAll = async (): Promise<void> => {
    for (const stop of stops.reverse()) await stop().catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const workers: GatewayWorker[] = [];
    for (const b of backends) {
      let sidecar: RunningSidecar | null = null;
      if (b.role !== "prefill") {
        const s = await startSidecar({
          decodeUrl: b.url,
          prefillRetries: o.prefillRetries ?? 0,
          ...(o.log ? { log: o.log } : {}),
        });
        stops.push(() => s.close());
        sidecar = s;
      }
      workers.push({ id: b.id, role: b.role, worker: b, sidecar, address: hostPort(sidecar ? sidecar.url : b.url) });
    }
    const endpoints: EppEndpoint[] = workers.map((w) => ({
      address: w.address,
      role: w.role,
      ...(w.worker.kvEventsEndpoint ? { kvEvents: w.worker.kvEventsEndpoint } : {}),
      ...(w.worker.kvEventsReplayEndpoint ? { kvEventsReplay: w.worker.kvEventsReplayEndpoint } : {}),
    }));
    const epp = await startEpp({
      dir,
      table: o.table,
      endpoints,
      model: o.model,
      ...(o.blockSize ? { blockSize: o.blockSize } : {}),
      ...(o.maxInflight ? { maxInflight: o.maxInflight } : {}),
      ...(o.healthMs !== undefined ? { healthMs: o.healthMs } : {}),
      ...(o.log ? { onLog: o.log } : {}),
    });
    stops.push(() => epp.close());
    const fallback = workers.filter((w) => w.sidecar).map((w) => ({ host: "127.0.0.1", port: w.sidecar!.port }));
    const envoy = await startGatewayEnvoy(
      {
        listen: { port: o.port ?? 8000 },
        admin: { port: o.adminPort ?? 9901 },
        epp: { host: epp.host, port: epp.grpcPort },
        fallback,
        failOpen: o.failOpen ?? false,
      },
      dir,
      "gateway",
      o.log,
    );
    stops.push(() => envoy.close());
    return { url: envoy.url, adminUrl: envoy.adminUrl, dir, envoy, epp, workers, endpoints, close: stopAll };
  } catch (e) {
    await stopAll();
    throw e;
  }
}
