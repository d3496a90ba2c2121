// `dolphin serve` with client API keys (auth.keys_file), over real sockets on loopback: a request without a known key
// is answered 401 before any worker call (no /tokenize either), a known key's request goes through with the proxy's
// own worker key, per-key limits answer 429 with Retry-After, the keys file is read again when it changes (and a
// broken one leaves the keys in force), and the logs and metrics name the key, never show it.
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { parseConfig } from "../src/serve/config.js";
import { startProxy } from "../src/serve/proxy.js";
import { coreModule } from "./helpers.js";
import {
  cleanUp,
  closers,
  metric,
  MODEL,
  proxy,
  proxyLog,
  startFake,
  vllmLike,
  waitUntil,
  workerProcess,
} from "./serve-fault-tools.js";

afterEach(cleanUp);

const ALICE = "sk-alice-0123456789abcdef";
const BATCH = "sk-batch-fedcba9876543210";
const sha = (s: string): string => createHash("sha256").update(s).digest("hex");

function keysFile(keys: unknown): string {
  const dir = mkdtempSync(join(tmpdir(), "dolphin-keys-"));
  closers.push(async () => rmSync(dir, { recursive: true, force: true }));
  const path = join(dir, "keys.json");
  writeFileSync(path, JSON.stringify({ keys }));
  return path;
}

function chat(url: string, key: string | null, content = "hello"): Promise<Response> {
  return fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(key ? { authorization: `Bearer ${key}` } : {}) },
    body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content }], max_tokens: 4 }),
  });
}

async function errorOf(r: Response): Promise<{ message: string; type: string; code: string; param: null }> {
  return ((await r.json()) as { error: { message: string; type: string; code: string; param: null } }).error;
}

async function series(url: string, name: string): Promise<string[]> {
  return (await (await fetch(`${url}/metrics`)).text()).split("\n").filter((l) => l.startsWith(name));
}

