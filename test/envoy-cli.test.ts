// Around the filter: finding Envoy (or saying to run npm run setup), the configuration `dolphin envoy --write`
// produces (checked by Envoy's own --mode validate), `dolphin bench envoy`'s result shape on a short run, and the
// simulator's approximate cache view that docs/envoy.md uses to price approximate mode.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runEnvoyBench } from "../bench/envoy.js";
import { findEnvoy, writeEnvoyConfig } from "../src/envoy/launch.js";
import { loadSetup } from "../src/envoy/config.js";
import { prepareRun } from "../src/sim/run.js";
import { simulate } from "../src/sim/simulator.js";
import { coreModule } from "./helpers.js";

describe("dolphin envoy", () => {
  it("says to run npm run setup when the venv has no Envoy", () => {
    const empty = mkdtempSync(join(tmpdir(), "dolphin-no-envoy-"));
    try {
      expect(() => findEnvoy(empty)).toThrow(
        /Envoy is not installed \(looked for .*\.venv\/bin\/envoy\): run npm run setup/,
      );
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
  });

  it("writes an envoy.yaml and listener for real workers that Envoy itself accepts", () => {
    const dir = mkdtempSync(join(tmpdir(), "dolphin-envoy-write-"));
    try {
      const setupFile = join(dir, "envoy-plugin.json");
      writeFileSync(
        setupFile,
        JSON.stringify({
          model: "Qwen/Qwen2.5-7B-Instruct",
          table: "dynamo-isl",
          listen: { host: "0.0.0.0", port: 8000 },
          workers: [
            { id: "prefill-0", role: "prefill", url: "http://10.0.0.10:8000" },
            { id: "decode-0", role: "decode", url: "http://10.0.0.20:8000" },
            { id: "decode-1", role: "decode", url: "http://vllm-decode-1.internal:8000" },
          ],
        }),
      );
      const paths = writeEnvoyConfig(loadSetup(setupFile), dir);
      const listener = readFileSync(paths.listener, "utf8");
      expect(listener).toContain("cluster_header: x-dolphin-cluster");
      expect(listener).toContain("failure_policy: FAIL_RELOAD");
      const r = spawnSync(findEnvoy(), ["--mode", "validate", "-c", paths.bootstrap], { encoding: "utf8" });
      expect(r.stdout + r.stderr).toMatch(/configuration .* OK/);
      expect(r.status).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("dolphin envoy --help and a missing --config say what to give", () => {
    const help = spawnSync(process.execPath, ["bin/dolphin.js", "envoy", "--help"], { encoding: "utf8" });
    expect(help.stdout).toContain("dolphin envoy --emulate <nPmD|nR>");
    const none = spawnSync(process.execPath, ["bin/dolphin.js", "envoy"], { encoding: "utf8" });
    expect(none.status).not.toBe(0);
    expect(none.stderr).toContain("give --config envoy-plugin.json, --emulate nPmD or --vllm nPmD");
  });
});

describe("dolphin bench envoy", () => {
  it("reports what Envoy and Envoy + filter add, both modes, and the filter's time per request", async () => {
    const r = await runEnvoyBench({ quick: true, requests: 60 });
    for (const m of [r, r.streaming]) {
      expect(m.failed).toEqual({ direct: 0, envoy: 0, filter: 0 });
      expect(Number.isFinite(m.filter_added_latency_ms.p50) && Number.isFinite(m.envoy_added_latency_ms.p99)).toBe(
        true,
      );
      expect(typeof m.target_met).toBe("boolean");
    }
    expect(r.remote_path.failed).toBe(0);
    expect(r.filter_us_per_request).toBeGreaterThan(0);
  }, 60_000);
});

describe("simulator cache view", () => {
  it("approximate: the index learns only from the router's own decisions, so multi-turn reuse is found less often", () => {
    const run = (cacheView: "precise" | "approximate") => {
      const p = prepareRun({
        workload: "multiturn",
        split: "2P2D",
        slo: "default",
        policy: "dynamo-isl",
        requests: 300,
        seed: 3,
        cacheView,
        module: coreModule("release"),
      });
      return simulate(p.workload, p.config).summary;
    };
    const precise = run("precise");
    const approximate = run("approximate");
    expect(approximate.completed).toBe(300);
    expect(approximate.local_fraction).toBeLessThan(precise.local_fraction);
  }, 60_000);
});
