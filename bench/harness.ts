// The child-process harness of the loopback benchmarks (bench proxy, overload, envoy, proxy --vllm): everything a
// bench measures runs in a process of its own (its own event loop, so the load generator does not share one with
// what it measures), started, awaited until it listens, and stopped here.
//
// Children are CommonJS `node -e` scripts: no build step, and the same from src (vitest) and dist. Each prints one
// JSON line with its ports on stdout when listening (CHILD_PRELUDE, read by portsLine), and exits when its stdin
// closes (the bench went away). `dolphin` itself (serve, worker) runs through LAUNCH_SCRIPT, which does the same.

import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** The model every bench's workers serve and its proxies are configured with. */
export const MODEL = "bench-model";

/** The top of a `node -e` child: its config from DOLPHIN_BENCH_CHILD, exit on stdin's end, listenAll(n, handler). */
export const CHILD_PRELUDE = `
const http = require("node:http");
const cfg = JSON.parse(process.env.DOLPHIN_BENCH_CHILD);
process.stdin.on("end", () => process.exit(0)); process.stdin.resume();
function listenAll(n, handler) {
  const servers = Array.from({ length: n }, () => { const s = http.createServer(handler); s.keepAliveTimeout = 60000; return s; });
  let left = n; const ports = [];
  servers.forEach((s, i) => s.listen(0, "127.0.0.1", () => { ports[i] = s.address().port; if (--left === 0) process.stdout.write(JSON.stringify({ ports }) + "\\n"); }));
}`;

// `node bin/dolphin.js serve --config <file>`, run through a launcher that also exits when its stdin closes, so a
// proxy never outlives a bench killed outright (SIGKILL, or SIGTERM to the bench alone).
export const LAUNCH_SCRIPT = `
process.stdin.on("end", () => process.exit(0)); process.stdin.resume();
process.argv = [process.argv[0], ...JSON.parse(process.env.DOLPHIN_BENCH_ARGV)];
import(require("node:url").pathToFileURL(process.argv[1]).href).catch((e) => { console.error(e); process.exit(1); });`;

export interface Child {
  name: string;
  proc: ChildProcess;
  stderrTail: () => string;
}

export class Children {
  private readonly list: Child[] = [];
  private readonly onExit = (): void => {
    for (const c of this.list) if (c.proc.exitCode === null && c.proc.signalCode === null) c.proc.kill("SIGKILL");
  };
  constructor() {
    process.once("exit", this.onExit);
  }

  spawn(name: string, args: string[], env: Record<string, string> = {}): Child {
    const proc = spawn(process.execPath, args, { stdio: ["pipe", "pipe", "pipe"], env: { ...process.env, ...env } });
    let tail = "";
    proc.stderr!.setEncoding("utf8").on("data", (s: string) => {
      tail = (tail + s).slice(-4000);
    });
    proc.stdin!.on("error", () => undefined);
    const child = { name, proc, stderrTail: () => tail.trim() };
    this.list.push(child);
    return child;
  }

  /** Resolves with the first stdout line (a node -e child's ports) or the proxy's URL from its stderr banner. */
  ready<T>(c: Child, parse: (stdout: string, stderr: string) => T | undefined, timeoutMs = 20_000): Promise<T> {
    return new Promise((resolve, reject) => {
      let out = "";
      let err = "";
      const check = (): void => {
        const v = parse(out, err);
        if (v !== undefined) finish(() => resolve(v));
      };
      const onOut = (s: string): void => {
        out += s;
        check();
      };
      const onErr = (s: string): void => {
        err += s;
        check();
      };
      const onExit = (code: number | null, signal: string | null): void =>
        finish(() =>
          reject(
            new Error(
              `bench proxy: ${c.name} exited (${signal ?? code}) before it was ready: ${c.stderrTail() || "(no stderr)"}`,
            ),
          ),
        );
      const timer = setTimeout(
        () =>
          finish(() => reject(new Error(`bench proxy: ${c.name} not ready within ${timeoutMs} ms: ${c.stderrTail()}`))),
        timeoutMs,
      );
      const finish = (then: () => void): void => {
        clearTimeout(timer);
        c.proc.stdout!.off("data", onOut);
        c.proc.stderr!.off("data", onErr);
        c.proc.off("exit", onExit);
        then();
      };
      c.proc.stdout!.setEncoding("utf8").on("data", onOut);
      c.proc.stderr!.on("data", onErr);
      c.proc.once("exit", onExit);
    });
  }

  /** Closes stdin and sends SIGTERM (a --cpu-prof profile still gets written), SIGKILL after 5 s. */
  async closeAll(): Promise<void> {
    await Promise.all(
      this.list.map(
        (c) =>
          new Promise<void>((resolve) => {
            const p = c.proc;
            if (p.exitCode !== null || p.signalCode !== null) return resolve();
            const kill = setTimeout(() => p.kill("SIGKILL"), 5000);
            p.once("exit", () => {
              clearTimeout(kill);
              resolve();
            });
            p.stdin!.end();
            p.kill("SIGTERM");
          }),
      ),
    );
    process.off("exit", this.onExit);
  }
}

export function repoRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const pkg = join(dir, "package.json");
    if (existsSync(pkg) && (JSON.parse(readFileSync(pkg, "utf8")) as { name?: string }).name === "dolphin-routing")
      return dir;
    const up = dirname(dir);
    if (up === dir) throw new Error("bench proxy: cannot find the dolphin-routing package root");
    dir = up;
  }
}

export const portsLine = (out: string): number[] | undefined => {
  const nl = out.indexOf("\n");
  return nl < 0 ? undefined : (JSON.parse(out.slice(0, nl)) as { ports: number[] }).ports;
};
export const proxyBanner = (_out: string, err: string): string | undefined =>
  /proxy at (http:\/\/[^\s,]+)/.exec(err)?.[1];

/** `node bin/dolphin.js <args>` as a child, through LAUNCH_SCRIPT; `nodeArgs` go to node (e.g. --cpu-prof). */
export function spawnDolphin(children: Children, name: string, args: string[], nodeArgs: string[] = []): Child {
  return children.spawn(name, [...nodeArgs, "-e", LAUNCH_SCRIPT], {
    DOLPHIN_BENCH_ARGV: JSON.stringify([join(repoRoot(), "bin/dolphin.js"), ...args]),
  });
}

/** `dolphin serve --config <config>` as a child; resolves with the proxy's URL once it listens, and the child (its log). */
export async function startServeChild(
  children: Children,
  name: string,
  config: string,
  nodeArgs: string[] = [],
): Promise<{ url: string; child: Child }> {
  const child = spawnDolphin(children, name, ["serve", "--config", config], nodeArgs);
  return { url: await children.ready(child, proxyBanner), child };
}

/** `dolphin serve --config <config>` as a child; resolves with the proxy's URL once it listens. */
export async function startServe(
  children: Children,
  name: string,
  config: string,
  nodeArgs: string[] = [],
): Promise<string> {
  return (await startServeChild(children, name, config, nodeArgs)).url;
}

/** Writes a `dolphin serve` config to `file`: loopback on a free port, MODEL, log level warn, and `fields`. */
export function writeServeConfig(file: string, fields: Record<string, unknown>): string {
  writeFileSync(
    file,
    JSON.stringify({ listen: { host: "127.0.0.1", port: 0 }, model: MODEL, ...fields, log_level: "warn" }),
  );
  return file;
}
