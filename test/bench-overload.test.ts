// `dolphin bench overload`'s harness, run short at a given rate: the proxy and the fake worker start, every request
// sent is accounted for exactly once (a status, a reset, a hang or an error), and the result has its shape. No
// assertion on how many were shed or how fast: that is the bench's business. Needs dist/ (the proxy child is
// `node bin/dolphin.js serve`).
import { describe, expect, it } from "vitest";
import { formatOverloadBench, runOverloadBench } from "../bench/overload.js";

describe("bench overload", () => {
  it("accounts for every request of a short overload at a given rate", async () => {
    const r = await runOverloadBench({ quick: true, rate: 25, durationS: 2, timeoutS: 20 });
    expect(r.sustained_from).toBe("given");
    expect(r.rate).toBe(50);
    expect(r.sent).toBe(100);
    const answered = Object.values(r.statuses).reduce((a, b) => a + b, 0);
    expect(answered + r.resets + r.hangs + r.errors).toBe(r.sent);
    expect(r.statuses["200"] ?? 0).toBeGreaterThan(0);
    expect(r.all_answered).toBe(
      answered === r.sent && Object.keys(r.statuses).every((s) => ["200", "429", "503"].includes(s)),
    );
    expect(r.search).toEqual([]);
    expect(JSON.parse(JSON.stringify(r))).toEqual(r);
    expect(formatOverloadBench(r)).toContain("overload: 50 req/s");
  }, 120_000);
});
