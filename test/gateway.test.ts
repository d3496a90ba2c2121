// The endpoint-picker deployment for real: Envoy (from .venv, npm run setup) with ext_proc to dolphin-epp (Go, built
// into build/dolphin-epp by npm run build), an ORIGINAL_DST cluster on the picked endpoint, a decode-side sidecar
// (dolphin serve --sidecar) on each decode worker and emulated workers (1P2D) publishing KV events over ZMQ. Both
// paths, streaming, the second identical long prompt local on blocks the picker learnt from KV events, decisions
// equal to a Node Router in precise mode fed the same events, the table file swapped (a bad one refused), the
// endpoints file edited (an endpoint removed, none left: 503), the prefill endpoint stopped (the sidecar prefills
// locally, then the picker's health checks take it out), the picker stopped (fail-closed and fail-open Envoys side
// by side). Tests run in order on one deployment; the destructive ones come last.
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runEppBench } from "../bench/epp.js";
import { startGateway, type RunningGateway } from "../src/gateway/gateway.js";
import { startGatewayEnvoy, type RunningGatewayEnvoy } from "../src/gateway/envoy.js";
import { findEpp } from "../src/gateway/epp.js";
import { rootHash } from "../src/hashing/hashes.js";
import { decodeEventBatch } from "../src/router/kv-events.js";
import { Router } from "../src/router/router.js";
import { EventIngest } from "../src/serve/proxy/kv-ingest.js";
import { loadZeromq, type ZmqSubscriber } from "../src/serve/zeromq.js";
import { encodeTable } from "../src/table/codec.js";
import { ruleTable } from "../src/table/rule-table.js";
import { ROOT } from "./bindings-tools.js";
import { coreModule, waitFor } from "./helpers.js";

const MODEL = "dolphin-emulated";

let g: RunningGateway;
let router: Router;
const subscribers: ZmqSubscriber[] = [];

beforeAll(async () => {
  g = await startGateway({
    split: "1P2D",
    port: 0,
    adminPort: 0,
    table: encodeTable(ruleTable("dynamo-isl")),
    model: MODEL,
    timeScale: 200,
    prefillRetries: 1,
    healthMs: 200,
  });
  // a Node Router in precise mode fed the same workers' events, as dolphin serve's feed applies them
  router = Router.create(ruleTable("dynamo-isl"), {
    module: coreModule(),
    workers: g.workers.map((w) => ({ id: w.address, role: w.role })),
    blockSize: 16,
    model: MODEL,
  });
  const { zmq } = await loadZeromq();
  if (!zmq) throw new Error("the zeromq package is missing: npm ci installs it");
  for (const w of g.workers) {
    const ingest = new EventIngest(16, rootHash(MODEL), 62_500);
    const sub = new zmq.Subscriber();
    sub.connect(w.worker.kvEventsEndpoint!);
    sub.subscribe();
    subscribers.push(sub);
    void (async () => {
      try {
        for await (const frames of sub as AsyncIterable<Buffer[]>)
          ingest.apply(router, w.address, decodeEventBatch(frames[frames.length - 1]!));
      } catch {
        // closed
      }
    })();
  }
}, 60_000);

afterAll(async () => {
  for (const s of subscribers) s.close();
  await g?.close();
});

// ---- helpers -------------------------------------------------------------------------------------------------

interface Answer {
  status: number;
  route: string | null;
  decode: string | null;
  prefill: string | null;
  text: string;
}

