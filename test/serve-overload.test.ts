// Shedding on event-loop lag (admission.ts): while the proxy's event loop lags past admission.max_event_loop_lag_ms,
// new requests get a fast 503 `overloaded` with Retry-After, counted as reason "event_loop_lag"; once it has caught
// up, requests go through again. The proxy runs in this process, so blocking this thread is lagging its loop.
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { startProxy, type RunningProxy } from "../src/serve/proxy.js";
import { coreModule } from "./helpers.js";

const MODEL = "test-model";
const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c().catch(() => undefined);
});

async function fakeWorker(): Promise<string> {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      const body = JSON.stringify({ id: "c", choices: [{ index: 0, text: "ok" }], usage: { completion_tokens: 1 } });
      res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
      res.end(body);
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  closers.push(() => new Promise((r) => server.close(() => r())));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function post(p: RunningProxy): Promise<{ status: number; retryAfter: string | null; code: string | null }> {
  const r = await fetch(`${p.url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: MODEL, prompt: "hello", max_tokens: 4 }),
  });
  const body = (await r.json()) as { error?: { code?: string } };
  return { status: r.status, retryAfter: r.headers.get("retry-after"), code: body.error?.code ?? null };
}

async function metric(p: RunningProxy, line: RegExp): Promise<number> {
  const text = await (await fetch(`${p.url}/metrics`)).text();
  const m = line.exec(text);
  return m ? Number(m[1]) : NaN;
}

const blockFor = (ms: number): void => {
  const end = performance.now() + ms;
  while (performance.now() < end);
};

describe("dolphin serve: shedding on event-loop lag", () => {
  it("answers 503 overloaded while its event loop lags, then serves again once it has caught up", async () => {
    const worker = await fakeWorker();
    const p = await startProxy(
      {
        model: MODEL,
        table: "always-local",
        listen: { host: "127.0.0.1", port: 0 },
        workers: [{ id: "d0", url: worker, role: "decode" }],
        admission: { max_event_loop_lag_ms: 100 },
        log_level: "silent",
      },
      { module: coreModule() },
    );
    closers.push(() => p.close());
    expect((await post(p)).status).toBe(200);
    // the loop stays busy (600 ms blocks, again and again) while the request is sent, so however slow this machine
    // is, every window folded in lags ~600 ms: the smoothed lag is past twice the limit and the request is shed
    const hog = setInterval(() => blockFor(600), 20);
    let shed: Awaited<ReturnType<typeof post>>;
    try {
      await new Promise((r) => setTimeout(r, 2000));
      shed = await post(p);
    } finally {
      clearInterval(hog);
    }
    expect(shed).toEqual({ status: 503, retryAfter: "1", code: "overloaded" });
    expect(await metric(p, /^dolphin_shed_total\{reason="event_loop_lag"\} (\S+)$/m)).toBe(1);
    // the smoothed lag falls by a third per 100 ms window of a free loop: under the limit within a few seconds
    const until = performance.now() + 10_000;
    while ((await metric(p, /^dolphin_event_loop_lag_seconds (\S+)$/m)) >= 0.05 && performance.now() < until)
      await new Promise((r) => setTimeout(r, 200));
    expect((await post(p)).status).toBe(200);
    expect(await metric(p, /^dolphin_event_loop_lag_seconds (\S+)$/m)).toBeLessThan(0.05);
  }, 30_000);
});
