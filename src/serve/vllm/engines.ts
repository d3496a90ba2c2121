// Real vLLM engines on this machine (the CPU build `npm run setup` installed): each `vllm serve` of the tiny model
// with prefix caching, KV events over ZMQ (with a replay endpoint), NixlConnector on CPU buffers and cached-token
// usage, on free loopback ports, its output in a log file. Started together, waited for (/health), stopped as a
// process group so the engine core's child processes go too; a process exit kills whatever is left, so no engine
// outlives the command or test that started it. Settings are the ones checked on a 2-core CPU machine
// (docs/serving.md "In front of real vLLM"): block size 32 (16 is refused there), eager mode (half the start time),
// one OpenMP thread, and NIXL's idle progress thread slowed from a busy spin (the setup's patch reads
// NIXL_PTHR_DELAY_US).

import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { closeSync, mkdirSync, openSync, readFileSync } from "node:fs";
import { createServer } from "node:net";
import { availableParallelism } from "node:os";
import { join } from "node:path";
import { vllmInstall, type VllmInstall } from "./install.js";

export type EngineRole = "prefill" | "decode" | "both";

/** What the engines serve as (the `model` clients send) and the block size they are started with. */
export const SERVED_MODEL = "tiny-llama";
export const ENGINE_BLOCK_SIZE = 32;
export const ENGINE_CONTEXT = 4096;
const KV_TOPIC = "kv-events";

export interface EngineSpec {
  id: string;
  role: EngineRole;
  /** The CPU core it is pinned to (taskset), or undefined for none. */
  core?: number;
  /** vLLM's --num-gpu-blocks-override: a small cache, to see evictions. */
  numBlocks?: number;
  /** kv_events_config.buffer_steps: the batches its replay socket keeps (vLLM's default 10,000). */
  kvEventsBufferSteps?: number;
  /** More `vllm serve` arguments. */
  extraArgs?: string[];
}

export interface EngineOptions {
  /** The model folder (default: the tiny model the setup made). */
  model?: string;
  /** Where the engines' logs go (default: a fresh folder under the cache's logs/). */
  logDir?: string;
  /** How long an engine may take to answer /health (default 300 s: several start at once on two cores). */
  startTimeoutMs?: number;
  /** A line per engine event (started, up, failed); default none. */
  progress?: (line: string) => void;
}

/** One running engine. Its ports stay its own across restart(), so a proxy's config of it stays true. */
export interface VllmEngine {
  readonly id: string;
  readonly role: EngineRole;
  readonly url: string;
  readonly port: number;
  readonly kvEventsEndpoint: string;
  readonly replayEndpoint: string;
  readonly logFile: string;
  /** The `vllm serve` process id (the leader of its process group); null once stopped. */
  pid(): number | null;
  /** Stops it (SIGTERM to its group, SIGKILL after a grace period); resolves when it has exited. */
  stop(): Promise<void>;
  /** Kills it at once (SIGKILL to its group), as a crash would. */
  kill(): Promise<void>;
  /** Starts it again on the same ports and waits for /health. */
  restart(): Promise<void>;
}

export class EngineStartError extends Error {}

const STOP_GRACE_MS = 15_000;
const running = new Set<ChildProcess>();
let exitHookSet = false;

/**
 * A free loopback TCP port for an engine, outside the kernel's ephemeral range: vLLM binds its own internal sockets
 * to port 0 as it starts, so a port from that range, released for the engine to bind, could be handed to another
 * engine's internal socket first (seen: "Address already in use" when engines start together). Each port is given
 * once per process.
 */
export async function freePort(): Promise<number> {
  const [low] = ephemeralRange();
  const from = 10_000;
  const to = Math.max(from + 1_000, low) - 1;
  for (let tries = 0; tries < 200; tries++) {
    const port = from + Math.floor(Math.random() * (to - from));
    if (handedOut.has(port) || !(await bindable(port))) continue;
    handedOut.add(port);
    return port;
  }
  throw new EngineStartError(`no free port found in ${from}–${to} for a vLLM engine`);
}

