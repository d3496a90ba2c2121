// The proxy's hot-path shortcuts give what the plain way gives: the answer's usage read from its tail equals the
// usage of the parsed answer (and falls back to parsing where the tail does not prove it), the byte-level SSE sniffer
// finds usage in a line cut anywhere between chunks, and a client leaving cuts its calls as an AbortSignal would; a
// worker's answer that came whole is read at once as it would be in pieces, the stream relay passes bursts, long
// streams and slow clients on byte for byte, and decision records get their time when read; session keys are the
// strings they were, the per-request counters render as prom-client's own counters would, and a decision record's
// object is reused only once its request is over.
import http, { type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { parseJson, readUpstream, usageOf, usageOfAnswer, UsageSniffer } from "../src/serve/proxy/upstream.js";
import { ClientAbort } from "../src/serve/proxy/request-context.js";
import { DecisionLog, type DecisionRecord } from "../src/serve/proxy/decisions.js";
import { bufferedBody } from "../src/serve/http-toolkit.js";
import { createHash } from "node:crypto";
import { Counter, HotCounter, Registry } from "../src/serve/prometheus.js";
import { sessionKey } from "../src/serve/proxy/openai.js";
import { startProxy, type RunningProxy } from "../src/serve/proxy.js";
import { coreModule } from "./helpers.js";

const usage = { prompt_tokens: 14, completion_tokens: 8, prompt_tokens_details: { cached_tokens: 5 } };
const plain = (body: string): ReturnType<typeof usageOf> => usageOf(parseJson(Buffer.from(body)));

describe("usageOfAnswer", () => {
  const cases: Array<[string, string]> = [
    ["usage last", JSON.stringify({ id: "x", choices: [{ text: "hi" }], usage })],
    ["usage last, pretty-printed", JSON.stringify({ id: "x", usage }, null, 2) + "\n"],
    ["usage first", JSON.stringify({ usage, id: "x", choices: [] })],
    ["a nested usage key last", JSON.stringify({ usage, meta: { usage: { completion_tokens: 99 } } })],
    ['"usage" inside a string', JSON.stringify({ usage, text: 'a "usage": {"completion_tokens": 1}}' })],
    ["usage null", JSON.stringify({ id: "x", usage: null })],
    ["no usage", JSON.stringify({ id: "x", choices: [] })],
    ["usage with a string holding braces", JSON.stringify({ id: "x", usage: { ...usage, note: '}{"' } })],
    ["not JSON", 'oops "usage": {"completion_tokens": 3}}'],
    ["empty", ""],
  ];
  for (const [name, body] of cases)
    it(`equals the parsed answer's usage: ${name}`, () => {
      expect(usageOfAnswer(Buffer.from(body))).toEqual(plain(body));
    });
});

describe("UsageSniffer", () => {
  const stream =
    `data: {"choices":[{"delta":{"content":"a \\"usage\\" word"}}]}\n\n` +
    `data: ${JSON.stringify({ choices: [], usage })}\n\n` +
    "data: [DONE]\n\n";
  it("finds the usage line whole or cut at every byte", () => {
    const bytes = Buffer.from(stream);
    for (let cut = 0; cut <= bytes.length; cut++) {
      const s = new UsageSniffer();
      s.push(bytes.subarray(0, cut));
      s.push(bytes.subarray(cut));
      expect(s.usage, `cut at ${cut}`).toEqual({ cached: 5, completion: 8 });
    }
  });
  it("finds it one byte at a time, and nothing in a stream without usage", () => {
    const s = new UsageSniffer();
    for (const b of Buffer.from(stream)) s.push(Buffer.from([b]));
    expect(s.usage).toEqual({ cached: 5, completion: 8 });
    const none = new UsageSniffer();
    none.push(Buffer.from('data: {"choices":[{"delta":{"content":"usage"}}]}\n\ndata: [DONE]\n\n'));
    expect(none.usage).toBeNull();
  });
});

describe("ClientAbort", () => {
  it("runs the cuts once on abort, at once for one added after, and aborts a signal asked for", () => {
    const a = new ClientAbort();
    const signal = a.signal;
    let cuts = 0;
    a.onAbort(() => cuts++);
    expect(signal.aborted).toBe(false);
    a.abort();
    a.abort();
    expect(cuts).toBe(1);
    expect(signal.aborted).toBe(true);
    a.onAbort(() => cuts++);
    expect(cuts).toBe(2);
    expect(a.signal.aborted).toBe(true);
  });
});

// ---- reading and relaying worker answers ---------------------------------------------------------------------

/** A worker on loopback whose handler writes the answer; closed after the test. */
async function worker(handler: http.RequestListener): Promise<{ url: string; close: () => Promise<void> }> {
  const server = http.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** The response to a GET of `url`, headers in, body not yet read. */
function get(url: string): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => http.get(url, resolve).on("error", reject));
}

