// Two `dolphin serve` replicas in front of the same emulated workers: in precise mode (each subscribes to every
// worker's KV events) their decisions agree once the events are in, whichever replica the traffic went through; in
// approximate mode each knows only its own decisions; a replica killed under load (a `dolphin serve` process,
// SIGKILL) loses only the requests it had in flight while the other keeps answering; a table written to the file both
// load (table_reload_s) reaches both.
import { spawn } from "node:child_process";
import { mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { parseConfig, type ServeConfigInput } from "../src/serve/config.js";
import type { Emulated } from "../src/serve/emulate.js";
import { startProxy, type RunningProxy } from "../src/serve/proxy.js";
import { encodeTable } from "../src/table/codec.js";
import { ruleTable } from "../src/table/rule-table.js";
import { coreModule } from "./helpers.js";
import { BIN, cleanUp, closers, emulated1P2D, sleep, workerProcess } from "./serve-fault-tools.js";

const MODEL = "dolphin-emulated";

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "dolphin-replicas-"));
  closers.push(async () => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

async function replica(config: ServeConfigInput): Promise<RunningProxy> {
  const p = await startProxy(
    { listen: { host: "127.0.0.1", port: 0 }, log_level: "silent", admin_token: "t", ...config },
    { module: coreModule("release") },
  );
  closers.push(() => p.close());
  return p;
}

/** A completions request of token ids (both modes then hash the same blocks). */
async function complete(p: RunningProxy, prompt: number[]): Promise<number> {
  const r = await fetch(`${p.url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: MODEL, prompt, max_tokens: 2 }),
  });
  await r.arrayBuffer();
  return r.status;
}

/** Three conversations' prompts: 640 shared tokens each, then a turn of its own. */
const prompt = (conversation: number, turn: number): number[] => [
  ...Array.from({ length: 640 }, (_, i) => 1000 + conversation * 7000 + i),
  ...Array.from({ length: 48 }, (_, i) => 50_000 + turn * 100 + i),
];

describe("two dolphin serve replicas, one cluster", () => {
  let e: Emulated;
  beforeAll(async () => {
    e = await emulated1P2D();
  });
  afterAll(async () => e?.close());
  afterEach(cleanUp);

  const workers = (): NonNullable<ServeConfigInput["workers"]> =>
    e.workers.map((w) => ({
      id: w.workerId,
      url: w.url,
      role: w.role,
      kv_events_endpoint: w.kvEventsEndpoint!,
      kv_events_replay_endpoint: w.kvEventsReplayEndpoint!,
    }));

  /** Traffic over the two: by default each conversation's turns alternate between them, or as `pick` says. */
  async function traffic(
    a: RunningProxy,
    b: RunningProxy,
    pick = (c: number, turn: number) => (turn % 2 === c % 2 ? a : b),
  ): Promise<void> {
    for (let turn = 0; turn < 4; turn++)
      for (let c = 0; c < 3; c++) expect(await complete(pick(c, turn), prompt(c, turn))).toBe(200);
  }

  /** Each replica's decision for a new turn of each conversation (explain: nothing recorded). */
  const probe = (a: RunningProxy, b: RunningProxy) =>
    [0, 1, 2].map((c) => {
      const request = { tokens: prompt(c, 99) };
      return { a: a.router.explain(request).decision, b: b.router.explain(request).decision };
    });

  it("precise mode: once the KV events are in, both replicas make the same decisions", async () => {
    const a = await replica({ model: MODEL, mode: "precise", workers: workers() });
    const b = await replica({ model: MODEL, mode: "precise", workers: workers() });
    await traffic(a, b);
    // the events reach both subscribers: wait until both indexes hold the same blocks per worker
    const ids = e.workers.map((w) => w.workerId);
    const counts = (p: RunningProxy) => ids.map((id) => p.router.index.count(id));
    for (let i = 0; i < 500 && JSON.stringify(counts(a)) !== JSON.stringify(counts(b)); i++) await sleep(20);
    expect(counts(a)).toEqual(counts(b));
    expect(counts(a).some((n) => n > 0)).toBe(true);
    for (const { a: da, b: db } of probe(a, b)) {
      expect(db.decodeWorker).toBe(da.decodeWorker);
      expect(db.prefillWorker).toBe(da.prefillWorker);
      expect(db.path).toBe(da.path);
      expect(db.matchedBlocks).toEqual(da.matchedBlocks);
      expect(da.matchedBlocks.decode + da.matchedBlocks.prefill).toBeGreaterThan(0); // the shared prefix is seen
    }
  });

  it("approximate mode: each replica knows only the decisions it made", async () => {
    const a = await replica({ model: MODEL, mode: "approximate", workers: workers() });
    const b = await replica({ model: MODEL, mode: "approximate", workers: workers() });
    // a client that sticks to one replica per conversation (as a hash on the session would): 0 and 2 through a, 1
    // through b. Each replica's index holds only the prompts it routed, so the other sees nothing cached for them
    await traffic(a, b, (c) => (c === 1 ? b : a));
    const [c0, c1] = probe(a, b);
    const matched = (d: { matchedBlocks: { decode: number; prefill: number } }) =>
      d.matchedBlocks.decode + d.matchedBlocks.prefill;
    expect(matched(c0!.a)).toBeGreaterThan(0);
    expect(matched(c0!.b)).toBe(0);
    expect(matched(c1!.b)).toBeGreaterThan(0);
    expect(matched(c1!.a)).toBe(0);
  });

  it("a table written to the file both load reaches both", async () => {
    const dir = tempDir();
    const path = join(dir, "table.msgpack");
    writeFileSync(path, encodeTable(ruleTable("always-local")));
    const config = { model: MODEL, table: path, table_reload_s: 0.05, workers: workers() };
    const [a, b] = [await replica(config), await replica(config)];
    const next = ruleTable("always-remote");
    // written next to it and renamed over it: a replica never reads half a file
    writeFileSync(join(dir, "next.msgpack"), encodeTable(next));
    renameSync(join(dir, "next.msgpack"), path);
    const checksum = async (p: RunningProxy) =>
      ((await (await fetch(`${p.url}/health`)).json()) as { table: { checksum: string } }).table.checksum;
    for (let i = 0; i < 250 && ((await checksum(a)) !== next.checksum || (await checksum(b)) !== next.checksum); i++)
      await sleep(20);
    expect([await checksum(a), await checksum(b)]).toEqual([next.checksum, next.checksum]);
    expect(() => parseConfig({ model: MODEL, table: "dynamo-isl", table_reload_s: 1 })).toThrow(
      /config: table_reload_s: needs a table file, not the rule "dynamo-isl"/,
    );
    // a file that does not load leaves both on the table in force
    writeFileSync(path, "not a table");
    await sleep(300);
    expect([await checksum(a), await checksum(b)]).toEqual([next.checksum, next.checksum]);
  });
});

describe("two dolphin serve processes, one killed under load", () => {
  afterEach(cleanUp);

  /** `dolphin serve --config` as its own process; resolves with its URL once it listens. */
  async function serveProcess(config: ServeConfigInput, dir: string, name: string) {
    const file = join(dir, `${name}.json`);
    writeFileSync(file, JSON.stringify({ listen: { host: "127.0.0.1", port: 0 }, log_level: "warn", ...config }));
    const child = spawn(process.execPath, [BIN, "serve", "--config", file], { stdio: ["ignore", "ignore", "pipe"] });
    closers.push(async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill("SIGKILL");
      await new Promise((r) => child.once("exit", r));
    });
    const url = await new Promise<string>((resolve, reject) => {
      let text = "";
      const t = setTimeout(() => reject(new Error(`${name} did not start: ${text}`)), 15_000);
      child.stderr!.on("data", (c: Buffer) => {
        text += c.toString();
        const m = /proxy at (http:\/\/\S+?),/.exec(text);
        if (m) {
          clearTimeout(t);
          resolve(m[1]!);
        }
      });
    });
    return { url, child };
  }

  it("loses only the requests the killed replica had in flight; the other keeps answering", async () => {
    const dir = tempDir();
    const pf = await workerProcess("prefill", "p0", 5);
    const d = await workerProcess("decode", "d0", 5);
    const config: ServeConfigInput = {
      model: "test-model",
      table: "always-remote",
      workers: [
        { id: "p0", url: pf.url, role: "prefill" },
        { id: "d0", url: d.url, role: "decode" },
      ],
    };
    const a = await serveProcess(config, dir, "a");
    const b = await serveProcess(config, dir, "b");
    let killed = false;
    let inflightA = 0;
    let inflightAtKill = -1;
    const results: Array<{ to: "a" | "b"; afterKill: boolean; ok: boolean }> = [];
    const send = async (to: "a" | "b"): Promise<boolean> => {
      const afterKill = killed;
      if (to === "a") inflightA++;
      let ok = false;
      try {
        const r = await fetch(`${to === "a" ? a.url : b.url}/v1/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ model: "test-model", prompt: "a question ".repeat(30), max_tokens: 16 }),
        });
        await r.arrayBuffer();
        ok = r.status === 200;
      } catch {
        ok = false;
      } finally {
        if (to === "a") inflightA--;
      }
      results.push({ to, afterKill, ok });
      return ok;
    };
    // four clients, round-robin; a client whose request to a fails goes to b, as a client-side balancer does
    const client = async (k: number): Promise<void> => {
      for (let i = 0; i < 12; i++) {
        const to = (i + k) % 2 === 0 ? "a" : "b";
        if (!(await send(to)) && to === "a") await send("b");
      }
    };
    const clients = [0, 1, 2, 3].map(client);
    while (results.length < 8) await sleep(5);
    inflightAtKill = inflightA;
    killed = true;
    a.child.kill("SIGKILL");
    await Promise.all(clients);
    const lostA = results.filter((r) => r.to === "a" && !r.ok);
    expect(results.filter((r) => r.to === "b" && !r.ok)).toEqual([]); // b answered every request, before and after
    expect(results.filter((r) => r.to === "a" && r.ok && r.afterKill)).toEqual([]);
    // lost: those in flight on a when it died, and those sent to it afterwards (refused, then sent to b)
    expect(lostA.filter((r) => !r.afterKill).length).toBeLessThanOrEqual(inflightAtKill);
    expect(results.filter((r) => r.to === "b" && r.afterKill).length).toBeGreaterThan(0);
  });
});
