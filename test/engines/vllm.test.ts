// The router in front of real vLLM engines (the CPU build and tiny model `npm run setup` installs), on loopback: one
// prefill engine P0 (NixlConnector kv_producer) and one decode engine D0 (kv_consumer), pinned to different cores,
// and a third, R0 (kv_both, a small cache of 160 blocks, a replay buffer of 8 batches), for lost events, evictions,
// restarts and as the second decode worker when D0 is killed. Started once for the whole file; the tests run in order, the destructive ones last. What is
// asserted is what a user relies on: outputs, cached-token figures, the index against the engines' caches, faults.
import { execFile, spawn, spawnSync } from "node:child_process";
import { promisify } from "node:util";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startEngines, stopEngines, type EngineSpec, type VllmEngine } from "../../src/serve/vllm/engines.js";
import { vllmInstall } from "../../src/serve/vllm/install.js";
import { envoySetupFor } from "../../src/envoy/vllm.js";
import { startEnvoy, type RunningEnvoy } from "../../src/envoy/launch.js";
import { encodeTable } from "../../src/table/codec.js";
import { ruleTable } from "../../src/table/rule-table.js";
import {
  ADMIN,
  cacheableBlocks,
  chat,
  complete,
  decisionOf,
  metric,
  MODEL,
  proxyFor,
  sleep,
  sseData,
  tokens,
  waitFor,
  type TestProxy,
  type EngineSuite,
} from "./engine-tools.js";
import { lostEventsTests, REPLAY_BUFFER_BATCHES } from "./lost-events.js";
import { clientLeavesTests } from "./client-leaves.js";
import { gatewayCases } from "./gateway-cases.js";

const BLOCK = 32;
const SMALL_CACHE_BLOCKS = 160;

let engines: VllmEngine[] = [];
let P0: VllmEngine;
let D0: VllmEngine;
let R0: VllmEngine;
const open: Array<{ close(): Promise<void> }> = [];

async function proxy(...args: Parameters<typeof proxyFor>): Promise<TestProxy> {
  const p = await proxyFor(...args);
  open.push(p);
  return p;
}

/** Waits until the proxy's index holds `blocks` blocks of `prompt` on `worker` (KV events arrive over ZMQ). */
async function indexed(p: TestProxy, worker: string, prompt: number[], blocks: number): Promise<void> {
  await waitFor(`${blocks} blocks of the prompt in ${worker}'s index`, () => {
    const m = p.router.index.match(p.router.hash({ tokens: prompt }));
    return (m[worker] ?? 0) >= blocks;
  });
}

const matchOf = (p: TestProxy, prompt: number[]) => p.router.index.match(p.router.hash({ tokens: prompt }));

const suite: EngineSuite = {
  engine: (id) => engines.find((e) => e.id === id)!,
  proxy,
  closeAfter: (c) => void open.push(c),
};

