// `dolphin serve` under faults, over real sockets on loopback: client mistakes answered 4xx and never counted against a
// worker, cached-token prediction by vLLM's rule, header and body limits (431, 414, 408), a clean exit when the port is
// in use. Every test is bounded in time (a few seconds at most).
import net from "node:net";
import type { AddressInfo } from "node:net";
import { spawn } from "node:child_process";
import type { IncomingMessage, ServerResponse } from "node:http";
import { afterEach, describe, expect, it } from "vitest";
import {
  BIN,
  cleanUp,
  closers,
  json,
  metric,
  MODEL,
  post,
  proxy,
  proxyLog,
  rawStatus,
  sleep,
  startFake,
  vllmLike,
  waitUntil,
  workerProcess,
  type Handler,
} from "./serve-fault-tools.js";
import { checkAdminAccess } from "../src/serve/tune.js";

afterEach(cleanUp);

describe("dolphin serve: a client's mistake is a 4xx, never a worker failure", () => {
  it("answers 400 naming the field for out-of-range max_tokens, deep nesting and non-u32 token ids", async () => {
    const d = await startFake();
    const p = await proxy([{ id: "d0", url: d.url, role: "decode" }]);
    const deep = `${"[".repeat(5000)}"x"${"]".repeat(5000)}`; // as text: JSON.stringify itself overflows the stack
    const cases: Array<[string, unknown, RegExp]> = [
      [
        "/v1/chat/completions",
        { model: MODEL, messages: [{ role: "user", content: "hi" }], max_tokens: 4294967296 },
        /max_tokens/,
      ],
      ["/v1/chat/completions", `{"model":"${MODEL}","messages":[{"role":"user","content":${deep}}]}`, /nested deeper/],
      ["/v1/completions", { model: MODEL, prompt: [8589934592] }, /prompt/],
      ["/v1/completions", { model: MODEL, prompt: "x", max_completion_tokens: 1.5 }, /max_completion_tokens/],
      ["/v1/chat/completions", { model: MODEL, messages: [{ role: "user", content: 123 }] }, /messages\[0\]\.content/],
    ];
    for (const [path, body, message] of cases) {
      const r = await post(p, path, body);
      expect(r.status, String(path)).toBe(400);
      const e = ((await r.json()) as { error: { message: string; type: string } }).error;
      expect(e.type).toBe("invalid_request_error");
      expect(e.message).toMatch(message);
    }
    expect(d.calls.filter((c) => c.startsWith("/v1/"))).toHaveLength(0);
    expect(await metric(p, "dolphin_upstream_errors_total")).toBe(0);
  });

  it("passes a worker's 4xx on as it is, without a failure, a fallback or a retry", async () => {
    const pf = await startFake(vllmLike({ rejectContent: true }));
    const d = await startFake(vllmLike({ rejectContent: true }));
    const p = await proxy(
      [
        { id: "p0", url: pf.url, role: "prefill" },
        { id: "d0", url: d.url, role: "decode" },
      ],
      { table: "always-remote", mode: "precise" },
    );
    // content the proxy lets through (an array of parts) but the worker refuses
    const r = await post(p, "/v1/chat/completions", {
      model: MODEL,
      messages: [{ role: "user", content: [{ type: "image_url" }] }],
    });
    expect(r.status).toBe(400);
    expect(((await r.json()) as { message: string }).message).toBe("content must be a string");
    expect(pf.calls.length + d.calls.length).toBe(1); // the tokenize call only
    for (const name of [
      "dolphin_tokenize_failures_total",
      "dolphin_prefill_failures_total",
      "dolphin_fallbacks_total",
      "dolphin_upstream_errors_total",
      "dolphin_worker_down_total",
    ]) {
      expect(await metric(p, name), name).toBe(0);
    }
    // approximate mode: the prefill worker's 400 comes back, the decode worker is never called
    const q = await proxy(
      [
        { id: "p0", url: pf.url, role: "prefill" },
        { id: "d0", url: d.url, role: "decode" },
      ],
      { table: "always-remote" },
    );
    const before = d.calls.length;
    const r2 = await post(q, "/v1/chat/completions", {
      model: MODEL,
      messages: [{ role: "user", content: [{ type: "image_url" }] }],
    });
    expect(r2.status).toBe(400);
    expect(d.calls.length).toBe(before);
    expect(await metric(q, "dolphin_fallbacks_total")).toBe(0);
    expect(await metric(q, "dolphin_prefill_failures_total")).toBe(0);
    expect([...q.router.workerIds].sort()).toEqual(["d0", "p0"]);
  });
});

