// `dolphin explore`: serves the built explorer on localhost, prints its URL, and serves only that folder, with the
// types a browser needs (application/wasm for compileStreaming) and a favicon (a 404 there is a console error).
import { spawn, type ChildProcess } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const BIN = new URL("../bin/dolphin.js", import.meta.url).pathname;
let child: ChildProcess;
let url: string;

beforeAll(async () => {
  child = spawn(process.execPath, [BIN, "explore", "--port", "0"], { stdio: ["ignore", "pipe", "pipe"] });
  url = await new Promise<string>((resolve, reject) => {
    let out = "";
    child.stdout!.on("data", (d: Buffer) => {
      out += d.toString();
      const m = /is at (http:\/\/127\.0\.0\.1:\d+\/)/.exec(out);
      if (m) resolve(m[1]!);
    });
    child.once("exit", (code) => reject(new Error(`dolphin explore exited with ${code}: ${out}`)));
  });
}, 30_000);

afterAll(() => {
  child?.kill("SIGTERM");
});

describe("dolphin explore", () => {
  it("serves the page, its core as application/wasm, and a favicon", async () => {
    const page = await fetch(url);
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toMatch(/^text\/html/);
    const html = await page.text();
    expect(html).toContain("policy explorer");
    const favicon = await fetch(new URL("favicon.ico", url));
    expect(favicon.status).toBe(200);
    const script = /src="\.\/(assets\/[^"]+\.js)"/.exec(html)?.[1];
    expect(script).toBeDefined();
    const js = await (await fetch(new URL(script!, url))).text();
    // both workers (the simulation's and the explain view's) load the core
    const workers = [...new Set([...js.matchAll(/[/"'`]((?:explain-)?worker-[\w-]+\.js)/g)].map((m) => m[1]!))].sort();
    expect(workers).toHaveLength(2);
    expect(workers[0]).toMatch(/^explain-worker-/);
    for (const worker of workers) {
      const res = await fetch(new URL(`assets/${worker}`, url));
      expect(res.status, worker).toBe(200);
      const wasm = /(core-[\w-]+\.wasm)/.exec(await res.text())?.[1];
      expect(wasm, worker).toBeDefined();
      const core = await fetch(new URL(`assets/${wasm!}`, url));
      expect(core.headers.get("content-type")).toBe("application/wasm");
      expect(WebAssembly.validate(new Uint8Array(await core.arrayBuffer()))).toBe(true);
    }
  });

  it("serves nothing outside its folder", async () => {
    expect((await fetch(new URL("/..%2f..%2fpackage.json", url))).status).toBe(404);
    expect((await fetch(new URL("/no-such-file.js", url))).status).toBe(404);
  });
});