async function post(base: string, path: string, body: unknown): Promise<Answer> {
  const r = await fetch(`${base}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return {
    status: r.status,
    route: r.headers.get("x-dolphin-route"),
    decode: r.headers.get("x-dolphin-decode-worker"),
    prefill: r.headers.get("x-dolphin-prefill-worker"),
    text: await r.text(),
  };
}

/** A prompt of token ids: `n` tokens from a seed (distinct seeds share nothing). */
const tokens = (seed: number, n: number): number[] =>
  Array.from({ length: n }, (_, i) => (seed * 7919 + i * 31) % 32000);

const completion = (prompt: number[], extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  model: MODEL,
  prompt,
  max_tokens: 4,
  ...extra,
});

async function eppIndex(): Promise<Map<string, number>> {
  const text = await (await fetch(g.epp.metricsUrl)).text();
  const out = new Map<string, number>();
  for (const m of text.matchAll(/^dolphin_index_blocks\{worker="([^"]+)"\} (\d+)/gm)) out.set(m[1]!, Number(m[2]));
  return out;
}

async function eppCounter(name: string): Promise<number> {
  const text = await (await fetch(g.epp.metricsUrl)).text();
  const m = new RegExp(`^${name} (\\d+)`, "m").exec(text);
  return m ? Number(m[1]) : 0;
}

/** Until the picker's index and the Node Router's hold the same blocks per worker, twice in a row. */
async function settled(): Promise<void> {
  let last = "";
  for (let i = 0; i < 100; i++) {
    const epp = await eppIndex();
    const node = g.workers.map((w) => `${w.address}=${router.index.count(w.address)}`).join(",");
    const picker = g.workers.map((w) => `${w.address}=${epp.get(w.address) ?? 0}`).join(",");
    if (node === picker && node === last) return;
    last = node === picker ? node : "";
    await new Promise((r) => setTimeout(r, 40));
  }
  throw new Error("the picker's index and the Node Router's did not agree");
}

const address = (role: string, i = 0): string => g.workers.filter((w) => w.role === role)[i]!.address;

// ---- tests ---------------------------------------------------------------------------------------------------

describe("dolphin-epp behind Envoy", () => {
  it("prefills a long new prompt remotely, then serves it again locally on blocks learnt from KV events", async () => {
    const prompt = tokens(1, 3000);
    const first = await post(g.url, "/v1/completions", completion(prompt));
    expect(first.status).toBe(200);
    expect(first.route).toBe("remote");
    expect(first.prefill).toBe(address("prefill"));
    await settled();
    const second = await post(g.url, "/v1/completions", completion(prompt));
    expect({ status: second.status, route: second.route, decode: second.decode }).toEqual({
      status: 200,
      route: "local",
      decode: first.decode,
    });
    const blocks = (await eppIndex()).get(first.decode!);
    expect(blocks).toBeGreaterThanOrEqual(Math.floor(3000 / 16));
    // each engine's replay socket was asked on subscribe (nothing was buffered yet)
    const metrics = await (await fetch(g.epp.metricsUrl)).text();
    const replays = metrics.match(/^dolphin_kv_replays_total\{outcome="ok",reason="subscribe",worker="[^"]+"\} 1$/gm);
    expect(replays).toHaveLength(3);
  });

  it("decides as a Node Router in precise mode fed the same events and prompts", async () => {
    const prompts = [
      tokens(2, 4000),
      tokens(2, 4000),
      tokens(3, 100),
      [...tokens(2, 4000), ...tokens(4, 300)],
      tokens(5, 2500),
      tokens(5, 2500),
      tokens(6, 3000),
    ];
    for (const prompt of prompts) {
      await settled();
      const d = router.route({ tokens: prompt, maxTokens: 4 });
      const a = await post(g.url, "/v1/completions", completion(prompt));
      expect(a.status).toBe(200);
      expect({ route: a.route, decode: a.decode, prefill: a.prefill }).toEqual({
        route: d.path,
        decode: d.decodeWorker,
        prefill: d.path === "remote" ? d.prefillWorker : null,
      });
    }
  });

  it("streams a chat completion through the remote path", async () => {
    const r = await fetch(`${g.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: MODEL,
        stream: true,
        max_tokens: 6,
        messages: [{ role: "user", content: Array.from({ length: 3000 }, (_, i) => `w${i}`).join(" ") }],
      }),
    });
    expect(r.status).toBe(200);
    expect(r.headers.get("x-dolphin-route")).toBe("remote");
    expect(r.headers.get("content-type")).toContain("text/event-stream");
    const events = (await r.text()).split("\n\n").filter((e) => e.startsWith("data: "));
    expect(events.at(-1)).toBe("data: [DONE]");
    expect(events.length).toBeGreaterThanOrEqual(6);
  });

  it("ends a request's prefill loads when the engines store its prompt (KV events), the rest when it ends", async () => {
    const released = async (): Promise<number> =>
      Number(
        /^dolphin_epp_prefill_releases_total\{signal="kv_events"\} (\d+)/m.exec(
          await (await fetch(g.epp.metricsUrl)).text(),
        )?.[1] ?? 0,
      );
    const before = await released();
    // An answer longer than every buffer between the engine and this client (128,000 tokens: megabytes of SSE) that
    // this client stops reading after its first token: the request lasts until the client cancels it, whatever the
    // machine's load. (Read to its end, a 3000-token answer lasted about 120 ms at timeScale 200, less than two
    // metrics reads take on a loaded machine.)
    const r = await fetch(`${g.url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(completion(tokens(60, 3000), { max_tokens: 128_000, stream: true })),
    });
    expect([r.status, r.headers.get("x-dolphin-route")]).toEqual([200, "remote"]);
    const reader = r.body!.getReader();
    await reader.read(); // the first token: both engines have the prompt
    // the prefill endpoint's and the decode endpoint's holds, ended by their engines' events (the signal counted is
    // the first that ended each hold: the request's end would have counted as request_end)
    await waitFor("both prefill holds ended by KV events", async () => (await released()) >= before + 2);
    expect((await released()) - before).toBe(2);
    // its decode load and its place count until it ends (Envoy's access-log entry), not until the pick's stream ends
    expect(await eppCounter("dolphin_inflight_requests")).toBe(1);
    await reader.cancel(); // the client leaves: Envoy logs the request's end
    await waitFor("the request's end", async () => (await eppCounter("dolphin_inflight_requests")) === 0);
  });

  it("answers a body-less request (GET /v1/models) through a decode endpoint", async () => {
    const r = await fetch(`${g.url}/v1/models`);
    expect(r.status).toBe(200);
    expect(JSON.stringify(await r.json())).toContain(MODEL);
  });

  it("stops picking an endpoint removed from the file, and answers 503 when no decode endpoint is left", async () => {
    const reloads = await eppCounter("dolphin_epp_endpoint_reloads_total");
    const kept = g.endpoints.filter((e) => e.address !== address("decode", 1));
    g.epp.setEndpoints(kept);
    while ((await eppCounter("dolphin_epp_endpoint_reloads_total")) === reloads)
      await new Promise((r) => setTimeout(r, 30));
    for (let i = 0; i < 4; i++) {
      const a = await post(g.url, "/v1/completions", completion(tokens(10 + i, 200 + 700 * i)));
      expect(a.status).toBe(200);
      expect(a.decode).toBe(address("decode", 0));
    }
    g.epp.setEndpoints(g.endpoints.filter((e) => e.role === "prefill"));
    while ((await eppCounter("dolphin_epp_endpoint_reloads_total")) < reloads + 2)
      await new Promise((r) => setTimeout(r, 30));
    const none = await post(g.url, "/v1/completions", completion(tokens(20, 100)));
    expect(none.status).toBe(503);
    expect(none.text).toContain("no decode endpoint is ready");
    g.epp.setEndpoints(g.endpoints);
    while ((await eppCounter("dolphin_epp_endpoint_reloads_total")) < reloads + 3)
      await new Promise((r) => setTimeout(r, 30));
  });

  it("swaps its table when the table file changes, and keeps the old one when the new one is bad", async () => {
    const swaps = await eppCounter("dolphin_table_swaps_total");
    g.epp.setTable(encodeTable(ruleTable("always-local")));
    while ((await eppCounter("dolphin_table_swaps_total")) === swaps) await new Promise((r) => setTimeout(r, 30));
    const local = await post(g.url, "/v1/completions", completion(tokens(50, 3000)));
    expect({ status: local.status, route: local.route }).toEqual({ status: 200, route: "local" });
    g.epp.setTable(new Uint8Array([0xc1, 0x00, 0x01])); // not a table: logged, the always-local table stays
    await new Promise((r) => setTimeout(r, 400));
    expect(await eppCounter("dolphin_table_swaps_total")).toBe(swaps + 1);
    expect((await post(g.url, "/v1/completions", completion(tokens(51, 3000)))).route).toBe("local");
    g.epp.setTable(encodeTable(ruleTable("dynamo-isl")));
    while ((await eppCounter("dolphin_table_swaps_total")) === swaps + 1) await new Promise((r) => setTimeout(r, 30));
    expect((await post(g.url, "/v1/completions", completion(tokens(52, 3000)))).route).toBe("remote");
  });

  it("falls back to local prefill when the prefill endpoint is stopped, until the picker takes it out", async () => {
    await g.workers.find((w) => w.role === "prefill")!.worker.close();
    const a = await post(g.url, "/v1/completions", completion(tokens(30, 3000)));
    expect({ status: a.status, route: a.route }).toEqual({ status: 200, route: "fallback" });
    expect(JSON.parse(a.text).choices[0].text.length).toBeGreaterThan(0);
    // then the picker's health checks take it out of rotation: no prefill endpoint is named any more
    while (!/^dolphin_workers\{role="prefill",state="down"\} 1$/m.test(await (await fetch(g.epp.metricsUrl)).text()))
      await new Promise((r) => setTimeout(r, 30));
    const b = await post(g.url, "/v1/completions", completion(tokens(31, 3000)));
    expect({ status: b.status, route: b.route, prefill: b.prefill }).toEqual({
      status: 200,
      route: "local",
      prefill: null,
    });
  });

  it("fails closed or open, as configured, when the picker is stopped", async () => {
    let open: RunningGatewayEnvoy | null = null;
    try {
      open = await startGatewayEnvoy(
        {
          listen: { port: 0 },
          admin: { port: 0 },
          epp: { host: g.epp.host, port: g.epp.grpcPort },
          fallback: g.workers.filter((w) => w.sidecar).map((w) => ({ host: "127.0.0.1", port: w.sidecar!.port })),
          failOpen: true,
        },
        g.dir,
        "fail-open",
      );
      // picked through the buffered body mode: the picker answered it (not the fallback route)
      const picks = async (): Promise<number> =>
        [...(await (await fetch(g.epp.metricsUrl)).text()).matchAll(/^dolphin_requests_total\{[^}]*\} (\d+)/gm)]
          .map((m) => Number(m[1]))
          .reduce((a, b) => a + b, 0);
      const picked = await picks();
      const before = await post(open.url, "/v1/completions", completion(tokens(40, 3000)));
      expect({ status: before.status, route: before.route }).toEqual({ status: 200, route: "local" });
      expect(await picks()).toBe(picked + 1);
      await g.epp.close();
      const closed = await post(g.url, "/v1/completions", completion(tokens(41, 100)));
      expect(closed.status).toBe(500);
      const opened = await post(open.url, "/v1/completions", completion(tokens(42, 100)));
      expect({ status: opened.status, route: opened.route }).toEqual({ status: 200, route: "local" });
    } finally {
      await open?.close();
    }
  });
});

describe("dolphin gateway", () => {
  it("says to run npm run setup and npm run build when dolphin-epp is not built", () => {
    const empty = mkdtempSync(join(tmpdir(), "dolphin-no-epp-"));
    try {
      expect(() => findEpp(empty)).toThrow(/build\/dolphin-epp is missing: run npm run setup and npm run build/);
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
  });

  it("refuses a bad split, and says to run npm run setup when vLLM is not installed, before starting anything", () => {
    const empty = mkdtempSync(join(tmpdir(), "dolphin-no-vllm-"));
    const cli = (args: string[]) =>
      spawnSync(process.execPath, [join(ROOT, "bin", "dolphin.js"), "gateway", ...args], {
        encoding: "utf8",
        env: { ...process.env, DOLPHIN_CACHE: empty },
      });
    try {
      const bad = cli(["--emulate", "1X"]);
      expect(bad.status).toBe(1);
      expect(bad.stderr).toContain("--emulate");
      expect(cli(["--vllm", "2X"]).stderr).toContain("--vllm");
      const vllm = cli(["--vllm", "1P1D", "--port", "0", "--admin-port", "0"]);
      expect(vllm.status).toBe(1);
      expect(vllm.stderr).toMatch(/vLLM is not installed \(.*\): run npm run setup/);
      expect(vllm.stderr).not.toContain("Envoy at"); // nothing started
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
  });
});

describe("dolphin bench epp", () => {
  it("reports what Envoy, the ext_proc exchange alone and the picker path add, both modes, and the picker's time per pick", async () => {
    const r = await runEppBench({ quick: true, requests: 60 });
    for (const m of [r, r.streaming]) {
      expect(m.failed).toEqual({ direct: 0, envoy: 0, ext_proc_only: 0, epp: 0 });
      for (const q of [m.epp_added_latency_ms, m.envoy_added_latency_ms, m.ext_proc_only_added_latency_ms])
        expect(Number.isFinite(q.p50) && Number.isFinite(q.p99)).toBe(true);
      expect(typeof m.target_met).toBe("boolean");
      // each picker answered its path's requests (a process that took no part would switch next to never)
      expect(m.context_switches_per_request.epp).toBeGreaterThan(0.5);
      expect(m.context_switches_per_request.ext_proc_only).toBeGreaterThan(0.5);
    }
    expect(r.pick_us).toBeGreaterThan(0);
  }, 60_000);
});
