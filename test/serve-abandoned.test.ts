// A client that leaves after its prefill, in front of emulated workers (`dolphin worker` processes) on loopback: the
// prefill worker's pinned blocks are released at once (not at its 30 s pin timeout) whether the client left once the
// prefill had answered (the proxy sends the decode worker the handoff to refuse) or during the decode call before the
// KV was pulled (the decode worker's abort tells the prefill worker), and no decode is run for a client gone.
import { afterEach, describe, expect, it } from "vitest";
import type { RunningProxy } from "../src/serve/proxy.js";
import {
  cleanUp,
  closers,
  json,
  metric,
  MODEL,
  proxy,
  sleep,
  startFake,
  workerProcess,
  type WorkerProcess,
} from "./serve-fault-tools.js";
import { holdingRelay as holdingRelayOf, type HoldingRelay } from "./relays.js";

afterEach(cleanUp);

async function workerMetric(w: WorkerProcess, name: string): Promise<number> {
  const text = await (await fetch(`${w.url}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(name));
  return Number(line?.split(" ").at(-1) ?? NaN);
}

async function until(check: () => Promise<boolean>): Promise<void> {
  const end = Date.now() + 5_000;
  while (!(await check())) {
    if (Date.now() > end) throw new Error("timed out");
    await sleep(20);
  }
}

/** Polls a worker's metric until `ok` (at most 5 s: the prefill worker's pins time out after 30 s). */
async function workerMetricReaches(w: WorkerProcess, name: string, ok: (v: number) => boolean): Promise<void> {
  let v = NaN;
  const end = Date.now() + 5_000;
  while (!ok((v = await workerMetric(w, name)))) {
    if (Date.now() > end) throw new Error(`${name} stayed at ${v}`);
    await sleep(20);
  }
}

async function holdingRelay(to: string): Promise<HoldingRelay> {
  const relay = await holdingRelayOf(to);
  closers.push(() => relay.close());
  return relay;
}

/** A request its client may abort: the controller, and the answer (the error once aborted). */
function leavingClient(p: RunningProxy): { client: AbortController; answer: Promise<Response | Error> } {
  const client = new AbortController();
  const answer = fetch(`${p.url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body,
    signal: client.signal,
  }).catch((e: Error) => e);
  return { client, answer };
}

const body = JSON.stringify({ model: MODEL, prompt: `${"a prompt to prefill ".repeat(40)}`, max_tokens: 8 });

/**
 * A remote request from `pf` to `d` (routed by a proxy of its own): `d` has pulled from `pf` once, so it has had its
 * NIXL handshake with it, and sends a release to it at once (see the first-contact test).
 */
async function pulledOnce(pf: WorkerProcess, d: WorkerProcess): Promise<void> {
  const warm = await proxy(
    [
      { id: "p0", url: pf.url, role: "prefill" },
      { id: "dx", url: d.url, role: "decode" },
    ],
    { table: "always-remote" },
  );
  const r = await fetch(`${warm.url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: MODEL, prompt: "a warm-up", max_tokens: 1 }),
  });
  expect([r.status, r.headers.get("x-dolphin-route")]).toEqual([200, "remote"]);
  await r.arrayBuffer();
  await workerMetricReaches(pf, "dolphin:kv_pinned_requests", (v) => v === 0);
}

/** The client leaves once the prefill answered (the relay holds the answer's second half until then). */
async function leftAfterPrefill(pf: WorkerProcess, d: WorkerProcess): Promise<RunningProxy> {
  const relay = await holdingRelay(pf.url);
  const p = await proxy(
    [
      { id: "p0", url: relay.url, role: "prefill" },
      { id: "d0", url: d.url, role: "decode" },
    ],
    { table: "always-remote" },
  );
  const { client, answer } = leavingClient(p);
  await relay.answerBegan;
  expect(await workerMetric(pf, "dolphin:kv_pinned_requests")).toBe(1);
  client.abort();
  expect(await answer).toBeInstanceOf(Error);
  // the proxy has seen the client go (its request counted 499) before the prefill's answer ends
  await until(
    async () =>
      (await metric(p, 'dolphin_requests_total{endpoint="/v1/completions",route="remote",status="499"}')) === 1,
  );
  relay.release();
  await until(async () => (await metric(p, 'dolphin_abandoned_prefills_total{cause="client_gone"')) === 1);
  return p;
}

describe("dolphin serve: a client that leaves after its prefill", () => {
  it("releases the prefill worker's blocks through the decode worker when the client left after the prefill answered", async () => {
    const pf = await workerProcess("prefill", "p0", 1); // pins time out after 30 s
    const d = await workerProcess("decode", "d0", 1);
    await pulledOnce(pf, d);
    const prompts = await workerMetric(d, "vllm:prompt_tokens_total");
    const p = await leftAfterPrefill(pf, d);
    await workerMetricReaches(pf, "dolphin:kv_pinned_requests", (v) => v === 0);
    expect(await metric(p, 'dolphin_abandoned_prefills_total{cause="client_gone",outcome="released"}')).toBe(1);
    // the decode worker refused the handoff: it decoded nothing, pulled nothing
    expect(await workerMetric(d, "vllm:prompt_tokens_total")).toBe(prompts);
  });

  it("sends a release that is its decode worker's first contact with the prefill worker at its next step, as vLLM", async () => {
    const pf = await workerProcess("prefill", "p0", 1);
    const d = await workerProcess("decode", "d0", 1); // no handshake with p0 yet
    await leftAfterPrefill(pf, d);
    // refused, and the handshake made, but an idle decode worker does not step: the blocks stay pinned
    await sleep(300);
    expect(await workerMetric(pf, "dolphin:kv_pinned_requests")).toBe(1);
    const next = await fetch(`${d.url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: MODEL, prompt: "the next request", max_tokens: 1 }),
    });
    expect(next.status).toBe(200);
    await next.arrayBuffer();
    await workerMetricReaches(pf, "dolphin:kv_pinned_requests", (v) => v === 0);
  });

  it("releases them through the decode worker's abort when the client left during the decode call, before the pull", async () => {
    const pf = await workerProcess("prefill", "p0", 1);
    const d = await workerProcess("decode", "d0", 0.0001); // its pull takes minutes
    const p = await proxy(
      [
        { id: "p0", url: pf.url, role: "prefill" },
        { id: "d0", url: d.url, role: "decode" },
      ],
      { table: "always-remote" },
    );
    const { client, answer } = leavingClient(p);
    await workerMetricReaches(pf, "dolphin:kv_pinned_requests", (v) => v === 1); // the handoff is made
    await workerMetricReaches(d, "vllm:num_requests_running", (v) => v === 1); // the decode worker is pulling
    client.abort();
    expect(await answer).toBeInstanceOf(Error);
    await workerMetricReaches(pf, "dolphin:kv_pinned_requests", (v) => v === 0);
    expect(await metric(p, "dolphin_abandoned_prefills_total")).toBe(0); // nothing for the proxy to release
  });

  it("releases them through the retry's decode worker when the first decode worker failed before the pull", async () => {
    const pf = await workerProcess("prefill", "p0", 1);
    const failing = await startFake((req, _body, res) =>
      req.url === "/health" ? json(res, 200, {}) : json(res, 500, { error: "engine dead" }),
    );
    const d1 = await workerProcess("decode", "d1", 1);
    await pulledOnce(pf, d1);
    const p = await proxy(
      [
        { id: "p0", url: pf.url, role: "prefill" },
        { id: "d0", url: failing.url, role: "decode" }, // chosen first: the lower index at a tie
        { id: "d1", url: d1.url, role: "decode" },
      ],
      { table: "always-remote" },
    );
    const r = await fetch(`${p.url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body,
    });
    expect(r.status).toBe(200);
    expect(r.headers.get("x-dolphin-route")).toBe("fallback");
    expect(r.headers.get("x-dolphin-decode-worker")).toBe("d1");
    await workerMetricReaches(pf, "dolphin:kv_pinned_requests", (v) => v === 0);
    expect(await metric(p, 'dolphin_abandoned_prefills_total{cause="decode_retried",outcome="released"}')).toBe(1);
  });
});