describe("readUpstream", () => {
  it("reads an answer that came whole with its headers (at once) and one that comes in pieces alike", async () => {
    const whole = Buffer.from(JSON.stringify({ id: "x", usage }));
    const w = await worker(async (req, res) => {
      if (req.url === "/whole") return void res.end(whole);
      res.writeHead(200, { "content-type": "application/json" });
      for (let i = 0; i < whole.length; i += 7) {
        res.write(whole.subarray(i, i + 7));
        await sleep(1);
      }
      res.end();
    });
    try {
      const atOnce = await get(`${w.url}/whole`);
      await sleep(20); // all of it is in before it is read
      expect(atOnce.complete).toBe(true);
      expect(await readUpstream(atOnce, 5000)).toEqual(whole);
      const inPieces = await get(`${w.url}/pieces`);
      expect(inPieces.complete).toBe(false);
      expect(await readUpstream(inPieces, 5000)).toEqual(whole);
    } finally {
      await w.close();
    }
  });
});

describe("bufferedBody", () => {
  it("takes a complete message's bytes at once, and leaves one still coming or over the limit alone", async () => {
    const body = Buffer.from("0123456789");
    const w = await worker(async (req, res) => {
      res.writeHead(200);
      if (req.url === "/slow") {
        res.write(body);
        await sleep(30);
      }
      res.end(req.url === "/slow" ? undefined : body);
    });
    try {
      const complete = await get(`${w.url}/fast`);
      await sleep(20);
      expect(bufferedBody(complete, 5)).toBeNull(); // over the limit: read the usual way (with its 413/limit)
      expect(bufferedBody(complete, 100)).toEqual(body);
      const slow = await get(`${w.url}/slow`);
      await sleep(10);
      expect(bufferedBody(slow, 100)).toBeNull();
      slow.resume();
    } finally {
      await w.close();
    }
  });
});

