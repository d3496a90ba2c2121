// `dolphin bench overload`'s harness, run short at a given rate: the workers, the proxy and the generator processes
// start, every request scheduled is accounted for exactly once (not sent because late, or sent and then a status, a
// reset, a hang or an error), and the result has its shape. No assertion on how many were shed or how fast: that is
// the bench's business. Needs dist/ (the children are `node bin/dolphin.js serve` and `dolphin worker`).
import { describe, expect, it } from "vitest";
import { runOverloadBench } from "../bench/overload.js";
import { formatOverloadBench, type OverloadBenchResult } from "../bench/overload-result.js";

function expectAccounted(r: OverloadBenchResult): void {
  const answered = Object.values(r.statuses).reduce((a, b) => a + b, 0);
  expect(r.sent + r.late).toBe(r.scheduled);
  expect(answered + r.resets + r.hangs + r.errors).toBe(r.sent);
  expect(r.statuses["200"] ?? 0).toBeGreaterThan(0);
  expect(r.all_answered).toBe(
    answered === r.sent && Object.keys(r.statuses).every((s) => ["200", "429", "503"].includes(s)),
  );
  expect(r.target_met).toBe(r.all_answered && r.proxy_rss_mb.bounded !== false);
  expect(r.generator.max_open_per_process).toBeLessThanOrEqual(r.generator.connections);
  expect(r.generator.send_lag_ms).not.toBeNull();
  expect(r.search).toEqual([]);
  expect(JSON.parse(JSON.stringify(r))).toEqual(r);
}

describe("bench overload", () => {
  it("accounts for every request of a short overload at a given rate (fake worker)", async () => {
    const r = await runOverloadBench({ quick: true, workers: "fake", rate: 25, durationS: 2, timeoutS: 20 });
    expect(r.sustained_from).toBe("given");
    expect(r.rate).toBe(50);
    expect(r.scheduled).toBe(100);
    expectAccounted(r);
    expect(r.runtime.workers).toMatch(/^fake/);
    expect(formatOverloadBench(r)).toContain("overload: 50 req/s");
  }, 120_000);

  it("runs emulated workers as their own processes (1P1D)", async () => {
    const r = await runOverloadBench({ quick: true, workers: "1P1D", timeScale: 20, rate: 5, durationS: 2 });
    expect(r.scheduled).toBe(20);
    expectAccounted(r);
    expect(r.cpu_cores.workers).toHaveLength(2);
    // the generator reports its own CPU (processes start up and send, so more than nothing)
    expect(r.cpu_cores.generator).toBeGreaterThan(0);
    expect(r.runtime.workers).toBe("1P1D (dolphin worker processes)");
    expect(formatOverloadBench(r)).toMatch(/^target .*: (met|NOT met)$/m);
  }, 120_000);
});