const handedOut = new Set<number>();

function ephemeralRange(): [number, number] {
  try {
    const [lo, hi] = readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/).map(Number);
    if (lo && hi) return [lo, hi];
  } catch {
    // not Linux: the IANA range
  }
  return [49152, 65535];
}

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once("error", () => resolve(false));
    // every interface: the KV-event publisher binds tcp://*:port
    s.listen(port, "0.0.0.0", () => s.close(() => resolve(true)));
  });
}

function lastLines(file: string, n = 25): string {
  try {
    const lines = readFileSync(file, "utf8").trimEnd().split("\n");
    return lines.slice(-n).join("\n");
  } catch {
    return "(no log)";
  }
}

const hasTaskset = (() => {
  let known: boolean | undefined;
  return () => (known ??= spawnSync("taskset", ["--version"], { stdio: "ignore" }).status === 0);
})();

function kvConnector(role: EngineRole): string {
  const kvRole = role === "prefill" ? "kv_producer" : role === "decode" ? "kv_consumer" : "kv_both";
  return JSON.stringify({ kv_connector: "NixlConnector", kv_role: kvRole, kv_buffer_device: "cpu" });
}

class Engine implements VllmEngine {
  readonly url: string;
  readonly kvEventsEndpoint: string;
  readonly replayEndpoint: string;
  readonly logFile: string;
  private child: ChildProcess | null = null;
  private exited: Promise<void> = Promise.resolve();

  constructor(
    private readonly install: VllmInstall,
    private readonly spec: EngineSpec,
    readonly port: number,
    private readonly ports: { kv: number; replay: number; nixl: number },
    private readonly opts: Required<Pick<EngineOptions, "startTimeoutMs">> & EngineOptions & { logDir: string },
  ) {
    this.url = `http://127.0.0.1:${port}`;
    this.kvEventsEndpoint = `tcp://127.0.0.1:${ports.kv}`;
    this.replayEndpoint = `tcp://127.0.0.1:${ports.replay}`;
    this.logFile = join(opts.logDir, `${spec.id}.log`);
  }

  get id(): string {
    return this.spec.id;
  }
  get role(): EngineRole {
    return this.spec.role;
  }

  pid(): number | null {
    return this.child?.pid ?? null;
  }

  private args(): string[] {
    const kvEvents = {
      enable_kv_cache_events: true,
      publisher: "zmq",
      // vLLM binds its publisher only for a wildcard endpoint: with tcp://127.0.0.1:port it would connect to it
      endpoint: `tcp://*:${this.ports.kv}`,
      replay_endpoint: `tcp://127.0.0.1:${this.ports.replay}`,
      topic: KV_TOPIC,
      ...(this.spec.kvEventsBufferSteps !== undefined ? { buffer_steps: this.spec.kvEventsBufferSteps } : {}),
    };
    return [
      "serve",
      this.opts.model ?? this.install.model,
      "--host",
      "127.0.0.1",
      "--port",
      String(this.port),
      "--served-model-name",
      SERVED_MODEL,
      "--enable-prefix-caching",
      "--max-model-len",
      String(ENGINE_CONTEXT),
      "--block-size",
      String(ENGINE_BLOCK_SIZE),
      "--enable-prompt-tokens-details",
      "--enforce-eager",
      "--kv-events-config",
      JSON.stringify(kvEvents),
      "--kv-transfer-config",
      kvConnector(this.spec.role),
      ...(this.spec.numBlocks !== undefined ? ["--num-gpu-blocks-override", String(this.spec.numBlocks)] : []),
      ...(this.spec.extraArgs ?? []),
    ];
  }

