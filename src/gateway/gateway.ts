// `dolphin gateway --emulate nPmD`: the endpoint-picker deployment on one machine, as a Kubernetes gateway would
// run it (docs/gateway.md): emulated workers (dolphin worker, publishing KV events over ZMQ), a decode-side sidecar
// in front of each decode engine (serve/sidecar.ts), dolphin-epp picking in precise mode on those events, and Envoy
// asking it over ext_proc and sending each request to the endpoint it picked.

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { splitWorkers } from "../serve/emulate.js";
import { startSidecar, type RunningSidecar } from "../serve/sidecar.js";
import { startWorker, type WorkerHandle } from "../serve/worker.js";
import { startEpp, type EppEndpoint, type RunningEpp } from "./epp.js";
import { startGatewayEnvoy, type RunningGatewayEnvoy } from "./envoy.js";

export interface GatewayOptions {
  split: string;
  port?: number;
  adminPort?: number;
  /** Table file bytes (msgpack). */
  table: Uint8Array;
  model?: string;
  preset?: string;
  timeScale?: number;
  failOpen?: boolean;
  /** Sidecars' retries of a prefill answered 502/503/504. */
  prefillRetries?: number;
  maxInflight?: number;
  /** The picker's health checks of the endpoints (ms, default 1000). */
  healthMs?: number;
  /** Worker ZMQ endpoints (KV events and their replay socket) bind here (default tcp://127.0.0.1:*, ephemeral). */
  kvEventsBind?: string;
  log?: (line: string) => void;
}

export interface GatewayWorker {
  id: string;
  role: "prefill" | "decode" | "both";
  worker: WorkerHandle;
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
  close(): Promise<void>;
}

const hostPort = (url: string): string => new URL(url).host;

export async function startGateway(o: GatewayOptions): Promise<RunningGateway> {
  const dir = mkdtempSync(join(tmpdir(), "dolphin-gateway-"));
  const model = o.model ?? "dolphin-emulated";
  const stops: (() => Promise<void>)[] = [];
  const stopAll = async (): Promise<void> => {
    for (const stop of stops.reverse()) await stop().catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const workers: GatewayWorker[] = [];
    for (const { id, role } of splitWorkers(o.split)) {
      const worker = await startWorker({
        role,
        preset: o.preset ?? "h100-8b",
        model,
        workerId: id,
        timeScale: o.timeScale ?? 1,
        kvEventsEndpoint: o.kvEventsBind ?? "tcp://127.0.0.1:*",
        kvEventsReplayEndpoint: o.kvEventsBind ?? "tcp://127.0.0.1:*",
        ...(o.log ? { log: o.log } : {}),
      });
      stops.push(() => worker.close());
      let sidecar: RunningSidecar | null = null;
      if (role !== "prefill") {
        const s = await startSidecar({
          decodeUrl: worker.url,
          prefillRetries: o.prefillRetries ?? 0,
          ...(o.log ? { log: o.log } : {}),
        });
        stops.push(() => s.close());
        sidecar = s;
      }
      workers.push({ id, role, worker, sidecar, address: hostPort(sidecar ? sidecar.url : worker.url) });
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
      model,
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