describe("dolphin serve: client keys", () => {
  it("answers 401 without a known key before any worker call, and lets a known key through", async () => {
    const seen: Array<string | undefined> = [];
    const inner = vllmLike();
    const w = await startFake((req, body, res) => {
      if (req.url !== "/health") seen.push(req.headers["authorization"]);
      return inner(req, body, res);
    });
    const path = keysFile([
      { name: "alice", key: ALICE },
      { name: "batch", sha256: sha(BATCH) },
    ]);
    const p = await proxy([{ id: "d0", url: w.url, role: "decode" }], {
      mode: "precise", // a prompt goes to /tokenize first: a refused request must not
      log_level: "info",
      auth: { keys_file: path, worker_api_key: "worker-secret" },
    });
    for (const [key, code] of [
      [null, "missing_api_key"],
      ["sk-wrong-0123456789abcdef", "invalid_api_key"],
    ] as const) {
      const r = await chat(p.url, key);
      expect(r.status).toBe(401);
      expect(r.headers.get("www-authenticate")).toBe("Bearer");
      const e = await errorOf(r);
      expect(e).toMatchObject({ type: "invalid_request_error", code, param: null });
    }
    expect((await fetch(`${p.url}/v1/models`)).status).toBe(401);
    expect(w.calls.filter((c) => c !== "/health")).toEqual([]);
    expect(await metric(p, 'dolphin_auth_failures_total{reason="missing"}')).toBe(2);
    expect(await metric(p, 'dolphin_auth_failures_total{reason="unknown"}')).toBe(1);

    expect((await chat(p.url, ALICE)).status).toBe(200);
    expect((await chat(p.url, BATCH)).status).toBe(200); // a key given by its SHA-256
    // the workers get the proxy's own key, never the client's
    expect(seen.length).toBeGreaterThan(0);
    expect(new Set(seen)).toEqual(new Set(["Bearer worker-secret"]));
    expect(await series(p.url, "dolphin_client_requests_total{")).toEqual([
      'dolphin_client_requests_total{key="alice",outcome="admitted"} 1',
      'dolphin_client_requests_total{key="batch",outcome="admitted"} 1',
    ]);
    expect(await metric(p, 'dolphin_client_tokens_total{key="alice"}')).toBeGreaterThan(0);
    expect(proxyLog.some((l) => l.includes('"msg":"request"') && l.includes('"key":"alice"'))).toBe(true);
    expect(proxyLog.some((l) => l.includes(ALICE) || l.includes(BATCH))).toBe(false);
  });

  it("answers 429 with Retry-After past a key's request rate and past its token rate, other keys unaffected", async () => {
    const d = await workerProcess("decode", "d0");
    const path = keysFile([
      { name: "slow", key: ALICE, requests_per_s: 0.01 },
      { name: "thrifty", key: BATCH, tokens_per_s: 0.01 },
      { name: "free", key: "sk-free-00000000000000000" },
    ]);
    const p = await proxy([{ id: "d0", url: d.url, role: "decode" }], {
      auth: { keys_file: path, burst_s: 1000 }, // thrifty: 10 tokens at once, slow: 10 requests
    });
    for (let i = 0; i < 10; i++) expect((await chat(p.url, ALICE)).status).toBe(200);
    const r = await chat(p.url, ALICE);
    expect(r.status).toBe(429);
    expect(Number(r.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(await errorOf(r)).toMatchObject({ type: "requests", code: "rate_limit_exceeded" });

    // the first request runs the bucket into debt (a prompt of ~40 tokens against 10), the next is refused
    expect((await chat(p.url, BATCH, "x".repeat(160))).status).toBe(200);
    const t = await chat(p.url, BATCH);
    expect(t.status).toBe(429);
    expect(Number(t.headers.get("retry-after"))).toBeGreaterThan(1000); // the debt repaid at 0.01 token/s
    expect(await errorOf(t)).toMatchObject({ type: "tokens", code: "rate_limit_exceeded" });

    expect((await chat(p.url, "sk-free-00000000000000000")).status).toBe(200);
    expect(await metric(p, 'dolphin_client_requests_total{key="slow",outcome="limited_requests"}')).toBe(1);
    expect(await metric(p, 'dolphin_client_requests_total{key="thrifty",outcome="limited_tokens"}')).toBe(1);
  });

  it("reads the keys file again when it changes, and keeps the keys in force when it no longer parses", async () => {
    const w = await startFake();
    const path = keysFile([{ name: "alice", key: ALICE }]);
    const p = await proxy([{ id: "d0", url: w.url, role: "decode" }], {
      log_level: "info",
      auth: { keys_file: path, reload_interval_s: 0.05 },
    });
    expect((await chat(p.url, BATCH)).status).toBe(401);
    writeFileSync(path, JSON.stringify({ keys: [{ name: "batch", key: BATCH }] }));
    await waitUntil(() => proxyLog.some((l) => l.includes("client keys reloaded")), 5_000);
    expect((await chat(p.url, BATCH)).status).toBe(200);
    expect((await chat(p.url, ALICE)).status).toBe(401); // taken out of the file
    writeFileSync(path, "{ not json");
    await waitUntil(() => proxyLog.some((l) => l.includes("client keys file unreadable")), 5_000);
    expect((await chat(p.url, BATCH)).status).toBe(200);
    expect(await metric(p, 'dolphin_client_keys_reloads_total{outcome="failed"}')).toBeGreaterThanOrEqual(1);
    expect(await metric(p, "dolphin_client_keys ")).toBe(1);
  });

  it("refuses a bad keys file or auth section at start, naming the file and the field", async () => {
    const cases: Array<[unknown, RegExp]> = [
      [[{ name: "a", key: "short" }], /keys\.json: keys\[0\]\.key: expected at least 16 characters/],
      [[{ name: "a", sha256: "abc" }], /keys\[0\]\.sha256: expected 64 hex digits/],
      [
        [
          { name: "a", key: ALICE },
          { name: "a", key: BATCH },
        ],
        /keys\[1\]\.name: duplicate name "a"/,
      ],
      [[{ name: "a b", key: ALICE }], /keys\[0\]\.name: expected 1–64 of/],
      [[{ name: "a", key: ALICE, sha256: sha(ALICE) }], /keys\[0\]: give exactly one of key and sha256/],
      [[{ name: "a", key: ALICE, requests_per_s: -1 }], /keys\[0\]\.requests_per_s: expected a number ≥ 0/],
    ];
    for (const [keys, message] of cases) {
      const path = keysFile(keys);
      await expect(
        startProxy({ model: MODEL, listen: { port: 0 }, auth: { keys_file: path } }, { module: coreModule() }),
      ).rejects.toThrow(message);
    }
    await expect(
      startProxy({ model: MODEL, listen: { port: 0 }, auth: { keys_file: "/nonexistent/keys.json" } }),
    ).rejects.toThrow(/config: auth\.keys_file: cannot read \/nonexistent\/keys\.json/);
    expect(() => parseConfig({ model: MODEL, auth: { worker_api_key: "x" } })).toThrow(
      /auth\.worker_api_key: needs auth\.keys_file/,
    );
    expect(() => parseConfig({ model: MODEL, auth: { burst_s: 0 } })).toThrow(/auth\.burst_s: expected a number > 0/);
    expect(() => parseConfig({ model: MODEL, auth: { keys: "x" } })).toThrow(/auth\.keys: unknown key/);
    // a relative keys_file is resolved against the config file's directory
    expect(parseConfig({ model: MODEL, auth: { keys_file: "k.json" } }, "/etc/dolphin").auth.keys_file).toBe(
      "/etc/dolphin/k.json",
    );
  });
});
