// dolphin tune --live, demonstrated end to end against emulated workers behind the proxy.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startEmulated, type Emulated } from "../src/serve/emulate.js";
import { followedCandidate, promptFor, tuneLive } from "../src/serve/tune.js";
import { CLUSTER_RULE, type Table } from "../src/table/table.js";
import { PRESETS } from "../src/sim/model-presets.js";
import { generate } from "../src/sim/generators.js";
import { coreModule } from "./helpers.js";

describe("live tuning", () => {
  let e: Emulated;
  beforeAll(async () => {
    e = await startEmulated({
      split: "1P1D",
      port: 0,
      preset: PRESETS["h100-8b"],
      timeScale: 100,
      module: coreModule("release"),
      log: () => {},
      adminToken: "secret",
    });
  });
  afterAll(async () => e?.close());

  it("keeps shared prefixes shared in the synthesized prompts, and different blocks different", () => {
    const req = (blocks: number[]) => ({
      id: 0,
      arrivalMs: 0,
      promptTokens: 16 * (blocks.length / 2),
      outputTokens: 4,
      turn: 1,
      blocks: Uint32Array.from(blocks),
    });
    const a = promptFor(req([11, 22, 33, 44, 55, 66]));
    const b = promptFor(req([11, 22, 33, 44, 77, 88]));
    const c = promptFor(req([99, 22, 33, 44]));
    const firstTwo = (s: string) => s.split(" ").slice(0, 6).join(" ");
    expect(firstTwo(b)).toBe(firstTwo(a));
    expect(b).not.toBe(a);
    expect(c.split(" ")[0]).not.toBe(a.split(" ")[0]);
  });

  it("judges a candidate only by the requests routed by it, not by the drift guard's control arm", () => {
    const table = { kind: "kmeans", bits: [0, 1, CLUSTER_RULE] } as unknown as Table;
    // learned arm, and requests outside any cluster's choice (rule kinds, out of distribution): judged
    expect(followedCandidate({ cluster: 0, reason: "cluster" }, table)).toBe(true);
    expect(followedCandidate({ cluster: 1, reason: "out-of-distribution" }, table)).toBe(true);
    expect(followedCandidate({ cluster: null, reason: "rule" }, table)).toBe(true);
    // the rule in a cluster the candidate sent local or remote is the control arm: not the candidate's doing
    expect(followedCandidate({ cluster: 0, reason: "rule-fallback" }, table)).toBe(false);
    expect(followedCandidate({ cluster: 1, reason: "rule-fallback" }, table)).toBe(false);
    // a cluster whose value is the rule is routed by it on every request
    expect(followedCandidate({ cluster: 2, reason: "rule-fallback" }, table)).toBe(true);
  });

  it("searches bits through the admin API, replaying the workload, and leaves the best table in place", async () => {
    const w = generate("hybrid", { seed: 3, requests: 24 });
    const lines: string[] = [];
    const r = await tuneLive({
      proxyUrl: e.proxy.url,
      adminToken: "secret",
      model: "dolphin-emulated",
      workload: w,
      rate: 40,
      slo: { ttftMs: 2000, tpotMs: 50 },
      k: 2,
      maxRounds: 4,
      maxOutputTokens: 8,
      onProgress: (l) => lines.push(l),
    });
    expect(r.search.log.length).toBeGreaterThan(1);
    expect(r.search.log.length).toBeLessThanOrEqual(4);
    expect(lines.some((l) => /live SLO attainment/.test(l))).toBe(true);
    const t = await fetch(`${e.proxy.url}/admin/table`, { headers: { authorization: "Bearer secret" } });
    expect(t.status).toBe(200);
    expect(e.proxy.router.table.kind).toBe("kmeans");
    expect(e.proxy.router.table.bits).toEqual(r.table.bits);
  }, 60_000);
});
