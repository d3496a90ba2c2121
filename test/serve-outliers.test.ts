// `dolphin serve` under faults, part two, over real sockets on loopback: per-worker admission limits (spill to another
// worker, local prefill, per-worker queue and 503), failure-rate outlier ejection (and timeouts that are not
// ejection), and answers cut after their first byte (a stream ends with an error event; a non-streaming answer cut
// before any byte reached the client is retried). Every test is bounded in time (a few seconds at most).
import type { IncomingMessage, ServerResponse } from "node:http";
import { afterEach, describe, expect, it } from "vitest";
import { parseConfig } from "../src/serve/config.js";
import { OutcomeWindow } from "../src/serve/proxy/registry.js";
import {
  cleanUp,
  json,
  metric,
  MODEL,
  post,
  proxy,
  sleep,
  startFake,
  vllmLike,
  workerProcess,
  type Handler,
} from "./serve-fault-tools.js";

afterEach(cleanUp);

/** A worker that takes `ms` per inference call and records the most calls it had at once. */
function slowWorker(ms: number): { handler: Handler; most: () => number } {
  let now = 0;
  let most = 0;
  return {
    most: () => most,
    handler: async (req, body, res) => {
      if (req.url === "/health") return json(res, 200, {});
      now++;
      most = Math.max(most, now);
      await sleep(ms);
      now--;
      return vllmLike()(req, body, res);
    },
  };
}

async function answers(
  p: Awaited<ReturnType<typeof proxy>>,
  n: number,
  body: (i: number) => unknown,
): Promise<Array<{ status: number; retryAfter: string | null; route: string | null; text: string }>> {
  return Promise.all(
    Array.from({ length: n }, async (_, i) => {
      const r = await post(p, "/v1/completions", body(i));
      return {
        status: r.status,
        retryAfter: r.headers.get("retry-after"),
        route: r.headers.get("x-dolphin-route"),
        text: await r.text(),
      };
    }),
  );
}

describe("dolphin serve: per-worker admission", () => {
  it("holds one worker to max_inflight_per_worker, queues max_queued_per_worker, sheds the rest with 503 and Retry-After", async () => {
    const w = slowWorker(300);
    const d = await startFake(w.handler);
    const p = await proxy([{ id: "d0", url: d.url, role: "decode" }], {
      admission: { max_inflight_per_worker: 2, max_queued_per_worker: 2, queue_timeout_ms: 5000 },
    });
    const got = await answers(p, 10, (i) => ({ model: MODEL, prompt: `request ${i}`, max_tokens: 4 }));
    const ok = got.filter((a) => a.status === 200);
    const shed = got.filter((a) => a.status === 503);
    expect(ok.length + shed.length).toBe(10);
    expect(ok).toHaveLength(4); // two at once, two from the worker's queue
    expect(shed.every((a) => a.retryAfter === "1" && /worker d0 is at capacity/.test(a.text))).toBe(true);
    expect(w.most()).toBe(2);
    expect(await metric(p, 'dolphin_shed_total{reason="worker_queue_full"}')).toBe(6);
    expect(await metric(p, 'dolphin_worker_full_total{outcome="queued",stage="decode"}')).toBe(2);
    expect(await metric(p, "dolphin_worker_inflight_requests")).toBe(0);
    expect(await metric(p, "dolphin_worker_queued_requests")).toBe(0);
  });

  it("sends a full worker's request to another worker of the role with room, and sheds once every worker is full", async () => {
    const w0 = slowWorker(400);
    const w1 = slowWorker(400);
    const d0 = await startFake(w0.handler);
    const d1 = await startFake(w1.handler);
    const p = await proxy(
      [
        { id: "d0", url: d0.url, role: "decode" },
        { id: "d1", url: d1.url, role: "decode" },
      ],
      { admission: { max_inflight_per_worker: 2, max_queued_per_worker: 0 } },
    );
    // the same prompt: the router's cache affinity sends it to one worker each time
    const got = await answers(p, 6, () => ({ model: MODEL, prompt: "one hot prefix", max_tokens: 4 }));
    expect(got.filter((a) => a.status === 200)).toHaveLength(4);
    expect(got.filter((a) => a.status === 503)).toHaveLength(2);
    expect(w0.most()).toBe(2);
    expect(w1.most()).toBe(2);
    expect(await metric(p, 'dolphin_shed_total{reason="worker_queue_full"}')).toBe(2);
  });

  it("prefills locally when every prefill worker is full (fallback_local)", async () => {
    const pf = slowWorker(400);
    const p0 = await startFake(pf.handler);
    const d0 = await startFake();
    const d1 = await startFake();
    const p = await proxy(
      [
        { id: "p0", url: p0.url, role: "prefill" },
        { id: "d0", url: d0.url, role: "decode" },
        { id: "d1", url: d1.url, role: "decode" },
      ],
      { table: "always-remote", admission: { max_inflight_per_worker: 2, max_queued_per_worker: 0 } },
    );
    const got = await answers(p, 4, (i) => ({ model: MODEL, prompt: `request ${i}`, max_tokens: 4 }));
    expect(got.map((a) => a.status)).toEqual([200, 200, 200, 200]);
    expect(got.filter((a) => a.route === "remote")).toHaveLength(2);
    expect(got.filter((a) => a.route === "fallback")).toHaveLength(2);
    expect(pf.most()).toBe(2);
    expect(await metric(p, 'dolphin_worker_full_total{outcome="local",stage="prefill"}')).toBe(2);
    expect(await metric(p, "dolphin_prefill_failures_total")).toBe(0); // a full worker is not a failed one
  });
});

