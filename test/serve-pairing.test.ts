// `dolphin serve` in front of a mixed fleet of emulated workers (`dolphin worker` processes, two engine versions whose
// NIXL handshake fails across them): with group_from_engine the proxy reads each worker's group from its engine and
// pairs prefill and decode only within a group, so a rolling upgrade (the new half registered under load, the old
// half removed) loses no request and makes no failed handoff; without groups the same fleet makes failed handoffs.
import { afterEach, describe, expect, it } from "vitest";
import type { RunningProxy } from "../src/serve/proxy.js";
import { parseConfig } from "../src/serve/config.js";
import { cacheConfigInfo } from "../src/serve/proxy/engine-group.js";
import { cleanUp, metric, MODEL, post, proxy, workerProcess, type WorkerProcess } from "./serve-fault-tools.js";
import { waitFor } from "./helpers.js";

afterEach(cleanUp);

const version = (v: string): string[] => ["--engine-version", v];

async function failedTransfers(w: WorkerProcess): Promise<number> {
  const text = await (await fetch(`${w.url}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith("vllm:nixl_num_failed_transfers_total"));
  return Number(line?.split(" ").at(-1) ?? NaN);
}

/** `n` rounds of `width` requests at once; each answer's status, route and workers. */
async function load(p: RunningProxy, n: number, width: number, salt: string) {
  const out: Array<{ status: number; route: string | null; prefill: string | null; decode: string | null }> = [];
  for (let i = 0; i < n; i++) {
    const rs = await Promise.all(
      Array.from({ length: width }, (_, k) =>
        post(p, "/v1/completions", { model: MODEL, prompt: `${salt} ${i}.${k} ${"words ".repeat(40)}`, max_tokens: 2 }),
      ),
    );
    for (const r of rs) {
      await r.arrayBuffer();
      out.push({
        status: r.status,
        route: r.headers.get("x-dolphin-route"),
        prefill: r.headers.get("x-dolphin-prefill-worker"),
        decode: r.headers.get("x-dolphin-decode-worker"),
      });
    }
  }
  return out;
}

const admin = (p: RunningProxy, method: string, path: string, body?: unknown): Promise<Response> =>
  fetch(`${p.url}/admin/workers${path}`, {
    method,
    headers: { authorization: "Bearer t", "content-type": "application/json" },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });

describe("dolphin serve: compatibility groups", () => {
  it("a rolling upgrade under load loses no request and makes no failed handoff", async () => {
    const [pOld, dOld, pNew, dNew] = await Promise.all([
      workerProcess("prefill", "p-old", 20, version("0.32.0")),
      workerProcess("decode", "d-old", 20, version("0.32.0")),
      workerProcess("prefill", "p-new", 20, version("0.33.0")),
      workerProcess("decode", "d-new", 20, version("0.33.0")),
    ]);
    const p = await proxy(
      [
        { id: "p-old", url: pOld.url, role: "prefill" },
        { id: "d-old", url: dOld.url, role: "decode" },
      ],
      { table: "always-remote", group_from_engine: true, log_level: "info" },
    );
    const workers = async () =>
      ((await (await admin(p, "GET", "")).json()) as { workers: Array<{ id: string; group: string }> }).workers;
    // until its engine told its group a worker is paired with none (its requests are local)
    // fails with what it waited for, rather than letting a slow read surface as a wrong group below
    const groupsRead = (): Promise<void> =>
      waitFor("every worker's group read", async () => !(await workers()).some((w) => w.group.startsWith("(unread)")));
    await groupsRead();
    // the load runs while the new half registers and the old half leaves
    const running = load(p, 12, 4, "a");
    for (const [id, w, role] of [
      ["p-new", pNew, "prefill"],
      ["d-new", dNew, "decode"],
    ] as const)
      expect((await admin(p, "POST", "", { id, url: w.url, role })).status).toBe(201);
    await groupsRead();
    const groups = Object.fromEntries((await workers()).map((w) => [w.id, w.group]));
    expect(groups["d-new"]).toBe(`vllm 0.33.0, model ${MODEL}, block_size 16, cache_dtype auto`);
    expect(groups["p-old"]).toBe(groups["d-old"]);
    const mixed = await load(p, 8, 4, "b");
    for (const id of ["p-old", "d-old"]) expect((await admin(p, "DELETE", `/${id}`)).status).toBe(200);
    const after = await load(p, 4, 4, "c");
    const answers = [...(await running), ...mixed, ...after];
    expect(answers.filter((a) => a.status !== 200)).toEqual([]);
    // every remote pair of one version; a request in flight on a worker removed, or decoded on a worker whose group
    // was not read yet, is prefilled locally instead
    for (const a of answers) if (a.route === "remote") expect(a.prefill!.split("-")[1]).toBe(a.decode!.split("-")[1]);
    expect(mixed.every((a) => a.route === "remote")).toBe(true);
    // both halves decoded requests handed over to them
    const remote = answers.filter((a) => a.route === "remote");
    expect(new Set(remote.map((a) => a.decode))).toEqual(new Set(["d-old", "d-new"]));
    expect(after.every((a) => a.decode === "d-new")).toBe(true);
    expect(await failedTransfers(dOld), "d-old's failed handoffs").toBe(0);
    expect(await failedTransfers(dNew), "d-new's failed handoffs").toBe(0);
  });

  it("without groups a decode worker is paired with the other version's prefill worker and the handoff fails", async () => {
    const [dOld, pNew, dNew] = await Promise.all([
      workerProcess("decode", "d-old", 20, version("0.32.0")),
      workerProcess("prefill", "p-new", 20, version("0.33.0")),
      workerProcess("decode", "d-new", 20, version("0.33.0")),
    ]);
    const fleet = [
      { id: "d-old", url: dOld.url, role: "decode" as const },
      { id: "p-new", url: pNew.url, role: "prefill" as const },
      { id: "d-new", url: dNew.url, role: "decode" as const },
    ];
    const blind = await proxy(fleet, { table: "always-remote" });
    const answers = await load(blind, 4, 4, "a");
    expect(await failedTransfers(dOld)).toBeGreaterThan(0);
    // a failed handoff costs a retry: the request is prefilled locally on the other decode worker
    expect(answers.filter((a) => a.route === "fallback").length).toBeGreaterThan(0);
    // with the groups read, d-old's requests are prefilled locally at once: no handoff fails
    const before = await failedTransfers(dOld);
    const grouped = await proxy(fleet, { table: "always-remote", group_from_engine: true });
    for (let i = 0; i < 250 && (await metric(grouped, 'dolphin_worker_group{group="(unread)')) > 0; i++)
      await new Promise((r) => setTimeout(r, 20));
    const again = await load(grouped, 4, 4, "b");
    expect(again.every((a) => a.status === 200 && a.route !== "fallback")).toBe(true);
    expect(await failedTransfers(dOld)).toBe(before);
  });

  it("checks a worker's group and group_from_engine, and reads vLLM's cache_config_info labels", () => {
    const w = { id: "d0", url: "http://127.0.0.1:1", role: "decode" };
    expect(parseConfig({ model: MODEL, workers: [{ ...w, group: "rev-7" }] }).workers[0]!.group).toBe("rev-7");
    expect(() => parseConfig({ model: MODEL, workers: [{ ...w, group: 7 }] })).toThrow(
      /config: workers\[0\]\.group: expected a string, got/,
    );
    expect(() => parseConfig({ model: MODEL, group_from_engine: "yes" })).toThrow(/group_from_engine: expected true/);
    const text =
      '# HELP vllm:cache_config_info x\nvllm:cache_config_info{block_size="16",cache_dtype="fp8",engine="0",prefix_caching_hash_algo="sha256"} 1.0\n';
    expect(cacheConfigInfo(text)).toMatchObject({ block_size: "16", cache_dtype: "fp8" });
    expect(cacheConfigInfo("vllm:num_requests_running 0\n")).toEqual({});
  });
});
