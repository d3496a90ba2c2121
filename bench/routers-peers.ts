// The peer routers of `dolphin bench routers`, as `npm run setup` installs them (build/routers-setup.mjs: a venv in
// the per-user cache): how each is started in P/D mode in front of one prefill and several decode workers, awaited
// until it answers, and stopped. Each runs in a process group of its own (smg's launcher starts a `smg::router`
// child), which is signalled as a whole: SIGTERM, then SIGKILL after 2 s.

import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import net from "node:net";
import { join } from "node:path";
import { cacheRoot } from "../src/serve/vllm/install.js";

export const VLLM_ROUTER_VERSION = "0.1.17";
export const SMG_VERSION = "1.13.0";

/** The venv's bin folder (build/routers-setup.mjs's routersPaths). */
export const routersBin = (env: NodeJS.ProcessEnv = process.env): string =>
  join(cacheRoot(env), "routers", "venv", "bin");

export class RouterNotInstalled extends Error {
  constructor(what: string, path: string) {
    super(`${what} is not installed (no ${path}): run npm run setup`);
    this.name = "RouterNotInstalled";
  }
}

/** A free loopback port (bound, then released: the peers take --port numbers, not 0). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

export interface Workers {
  prefill: string;
  decode: string[];
}

export interface RunningPeer {
  name: string;
  url: string;
  /** What it was started with, for the result. */
  argv: string[];
  stop(): Promise<void>;
}

/** vLLM's router in its vLLM P/D mode with the NixlConnector protocol: every request a prefill then a decode leg. */
async function vllmRouterArgs(w: Workers, policy: string): Promise<{ port: number; argv: string[] }> {
  const port = await freePort();
  // its Prometheus listener defaults to 29000: one of our own so two runs (or another service) never collide
  const metrics = await freePort();
  const argv = [
    ...["--host", "127.0.0.1", "--port", String(port), "--vllm-pd-disaggregation", "--kv-connector", "nixl"],
    ...["--prefill", w.prefill, ...w.decode.flatMap((d) => ["--decode", d])],
    ...["--policy", policy, "--prometheus-port", String(metrics), "--worker-startup-check-interval", "1"],
    ...["--log-level", "warning"],
  ];
  return { port, argv };
}

async function smgArgs(w: Workers, policy: string): Promise<{ port: number; argv: string[] }> {
  const port = await freePort();
  const metrics = await freePort();
  const argv = [
    ...["launch", "--host", "127.0.0.1", "--port", String(port), "--pd-disaggregation", "--backend", "vllm"],
    ...["--prefill", w.prefill, ...w.decode.flatMap((d) => ["--decode", d])],
    ...["--policy", policy, "--prometheus-port", String(metrics), "--disable-tokenizer-autoload"],
    ...["--log-level", "warn"],
  ];
  return { port, argv };
}

const LAUNCH = {
  "vllm-router": { bin: "vllm-router", what: `vllm-router ${VLLM_ROUTER_VERSION}`, args: vllmRouterArgs },
  smg: { bin: "smg", what: `smg ${SMG_VERSION}`, args: smgArgs },
} as const;

export type PeerRouter = keyof typeof LAUNCH;

/** The binary of `peer`, or RouterNotInstalled saying to run npm run setup. */
export function peerRouterBinary(peer: PeerRouter, env: NodeJS.ProcessEnv = process.env): string {
  const bin = join(routersBin(env), LAUNCH[peer].bin);
  if (!existsSync(bin)) throw new RouterNotInstalled(LAUNCH[peer].what, bin);
  return bin;
}

function stopGroup(proc: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (proc.exitCode !== null || proc.signalCode !== null) return resolve();
    const signal = (s: NodeJS.Signals): void => {
      try {
        process.kill(-proc.pid!, s);
      } catch {
        // the group is gone
      }
    };
    // smg::router ignores SIGTERM; and never wait for ever on a process that will not say it exited
    const kill = setTimeout(() => signal("SIGKILL"), 2000);
    const giveUp = setTimeout(resolve, 10_000);
    proc.once("exit", () => {
      clearTimeout(kill);
      clearTimeout(giveUp);
      signal("SIGKILL"); // a child the launcher left behind
      resolve();
    });
    signal("SIGTERM");
  });
}

/** Polls `url`/health until it answers 200 (every worker registered), or fails with the process's stderr. */
async function untilHealthy(url: string, proc: ChildProcess, tail: () => string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (proc.exitCode !== null || proc.signalCode !== null)
      throw new Error(`exited (${proc.signalCode ?? proc.exitCode}) before it was ready: ${tail() || "(no output)"}`);
    try {
      const r = await fetch(`${url}/health`, { signal: AbortSignal.timeout(1000) });
      if (r.status === 200) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`not healthy within ${timeoutMs} ms: ${tail() || "(no output)"}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Starts `peer` with `policy` in front of the workers; resolves once it answers /health. */
export async function startPeerRouter(
  peer: PeerRouter,
  workers: Workers,
  policy: string,
  timeoutMs = 60_000,
): Promise<RunningPeer> {
  const bin = peerRouterBinary(peer);
  const { port, argv } = await LAUNCH[peer].args(workers, policy);
  const proc = spawn(bin, argv, { stdio: ["ignore", "ignore", "pipe"], detached: true });
  let tail = "";
  proc.stderr!.setEncoding("utf8").on("data", (s: string) => {
    tail = (tail + s).slice(-4000);
  });
  const onExit = (): void => {
    try {
      process.kill(-proc.pid!, "SIGKILL");
    } catch {
      // already gone
    }
  };
  process.once("exit", onExit);
  const stop = async (): Promise<void> => {
    await stopGroup(proc);
    process.off("exit", onExit);
  };
  const url = `http://127.0.0.1:${port}`;
  try {
    await untilHealthy(url, proc, () => tail.trim(), timeoutMs);
  } catch (e) {
    await stop();
    throw new Error(`${LAUNCH[peer].what} (${bin} ${argv.join(" ")}): ${(e as Error).message}`);
  }
  return { name: peer, url, argv: [bin, ...argv], stop };
}
