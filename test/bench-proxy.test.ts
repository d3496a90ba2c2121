// `dolphin bench proxy`'s harness, run short: the child processes start, every request through every path (direct,
// pass-through, proxy on the local and the remote path, streaming or not) succeeds, and the result has its shape.
// No timing assertions: speed is the full bench's business. Needs dist/ (npm test builds it): the proxy child is
// `node bin/dolphin.js serve`.
import { describe, expect, it } from "vitest";
import { runProxyBench } from "../bench/proxy.js";
import { formatProxyBench, medianOfRuns, type ModeResult, type ProxyBenchResult } from "../bench/proxy-result.js";

const finite = (x: unknown): boolean => typeof x === "number" && Number.isFinite(x);

function checkMode(m: ModeResult, requests: number): void {
  for (const q of [
    m.added_latency_ms,
    m.passthrough_added_latency_ms,
    m.direct_latency_ms,
    m.passthrough_latency_ms,
    m.proxy_latency_ms,
  ]) {
    expect(finite(q.p50) && finite(q.p99)).toBe(true);
  }
  for (const q of [m.direct_latency_ms, m.passthrough_latency_ms, m.proxy_latency_ms]) {
    expect(q.p50).toBeGreaterThan(0);
    expect(q.p99).toBeGreaterThanOrEqual(q.p50);
  }
  // added = quantile(path) − quantile(direct)
  expect(m.added_latency_ms.p50).toBeCloseTo(m.proxy_latency_ms.p50 - m.direct_latency_ms.p50, 2);
  expect(m.passthrough_added_latency_ms.p99).toBeCloseTo(m.passthrough_latency_ms.p99 - m.direct_latency_ms.p99, 2);
  expect(m.rate).toBe(500);
  expect(m.requests).toBe(requests);
  expect(m.failed.direct + m.failed.passthrough + m.failed.proxy).toBe(0);
  expect(m.rate_search.steps.length).toBeGreaterThan(0);
  for (const s of m.rate_search.steps) expect(s.failed).toBe(0);
  expect(typeof m.target.met).toBe("boolean");
  expect(m.target.p50_extra_limit_ms).toBe(0.3);
  expect(m.target.p99_ratio_limit).toBe(1.5);
}

describe("bench proxy", () => {
  it("runs every path in a quick run with no failed request", async () => {
    const r = await runProxyBench({ quick: true, requests: 200 });
    expect(r.failed_requests).toBe(0);
    expect(r.first_failure).toBeNull();
    checkMode(r, 200);
    checkMode(r.streaming, 200);
    expect(r.failed.proxy_remote).toBe(0);
    expect(r.remote_path.failed).toBe(0);
    expect(r.remote_path.requests).toBe(200);
    expect(r.remote_path.latency_ms.p50).toBeGreaterThan(0);
    expect(r.runtime.quick).toBe(true);
    // JSON-able, and the formatter reads every field it needs
    expect(JSON.parse(JSON.stringify(r))).toEqual(r);
    const text = formatProxyBench(r);
    expect(text).toContain("non-streaming");
    expect(text).toContain("failed requests: 0");
    checkMedians(r);
  }, 120_000);
});

/** --runs: three runs whose figures differ give their medians, failures summed, each run kept. */
function checkMedians(r: ProxyBenchResult): void {
  const shifted = (by: number, failed: number): ProxyBenchResult => {
    const c = JSON.parse(JSON.stringify(r)) as ProxyBenchResult;
    c.added_latency_ms.p50 += by;
    c.streaming.proxy_latency_ms.p99 += by;
    c.target.p50_extra_ms += by;
    c.requests_per_s += by * 1000;
    c.failed_requests = failed;
    c.failed.proxy = failed;
    return c;
  };
  const runs = [shifted(1, 0), shifted(-1, 2), shifted(0, 1)];
  const m = medianOfRuns(runs);
  expect(m.added_latency_ms.p50).toBeCloseTo(r.added_latency_ms.p50, 3);
  expect(m.streaming.proxy_latency_ms.p99).toBeCloseTo(r.streaming.proxy_latency_ms.p99, 3);
  expect(m.target.p50_extra_ms).toBeCloseTo(r.target.p50_extra_ms, 3);
  expect(m.requests_per_s).toBe(r.requests_per_s);
  expect(m.failed_requests).toBe(3);
  expect(m.failed.proxy).toBe(3);
  expect(m.runtime.runs).toBe(3);
  expect(m.runs).toEqual(runs);
  expect(formatProxyBench(m)).toContain("medians of 3 runs");
}
