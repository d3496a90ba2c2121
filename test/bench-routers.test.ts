// `dolphin bench routers --quick` end to end: emulated 1P2D workers, dolphin serve with a learned table and with
// dynamo-isl, vllm-router and smg from `npm run setup`'s install, every one answering every request on two legs,
// and the JSON's lines (one per run, the summary last) in their shape. No timing assertions. Needs dist/ (npm test
// builds it) and the peers' install: without it the bench fails saying to run npm run setup, and so does this test.
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { routersBin } from "../bench/routers-peers.js";
import { formatRoutersBench, type RoutersRun, type RoutersSummary } from "../bench/routers-result.js";

const ROOT = join(import.meta.dirname, "..");
const ROUTERS = ["dolphin-learned", "dolphin-dynamo-isl", "vllm-router", "smg"] as const;

function bench(
  args: string[],
  env: NodeJS.ProcessEnv = process.env,
): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, [join(ROOT, "bin/dolphin.js"), "bench", "routers", ...args], { env });
    let out = "";
    let err = "";
    p.stdout.setEncoding("utf8").on("data", (s: string) => (out += s));
    p.stderr.setEncoding("utf8").on("data", (s: string) => (err += s));
    p.on("exit", (code) => resolve({ code, out, err }));
  });
}

describe("dolphin bench routers", () => {
  it("without the peers' install says to run npm run setup", async () => {
    const r = await bench(["--quick", "--json"], { ...process.env, DOLPHIN_CACHE: join(ROOT, "no-such-cache") });
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/vllm-router 0\.1\.17 is not installed \(no .*vllm-router\): run npm run setup/);
  }, 60_000);

  it("--quick runs every router in front of the same workers, every request answered on two legs", async () => {
    expect(existsSync(join(routersBin(), "vllm-router")), "vllm-router missing: run npm run setup").toBe(true);
    const r = await bench(["--quick", "--json"]);
    expect(r.code, r.err.slice(-2000)).toBe(0);
    const lines = r.out.trim().split("\n");
    expect(lines).toHaveLength(2); // one run, then the summary
    const run = JSON.parse(lines[0]!) as RoutersRun;
    const s = JSON.parse(lines[1]!) as RoutersSummary;
    expect(s.summary).toBe(true);
    expect(s.runs).toBe(1);
    expect(run.direct.failed + run.direct.streaming.failed).toBe(0);
    for (const name of ROUTERS) {
      const f = run.routers[name];
      for (const m of [f, f.streaming]) {
        expect(m.failed, `${name}: ${m.first_failure}`).toBe(0);
        expect(m.latency_ms.p50).toBeGreaterThan(0);
        expect(m.latency_ms.p99).toBeGreaterThanOrEqual(m.latency_ms.p50);
        expect(m.two_leg_share).toBe(1);
      }
      // added = quantile(router) − quantile(direct)
      expect(f.added_latency_ms.p50).toBeCloseTo(f.latency_ms.p50 - run.direct.latency_ms.p50, 2);
      expect(s.added_latency_ms[name].non_streaming).toEqual(f.added_latency_ms);
      expect(s.added_latency_ms[name].streaming).toEqual(f.streaming.added_latency_ms);
      expect(s.failed[name]).toBe(0);
    }
    expect(run.learned_table_bits).toMatch(/^[012]+$/);
    expect(s.target.non_streaming.best_peer.p50).toBe("vllm-router");
    expect(Object.keys(s.target.streaming.met).sort()).toEqual(["dolphin-dynamo-isl", "dolphin-learned"]);
    expect(formatRoutersBench(s)).toContain("vllm-router");
  }, 300_000);
});