describe("dolphin serve: failure-rate outlier ejection", () => {
  it("counts calls over a sliding window: old buckets drop out", () => {
    const w = new OutcomeWindow(10_000);
    for (let i = 0; i < 4; i++) w.note(0, true);
    w.note(5_000, false);
    expect(w.totals(5_000)).toEqual({ calls: 5, failures: 4 });
    expect(w.totals(10_500)).toEqual({ calls: 1, failures: 0 }); // the failures at 0 s are over 10 s old
    expect(w.totals(30_000)).toEqual({ calls: 0, failures: 0 });
    w.note(30_000, true);
    expect(w.totals(30_000)).toEqual({ calls: 1, failures: 1 }); // a reused bucket starts afresh
  });

  it("validates the new config fields, naming them", () => {
    const base = { model: "m" };
    expect(() => parseConfig({ ...base, outlier: { failure_rate_threshold: 1.5 } })).toThrow(
      /outlier\.failure_rate_threshold: expected a number ≥ 0 and ≤ 1, got 1\.5/,
    );
    expect(() => parseConfig({ ...base, outlier: { failure_rate_window_s: 0 } })).toThrow(
      /outlier\.failure_rate_window_s/,
    );
    expect(() => parseConfig({ ...base, admission: { max_inflight_per_worker: 0 } })).toThrow(
      /admission\.max_inflight_per_worker: expected an integer ≥ 1/,
    );
    const c = parseConfig(base);
    expect(c.admission.max_inflight_per_worker).toBe(512);
    expect(c.outlier.failure_rate_threshold).toBe(0.5);
  });

  it("ejects a worker whose failure rate over the window passes the threshold, though never 5 failures in a row", async () => {
    /** Every other inference call answers 500. */
    const alternating = (): Handler => {
      let calls = 0;
      return (req, body, res) => {
        if (req.url === "/health") return json(res, 200, {});
        if (calls++ % 2 === 0) return json(res, 500, { error: "engine error" });
        return vllmLike()(req, body, res);
      };
    };
    const d0 = await startFake(alternating());
    const d1 = await startFake(alternating());
    const p = await proxy(
      [
        { id: "d0", url: d0.url, role: "decode" },
        { id: "d1", url: d1.url, role: "decode" },
      ],
      {
        outlier: {
          base_ejection_s: 60,
          failure_rate_threshold: 0.3,
          failure_rate_min_requests: 10,
          failure_rate_window_s: 30,
        },
        retries: { min_concurrent: 10 },
      },
    );
    const statuses: number[] = [];
    for (let i = 0; i < 30; i++)
      statuses.push((await post(p, "/v1/completions", { model: MODEL, prompt: `r${i}`, max_tokens: 4 })).status);
    expect(await metric(p, 'dolphin_ejections_total{cause="failure_rate"}')).toBe(1);
    expect(await metric(p, 'dolphin_ejections_total{cause="consecutive_failures"}')).toBe(0);
    expect(p.router.workerIds).toHaveLength(1); // the other one is held back by max_ejected_share
    expect(await metric(p, "dolphin_ejections_skipped_total")).toBeGreaterThanOrEqual(1);
    // before the ejection a 500 was retried on the other worker
    expect(statuses.filter((s) => s === 200).length).toBeGreaterThanOrEqual(10);
  });

  it("does not eject a worker for response timeouts, however many", async () => {
    const d0 = await startFake(async (req, body, res) => {
      if (req.url === "/health") return json(res, 200, {});
      await sleep(400);
      return vllmLike()(req, body, res);
    });
    const p = await proxy([{ id: "d0", url: d0.url, role: "decode" }], {
      timeouts: { request_ms: 100 },
      outlier: { consecutive_failures: 2, failure_rate_threshold: 0.1, failure_rate_min_requests: 3 },
    });
    for (let i = 0; i < 6; i++)
      expect((await post(p, "/v1/completions", { model: MODEL, prompt: `r${i}`, max_tokens: 4 })).status).toBe(504);
    expect(p.router.workerIds).toEqual(["d0"]);
    expect(await metric(p, "dolphin_ejections_total")).toBe(0);
  });
});

