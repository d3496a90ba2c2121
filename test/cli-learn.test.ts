// The simulator and learner commands as a user runs them (small workloads; every figure is simulated).
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const BIN = new URL("../bin/dolphin.js", import.meta.url).pathname;
const dolphin = (args: string[]) => {
  const r = spawnSync(process.execPath, [BIN, ...args], { encoding: "utf8", timeout: 120_000 });
  return { code: r.status ?? -1, out: r.stdout, err: r.stderr };
};

describe("dolphin simulate", () => {
  it("prints the documented JSON summary and writes per-request records", () => {
    const dir = mkdtempSync(join(tmpdir(), "dolphin-sim-"));
    const trace = join(dir, "records.jsonl");
    const r = dolphin([
      "simulate",
      "--workload",
      "humaneval",
      "--requests",
      "200",
      "--cluster",
      "h100-8b",
      "--split",
      "1P1D",
      "--slo",
      "taichi-a",
      "--policy",
      "dynamo-isl",
      "--json",
      "--trace-out",
      trace,
    ]);
    expect(r.err).toBe("");
    const j = JSON.parse(r.out);
    for (const k of [
      "requests",
      "slo_attainment",
      "slo_attainment_per_metric",
      "throughput_tokens_per_s",
      "local_fraction",
      "kv_bytes_transferred",
      "failed",
    ])
      expect(j).toHaveProperty(k);
    expect(j.simulated).toBe(true);
    expect(j.requests).toBe(200);
    expect(Object.keys(j.ttft_ms)).toEqual(["p50", "p90", "p99"]);
    expect(Object.keys(j.prefix_hit_rate)).toEqual(["prefill", "decode"]);
    const lines = readFileSync(trace, "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines).toHaveLength(200);
    expect(lines[0]).toHaveProperty("ttftMs");
  });

  it("rejects bad choices with a message that names them", () => {
    expect(dolphin(["simulate", "--workload", "nope", "--split", "1P1D", "--policy", "dynamo-isl"]).err).toMatch(
      /not a generator \(hybrid, arxiv/,
    );
    expect(dolphin(["simulate", "--workload", "arxiv", "--split", "3X", "--policy", "dynamo-isl"]).err).toMatch(
      /--split: expected nPmD.*got "3X"/,
    );
    expect(
      dolphin(["simulate", "--workload", "arxiv", "--split", "1P1D", "--policy", "dynamo-isl", "--slo", "fast"]).err,
    ).toMatch(/--slo: expected a preset.*got "fast"/);
    expect(dolphin(["simulate", "--workload", "arxiv", "--split", "1P1D", "--policy", "kmeans"]).err).toMatch(
      /--policy: kmeans needs a table/,
    );
    expect(
      dolphin(["simulate", "--workload", "arxiv", "--split", "1P1D", "--policy", "dynamo-isl", "--cluster", "a100"])
        .err,
    ).toMatch(/--cluster: .*a100/);
    expect(
      dolphin(["simulate", "--workload", "arxiv", "--split", "1P1D", "--policy", "dynamo-isl", "--load", "lots"]).err,
    ).toMatch(/--load: expected "trace".*got "lots"/);
  });
});

describe("dolphin train, eval, report", () => {
  it("learns a table, evaluates every policy on it, and charts the result", () => {
    const dir = mkdtempSync(join(tmpdir(), "dolphin-learn-"));
    const table = join(dir, "t.msgpack");
    const common = [
      "--workload",
      "hybrid",
      "--requests",
      "150",
      "--cluster",
      "h100-8b",
      "--split",
      "1P1D",
      "--slo",
      "taichi-a",
      "--load",
      "x1",
    ];
    const t = dolphin(["train", ...common, "--k", "3", "--out", table, "--json"]);
    expect(t.code, t.err).toBe(0);
    expect(t.err).toBe(""); // quiet under --json: no progress lines
    const tj = JSON.parse(t.out);
    expect(tj.bits).toHaveLength(3);
    expect(tj.log.length).toBe(tj.rounds);
    expect(tj.osl_classifier.accuracy.heldOut).toBeGreaterThan(0);
    expect(dolphin(["table", table]).out).toMatch(/kmeans table: K = 3/);
    const e = dolphin(["eval", ...common, "--table", table, "--json"]);
    expect(e.code, e.err).toBe(0);
    expect(e.err).toBe("");
    const ej = JSON.parse(e.out);
    expect(Object.keys(ej.policies)).toContain("dolphin");
    expect(Object.keys(ej.policies)).toHaveLength(10);
    const evalFile = join(dir, "eval.json");
    writeFileSync(evalFile, e.out);
    const rep = dolphin(["report", evalFile, "--out", join(dir, "report")]);
    expect(rep.code, rep.err).toBe(0);
    expect(existsSync(join(dir, "report", "report.md"))).toBe(true);
    expect(readFileSync(join(dir, "report", "report.md"), "utf8")).toMatch(/simulated/i);
  }, 120_000);

  it("refuses dolphin without a table and unknown policies", () => {
    expect(
      dolphin([
        "eval",
        "--workload",
        "arxiv",
        "--split",
        "1P1D",
        "--policies",
        "dolphin",
        "--load",
        "x1",
        "--requests",
        "50",
      ]).err,
    ).toMatch(/needs --table/);
    expect(dolphin(["eval", "--workload", "arxiv", "--split", "1P1D", "--policies", "magic"]).err).toMatch(
      /--policies: unknown policy "magic"/,
    );
  });
});