describe("dolphin serve: cached-token prediction follows vLLM's rule", () => {
  it("predicts at most isl − 1 tokens in whole blocks: a repeated 32-token prompt predicts 16", async () => {
    const d = await startFake();
    const p = await proxy([{ id: "d0", url: d.url, role: "decode" }], {
      table: "always-local",
      mode: "approximate",
      block_size: 16,
    });
    const prompt = Array.from({ length: 32 }, (_, i) => i + 1);
    for (let i = 0; i < 2; i++)
      expect((await post(p, "/v1/completions", { model: MODEL, prompt, max_tokens: 4 })).status).toBe(200);
    const r = await fetch(`${p.url}/admin/decisions?n=2`, { headers: { authorization: "Bearer t" } });
    const [first, second] = (
      (await r.json()) as { decisions: Array<{ predicted_cached_tokens: number; matched_blocks: { decode: number } }> }
    ).decisions;
    expect(first!.predicted_cached_tokens).toBe(0);
    expect(second!.matched_blocks.decode).toBe(2);
    expect(second!.predicted_cached_tokens).toBe(16);
    const p33 = [...prompt, 99];
    for (let i = 0; i < 2; i++) await post(p, "/v1/completions", { model: MODEL, prompt: p33, max_tokens: 4 });
    const r33 = await fetch(`${p.url}/admin/decisions?n=1`, { headers: { authorization: "Bearer t" } });
    expect(
      ((await r33.json()) as { decisions: Array<{ predicted_cached_tokens: number }> }).decisions[0]!
        .predicted_cached_tokens,
    ).toBe(32);
  });
});

describe("dolphin serve: header and body limits", () => {
  it("answers 431, 414 and 408 (slow headers, stalled body) and closes the connection", async () => {
    const d = await startFake();
    const p = await proxy([{ id: "d0", url: d.url, role: "decode" }], { timeouts: { headers_ms: 300, body_ms: 300 } });
    const big = "x".repeat(20_000);
    expect(await rawStatus(p.port, `GET /health HTTP/1.1\r\nhost: a\r\nx-big: ${big}\r\n\r\n`)).toMatch(
      /^HTTP\/1.1 431/,
    );
    expect(await rawStatus(p.port, `GET /health?${big} HTTP/1.1\r\nhost: a\r\n\r\n`)).toMatch(/^HTTP\/1.1 414/);
    const t0 = Date.now();
    expect(await rawStatus(p.port, "GET /health HTTP/1.1\r\nhost: a\r\n", { keepOpenMs: 5000 })).toMatch(
      /^HTTP\/1.1 408/,
    );
    const stalled = await rawStatus(
      p.port,
      `POST /v1/completions HTTP/1.1\r\nhost: a\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"model":`,
      { keepOpenMs: 5000 },
    );
    expect(stalled).toMatch(/^HTTP\/1.1 408/);
    expect(Date.now() - t0).toBeLessThan(4000);
    expect((await fetch(`${p.url}/health`)).status).toBe(200); // the proxy is fine
  });
});

describe("dolphin serve: clean start", () => {
  it("--emulate with the port in use exits non-zero with one line, leaving no port behind", async () => {
    const blocker = net.createServer();
    await new Promise<void>((r) => blocker.listen(0, "127.0.0.1", r));
    closers.push(() => new Promise<void>((r) => blocker.close(() => r())));
    const port = (blocker.address() as AddressInfo).port;
    const child = spawn(process.execPath, [BIN, "serve", "--emulate", "1P1D", "--port", String(port)], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (c: Buffer) => {
      stderr += c.toString();
    });
    const code = await new Promise<number | null>((resolve) => {
      const t = setTimeout(() => {
        child.kill("SIGKILL");
        resolve(null);
      }, 20_000);
      child.on("exit", (c) => {
        clearTimeout(t);
        resolve(c);
      });
    });
    expect(code, stderr).not.toBe(null);
    expect(code).toBe(1); // a failure, not a usage error
    const said = stderr
      .trim()
      .split("\n")
      .filter((l) => !l.startsWith("{")); // JSON lines: the workers' start-up log
    expect(said).toHaveLength(1);
    expect(stderr).toContain(`127.0.0.1:${port}: the port is in use`);
  }, 30_000);
});

