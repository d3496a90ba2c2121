// Loopback tools of the fault suites (serve-faults, serve-outliers): fake vLLM-like workers, `dolphin worker`
// processes, a proxy started in-process, and readers of its answers and metrics. Everything started is closed by
// cleanUp (each suite's afterEach).
import http, { type IncomingMessage, type ServerResponse } from "node:http";
import net from "node:net";
import type { AddressInfo } from "node:net";
import { spawn } from "node:child_process";
import type { ServeConfigInput } from "../src/serve/config.js";
import type { WorkerConfig } from "../src/serve/config-workers.js";
import { startProxy, type RunningProxy } from "../src/serve/proxy.js";
import { startEmulated, type Emulated } from "../src/serve/emulate.js";
import { PRESETS } from "../src/sim/model-presets.js";
import { coreModule } from "./helpers.js";

export const MODEL = "test-model";
export const BIN = new URL("../bin/dolphin.js", import.meta.url).pathname;

export interface Fake {
  url: string;
  port: number;
  calls: string[];
  server: http.Server;
}

export type Handler = (
  req: IncomingMessage,
  body: Record<string, unknown>,
  res: ServerResponse,
) => void | Promise<void>;

export const closers: Array<() => Promise<void>> = [];
export async function cleanUp(): Promise<void> {
  await Promise.all(
    closers
      .splice(0)
      .reverse()
      .map((c) => c().catch(() => undefined)),
  );
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
}

/** A vLLM-like worker: byte tokens, NixlConnector prefill answers, chat answers; `opts.reject` answers 400 to inference. */
export function vllmLike(opts: { rejectContent?: boolean; cached?: number } = {}): Handler {
  return (req, body, res) => {
    if (req.url === "/health") return json(res, 200, {});
    const msgs = body["messages"] as Array<{ content: unknown }> | undefined;
    if (opts.rejectContent && msgs?.some((m) => typeof m.content !== "string")) {
      return json(res, 400, {
        object: "error",
        message: "content must be a string",
        type: "BadRequestError",
        param: null,
        code: 400,
      });
    }
    if (req.url === "/tokenize")
      return json(res, 200, { tokens: Array.from(Buffer.from(JSON.stringify(body["messages"] ?? body["prompt"]))) });
    const usage = {
      prompt_tokens: 10,
      completion_tokens: 3,
      prompt_tokens_details: { cached_tokens: opts.cached ?? 0 },
    };
    const kv = body["kv_transfer_params"] as Record<string, unknown> | undefined;
    if (kv?.["do_remote_decode"] === true)
      return json(res, 200, { usage, kv_transfer_params: { do_remote_prefill: true, remote_engine_id: "e" } });
    return json(res, 200, { id: "c", choices: [{ index: 0, message: { role: "assistant", content: "ok" } }], usage });
  };
}

export async function startFake(handler: Handler = vllmLike(), port = 0): Promise<Fake> {
  const calls: string[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      calls.push(req.url ?? "");
      const text = Buffer.concat(chunks).toString("utf8");
      Promise.resolve(handler(req, text ? (JSON.parse(text) as Record<string, unknown>) : {}, res)).catch(() =>
        res.destroy(),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  const actual = (server.address() as AddressInfo).port;
  closers.push(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return { url: `http://127.0.0.1:${actual}`, port: actual, calls, server };
}

export const proxyLog: string[] = [];

export async function proxy(workers: WorkerConfig[], extra: Partial<ServeConfigInput> = {}): Promise<RunningProxy> {
  const p = await startProxy(
    {
      model: MODEL,
      listen: { host: "127.0.0.1", port: 0 },
      log_level: "warn",
      admin_token: "t",
      capacity_blocks: 4096,
      max_workers: 16,
      table: "always-local",
      workers,
      ...extra,
    },
    { module: coreModule("release"), log: (line) => proxyLog.push(line) },
  );
  closers.push(() => p.close());
  return p;
}

export function post(p: RunningProxy, path: string, body: unknown): Promise<Response> {
  return fetch(`${p.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}

export async function metric(p: RunningProxy, name: string): Promise<number> {
  const text = await (await fetch(`${p.url}/metrics`)).text();
  return text
    .split("\n")
    .filter((l) => l.startsWith(name))
    .reduce((sum, l) => sum + Number(l.split(" ").at(-1)), 0);
}

/** Sends raw bytes and resolves with the status line of the answer (or "closed"). */
export function rawStatus(port: number, bytes: string, opts: { keepOpenMs?: number } = {}): Promise<string> {
  return new Promise((resolve) => {
    const socket = net.connect(port, "127.0.0.1", () => socket.write(bytes));
    let got = "";
    socket.on("data", (d) => {
      got += d.toString("latin1");
    });
    socket.on("close", () => resolve(got.split("\r\n")[0] || "closed"));
    socket.on("error", () => undefined);
    if (opts.keepOpenMs) setTimeout(() => socket.destroy(), opts.keepOpenMs);
  });
}

export interface WorkerProcess {
  url: string;
  pid: number;
  child: ReturnType<typeof spawn>;
}

/** Starts `dolphin worker` as its own process on a free port; resolves once it listens. */
export async function workerProcess(
  role: "prefill" | "decode",
  id: string,
  timeScale = 20,
  extraArgs: string[] = [],
): Promise<WorkerProcess> {
  const child = spawn(
    process.execPath,
    [
      BIN,
      "worker",
      "--role",
      role,
      "--port",
      "0",
      "--time-scale",
      String(timeScale),
      "--worker-id",
      id,
      "--model",
      MODEL,
      ...extraArgs,
    ],
    { stdio: ["ignore", "ignore", "pipe"] },
  );
  closers.push(async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill("SIGCONT");
    child.kill("SIGKILL");
    await new Promise((r) => child.once("exit", r));
  });
  const url = await new Promise<string>((resolve, reject) => {
    let text = "";
    const t = setTimeout(() => reject(new Error(`worker ${id} did not start: ${text}`)), 15_000);
    child.stderr!.on("data", (c: Buffer) => {
      text += c.toString();
      const m = /at (http:\/\/\S+?)[,\s]/.exec(text);
      if (m) {
        clearTimeout(t);
        resolve(m[1]!);
      }
    });
  });
  return { url, pid: child.pid!, child };
}

export async function waitUntil(check: () => boolean, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > end) throw new Error("timed out");
    await sleep(20);
  }
}

/** A 1P2D cluster of in-process emulated workers (KV events over ZMQ, 50× time) and its precise-mode proxy. */
export function emulated1P2D(): Promise<Emulated> {
  return startEmulated({
    split: "1P2D",
    port: 0,
    preset: PRESETS["h100-8b"],
    timeScale: 50,
    module: coreModule("release"),
    log: () => {},
  });
}
