// The explorer's jobs (bindings/browser/explorer/jobs.ts) give the CLI's figures: the same evaluation as
// `dolphin eval --json` (evalJob) for a generator and for a trace file's text, with the same core module.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadCoreModule } from "../bindings/node/index.js";
import { clusterMap } from "../bindings/browser/explorer/cluster-map.js";
import { BASELINES, evaluate, sweep, SWEEP_FACTORS } from "../bindings/browser/explorer/jobs.js";
import { guardCounts } from "../src/learn/guard.js";
import { kmeansTable } from "./helpers.js";
import { evalJob } from "../src/learn/job.js";

const module = loadCoreModule();

describe("explorer jobs", () => {
  it("evaluates every baseline with the same figures as dolphin eval (hybrid, 3P1D, saturated)", () => {
    const o = { split: "3P1D", slo: "default", seed: 3, requests: 200, module };
    const cli = evalJob({ ...o, workload: "hybrid", policies: [...BASELINES] });
    const page = evaluate({ ...o, workload: { generator: "hybrid" } }, module);
    const { ppd: _ppdInfo, ...cliOutput } = cli;
    expect(page.output).toEqual(cliOutput);
    expect(Object.keys(page.points).sort()).toEqual([...BASELINES].sort());
  });

  it("parses a dropped Mooncake file with the CLI's parser and splits it as the CLI does", () => {
    const file = "data/traces/mooncake_conversation_dev.jsonl";
    const o = {
      split: "1P1D",
      slo: "default",
      load: "trace",
      requests: 300,
      policies: ["dynamo-isl", "always-local"] as const,
    };
    const cli = evalJob({ ...o, policies: [...o.policies], workload: file, module });
    const page = evaluate({ ...o, workload: { file, text: readFileSync(file, "utf8") } }, module);
    expect(page.output).toEqual(cli);
  });

  it("names the line of a malformed workload file, as the CLI does", () => {
    expect(() =>
      evaluate({ split: "1P1D", workload: { file: "bad.jsonl", text: '{"timestamp": 0}\n' } }, module),
    ).toThrow(/bad\.jsonl:1/);
  });

  it("sweeps the load: each point is the evaluation at load x<scale>", () => {
    const o = { split: "2P1D", slo: "default", seed: 2, requests: 60, load: "x1.5" };
    const policies = ["dynamo-isl", "ppd"] as const;
    const r = sweep({ ...o, workload: { generator: "hybrid" }, policies: [...policies] }, module);
    expect(r.points.map((p) => p.factor)).toEqual([...SWEEP_FACTORS]);
    expect(r.load).toEqual({ spec: "x1.5", scale: 1.5 });
    expect(Object.keys(r.attainment)).toEqual([...policies]);
    for (const i of [0, 4]) {
      const at = evaluate(
        { ...o, load: `x${r.points[i]!.scale}`, workload: { generator: "hybrid" }, policies: [...policies] },
        module,
      );
      expect(at.output.load.rps).toBe(r.points[i]!.rps);
      for (const p of policies) expect(r.attainment[p]![i], p).toBe(at.output.policies[p]!.slo_attainment);
    }
    // progress says how far it is, from 0 up
    const fractions: number[] = [];
    sweep({ ...o, workload: { generator: "hybrid" }, policies: ["always-local"] }, module, (_l, f) => {
      if (f !== undefined) fractions.push(f);
    });
    expect(fractions).toEqual(SWEEP_FACTORS.map((_, i) => i / SWEEP_FACTORS.length));
  });

  it("simulates a custom model given as a cluster file's text as --cluster file.json does", () => {
    const dir = mkdtempSync(join(tmpdir(), "dolphin-explorer-cluster-"));
    const file = join(dir, "tp8.json");
    const text = JSON.stringify({
      presets: { "llama-70b-tp8": { base: "h100-70b", tp: 8 } },
      links: { "slow-link": { gbPerSecond: 12.5 } },
    });
    writeFileSync(file, text);
    const o = { split: "1P1D", slo: "4000,80", load: "trace", seed: 1, requests: 80, link: "slow-link" };
    const policies = ["dynamo-isl", "always-remote"] as const;
    const cli = evalJob({ ...o, workload: "hybrid", cluster: file, module, policies: [...policies] });
    const page = evaluate(
      { ...o, workload: { generator: "hybrid" }, clusterFile: { name: file, text }, policies: [...policies] },
      module,
    );
    expect(page.output).toEqual(cli);
    expect(page.output.cluster).toBe("llama-70b-tp8");
    // and a wrong field is named as the CLI names it
    const bad = JSON.stringify({ presets: { x: { base: "h100-70b", tp: 0 } } });
    expect(() =>
      evaluate({ ...o, workload: { generator: "hybrid" }, clusterFile: { name: "custom model", text: bad } }, module),
    ).toThrow("custom model: presets.x.tp: expected an integer ≥ 1, got 0");
    rmSync(dir, { recursive: true, force: true });
  });

  it("maps a guarded table's requests: per-cluster attainment and the share each guard took", () => {
    const t = kmeansTable(
      [
        [-1, -1, -1, -1],
        [0.5, 0.5, 0.5, 0.5],
        [0.8, 0.8, 0.8, -0.5],
        [2, 2, 2, 2],
      ],
      [0, 1, 2, 1],
      { version: 2, ood_bound: [1, 0.3, 100, 0.5] },
    );
    const o = { split: "3P1D", slo: "default", load: "trace", seed: 1, requests: 150 };
    const r = evaluate({ ...o, workload: { generator: "hybrid" }, table: t, policies: ["dolphin"] }, module);
    const map = r.map!;
    expect(map.source).toMatch(/^the 150 requests of hybrid/);
    expect(map.centroids.map((c) => c.value)).toEqual([0, 1, 2, 1]);
    expect(map.clusters.reduce((s, c) => s + c.requests, 0)).toBe(150);
    const met = map.clusters.reduce((s, c) => s + c.met, 0);
    expect(met / 150).toBeCloseTo(r.output.policies["dolphin"]!.slo_attainment, 12);
    const g = map.guards!;
    expect(g.cluster + g.ruleCluster + g.outOfDistribution).toBe(150);
    for (const part of [g.cluster, g.ruleCluster, g.outOfDistribution]) expect(part).toBeGreaterThan(0); // each guard took some
    expect(g.outOfDistribution).toBe(map.clusters.reduce((s, c) => s + c.outOfDistribution, 0));
    expect(map.clusters[2]!.ruleCluster).toBe(map.clusters[2]!.requests - map.clusters[2]!.outOfDistribution);
    expect(map.points.xy).toHaveLength(150);
    expect(map.points.routedBy.filter((x) => x === "out-of-distribution")).toHaveLength(g.outOfDistribution);
    // a table opened before any run: centroids only
    const bare = clusterMap(t, null, { ttftMs: 1, tpotMs: 1 }, null)!;
    expect(bare.source).toBeNull();
    expect(bare.points.xy).toEqual([]);
    expect(guardCounts(t, [])).toEqual({ cluster: 0, ruleCluster: 0, outOfDistribution: 0, loadBound: 0 });
  });
});