describe("dolphin tune --live: admin access is checked first", () => {
  it("fails fast with the fix in the message: admin API off (403), wrong token (401), no proxy", async () => {
    const d = await startFake();
    const open = await proxy([{ id: "d0", url: d.url, role: "decode" }]); // admin_token "t"
    await expect(checkAdminAccess(open.url, "t")).resolves.toBeUndefined();
    await expect(checkAdminAccess(open.url, "wrong")).rejects.toThrow(/refused the admin token \(401\).*--admin-token/);
    const closed = await proxy([{ id: "d0", url: d.url, role: "decode" }], { admin_token: null });
    await expect(checkAdminAccess(closed.url, "t")).rejects.toThrow(/admin API off \(403\).*--admin-token T/);
    await expect(checkAdminAccess("http://127.0.0.1:9", "t")).rejects.toThrow(/cannot reach the proxy/);
    // the command checks before it builds the workload or replays anything
    const child = spawn(
      process.execPath,
      [BIN, "tune", "--live", closed.url, "--workload", "hybrid", "--rate", "4", "--admin-token", "t"],
      { stdio: ["ignore", "ignore", "pipe"] },
    );
    let stderr = "";
    child.stderr.on("data", (c: Buffer) => {
      stderr += c.toString();
    });
    const code = await new Promise<number | null>((resolve) => child.on("exit", (c) => resolve(c)));
    expect(code).toBe(1);
    expect(stderr).toMatch(/dolphin tune: the proxy at .* has its admin API off \(403\)/);
  }, 20_000);
});

describe("dolphin serve: admission control", () => {
  it("sheds what overflows the in-flight and queue limits with a fast 503 and Retry-After, counted", async () => {
    let concurrent = 0;
    let most = 0;
    const d = await startFake(async (req, body, res) => {
      if (req.url === "/health") return json(res, 200, {});
      concurrent++;
      most = Math.max(most, concurrent);
      await sleep(100);
      concurrent--;
      return vllmLike()(req, body, res);
    });
    const p = await proxy([{ id: "d0", url: d.url, role: "decode" }], {
      admission: { max_inflight: 4, max_queued: 4, queue_timeout_ms: 150 },
    });
    const body = { model: MODEL, prompt: "hello", max_tokens: 4 };
    const t0 = performance.now();
    const answers = await Promise.all(
      Array.from({ length: 60 }, async () => {
        const start = performance.now();
        const r = await post(p, "/v1/completions", body);
        await r.arrayBuffer();
        return { status: r.status, retryAfter: r.headers.get("retry-after"), ms: performance.now() - start };
      }),
    );
    const ok = answers.filter((a) => a.status === 200);
    const shed = answers.filter((a) => a.status === 503);
    expect(ok.length + shed.length).toBe(60); // every request answered, nothing else
    expect(ok.length).toBeGreaterThanOrEqual(4);
    expect(shed.length).toBeGreaterThanOrEqual(10);
    expect(shed.every((a) => a.retryAfter === "1")).toBe(true);
    expect(most).toBeLessThanOrEqual(4); // the worker never saw more than max_inflight
    expect(await metric(p, "dolphin_shed_total")).toBe(shed.length);
    expect(await metric(p, "dolphin_queued_requests")).toBe(0);
    expect(performance.now() - t0).toBeLessThan(3000);
    // once the wave has passed, requests go through again
    expect((await post(p, "/v1/completions", body)).status).toBe(200);
  });
});

