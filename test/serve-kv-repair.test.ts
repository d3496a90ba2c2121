// Lost KV events repaired (proxy/kv-feed.ts), against the emulated worker's publisher and replay socket
// (src/serve/worker/kv-events.ts): the proxy subscribes through a relay that drops batches on purpose, while a
// reference proxy subscribes to the worker directly. A gap the replay socket still buffers is replayed, and the index
// ends as the reference's; a gap past the buffer, or without a replay socket, resets the worker's index (counted, and
// said in the log) rather than leave it wrong.
import { afterEach, describe, expect, it } from "vitest";
import type { ServeConfigInput } from "../src/serve/config.js";
import { startProxy, type RunningProxy } from "../src/serve/proxy.js";
import { startWorker, type WorkerHandle } from "../src/serve/worker.js";
import { coreModule } from "./helpers.js";
import { lossyRelay as lossyRelayOf, type LossyRelay } from "./relays.js";
import { cleanUp, closers, metric, MODEL, sleep } from "./serve-fault-tools.js";

afterEach(cleanUp);

async function worker(
  bufferSteps?: number,
  ports?: { http: number; pub: number; replay: number },
): Promise<WorkerHandle> {
  const w = await startWorker({
    role: "both",
    model: MODEL,
    timeScale: 50,
    workerId: "w0",
    port: ports?.http ?? 0,
    kvEventsEndpoint: `tcp://127.0.0.1:${ports?.pub ?? "*"}`,
    kvEventsReplayEndpoint: `tcp://127.0.0.1:${ports?.replay ?? "*"}`,
    ...(bufferSteps !== undefined ? { kvEventsBufferSteps: bufferSteps } : {}),
    log: () => {},
  });
  closers.push(() => w.close());
  return w;
}

async function lossyRelay(from: string): Promise<LossyRelay> {
  const relay = await lossyRelayOf(from);
  closers.push(() => relay.close());
  return relay;
}

const log: string[] = [];
async function proxyOn(w: WorkerHandle, endpoint: string, replay: boolean): Promise<RunningProxy> {
  const config: ServeConfigInput = {
    model: MODEL,
    mode: "precise",
    listen: { host: "127.0.0.1", port: 0 },
    table: "always-local",
    log_level: "warn",
    workers: [
      {
        id: w.workerId,
        url: w.url,
        role: "both",
        kv_events_endpoint: endpoint,
        ...(replay ? { kv_events_replay_endpoint: w.kvEventsReplayEndpoint! } : {}),
      },
    ],
  };
  const p = await startProxy(config, { module: coreModule("release"), log: (l) => log.push(l) });
  closers.push(() => p.close());
  return p;
}

