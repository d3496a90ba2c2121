// The explorer's jobs (bindings/browser/explorer/jobs.ts) give the CLI's figures: the same evaluation as
// `dolphin eval --json` (evalJob) for a generator and for a trace file's text, with the same core module.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { loadCoreModule } from "../bindings/node/index.js";
import { BASELINES, evaluate } from "../bindings/browser/explorer/jobs.js";
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
});