describe("dolphin serve: workers killed and frozen under load", () => {
  it("kill -9 of a prefill and a decode worker, then SIGSTOP of another decode worker: every request answered 200", async () => {
    const [p0, p1, d0, d1, d2] = await Promise.all([
      workerProcess("prefill", "P0"),
      workerProcess("prefill", "P1"),
      workerProcess("decode", "D0"),
      workerProcess("decode", "D1"),
      workerProcess("decode", "D2"),
    ]);
    const p = await proxy(
      [
        { id: "P0", url: p0!.url, role: "prefill" },
        { id: "P1", url: p1!.url, role: "prefill" },
        { id: "D0", url: d0!.url, role: "decode" },
        { id: "D1", url: d1!.url, role: "decode" },
        { id: "D2", url: d2!.url, role: "decode" },
      ],
      {
        table: "always-remote",
        health: { check_interval_s: 0.5, check_timeout_ms: 500, unhealthy_after: 2, probe_interval_s: 0.5 },
        outlier: { base_ejection_s: 30 },
      },
    );
    const statuses = new Map<number, number>();
    let slowest = 0;
    let stop = false;
    const client = async (c: number): Promise<void> => {
      for (let i = 0; !stop; i++) {
        const t0 = performance.now();
        const r = await post(p, "/v1/completions", {
          model: MODEL,
          prompt: `client ${c} request ${i}: a short prompt for the fault test`,
          max_tokens: 4,
        });
        await r.arrayBuffer();
        slowest = Math.max(slowest, performance.now() - t0);
        statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
      }
    };
    const clients = Promise.all(Array.from({ length: 6 }, (_, c) => client(c)));
    await sleep(800);
    process.kill(p0!.pid, "SIGKILL");
    process.kill(d0!.pid, "SIGKILL");
    await sleep(800);
    const frozenAt = performance.now();
    process.kill(d1!.pid, "SIGSTOP");
    await waitUntil(() => !p.router.workerIds.includes("D1"), 5000);
    const detectMs = performance.now() - frozenAt;
    // keep the load on with the frozen worker out until enough requests went through (a loaded machine is slower)
    const answered = (): number => [...statuses.values()].reduce((a, b) => a + b, 0);
    const atEjection = answered();
    await sleep(500);
    await waitUntil(() => answered() > 30 && answered() >= atEjection + 6, 20_000);
    stop = true;
    await clients;
    process.kill(d1!.pid, "SIGCONT");
    const total = [...statuses.values()].reduce((a, b) => a + b, 0);
    console.log(
      `fault run: ${total} requests, statuses ${JSON.stringify(Object.fromEntries(statuses))}, slowest ${Math.round(slowest)} ms, SIGSTOP detected in ${Math.round(detectMs)} ms, ` +
        `retries decode ${await metric(p, 'dolphin_retries_total{stage="decode"}')}, prefill ${await metric(p, 'dolphin_retries_total{stage="prefill"}')}, ` +
        `skipped ${(await (await fetch(`${p.url}/metrics`)).text())
          .split("\n")
          .filter((l) => l.startsWith("dolphin_retries_skipped"))
          .join("; ")}`,
    );
    expect(statuses.get(200), proxyLog.filter((l) => /"status":5/.test(l)).join("\n")).toBe(total); // no 502, no 504
    expect(total).toBeGreaterThan(30);
    expect(detectMs).toBeLessThan(5000);
    expect(slowest).toBeLessThan(5000);
    expect([...p.router.workerIds].sort()).toEqual(["D2", "P1"]);
    expect(await metric(p, 'dolphin_ejections_total{cause="health_check"}')).toBeGreaterThanOrEqual(1);
  }, 60_000);
});

