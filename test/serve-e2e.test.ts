// End to end with the real parts: the proxy in front of emulated vLLM workers (real sockets, real HTTP, KV events
// over ZMQ), and `dolphin serve --emulate` as a separate process.
import { spawn } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Emulated } from "../src/serve/emulate.js";
import { startProxy } from "../src/serve/proxy.js";
import type { ServeConfigInput } from "../src/serve/config.js";
import { coreModule } from "./helpers.js";
import { emulated1P2D } from "./serve-fault-tools.js";

const longPrompt = (topic: string) => `Summarize everything you know about ${topic}. `.repeat(120);

async function chat(url: string, content: string, extra: Record<string, unknown> = {}) {
  const r = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "dolphin-emulated", messages: [{ role: "user", content }], max_tokens: 6, ...extra }),
  });
  return {
    status: r.status,
    route: r.headers.get("x-dolphin-route"),
    decode: r.headers.get("x-dolphin-decode-worker"),
    text: await r.text(),
  };
}

/** The config `startEmulated` gave its proxy, read back from its workers. */
function proxyConfig(e: Emulated): ServeConfigInput {
  return {
    model: "dolphin-emulated",
    mode: "precise",
    workers: e.workers.map((w) => ({
      id: w.workerId,
      url: w.url,
      role: w.role,
      kv_events_endpoint: w.kvEventsEndpoint!,
      kv_events_replay_endpoint: w.kvEventsReplayEndpoint!,
    })),
  };
}

/** A chat prompt's token ids as the worker's /tokenize gives them (what precise mode routes on). */
async function tokenize(content: string): Promise<number[]> {
  const r = await fetch(`${tokenizerUrl}/tokenize`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "dolphin-emulated", messages: [{ role: "user", content }] }),
  });
  return ((await r.json()) as { tokens: number[] }).tokens;
}
let tokenizerUrl = "";

describe("proxy + emulated workers (in process)", () => {
  let e: Emulated;
  beforeAll(async () => {
    e = await emulated1P2D();
    tokenizerUrl = e.workers.find((w) => w.role === "decode")!.url;
  });
  afterAll(async () => e?.close());

  it("sends a cold long prompt remote, then, once the KV events arrive, the repeat local where it is cached", async () => {
    const prompt = longPrompt("prefix caches");
    const first = await chat(e.proxy.url, prompt);
    expect(first.status).toBe(200);
    expect(first.route).toBe("remote");
    const body = JSON.parse(first.text);
    expect(body.usage.completion_tokens).toBe(6);
    // KV events travel over ZMQ: wait until the decode worker's blocks are in the router's index
    const deadline = Date.now() + 10_000;
    while (e.proxy.router.index.count(first.decode!) === 0 && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 20));
    expect(e.proxy.router.index.count(first.decode!)).toBeGreaterThan(0);
    const again = await chat(e.proxy.url, prompt);
    expect(again.route).toBe("local");
    expect(again.decode).toBe(first.decode);
    expect(JSON.parse(again.text).usage.prompt_tokens_details.cached_tokens).toBeGreaterThan(1000);
  });

  it("streams a remote request through without buffering: role chunk, tokens, [DONE]", async () => {
    const r = await chat(e.proxy.url, longPrompt("streaming"), { stream: true });
    expect(r.route).toBe("remote");
    const events = r.text.split("\n\n").filter(Boolean);
    expect(events.at(-1)).toBe("data: [DONE]");
    // the client did not ask for usage and gets no usage event
    expect(r.text).not.toContain('"usage"');
    const chunks = events.slice(0, -1).map((l) => JSON.parse(l.slice("data: ".length)));
    expect(
      chunks
        .map((c) => c.choices[0]?.delta?.content ?? "")
        .join("")
        .trim()
        .split(/\s+/),
    ).toHaveLength(6);
  });

  it("a second proxy started in front of the warm workers sees their caches before its first request (replay)", async () => {
    const prompt = longPrompt("late joiners");
    const first = await chat(e.proxy.url, prompt);
    expect(first.status).toBe(200);
    const deadline = Date.now() + 10_000;
    while (e.proxy.router.index.count(first.decode!) === 0 && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 20));
    const late = await startProxy(
      { ...proxyConfig(e), listen: { host: "127.0.0.1", port: 0 }, admin_token: null },
      { module: coreModule("release"), log: () => {} },
    );
    try {
      const hashes = late.router.hash({ tokens: await tokenize(prompt) });
      const until = Date.now() + 10_000;
      while ((late.router.index.match(hashes)[first.decode!] ?? 0) === 0 && Date.now() < until)
        await new Promise((r) => setTimeout(r, 20));
      expect(late.router.index.match(hashes)[first.decode!]).toBeGreaterThan(0);
      const again = await chat(late.url, prompt);
      expect([again.status, again.route, again.decode]).toEqual([200, "local", first.decode]);
    } finally {
      await late.close();
    }
  });

  it("falls back to local prefill when the prefill worker is gone", async () => {
    const prefill = e.workers.find((w) => w.role === "prefill")!;
    await prefill.close();
    const r = await chat(e.proxy.url, longPrompt("failures"));
    expect(r.status).toBe(200);
    expect(["fallback", "local"]).toContain(r.route);
    expect(JSON.parse(r.text).usage.completion_tokens).toBe(6);
  });
});

describe("dolphin serve --emulate (a separate process)", () => {
  it("starts workers and the proxy in one command and answers OpenAI requests", async () => {
    const child = spawn(
      process.execPath,
      [
        new URL("../bin/dolphin.js", import.meta.url).pathname,
        "serve",
        "--emulate",
        "1P1D",
        "--port",
        "0",
        "--time-scale",
        "50",
      ],
      { stdio: ["ignore", "ignore", "pipe"] },
    );
    try {
      const url = await new Promise<string>((resolve, reject) => {
        let err = "";
        const timer = setTimeout(() => reject(new Error(`no proxy URL in: ${err}`)), 20_000);
        child.stderr.on("data", (d: Buffer) => {
          err += d.toString();
          const m = /proxy at (http:\/\/[\d.:]+)/.exec(err);
          if (m) {
            clearTimeout(timer);
            resolve(m[1]!);
          }
        });
      });
      const models = (await (await fetch(`${url}/v1/models`)).json()) as { data: { id: string }[] };
      expect(models.data.map((m) => m.id)).toContain("dolphin-emulated");
      const r = await chat(url, "hello there");
      expect(r.status).toBe(200);
      expect(JSON.parse(r.text).choices[0].message.content.length).toBeGreaterThan(0);
      expect((await fetch(`${url}/health`)).status).toBe(200);
      const bad = await fetch(`${url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: "{nope",
      });
      expect(bad.status).toBe(400);
      expect(((await bad.json()) as { error: { message: string } }).error.message.length).toBeGreaterThan(0);
    } finally {
      child.kill("SIGTERM");
    }
  }, 60_000);
});
