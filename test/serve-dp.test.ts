// dolphin serve in front of data-parallel engines (issue 28, item 3): emulated workers with
// --data-parallel-size 2 publish each rank's KV events (its data_parallel_rank, at the endpoint's port + rank, as
// vLLM), the proxy indexes each rank as a worker of its own (`id#rank`) and pins each leg to its rank with
// X-data-parallel-rank.
import net from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { expandRanks, offsetEndpointPort, parseWorker, type WorkerConfig } from "../src/serve/config-workers.js";
import type { RunningProxy } from "../src/serve/proxy.js";
import { startWorker, type WorkerHandle } from "../src/serve/worker.js";
import { cleanUp, closers, MODEL, proxy, sleep, startFake, vllmLike } from "./serve-fault-tools.js";

afterEach(cleanUp);

/** A free port whose next port is free too (vLLM puts rank r's publisher at the endpoint's port + r). */
async function freePortPair(): Promise<number> {
  const take = (port: number): Promise<net.Server | null> =>
    new Promise((resolve) => {
      const s = net.createServer();
      s.once("error", () => resolve(null));
      s.listen(port, "127.0.0.1", () => resolve(s));
    });
  for (;;) {
    const a = await take(0);
    const port = (a!.address() as net.AddressInfo).port;
    const b = port < 65535 ? await take(port + 1) : null;
    await new Promise((r) => a!.close(r));
    if (b) {
      await new Promise((r) => b.close(r));
      return port;
    }
  }
}

interface DpWorker {
  w: WorkerHandle;
  endpoint: string;
  replay: string;
}

/**
 * An emulated engine with 2 data-parallel ranks, publishing and replaying at the endpoints' port + rank. The replay
 * socket gives the proxy what a rank published before its subscription was up (ZMQ's late joiner).
 */
async function dpWorker(role: "prefill" | "decode", id: string, attempt = 1): Promise<DpWorker> {
  let pub = await freePortPair();
  let replay = await freePortPair();
  while (Math.abs(pub - replay) < 2) replay = await freePortPair();
  // another test file may take a port between its check and the bind: then new ports
  const started = startWorker({
    role,
    model: MODEL,
    timeScale: 50,
    workerId: id,
    dataParallelSize: 2,
    kvEventsEndpoint: `tcp://127.0.0.1:${pub}`,
    kvEventsReplayEndpoint: `tcp://127.0.0.1:${replay}`,
    log: () => {},
  });
  const w = await started.catch((e: Error) => {
    if (attempt >= 5) throw e;
    return null;
  });
  if (!w) return dpWorker(role, id, attempt + 1);
  closers.push(() => w.close());
  return { w, endpoint: `tcp://127.0.0.1:${pub}`, replay: `tcp://127.0.0.1:${replay}` };
}

const entry = (d: DpWorker, id: string, role: "prefill" | "decode"): WorkerConfig => ({
  id,
  url: d.w.url,
  role,
  kv_events_endpoint: d.endpoint,
  kv_events_replay_endpoint: d.replay,
  data_parallel_size: 2,
});

const PROMPT = Array.from({ length: 96 }, (_, k) => 7 + k); // 6 blocks