describe("the proxy's stream relay", () => {
  const proxies: RunningProxy[] = [];
  afterEach(async () => {
    await Promise.all(proxies.splice(0).map((p) => p.close()));
  });

  async function through(stream: http.RequestListener): Promise<{ proxy: RunningProxy; close: () => Promise<void> }> {
    const w = await worker((req, res) => {
      if (req.url === "/health") return void res.end("{}");
      req.resume();
      req.on("end", () => stream(req, res));
    });
    const proxy = await startProxy(
      {
        listen: { host: "127.0.0.1", port: 0 },
        model: "m",
        table: "always-local",
        mode: "approximate",
        workers: [{ id: "d", url: w.url, role: "decode" }],
        log_level: "warn",
        ask_stream_usage: true, // the relay's two ways: the client asked for usage, or the proxy did
      },
      { module: coreModule() },
    );
    proxies.push(proxy);
    return { proxy, close: w.close };
  }

  /**
   * A streaming chat request through the proxy, its answer read `slowly` (paused between reads) or at once. With
   * `askUsage` the client asks for stream_options.include_usage (the relay passes the bytes as they are); without, the
   * proxy asks the worker itself and takes the usage event out (stream-usage.ts).
   */
  function streamed(proxy: RunningProxy, slowly: boolean, askUsage: boolean): Promise<Buffer> {
    const body = JSON.stringify({
      model: "m",
      messages: [{ role: "user", content: "hi" }],
      stream: true,
      ...(askUsage ? { stream_options: { include_usage: true } } : {}),
    });
    return new Promise((resolve, reject) => {
      const req = http.request(`${proxy.url}/v1/chat/completions`, { method: "POST" }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => {
          chunks.push(c);
          if (slowly) {
            res.pause();
            setTimeout(() => res.resume(), 1);
          }
        });
        res.on("end", () => resolve(Buffer.concat(chunks)));
        res.on("error", reject);
      });
      req.on("error", reject);
      req.end(body);
    });
  }

  const event = (i: number, size = 20): string => `data: {"i":${i},"text":"${"x".repeat(size)}"}\n\n`;
  const usageEvent = `data: ${JSON.stringify({ choices: [], usage })}\n\n`;

  /** What the client gets of `sent`: all of it when it asked for usage, else all but the usage event. */
  const expected = (sent: string[], askUsage: boolean): string =>
    sent.filter((e) => askUsage || e !== usageEvent).join("");

  for (const askUsage of [true, false]) {
    const asked = askUsage ? "the client asked for usage" : "the proxy asked for usage";
    it(`passes on a burst of events written in one tick, the end included, byte for byte (${asked})`, async () => {
      const sent = [...Array.from({ length: 8 }, (_, i) => event(i)), usageEvent, "data: [DONE]\n\n"];
      const w = await through((_req, res) => {
        res.writeHead(200, { "content-type": "text/event-stream" });
        for (const e of sent.slice(0, -1)) res.write(e);
        res.end(sent.at(-1));
      });
      try {
        expect((await streamed(w.proxy, false, askUsage)).toString()).toBe(expected(sent, askUsage));
      } finally {
        await w.close();
      }
    });

    it(`passes on a long stream that comes over many ticks to a slow client, the worker held back meanwhile (${asked})`, async () => {
      const sent = Array.from({ length: 400 }, (_, i) => event(i, 4000));
      sent.push(usageEvent, "data: [DONE]\n\n");
      const w = await through(async (_req, res) => {
        res.writeHead(200, { "content-type": "text/event-stream" });
        for (let i = 0; i < sent.length - 1; i++) {
          if (!res.write(sent[i])) await new Promise((r) => res.once("drain", r));
          if (i % 50 === 0) await sleep(1);
        }
        res.end(sent.at(-1));
      });
      try {
        const got = await streamed(w.proxy, true, askUsage);
        expect(got.length).toBe(Buffer.byteLength(expected(sent, askUsage)));
        expect(got.toString()).toBe(expected(sent, askUsage));
      } finally {
        await w.close();
      }
    });
  }
});

describe("DecisionLog", () => {
  it("writes a record's ts from its time when it is read, and trims times with records", () => {
    const log = new DecisionLog(2);
    const t0 = Date.UTC(2026, 10, 30, 12, 0, 0, 5);
    for (let i = 0; i < 5; i++) log.newRecord(t0 + i).id = `r${i}`;
    const recent = log.recent(10);
    expect(recent.map((r) => r.id)).toEqual(["r3", "r4"]);
    expect(recent.map((r) => r.ts)).toEqual([new Date(t0 + 3).toISOString(), new Date(t0 + 4).toISOString()]);
  });
  it("hands a new request the oldest record's object only once its request is over and had no error", () => {
    const log = new DecisionLog(2);
    const a = log.newRecord(1);
    const b = log.newRecord(2);
    expect(a).not.toBe(b);
    a.id = "a";
    b.id = "b";
    // a is still going: a new object takes its slot, and a leaves the log
    const c = log.newRecord(3);
    expect(c).not.toBe(a);
    c.id = "c";
    expect(log.recent(5).map((r) => r.id)).toEqual(["b", "c"]);
    b.status = 200; // over: its object is taken
    const d = log.newRecord(4);
    expect(d).toBe(b);
    d.id = "d";
    c.status = 502;
    c.error = "decode worker failed";
    const e = log.newRecord(5); // over but with an error key: a new object
    expect(e).not.toBe(c);
    e.id = "e";
    expect(log.recent(5).map((r) => [r.id, r.ts])).toEqual([
      ["d", new Date(4).toISOString()],
      ["e", new Date(5).toISOString()],
    ]);
  });
  it("gives records the keys of a record written whole, in the same order", () => {
    const whole: DecisionRecord = {
      id: "x",
      ts: "",
      endpoint: "/v1/chat/completions",
      table: { kind: "rule", checksum: "c" },
      turn: 1,
      path: "local",
      route: "local",
      reason: "rule",
      decode_worker: "d0",
      prefill_worker: null,
      cluster: null,
      features: { isl: 18, effP: 18, effD: 18, oslHat: 0 },
      matched_blocks: { decode: 0, prefill: 0 },
      predicted_cached_tokens: 0,
      reported_cached_tokens: null,
      status: null,
      latency_ms: null,
    };
    const r = new DecisionLog(1).newRecord(0);
    for (const [k, v] of Object.entries(whole)) (r as unknown as Record<string, unknown>)[k] = v;
    expect(JSON.stringify(r)).toBe(JSON.stringify(whole));
    expect(Object.keys(new DecisionLog(0).newRecord(0))).toEqual(Object.keys(whole));
  });
});