beforeAll(async () => {
  const specs: EngineSpec[] = [
    { id: "P0", role: "prefill", core: 0 },
    { id: "D0", role: "decode", core: 1 },
    { id: "R0", role: "both", core: 0, numBlocks: SMALL_CACHE_BLOCKS, kvEventsBufferSteps: REPLAY_BUFFER_BATCHES },
  ];
  const t0 = Date.now();
  engines = await startEngines(specs, { progress: (l) => console.log(l) });
  [P0, D0, R0] = engines as [VllmEngine, VllmEngine, VllmEngine];
  console.log(`three vLLM engines up in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
});

afterAll(async () => {
  for (const c of open.reverse()) await c.close().catch(() => undefined);
  await stopEngines(engines);
});

describe("P/D through NixlConnector: the remote path", () => {
  it("transfers the KV cache (the decode engine's nixl_xfer_time_seconds_count rises) and answers as the local path does", async () => {
    const remote = await proxy([P0, D0], { table: "always-remote" });
    const local = await proxy([P0, D0], { table: "always-local" });
    const prompt = tokens(1, 1500);
    const before = await metric(D0.url, "vllm:nixl_xfer_time_seconds_count");
    const r = await complete(remote.url, prompt, { max_tokens: 16 });
    expect(r.status).toBe(200);
    expect([r.route, r.prefill, r.decode]).toEqual(["remote", "P0", "D0"]);
    expect(await metric(D0.url, "vllm:nixl_xfer_time_seconds_count")).toBe(before + 1);
    expect(await metric(D0.url, "vllm:nixl_num_failed_transfers_total")).toBe(0);
    // greedy decoding: the same tokens whichever engine prefilled
    const l = await complete(local.url, prompt, { max_tokens: 16 });
    expect([l.status, l.route, l.decode]).toEqual([200, "local", "D0"]);
    expect(r.json.choices[0].text.length).toBeGreaterThan(0);
    expect(l.json.choices[0].text).toBe(r.json.choices[0].text);
    // chat, on the same two paths
    const content = "Explain how a prefix cache saves prefill work. ".repeat(40);
    const rc = await chat(remote.url, content);
    const lc = await chat(local.url, content);
    expect([rc.status, rc.route, lc.status, lc.route]).toEqual([200, "remote", 200, "local"]);
    expect(lc.json.choices[0].message.content).toBe(rc.json.choices[0].message.content);
  });

  it("tells the client the prefill engine's cached tokens on the remote path, streamed or not", async () => {
    const remote = await proxy([P0, D0], { table: "always-remote" });
    const prompt = tokens(2, 1200);
    const first = await complete(remote.url, prompt);
    expect(first.json.usage.prompt_tokens_details.cached_tokens).toBe(0);
    await indexed(remote, "P0", prompt, cacheableBlocks(1200));
    // the second time P0 has the whole prompt cached; D0 holds it too, from the first transfer
    const again = await complete(remote.url, prompt);
    expect(again.route).toBe("remote");
    expect(again.json.usage.prompt_tokens_details.cached_tokens).toBe(cacheableBlocks(1200) * BLOCK);
    // a streamed answer's usage says the same
    const streamed = await complete(remote.url, prompt, { stream: true, stream_options: { include_usage: true } });
    const usage = sseData(streamed.text)
      .filter((d) => d !== "[DONE]")
      .map((d) => JSON.parse(d))
      .find((c) => c.usage)?.usage;
    expect(usage.prompt_tokens_details.cached_tokens).toBe(cacheableBlocks(1200) * BLOCK);
  });
});

describe("precise mode: the index is the engines' caches", () => {
  it("holds a long prompt's blocks once the engines publish them, and routes a repeat by where they are", async () => {
    // cache_evidence off: only the engines' KV events may fill the index here
    const p = await proxy([P0, D0], { table: "dynamo-isl", extra: { cache_evidence: false } });
    const prompt = tokens(3, 2000);
    const first = await complete(p.url, prompt);
    expect([first.status, first.route]).toEqual([200, "remote"]); // cold and long: dynamo-isl prefills remotely
    // both engines published the blocks (P0 computed them; D0 stored them after the transfer, same hashes)
    await indexed(p, "P0", prompt, cacheableBlocks(2000));
    await indexed(p, "D0", prompt, cacheableBlocks(2000));
    const again = await complete(p.url, prompt);
    const d = await decisionOf(p, again.id!);
    expect(d.matched_blocks.decode).toBe(cacheableBlocks(2000));
    expect(again.route).toBe("local"); // all but the last block cached on the decode engine: nothing to ship
    expect(again.json.usage.prompt_tokens_details.cached_tokens).toBe(cacheableBlocks(2000) * BLOCK);
  });

  it("predicts, per request, the cached tokens the engine that prefilled reports, on both paths", async () => {
    const p = await proxy([P0, D0], { table: "dynamo-isl", extra: { cache_evidence: false } });
    // cold long prompts (remote), their repeats (local), and prompts sharing a prefix with them
    const base = tokens(4, 1600);
    const prompts = [
      base,
      base,
      [...base.slice(0, 800), ...tokens(5, 900)],
      tokens(6, 300),
      [...base.slice(0, 800), ...tokens(5, 900)],
      tokens(7, 2500),
      tokens(7, 2500),
    ];
    const seen: Array<{ route: string; predicted: number; reported: number; client: number }> = [];
    for (const prompt of prompts) {
      const r = await complete(p.url, prompt);
      expect(r.status).toBe(200);
      const d = await decisionOf(p, r.id!);
      seen.push({
        route: d.route,
        predicted: d.predicted_cached_tokens,
        reported: d.reported_cached_tokens,
        client: r.json.usage.prompt_tokens_details.cached_tokens,
      });
      // the next request is routed once the engines' events for this one are in (on the remote path both engines
      // store the prompt: P0 computed it, D0 received it)
      if (d.route === "remote") await indexed(p, "P0", prompt, cacheableBlocks(prompt.length));
      await indexed(p, "D0", prompt, cacheableBlocks(prompt.length));
    }
    console.log("predicted vs reported cached tokens:", JSON.stringify(seen));
    for (const s of seen) {
      expect(s.predicted).toBe(s.reported);
      expect(s.client).toBe(s.reported);
    }
    expect(new Set(seen.map((s) => s.route))).toEqual(new Set(["remote", "local"]));
    expect(seen.some((s) => s.reported > 0)).toBe(true);
  });
});

describe("approximate mode (no KV events: the index is the proxy's own decisions)", () => {
  it("answers both paths, chat and completions, as precise mode does", async () => {
    const content = "Approximate routing hashes the prompt's text in 64-byte blocks. ".repeat(30);
    const ids = tokens(12, 1000);
    for (const table of ["always-remote", "always-local"]) {
      const approx = await proxy([P0, D0], { table, mode: "approximate" });
      const precise = await proxy([P0, D0], { table });
      const [a, b] = [await chat(approx.url, content), await chat(precise.url, content)];
      expect([a.status, a.route, b.route]).toEqual([200, table === "always-remote" ? "remote" : "local", a.route]);
      expect(a.json.choices[0].message.content).toBe(b.json.choices[0].message.content);
      const [c, d] = [await complete(approx.url, ids), await complete(precise.url, ids)];
      expect([c.status, d.status]).toEqual([200, 200]);
      expect(c.json.choices[0].text).toBe(d.json.choices[0].text);
    }
  });
});

describe("a proxy started in front of warm engines", () => {
  it("sees their caches at once with replay, after one request with cached-token evidence alone, never with neither", async () => {
    const warm = await proxy([P0, D0], { table: "always-local" });
    const prompt = tokens(8, 2200);
    expect((await complete(warm.url, prompt)).status).toBe(200);
    await indexed(warm, "D0", prompt, cacheableBlocks(2200));
    const full = cacheableBlocks(2200);

    // the router restarted: a new proxy, the engines as they were
    const replayed = await proxy([P0, D0], { table: "dynamo-isl" });
    await indexed(replayed, "D0", prompt, full); // before any request: the replay of the engines' buffers
    const r1 = await complete(replayed.url, prompt);
    expect([r1.route, (await decisionOf(replayed, r1.id!)).predicted_cached_tokens]).toEqual(["local", full * BLOCK]);
    expect(await metric(replayed.url, "dolphin_kv_replayed_batches_total")).toBeGreaterThan(0);

    // without the replay socket: the first request is blind, its answer's cached tokens teach the index
    const evidence = await proxy([P0, D0], { table: "dynamo-isl", replay: false });
    await sleep(300);
    expect(matchOf(evidence, prompt)["D0"]).toBe(0);
    const e1 = await complete(evidence.url, prompt);
    expect(e1.route).toBe("remote"); // it does not know D0 holds the prompt
    const e2 = await complete(evidence.url, prompt);
    expect((await decisionOf(evidence, e2.id!)).predicted_cached_tokens).toBe(full * BLOCK);
    expect(await metric(evidence.url, "dolphin_cache_evidence_blocks_total")).toBeGreaterThan(0);

    // neither: the gap the issue found, blind for as long as the blocks stay cached
    const blind = await proxy([P0, D0], { table: "dynamo-isl", replay: false, extra: { cache_evidence: false } });
    for (let i = 0; i < 3; i++) {
      const b = await complete(blind.url, prompt);
      expect((await decisionOf(blind, b.id!)).predicted_cached_tokens).toBe(0);
    }
  });
});

describe("clients", () => {
  it("the official openai Python client: chat, streamed chat with and without usage, completions (remote and dynamo-isl)", async () => {
    const python = vllmInstall().python;
    const script = fileURLToPath(new URL("./openai_client.py", import.meta.url));
    const prompt = "Write a short story about a router that learned where every cache was. ".repeat(25);
    const results = [];
    for (const table of ["always-remote", "dynamo-isl"]) {
      const p = await proxy([P0, D0], { table });
      // asynchronously: the proxy it calls runs in this process
      const run = await promisify(execFile)(python, [script, p.url, MODEL, prompt], { timeout: 120_000 });
      const out = JSON.parse(run.stdout);
      expect(out.chat.text.length).toBeGreaterThan(0);
      expect(out.chat_stream_usage.text).toBe(out.chat.text);
      expect(out.chat_stream.text).toBe(out.chat.text);
      expect(out.chat_stream.usage_chunks).toBe(0); // not asked for, not given
      expect(out.chat_stream_usage.usage.completion_tokens).toBe(8);
      expect(out.completion_stream_usage.text).toBe(out.completion.text);
      expect(out.chat.usage.prompt_tokens).toBeGreaterThan(300);
      results.push(out);
    }
    // the same greedy answers whichever table routed them
    expect(results[1].chat.text).toBe(results[0].chat.text);
    expect(results[1].completion.text).toBe(results[0].completion.text);
  });

  it("passes vLLM's 400 on (max_tokens beyond the context) with vLLM's message, on either path", async () => {
    for (const table of ["always-remote", "always-local"]) {
      // max_model_len unknown to the proxy: the engines answer
      const p = await proxy([P0, D0], { table, extra: { max_model_len: null } });
      const r = await complete(p.url, tokens(9, 200), { max_tokens: 5000 });
      expect(r.status).toBe(400);
      expect(r.json.error.message).toMatch(/max_tokens=5000 cannot be greater than max_model_len=4096/);
    }
    // known (as --vllm sets it): refused with the same message before the remote path spends a prefill on it
    const known = await proxy([P0, D0], { table: "always-remote" });
    const prefillsBefore = await metric(P0.url, "vllm:request_success_total");
    const refused = await complete(known.url, tokens(9, 200), { max_tokens: 5000 });
    expect([refused.status, refused.route]).toEqual([400, null]);
    expect(refused.json.error.message).toMatch(/max_tokens=5000 cannot be greater than max_model_len=4096/);
    expect(await metric(P0.url, "vllm:request_success_total")).toBe(prefillsBefore);
    const p = await proxy([P0, D0], { table: "always-local" });
    const tooLong = await complete(p.url, tokens(10, 4200));
    expect(tooLong.status).toBe(400);
  });

  it("swaps the table while 20 requests are in flight: none fails", async () => {
    const p = await proxy([P0, D0], { table: "always-remote" });
    const inflight = Array.from({ length: 20 }, (_, i) => complete(p.url, tokens(100 + i, 600), { max_tokens: 24 }));
    await sleep(50);
    const swap = await fetch(`${p.url}/admin/table`, {
      method: "PUT",
      headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/msgpack" },
      body: Buffer.from(encodeTable(ruleTable("always-local"))),
    });
    expect(swap.status).toBe(200);
    const answers = await Promise.all(inflight);
    expect(answers.map((a) => a.status)).toEqual(Array(20).fill(200));
    expect(p.router.table.kind).toBe("always-local");
    expect((await complete(p.url, tokens(99, 600))).route).toBe("local");
  });
});

describe("the Envoy filter in front of 1P1D", () => {
  it("answers both paths, streamed or not, with the Node proxy's outputs", async () => {
    const prompt = "A filter in Envoy routes this request through the same core. ".repeat(30);
    for (const table of ["always-remote", "always-local"]) {
      const envoy: RunningEnvoy = await startEnvoy({
        ...envoySetupFor([P0, D0], { table, concurrency: 1 }),
        listen: { port: 0 },
        admin: { port: 0 },
      });
      open.push(envoy);
      const node = await proxy([P0, D0], { table, mode: "approximate" });
      const e = await chat(envoy.url, prompt);
      const n = await chat(node.url, prompt);
      expect([e.status, n.status]).toEqual([200, 200]);
      expect([e.route, n.route]).toEqual(table === "always-remote" ? ["remote", "remote"] : ["local", "local"]);
      expect(e.json.choices[0].message.content).toBe(n.json.choices[0].message.content);
      const es = await chat(envoy.url, prompt, { stream: true });
      const text = sseData(es.text)
        .filter((d) => d !== "[DONE]")
        .map((d) => JSON.parse(d).choices[0]?.delta?.content ?? "")
        .join("");
      expect(text).toBe(n.json.choices[0].message.content);
      expect(sseData(es.text).at(-1)).toBe("[DONE]");
      const c = await complete(envoy.url, tokens(11, 900));
      expect(c.status).toBe(200);
      await envoy.close();
    }
  });
});

lostEventsTests(suite);
gatewayCases(() => ({ P0, D0 }));

describe("evictions and an engine restart (R0: 160 blocks)", () => {
  it("takes evicted blocks out of the index", async () => {
    const p = await proxy([R0], { table: "always-local" });
    const first = tokens(20, 1500);
    expect((await complete(p.url, first)).status).toBe(200);
    await indexed(p, "R0", first, cacheableBlocks(1500));
    // three more prompts of 46 blocks each: more than R0's 160 blocks, so the first one's are evicted (LRU)
    for (const seed of [21, 22, 23]) expect((await complete(p.url, tokens(seed, 1500))).status).toBe(200);
    await waitFor(
      "BlockRemoved events applied",
      async () => (await metric(p.url, "dolphin_kv_events_total", 'kind="removed_blocks"')) > 0,
    );
    await waitFor(
      "the first prompt's blocks out of the index",
      () => (matchOf(p, first)["R0"] ?? 0) < cacheableBlocks(1500),
    );
    expect(p.router.index.count("R0")).toBeLessThanOrEqual(SMALL_CACHE_BLOCKS);
    // what the index says is what the engine has: a repeat of the first prompt is predicted as it is reported
    const again = await complete(p.url, first);
    const d = await decisionOf(p, again.id!);
    expect(d.predicted_cached_tokens).toBe(d.reported_cached_tokens);
  });

  it("detects an engine restarted under it (its event sequence starts over) and resets that engine's index", async () => {
    // health checks slowed right down, so the event sequence alone must tell the restart
    const p = await proxy([R0], {
      table: "always-local",
      extra: { health: { check_interval_s: 3_600, probe_interval_s: 1 } },
    });
    const before = tokens(30, 1200);
    expect((await complete(p.url, before)).status).toBe(200);
    await indexed(p, "R0", before, cacheableBlocks(1200));
    await R0.restart();
    const after = tokens(31, 700);
    const r = await complete(p.url, after);
    expect(r.status).toBe(200);
    await indexed(p, "R0", after, cacheableBlocks(700));
    expect(matchOf(p, before)["R0"]).toBe(0); // the restarted engine holds none of it, nor does the index
    // told by the sequence (R0's starts over at 0), not by the health checks: reset, counted and said
    expect(await metric(p.url, "dolphin_kv_index_resets_total", 'cause="restart",worker="R0"')).toBe(1);
    expect(await metric(p.url, "dolphin_kv_engine_restarts_total")).toBe(1);
    expect(p.log.some((l) => l.includes("sequence started over (engine restarted): index reset"))).toBe(true);
    expect(await metric(p.url, "dolphin_worker_down_total")).toBe(0);
    const again = await complete(p.url, before);
    const d = await decisionOf(p, again.id!);
    expect([d.predicted_cached_tokens, d.reported_cached_tokens]).toEqual([0, 0]);
  });
});

clientLeavesTests(suite);

describe("faults", () => {
  it("falls back to local prefill when the prefill engine is killed: no request fails", async () => {
    const p = await proxy([P0, D0], { table: "always-remote" });
    expect((await complete(p.url, tokens(40, 800))).route).toBe("remote");
    await P0.kill();
    const answers = [];
    for (let i = 0; i < 5; i++) answers.push(await complete(p.url, tokens(41 + i, 800)));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200]);
    for (const a of answers) expect(["fallback", "local"]).toContain(a.route);
  });

  it("ends a stream whose decode engine is killed mid-way with an SSE error event; other requests are served", async () => {
    const p = await proxy([D0, R0], { table: "always-local" });
    const res = await fetch(`${p.url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: MODEL,
        prompt: tokens(50, 300),
        max_tokens: 3000,
        ignore_eos: true,
        temperature: 0,
        stream: true,
      }),
    });
    expect(res.status).toBe(200);
    const victim = engines.find((e) => e.id === res.headers.get("x-dolphin-decode-worker"))!;
    const other = victim === D0 ? R0 : D0;
    const reader = res.body!.getReader();
    let text = new TextDecoder().decode((await reader.read()).value);
    await victim.kill();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
    const events = sseData(text);
    expect(events.at(-1)).toBe("[DONE]");
    expect(events.some((e) => e.includes('"error"'))).toBe(true);
    const next = await complete(p.url, tokens(51, 300));
    expect([next.status, next.decode]).toEqual([200, other.id]);
  });
});