  private env(): NodeJS.ProcessEnv {
    const home = this.install.home;
    return {
      ...process.env,
      HF_HUB_OFFLINE: "1",
      TRANSFORMERS_OFFLINE: "1",
      VLLM_TARGET_DEVICE: "cpu",
      VLLM_CPU_KVCACHE_SPACE: process.env["VLLM_CPU_KVCACHE_SPACE"] ?? "1",
      VLLM_CPU_OMP_THREADS_BIND: "nobind",
      OMP_NUM_THREADS: "1",
      VLLM_NO_USAGE_STATS: "1",
      DO_NOT_TRACK: "1",
      VLLM_CACHE_ROOT: join(home, "cache"),
      HF_HOME: join(home, "hf"),
      NIXL_PTHR_DELAY_US: "1000",
      VLLM_NIXL_SIDE_CHANNEL_HOST: "127.0.0.1",
      VLLM_NIXL_SIDE_CHANNEL_PORT: String(this.ports.nixl),
      PYTHONUNBUFFERED: "1",
    };
  }

  /** Spawns the process (its own process group) and waits for /health 200, or fails with its log's last lines. */
  async start(): Promise<void> {
    const fd = openSync(this.logFile, "a");
    const pin = this.spec.core !== undefined && hasTaskset();
    const [cmd, args] = pin
      ? ["taskset", ["-c", String(this.spec.core), this.install.vllm, ...this.args()]]
      : [this.install.vllm, this.args()];
    const child = spawn(cmd, args, { env: this.env(), stdio: ["ignore", fd, fd], detached: true });
    closeSync(fd);
    this.child = child;
    running.add(child);
    let exitCode: number | string | null = null;
    this.exited = new Promise((resolve) =>
      child.once("exit", (code, signal) => {
        exitCode = code ?? signal;
        running.delete(child);
        resolve();
      }),
    );
    child.once("error", () => undefined); // reported as an exit below
    this.opts.progress?.(
      `engine ${this.id} (${this.role}${pin ? `, core ${this.spec.core}` : ""}) starting on ${this.url}, log ${this.logFile}`,
    );
    const t0 = Date.now();
    while (Date.now() - t0 < this.opts.startTimeoutMs) {
      if (exitCode !== null) {
        this.child = null;
        throw new EngineStartError(
          `vLLM engine ${this.id} exited (${exitCode}) before it was up; the end of ${this.logFile}:\n${lastLines(this.logFile)}`,
        );
      }
      if (await healthy(this.url)) {
        const repinned = pin ? repinGroup(child.pid!, this.spec.core!) : 0;
        this.opts.progress?.(
          `engine ${this.id} up in ${((Date.now() - t0) / 1000).toFixed(0)} s` +
            (repinned ? `; ${repinned} thread(s) pinned back to core ${this.spec.core}` : ""),
        );
        return;
      }
      await sleep(500);
    }
    await this.kill();
    throw new EngineStartError(
      `vLLM engine ${this.id} did not answer /health within ${this.opts.startTimeoutMs / 1000} s; the end of ` +
        `${this.logFile}:\n${lastLines(this.logFile)}`,
    );
  }

  private signal(sig: NodeJS.Signals): void {
    const pid = this.child?.pid;
    if (pid === undefined) return;
    try {
      process.kill(-pid, sig);
    } catch {
      // the group is gone already
    }
  }

  async stop(): Promise<void> {
    if (!this.child) return;
    this.signal("SIGTERM");
    const timer = setTimeout(() => this.signal("SIGKILL"), STOP_GRACE_MS);
    await this.exited;
    clearTimeout(timer);
    this.signal("SIGKILL"); // what the leader left of its group (the engine core) goes with it
    this.child = null;
  }

  async kill(): Promise<void> {
    if (!this.child) return;
    this.signal("SIGKILL");
    await this.exited;
    this.child = null;
  }

  async restart(): Promise<void> {
    await this.stop();
    await this.start();
  }
}