describe("sessionKey", () => {
  const chat = (content: string, user?: string): Record<string, unknown> => ({
    messages: [
      { role: "system", content: "be brief" },
      { role: "user", content },
    ],
    ...(user === undefined ? {} : { user }),
  });
  it("is the model, endpoint, user and first user message joined by NULs, marked with \\u0001, up to 96 characters", () => {
    expect(sessionKey("m", "chat", chat("hello", "ann"))).toBe("\u0001m\0chat\0ann\0hello");
    expect(sessionKey("m", "completions", { prompt: "once upon" })).toBe("\u0001m\0completions\0\0once upon");
    const longest = "x".repeat(96 - "m\0chat\0\0".length);
    expect(sessionKey("m", "chat", chat(longest))).toBe(`\u0001m\0chat\0\0${longest}`);
  });
  it("is the sha1 of that, in base64, beyond 96 characters", () => {
    const long = "x".repeat(97 - "m\0chat\0\0".length);
    const digest = createHash("sha1").update(`m\0chat\0\0${long}`).digest("base64");
    expect(sessionKey("m", "chat", chat(long))).toBe(digest);
  });
});

describe("HotCounter", () => {
  it("renders what a prom-client counter given the same counts renders: series order, label order, zero counts", async () => {
    const plain = new Registry();
    const hot = new Registry();
    const p = new Counter({
      name: "c_total",
      help: "h",
      labelNames: ["endpoint", "route", "status"],
      registers: [plain],
    });
    const h = new HotCounter(hot, "c_total", "h", ["endpoint", "route", "status"]);
    const counts: Array<[string, string, number, number]> = [
      ["/a", "local", 200, 1],
      ["/b", "remote", 502, 0],
      ["/a", "local", 200, 3],
      ["/a", "fallback", 200, 1],
    ];
    for (const [endpoint, route, status, n] of counts) {
      p.inc({ endpoint, route, status: String(status) }, n);
      h.at(endpoint, route, status).inc(n);
    }
    expect(await hot.metrics()).toBe(await plain.metrics());
    // counted again after a scrape: the new counts add to what was handed over
    p.inc({ endpoint: "/b", route: "remote", status: "502" }, 2);
    h.at("/b", "remote", 502).inc(2);
    expect(await hot.metrics()).toBe(await plain.metrics());
    expect(await hot.metrics()).toContain('c_total{endpoint="/b",route="remote",status="502"} 2');
  });
  it("rejects what prom-client rejects, at the call", () => {
    const s = new HotCounter(new Registry(), "d_total", "h", ["path"]).at("local");
    expect(() => s.inc(-1)).toThrow(/decrease/);
    expect(() => s.inc(Infinity)).toThrow(/not a valid number/);
  });
});
