// `dolphin explore`: serves the built policy explorer (dist/explorer/, from `npm run build:explorer`) on localhost
// and prints its URL. Static files only: the page computes everything itself (core.wasm, simulator and learner in
// a Web Worker), so the server never sees a workload or a table.

import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { extname, join, normalize, sep } from "node:path";
import { packageFile } from "../core/package-root.js";
import { intOption, untilSignal, type Command } from "./args.js";

const MIME: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".wasm": "application/wasm", // WebAssembly.compileStreaming requires it
  ".svg": "image/svg+xml",
  ".json": "application/json",
  ".png": "image/png",
  ".ico": "image/x-icon",
};

/** The built explorer, or an error saying how to build it. */
export function explorerDir(): string {
  const dir = packageFile("dist", "explorer");
  if (!existsSync(join(dir, "index.html"))) throw new Error(`no built explorer in ${dir}: run npm run build:explorer`);
  return dir;
}

/** The favicon browsers ask for at /favicon.ico whatever the page links (a 404 there is a console error). */
function faviconFile(dir: string): string | undefined {
  const assets = join(dir, "assets");
  const name = existsSync(assets)
    ? readdirSync(assets).find((f) => f.startsWith("favicon") && f.endsWith(".svg"))
    : undefined;
  return name ? join(assets, name) : undefined;
}

/** Serves `dir` read-only on host:port (port 0: any free port); resolves with the server and its URL. */
export function serveExplorer(dir: string, port: number, host = "127.0.0.1"): Promise<{ server: Server; url: string }> {
  const favicon = faviconFile(dir);
  const server = createServer((req, res) => {
    const path = decodeURIComponent(new URL(req.url ?? "/", "http://localhost").pathname);
    let file =
      path === "/favicon.ico" && favicon
        ? favicon
        : normalize(join(dir, path.endsWith("/") ? path + "index.html" : path));
    if (file !== favicon && !file.startsWith(dir + sep)) file = ""; // no path escapes the folder
    if (req.method !== "GET" && req.method !== "HEAD") {
      res.writeHead(405, { allow: "GET, HEAD" }).end();
      return;
    }
    if (!file || !existsSync(file) || !statSync(file).isFile()) {
      res.writeHead(404, { "content-type": "text/plain; charset=utf-8" }).end(`not found: ${path}\n`);
      return;
    }
    const type = file === favicon ? MIME[".svg"]! : (MIME[extname(file)] ?? "application/octet-stream");
    res.writeHead(200, { "content-type": type, "cache-control": "no-cache" });
    res.end(req.method === "HEAD" ? undefined : readFileSync(file));
  });
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      const a = server.address() as AddressInfo;
      resolve({ server, url: `http://${host}:${a.port}/` });
    });
  });
}

export const command: Command = {
  usage: `dolphin explore [--port N] [--host H]

Serves the policy explorer (dist/explorer/, built by npm run build:explorer) and prints its URL: set up a simulated
cluster and workload, compare every baseline, open or train a table, all computed in the page. --port defaults to
8080 (0: any free port); --host to 127.0.0.1.`,
  options: { port: { type: "string" }, host: { type: "string" } },
  async run(v) {
    const port = intOption(v["port"], "port", 0, 65535, 8080);
    const { server, url } = await serveExplorer(explorerDir(), port, String(v["host"] ?? "127.0.0.1"));
    process.stdout.write(`dolphin explore: the policy explorer is at ${url} (Ctrl-C stops it)\n`);
    await untilSignal(() => new Promise<void>((r) => server.close(() => r())));
    return 0;
  },
};