/**
 * Pins every thread of a process group back to `core`; returns how many had left it. vLLM's CPU NixlConnector pins
 * the worker's main thread, the one that runs the model, to the last core of each NUMA node
 * (`os.sched_setaffinity(0, …)` in nixl/base_worker.py, meant to reserve a core for transfers), whatever taskset
 * said: on two cores a prefill engine on core 0 ran its forward passes on core 1, beside the decode engine (seen:
 * the prefill engine's VLLM::Worker thread on core 1). Done once the engine is up, when that call has been made.
 */
function repinGroup(pgid: number, core: number): number {
  const ps = spawnSync("ps", ["-e", "-L", "-o", "pgid=,tid=,psr="], { encoding: "utf8" });
  if (ps.status !== 0) return 0;
  let moved = 0;
  for (const line of ps.stdout.split("\n")) {
    const [g, tid] = line.trim().split(/\s+/).map(Number);
    if (g !== pgid || !tid) continue;
    const now = spawnSync("taskset", ["-p", "-c", String(tid)], { encoding: "utf8" });
    const list = now.stdout.trim().split(/:\s*/).pop();
    if (list === String(core)) continue;
    if (spawnSync("taskset", ["-p", "-c", String(core), String(tid)], { stdio: "ignore" }).status === 0) moved++;
  }
  return moved;
}

async function healthy(url: string): Promise<boolean> {
  try {
    const r = await fetch(`${url}/health`, { signal: AbortSignal.timeout(2_000) });
    await r.arrayBuffer();
    return r.status === 200;
  } catch {
    return false;
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Kills every engine still running when the process exits (a crash, an uncaught error, a test run's end). */
function killAllOnExit(): void {
  if (exitHookSet) return;
  exitHookSet = true;
  process.once("exit", () => {
    for (const c of running) {
      try {
        if (c.pid !== undefined) process.kill(-c.pid, "SIGKILL");
      } catch {
        // gone
      }
    }
  });
}

/**
 * The cores engines are pinned to, by role: on a machine of c cores, prefill engines on the first ⌈c/2⌉, decode
 * engines on the rest (so P/D is real: a prefill and a decode never share a core), replicas across all. Undefined
 * (no pinning) on one core.
 */
export function pinCores(specs: { role: EngineRole }[], cores = availableParallelism()): (number | undefined)[] {
  if (cores < 2) return specs.map(() => undefined);
  const half = Math.ceil(cores / 2);
  const next = { prefill: 0, decode: 0, both: 0 };
  return specs.map(({ role }) => {
    const i = next[role]++;
    if (role === "prefill") return i % half;
    if (role === "decode") return half + (i % (cores - half));
    return i % cores;
  });
}

/** Starts the engines at once and waits for all; a failure stops those that started and throws the first error. */
export async function startEngines(specs: EngineSpec[], options: EngineOptions = {}): Promise<VllmEngine[]> {
  if (specs.length > 3)
    throw new EngineStartError(`at most 3 vLLM engines at once on this machine, asked for ${specs.length}`);
  const install = vllmInstall();
  const logDir =
    options.logDir ?? join(install.home, "logs", `${new Date().toISOString().replace(/[:.]/g, "-")}-${process.pid}`);
  mkdirSync(logDir, { recursive: true });
  killAllOnExit();
  const opts = { startTimeoutMs: 300_000, ...options, logDir };
  const engines: Engine[] = [];
  for (const spec of specs) {
    const [port, kv, replay, nixl] = [await freePort(), await freePort(), await freePort(), await freePort()];
    engines.push(new Engine(install, spec, port, { kv, replay, nixl }, opts));
  }
  const started = await Promise.allSettled(engines.map((e) => e.start()));
  const failed = started.find((r): r is PromiseRejectedResult => r.status === "rejected");
  if (failed) {
    await Promise.all(engines.map((e) => e.stop()));
    throw failed.reason;
  }
  return engines;
}

/** Stops every engine, each as a process group. */
export async function stopEngines(engines: VllmEngine[]): Promise<void> {
  await Promise.all(engines.map((e) => e.stop()));
}
