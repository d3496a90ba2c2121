// `dolphin ablate --study fidelity --quick` on real vLLM (it starts and stops its own 1P1D): every run has real and
// simulated figures, and the engines are gone when the command returns. How close the two come is a measurement
// (docs/simulator-calibration.md, "Fidelity: real against simulated"), not a test.
import { execFile } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

/** A calibrated-style cluster file (the figures docs/simulator-calibration.md records), so the test skips calibrating. */
const CLUSTER = {
  presets: {
    calibrated: {
      tp: 1,
      tFixMs: 2.53,
      weightStreamMs: 0,
      kLinMs: 0.00413,
      cArMs: 0,
      kArMs: 0,
      kKvMs: 0.00011,
      cAttnMs: 3.56e-6,
      kvBytesPerToken: 512,
      hbmBytes: 1.076e9,
      weightBytes: 2.8e6,
      gpuMemoryUtilization: 1,
      maxNumBatchedTokens: 2048,
      maxNumSeqs: 128,
    },
  },
  links: { "calibrated-nixl": { gbPerSecond: 4.83, alphaMs: 3.8, eta: 1 } },
};

const FIGURES = ["attainment", "ttftP50", "ttftP90", "tpotP50", "tpotP90"] as const;

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

const bindable = (port: number) =>
  new Promise<boolean>((resolve) => {
    const s = createServer();
    s.once("error", () => resolve(false));
    s.listen(port, "127.0.0.1", () => s.close(() => resolve(true)));
  });

describe("dolphin ablate --study fidelity --quick (real 1P1D, started and stopped by the command)", () => {
  it("gives real and simulated figures for every run, and leaves no engine running", async () => {
    const dir = mkdtempSync(join(tmpdir(), "fidelity-"));
    const cluster = join(dir, "cluster.json");
    writeFileSync(cluster, JSON.stringify(CLUSTER));
    const bin = fileURLToPath(new URL("../../bin/dolphin.js", import.meta.url));
    const run = await promisify(execFile)(
      process.execPath,
      [bin, "ablate", "--study", "fidelity", "--quick", "--cluster", cluster, "--json"],
      { timeout: 170_000 },
    );
    console.log(run.stderr);
    const lines = run.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    const runs = lines.filter((l) => !l.summary);
    const summary = lines.find((l) => l.summary).summary;

    // one rate, two policies, one repeat: two runs, each with a real repeat and a simulation of the same arrivals
    expect(runs.map((r) => r.policy).sort()).toEqual(["always-local", "always-remote"]);
    for (const r of runs) {
      expect(r.real).toHaveLength(1);
      for (const k of FIGURES) {
        expect(Number.isFinite(r.real[0][k]), `real ${k}`).toBe(true);
        expect(Number.isFinite(r.simulated[k]), `simulated ${k}`).toBe(true);
      }
      expect(r.real[0].failed).toBe(0);
      // each policy took its own path, for real and in the simulator
      const local = r.policy === "always-local" ? 1 : 0;
      expect(r.real[0].localFraction).toBe(local);
      expect(r.simulated.localFraction).toBe(local);
    }
    expect(summary.workloads[0].realSaturatedRps).toBeGreaterThan(0);

    // the engines are gone (their process groups stopped) and their ports free
    expect(summary.engines).toHaveLength(2);
    for (const e of summary.engines) {
      expect(e.pid).toBeGreaterThan(0);
      expect(alive(e.pid), `engine ${e.id} (pid ${e.pid})`).toBe(false);
      expect(await bindable(e.port), `engine ${e.id}'s port ${e.port}`).toBe(true);
    }
  });
});
