// Runs dolphin-epp (bindings/go/cmd/dolphin-epp, built by npm run build into build/dolphin-epp): writes its
// endpoints file and table file into a directory, starts it on ephemeral ports, reads the addresses it prints, and
// rewrites either file when asked (the picker watches both: an edit takes effect without a restart).

import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { packageRoot } from "../core/package-root.js";

const READY_TIMEOUT_MS = 20_000;

/** An endpoint as the picker's file lists it (bindings/go/cmd/dolphin-epp/endpoints.go). */
export interface EppEndpoint {
  address: string;
  role: "prefill" | "decode" | "both";
  kvEvents?: string;
  kvEventsReplay?: string;
}

export interface EppOptions {
  dir: string;
  /** Table file bytes (msgpack). */
  table: Uint8Array;
  endpoints: EppEndpoint[];
  model: string;
  /** The engines' KV block size (default 16). */
  blockSize?: number;
  mode?: "precise" | "approximate";
  /** What ends a request's loads (default access-log: the gateway's Envoy logs to the picker, config.ts). */
  loadsUntil?: "access-log" | "stream";
  maxInflight?: number;
  /** Answer every request with this endpoint, unpicked (-fixed-endpoint: the ext_proc exchange alone, a benchmark's baseline). */
  fixedEndpoint?: string;
  /** How often the picker looks at its files (ms, default 100 here: the tests wait on it). */
  watchMs?: number;
  /** How often it asks each endpoint's /health (ms, default 1000; 0: never). */
  healthMs?: number;
  logLevel?: string;
  onLog?: (line: string) => void;
}

export interface RunningEpp {
  host: string;
  grpcPort: number;
  metricsUrl: string;
  process: ChildProcess;
  log(): string;
  setEndpoints(endpoints: EppEndpoint[]): void;
  setTable(table: Uint8Array): void;
  close(): Promise<void>;
}

export class EppNotBuiltError extends Error {
  constructor(path: string) {
    super(
      `${path} is missing: run npm run setup and npm run build (dolphin-epp needs Go 1.26 or newer: its dependencies ask for it)`,
    );
  }
}

export function findEpp(root = packageRoot()): string {
  const path = join(root, "build", "dolphin-epp");
  if (!existsSync(path)) throw new EppNotBuiltError(path);
  return path;
}

/** The endpoints file's text (JSON, which the picker reads as YAML). */
export function endpointsFile(endpoints: EppEndpoint[]): string {
  const list = endpoints.map((e) => ({
    address: e.address,
    labels: { "llm-d.ai/role": e.role },
    ...(e.kvEvents ? { kv_events: e.kvEvents } : {}),
    ...(e.kvEventsReplay ? { kv_events_replay: e.kvEventsReplay } : {}),
  }));
  return `${JSON.stringify({ endpoints: list }, null, 2)}\n`;
}

/** A rename into place: the picker never reads half a file. */
function writeAtomically(path: string, data: string | Uint8Array): void {
  writeFileSync(`${path}.tmp`, data);
  renameSync(`${path}.tmp`, path);
}

export async function startEpp(o: EppOptions): Promise<RunningEpp> {
  const binary = findEpp();
  const endpointsPath = join(o.dir, "endpoints.yaml");
  const tablePath = join(o.dir, "table.msgpack");
  writeAtomically(endpointsPath, endpointsFile(o.endpoints));
  writeAtomically(tablePath, o.table);
  const args = [
    "-table",
    tablePath,
    "-endpoints",
    endpointsPath,
    "-grpc-port",
    "0",
    "-metrics-port",
    "0",
    "-model",
    o.model,
    "-mode",
    o.mode ?? "precise",
    "-block-size",
    String(o.blockSize ?? 16),
    "-loads-until",
    o.loadsUntil ?? "access-log",
    "-watch",
    `${o.watchMs ?? 100}ms`,
    "-health-interval",
    `${o.healthMs ?? 1000}ms`,
    "-log-level",
    o.logLevel ?? "warn",
    ...(o.maxInflight ? ["-max-inflight", String(o.maxInflight)] : []),
    ...(o.fixedEndpoint ? ["-fixed-endpoint", o.fixedEndpoint] : []),
  ];
  const child = spawn(binary, args, { stdio: ["ignore", "pipe", "pipe"] });
  let log = "";
  let out = "";
  child.stderr!.setEncoding("utf8");
  child.stderr!.on("data", (chunk: string) => {
    log += chunk;
    if (o.onLog) for (const line of chunk.split("\n")) if (line) o.onLog(line);
  });
  child.stdout!.setEncoding("utf8");
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const ready = new Promise<{ grpc: string; metrics: string }>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`dolphin-epp: not ready after ${READY_TIMEOUT_MS} ms\n${log}`)),
      READY_TIMEOUT_MS,
    );
    child.stdout!.on("data", (chunk: string) => {
      out += chunk;
      const grpc = /ext_proc listening on (\S+)/.exec(out)?.[1];
      const metrics = /metrics listening on (\S+)/.exec(out)?.[1];
      if (grpc && metrics && /\bmode \w+/.test(out)) {
        clearTimeout(timer);
        resolve({ grpc, metrics });
      }
    });
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`dolphin-epp exited with ${signal ?? `code ${code}`} before it was ready\n${log}`));
    });
  });
  let addresses: { grpc: string; metrics: string };
  try {
    addresses = await ready;
  } catch (e) {
    child.kill("SIGKILL");
    throw e;
  }
  const cut = addresses.grpc.lastIndexOf(":");
  return {
    host: addresses.grpc.slice(0, cut),
    grpcPort: Number(addresses.grpc.slice(cut + 1)),
    metricsUrl: `http://${addresses.metrics}/metrics`,
    process: child,
    log: () => log,
    setEndpoints: (endpoints) => writeAtomically(endpointsPath, endpointsFile(endpoints)),
    setTable: (table) => writeAtomically(tablePath, table),
    async close() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill("SIGTERM");
        const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
        await exited;
        clearTimeout(timer);
      }
    },
  };
}