describe("dolphin serve --vllm (the command, as a user runs it)", () => {
  it("starts 1P1D and the proxy, answers through NIXL, and leaves no engine or port behind on Ctrl-C", async () => {
    // the suite's engines go first: never more than three at once
    for (const c of open.splice(0).reverse()) await c.close().catch(() => undefined);
    await stopEngines(engines);
    engines = [];
    const bin = fileURLToPath(new URL("../../bin/dolphin.js", import.meta.url));
    const child = spawn(process.execPath, [bin, "serve", "--vllm", "1P1D", "--port", "0", "--table", "always-remote"], {
      stdio: ["ignore", "ignore", "pipe"],
    });
    let err = "";
    child.stderr.on("data", (d: Buffer) => void (err += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    try {
      await waitFor(
        "the proxy's URL",
        () => /proxy at (http:\/\/[\d.:]+)/.test(err) || child.exitCode !== null,
        300_000,
      );
      const url = /proxy at (http:\/\/[\d.:]+)/.exec(err)?.[1];
      expect(url, err).toBeDefined();
      const engineUrls = [...err.matchAll(/(P0|D0) (?:prefill|decode) (http:\/\/[\d.:]+)/g)].map((m) => m[2]!);
      expect(engineUrls).toHaveLength(2);
      const r = await complete(url!, tokens(60, 700));
      expect([r.status, r.route, r.prefill, r.decode]).toEqual([200, "remote", "P0", "D0"]);
      child.kill("SIGINT");
      expect(await exited).toBe(0);
      for (const u of [url!, ...engineUrls]) await expect(fetch(`${u}/health`)).rejects.toThrow();
      const left = spawnSync("pgrep", ["-f", "VLLM::EngineCore"], { encoding: "utf8" });
      expect(left.stdout.trim()).toBe("");
    } finally {
      if (child.exitCode === null) {
        child.kill("SIGINT"); // let it stop its engines
        await Promise.race([exited, sleep(30_000)]);
        if (child.exitCode === null) child.kill("SIGKILL");
      }
    }
  });
});