/** Reads an SSE answer to its end; the data lines. */
async function sseLines(r: Response): Promise<string[]> {
  const text = await r.text();
  return text
    .split("\n")
    .filter((l) => l.startsWith("data: "))
    .map((l) => l.slice(6));
}

describe("dolphin serve: answers cut after they began", () => {
  it("kill -9 of the decode worker mid-stream: the client gets the first tokens, an error event, [DONE] and the end", async () => {
    const d0 = await workerProcess("decode", "D0", 1);
    const p = await proxy([{ id: "D0", url: d0.url, role: "decode" }], { timeouts: { request_ms: 60_000 } });
    const r = await post(p, "/v1/completions", {
      model: MODEL,
      prompt: "a long answer",
      max_tokens: 5000,
      ignore_eos: true,
      stream: true,
    });
    expect(r.status).toBe(200);
    const reader = r.body!.getReader();
    const first = await reader.read(); // the first byte reached the client
    expect(first.done).toBe(false);
    const t0 = performance.now();
    process.kill(d0.pid, "SIGKILL");
    let rest = "";
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      rest += Buffer.from(value).toString();
    }
    const endedMs = performance.now() - t0;
    console.log(`kill -9 mid-stream: the client's stream ended ${Math.round(endedMs)} ms after the kill`);
    const lines = rest
      .split("\n")
      .filter((l) => l.startsWith("data: "))
      .map((l) => l.slice(6));
    expect(lines.at(-1)).toBe("[DONE]");
    const event = JSON.parse(lines.at(-2)!) as { error: { code: string; message: string } };
    expect(event.error.code).toBe("decode_failed");
    expect(event.error.message).toMatch(/D0 failed mid-stream/);
    expect(endedMs).toBeLessThan(5000);
    expect(await metric(p, "dolphin_stream_errors_total")).toBe(1);
    expect(await metric(p, 'dolphin_requests_total{endpoint="/v1/completions",route="local",status="502"}')).toBe(1);
    expect(await metric(p, "dolphin_retries_total")).toBe(0); // bytes had reached the client: no retry
  }, 30_000);

  it("a worker frozen mid-stream: the health checks eject it and its stream ends with an error event, long before request_ms", async () => {
    let frozen = false;
    const d0 = await startFake(async (req, _body, res) => {
      if (req.url === "/health") {
        if (frozen) return; // never answers
        return json(res, 200, {});
      }
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(`data: ${JSON.stringify({ choices: [{ index: 0, text: "first" }] })}\n\n`);
      frozen = true; // and nothing more, like a SIGSTOPped engine
    });
    const p = await proxy([{ id: "d0", url: d0.url, role: "decode" }], {
      timeouts: { request_ms: 60_000 },
      health: { check_interval_s: 0.2, check_timeout_ms: 200, unhealthy_after: 2 },
    });
    const t0 = performance.now();
    const r = await post(p, "/v1/completions", { model: MODEL, prompt: "x", max_tokens: 50, stream: true });
    const lines = await sseLines(r);
    const endedMs = performance.now() - t0;
    console.log(`frozen mid-stream: the client's stream ended ${Math.round(endedMs)} ms after the request`);
    expect(endedMs).toBeLessThan(5000);
    expect(JSON.parse(lines[0]!)).toMatchObject({ choices: [{ text: "first" }] });
    expect(lines.at(-1)).toBe("[DONE]");
    expect((JSON.parse(lines.at(-2)!) as { error: { message: string } }).error.message).toMatch(
      /d0 failed mid-stream: d0 left rotation \(health check\)/,
    );
    expect(await metric(p, 'dolphin_ejections_total{cause="health_check"}')).toBe(1);
    expect(await metric(p, "dolphin_stream_errors_total")).toBe(1);
  });

  it("a health check that times out while the proxy's own loop is saturated counts as a third of a failure", async () => {
    let checks = 0;
    const d0 = await startFake(async (req, body, res) => {
      if (req.url === "/health") {
        checks++;
        return; // never answers: each check times out
      }
      return vllmLike()(req, body, res);
    });
    const p = await proxy([{ id: "d0", url: d0.url, role: "decode" }], {
      health: { check_interval_s: 0.2, check_timeout_ms: 200, unhealthy_after: 2 },
    });
    const ejections = (): Promise<number> => metric(p, 'dolphin_ejections_total{cause="health_check"}');
    // the loop busy in 30 ms tasks (~97 %): the checks' answers, had there been any, could have waited unread
    const hog = setInterval(() => {
      const end = performance.now() + 30;
      while (performance.now() < end);
    }, 1);
    try {
      // the fifth check starts once four have timed out: two failures would have ejected d0 by then
      while (checks < 5) await sleep(20);
      expect(await ejections()).toBe(0);
    } finally {
      clearInterval(hog);
    }
    // the loop free again: timed-out checks count in full, and d0 leaves rotation within a few checks
    for (let i = 0; i < 100 && (await ejections()) === 0; i++) await sleep(50);
    expect(await ejections()).toBe(1);
  });

  it("a non-streaming answer cut before any byte reached the client is retried on another decode worker", async () => {
    const cutting: Handler = (req, _body, res: ServerResponse) => {
      if (req.url === "/health") return json(res, 200, {});
      res.writeHead(200, { "content-type": "application/json", "content-length": "1000" });
      res.write('{"id":"c","choices":[');
      setTimeout(() => (req as IncomingMessage).socket.destroy(), 20); // dies mid-body
    };
    const d0 = await startFake(cutting);
    const d1 = await startFake(cutting);
    const p = await proxy([
      { id: "d0", url: d0.url, role: "decode" },
      { id: "d1", url: d1.url, role: "decode" },
    ]);
    // both cut: one retry, then 502 (nothing had reached the client, so the answer is a clean error)
    const r = await post(p, "/v1/completions", { model: MODEL, prompt: "x", max_tokens: 4 });
    expect(r.status).toBe(502);
    expect(await metric(p, 'dolphin_retries_total{stage="decode"}')).toBe(1);
    // d1 recovers: the next request cut on d0 is answered by d1
    d1.server.removeAllListeners("request");
    d1.server.on("request", (req: IncomingMessage, res: ServerResponse) => {
      req.resume();
      req.on("end", () =>
        json(res, 200, {
          id: "c",
          choices: [{ index: 0, text: "ok" }],
          usage: { prompt_tokens: 1, completion_tokens: 1 },
        }),
      );
    });
    let answered = 0;
    for (let i = 0; i < 4; i++) {
      const r2 = await post(p, "/v1/completions", { model: MODEL, prompt: `y${i}`, max_tokens: 4 });
      if (r2.status === 200) answered++;
      await r2.arrayBuffer();
    }
    expect(answered).toBe(4);
  });
});