async function complete(url: string, headers: Record<string, string> = {}): Promise<Response> {
  const r = await fetch(`${url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify({ model: MODEL, prompt: PROMPT, max_tokens: 2 }),
  });
  expect(r.status).toBe(200);
  return r;
}

async function until(check: () => boolean, what: string): Promise<void> {
  const end = Date.now() + 10_000;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

const held = (p: RunningProxy, worker: string): number => p.router.index.count(worker);

describe("dolphin serve: data-parallel ranks", () => {
  it("makes one worker per rank, its KV-event endpoints offset by the rank as vLLM's", () => {
    const w = parseWorker(
      { id: "d", url: "http://h:8000", role: "decode", kv_events_endpoint: "tcp://h:5557", data_parallel_size: 3 },
      "workers[0]",
    );
    expect(expandRanks(w).map((r) => [r.id, r.data_parallel_rank, r.kv_events_endpoint])).toEqual([
      ["d#0", 0, "tcp://h:5557"],
      ["d#1", 1, "tcp://h:5558"],
      ["d#2", 2, "tcp://h:5559"],
    ]);
    expect(offsetEndpointPort("inproc://cache", 2)).toBe("inproc://cache_dp2");
    expect(offsetEndpointPort("tcp://h:0", 2)).toBe("tcp://h:0");
    expect(() => parseWorker({ id: "d", url: "http://h:1", role: "decode", data_parallel_size: 0 }, "w")).toThrow(
      /w\.data_parallel_size: expected an integer ≥ 1 and ≤ 1024, got 0/,
    );
  });

  it("routes to the rank that holds the prefix, and that rank serves it from its cache", async () => {
    const dec = await dpWorker("decode", "d");
    const w = dec.w;
    const p = await proxy([entry(dec, "d", "decode")], { mode: "precise" });
    // rank 1 alone computes the prompt (a request pinned there, past the proxy): its events reach d#1 only
    await (await complete(w.url, { "x-data-parallel-rank": "1" })).arrayBuffer();
    await until(() => held(p, "d#1") === 6, "rank 1's blocks in the index");
    expect(held(p, "d#0")).toBe(0);
    const r = await complete(p.url);
    expect(r.headers.get("x-dolphin-decode-worker")).toBe("d#1");
    const body = (await r.json()) as { usage: { prompt_tokens_details: { cached_tokens: number } } };
    expect(body.usage.prompt_tokens_details.cached_tokens).toBe(80); // 5 of 6 blocks: the last is recomputed
    expect([w.ranks[0]!.stats().completed, w.ranks[1]!.stats().completed]).toEqual([0, 2]);
  });

  it("pins the prefill leg and the decode leg each to its worker's rank", async () => {
    const pre = await dpWorker("prefill", "p");
    const dec = await dpWorker("decode", "d");
    const p = await proxy([entry(pre, "p", "prefill"), entry(dec, "d", "decode")], {
      mode: "precise",
      table: "always-remote",
    });
    // the prompt's blocks on rank 1 of the prefill engine, so the router's choice there is not the tie's rank 0
    await (await complete(pre.w.url, { "x-data-parallel-rank": "1" })).arrayBuffer();
    await until(() => held(p, "p#1") === 6, "rank 1's blocks in the index");
    const r = await complete(p.url);
    await r.arrayBuffer();
    expect(r.headers.get("x-dolphin-prefill-worker")).toBe("p#1");
    const decodeRank = Number(r.headers.get("x-dolphin-decode-worker")!.split("#")[1]);
    const prefill = pre.w.ranks.map((k) => k.stats());
    expect(prefill.map((s) => s.promptTokens)).toEqual([0, 2 * PROMPT.length]);
    // the decode rank pulled from prefill rank 1, whose blocks it then released
    await until(() => pre.w.ranks[1]!.stats().kvReleases.pulled === 1, "the release on the prefill rank");
    const decode = dec.w.ranks.map((k) => k.stats().completed);
    expect(decode[decodeRank]).toBe(1);
    expect(decode[1 - decodeRank]).toBe(0);
  });

  it("takes one rank registered as a worker of its own, and sends its requests with its rank", async () => {
    const ranks: (string | undefined)[] = [];
    const answer = vllmLike();
    const fake = await startFake((req, body, res) => {
      if (req.url?.startsWith("/v1/")) ranks.push(req.headers["x-data-parallel-rank"] as string | undefined);
      return answer(req, body, res);
    });
    const p = await proxy([]);
    const register = (body: unknown): Promise<Response> =>
      fetch(`${p.url}/admin/workers`, {
        method: "POST",
        headers: { authorization: "Bearer t", "content-type": "application/json" },
        body: JSON.stringify(body),
      });
    expect((await register({ id: "d", url: fake.url, role: "decode", data_parallel_size: 2 })).status).toBe(400);
    expect((await register({ id: "d#1", url: fake.url, role: "decode", data_parallel_rank: 1 })).status).toBe(201);
    const r = await fetch(`${p.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "hi" }] }),
    });
    expect(r.status).toBe(200);
    expect(ranks).toEqual(["1"]);
  });
});