describe("dolphin serve: clean stop", () => {
  it("SIGTERM drains the requests in flight, refuses new connections, then exits 0", async () => {
    const blocker = net.createServer();
    await new Promise<void>((r) => blocker.listen(0, "127.0.0.1", r));
    const port = (blocker.address() as AddressInfo).port;
    await new Promise<void>((r) => blocker.close(() => r()));
    const child = spawn(
      process.execPath,
      [BIN, "serve", "--emulate", "1R", "--port", String(port), "--admin-token", "drain-token"],
      { stdio: ["ignore", "ignore", "pipe"] },
    );
    closers.push(async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    });
    const exited = new Promise<number | null>((resolve) => child.once("exit", (c) => resolve(c)));
    await new Promise<void>((resolve, reject) => {
      let text = "";
      const t = setTimeout(() => reject(new Error(`serve did not start: ${text}`)), 15_000);
      child.stderr!.on("data", (c: Buffer) => {
        text += c.toString();
        if (text.includes("proxy at")) {
          clearTimeout(t);
          resolve();
        }
      });
    });
    // --admin-token opens the admin API (what dolphin tune --live needs)
    const admin = await fetch(`http://127.0.0.1:${port}/admin/decisions?n=1`, {
      headers: { authorization: "Bearer drain-token" },
    });
    expect(admin.status).toBe(200);
    const url = `http://127.0.0.1:${port}/v1/completions`;
    const t0 = performance.now();
    const long = fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "dolphin-emulated", prompt: "drain me", max_tokens: 150, ignore_eos: true }),
    });
    await sleep(300);
    child.kill("SIGTERM");
    await sleep(200);
    await expect(fetch(url, { method: "POST", body: "{}" })).rejects.toThrow(); // no new connections
    const r = await long;
    const answer = (await r.json()) as { usage: { completion_tokens: number } };
    const answeredMs = performance.now() - t0;
    expect(r.status).toBe(200);
    expect(answer.usage.completion_tokens).toBe(150);
    expect(await exited).toBe(0);
    expect(answeredMs).toBeGreaterThan(500); // it was in flight when SIGTERM came
  }, 30_000);
});

describe("dolphin serve: outlier detection", () => {
  it("ejects after consecutive failures only, never more than the role's share, and retries a 5xx elsewhere", async () => {
    let failing = true;
    const flaky = (): Handler => (req, body, res) => {
      if (req.url === "/health") return json(res, 200, {});
      if (failing) return json(res, 500, { error: "engine error" });
      return vllmLike()(req, body, res);
    };
    const d0 = await startFake(flaky());
    const d1 = await startFake(flaky());
    const p = await proxy(
      [
        { id: "d0", url: d0.url, role: "decode" },
        { id: "d1", url: d1.url, role: "decode" },
      ],
      { outlier: { consecutive_failures: 3, base_ejection_s: 60 } },
    );
    const body = { model: MODEL, prompt: "hello", max_tokens: 4 };
    // each request fails on its worker and on the retry: two failures per request, one per worker
    for (let i = 0; i < 2; i++) expect((await post(p, "/v1/completions", body)).status).toBe(502);
    expect(await metric(p, 'dolphin_retries_total{stage="decode"}')).toBe(2); // each 5xx was retried on the other worker
    expect([...p.router.workerIds].sort()).toEqual(["d0", "d1"]); // two failures in a row each: not yet
    failing = false;
    expect((await post(p, "/v1/completions", body)).status).toBe(200); // the run of failures is over
    failing = true;
    for (let i = 0; i < 6; i++) await post(p, "/v1/completions", body);
    expect(p.router.workerIds).toHaveLength(1); // at most half the decode workers ejected
    expect(await metric(p, 'dolphin_ejections_total{cause="consecutive_failures"}')).toBe(1);
    expect(await metric(p, "dolphin_ejections_skipped_total")).toBeGreaterThanOrEqual(1);
    // the worker left answers 503: with the other out of rotation, there is nowhere to retry
    failing = false;
    const left = p.router.workerIds[0]!;
    (left === "d0" ? d0 : d1).server.removeAllListeners("request");
    (left === "d0" ? d0 : d1).server.on("request", (req: IncomingMessage, res: ServerResponse) => {
      req.resume();
      json(res, 503, { error: "busy" });
    });
    expect(p.router.workerIds).toEqual([left]);
    const r = await post(p, "/v1/completions", body);
    expect(r.status).toBe(502); // no other worker in rotation: nothing to retry on
    expect(
      await metric(p, 'dolphin_retries_skipped_total{reason="no_other_worker",stage="decode"}'),
    ).toBeGreaterThanOrEqual(1);
  });
});