async function complete(p: RunningProxy, i: number): Promise<void> {
  const prompt = Array.from({ length: 96 }, (_, k) => 1 + i * 1000 + k); // 6 blocks of its own
  const r = await fetch(`${p.url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: MODEL, prompt, max_tokens: 2 }),
  });
  expect(r.status).toBe(200);
  await r.arrayBuffer();
}

/** Waits until `check` holds (the events travel over ZMQ), at most 10 s. */
async function until(check: () => boolean | Promise<boolean>, what: string): Promise<void> {
  const end = Date.now() + 10_000;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

describe("dolphin serve: lost KV events", () => {
  it("replays a gap the worker still buffers: the index ends as a lossless subscriber's", async () => {
    const w = await worker();
    const relay = await lossyRelay(w.kvEventsEndpoint!);
    const p = await proxyOn(w, relay.endpoint, true);
    const ref = await proxyOn(w, w.kvEventsEndpoint!, true);
    const blocks = (x: RunningProxy) => x.router.index.count("w0");
    await sleep(300); // the subscriptions connected (a PUB socket drops what it sends before: ZMQ's slow joiner)
    await complete(ref, 0);
    await until(() => blocks(p) === 6 && blocks(ref) === 6, "the first request's blocks");
    relay.dropping = true;
    for (let i = 1; i <= 3; i++) await complete(ref, i);
    await until(() => blocks(ref) === 24, "the reference's blocks");
    relay.dropping = false;
    expect(relay.dropped).toBeGreaterThan(0);
    expect(blocks(p)).toBe(6); // the dropped batches' blocks are missing
    await complete(ref, 4); // its batch shows the gap
    await until(() => blocks(p) === 30, "the gap replayed");
    expect(blocks(ref)).toBe(30);
    expect(await metric(p, "dolphin_kv_sequence_gaps_total")).toBeGreaterThanOrEqual(relay.dropped);
    const replays = (await (await fetch(`${p.url}/metrics`)).text())
      .split("\n")
      .filter((l) => l.startsWith("dolphin_kv_replays_total{") && l.includes('reason="gap"'));
    expect(replays.map((l) => /outcome="(\w+)"/.exec(l)![1])).toEqual(["ok"]);
    expect(await metric(p, "dolphin_kv_index_resets_total")).toBe(0);
  });

  it("resets the worker's index when the gap is older than the replay buffer, and says so", async () => {
    const w = await worker(1); // the replay socket keeps only the last batch
    const relay = await lossyRelay(w.kvEventsEndpoint!);
    const p = await proxyOn(w, relay.endpoint, true);
    const blocks = () => p.router.index.count("w0");
    await sleep(300); // the subscriptions connected (a PUB socket drops what it sends before: ZMQ's slow joiner)
    await complete(p, 0);
    await until(() => blocks() === 6, "the first request's blocks");
    relay.dropping = true;
    for (let i = 1; i <= 3; i++) await complete(p, i);
    await sleep(100);
    relay.dropping = false;
    await complete(p, 4);
    await until(
      async () => (await metric(p, 'dolphin_kv_index_resets_total{cause="replay_partial"')) === 1,
      "the reset",
    );
    // request 0's blocks are gone with the reset (whatever their fate in the lost batches); request 4's are in
    await until(() => blocks() === 6, "request 4's blocks only");
    expect(log.some((l) => l.includes("beyond the replay buffer: index reset"))).toBe(true);
  });

  it("resets the worker's index on a gap when it has no replay socket", async () => {
    const w = await worker();
    const relay = await lossyRelay(w.kvEventsEndpoint!);
    const p = await proxyOn(w, relay.endpoint, false);
    const blocks = () => p.router.index.count("w0");
    await sleep(300); // the subscriptions connected (a PUB socket drops what it sends before: ZMQ's slow joiner)
    await complete(p, 0);
    await until(() => blocks() === 6, "the first request's blocks");
    relay.dropping = true;
    await complete(p, 1);
    await sleep(100);
    relay.dropping = false;
    await complete(p, 2);
    await until(
      async () => (await metric(p, 'dolphin_kv_index_resets_total{cause="gap_unreplayable"')) === 1,
      "the reset",
    );
    await until(() => blocks() === 6, "request 2's blocks only");
  });

  it("resets the worker's index when its engine restarted (its sequence started over), then replays what it has", async () => {
    const first = await worker();
    const port = (endpoint: string | null) => Number(endpoint!.split(":").at(-1));
    const ports = { http: first.port, pub: port(first.kvEventsEndpoint), replay: port(first.kvEventsReplayEndpoint) };
    const p = await proxyOn(first, first.kvEventsEndpoint!, true);
    const blocks = () => p.router.index.count("w0");
    await sleep(300); // the subscriptions connected (a PUB socket drops what it sends before: ZMQ's slow joiner)
    // ten batches or so: the new engine's sequence, started over, stays below the last one seen until the proxy's
    // subscription has reconnected (past it, a restart would look like a gap)
    for (let i = 0; i < 10; i++) await complete(p, i);
    await until(() => blocks() === 60, "the first engine's blocks");
    await first.close();
    await worker(undefined, ports); // the same addresses, a fresh cache and sequence
    // until the subscription has reconnected, the new engine's batches go nowhere (ZMQ's slow joiner): requests until
    // one of its batches shows the sequence started over
    let served = 0;
    const restarted = async () => (await metric(p, 'dolphin_kv_index_resets_total{cause="restart"')) === 1;
    while (!(await restarted()) && served < 50) {
      await complete(p, 10 + served++);
      await sleep(50);
    }
    expect(await restarted()).toBe(true);
    // the first engine's blocks are gone; the new one's, replayed from its buffer, are in
    await until(() => blocks() === 6 * served, "the restarted engine's blocks only");
    expect(await metric(p, "dolphin_kv_engine_restarts_total")).toBe(1);
  });
});
