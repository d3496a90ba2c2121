// The saturated-load search (src/sim/saturation.ts): probed in turn in this thread, or with the guessed next probe
// beside the needed one (a pool), it uses the same probes in the same order and finds the same scale.
import { describe, expect, it } from "vitest";
import {
  findSaturatedScale,
  findSaturatedScaleWith,
  probeAttainment,
  probeWorkload,
  saturationSearch,
} from "../src/sim/saturation.js";
import { PRESETS } from "../src/sim/model-presets.js";
import { SLO_PRESETS } from "../src/sim/metrics.js";
import { parseSplit } from "../src/sim/split.js";
import { generate } from "../src/sim/generators.js";
import { coreModule } from "./helpers.js";

/** Runs the search against an attainment curve, in turn: the scale and the probes it used. */
function searchOn(attainment: (scale: number) => number): { scale: number; probes: number[] } {
  const probes: number[] = [];
  const search = saturationSearch();
  let step = search.next();
  while (!step.done) {
    probes.push(step.value.need);
    step = search.next(attainment(step.value.need));
  }
  return { scale: step.value, probes };
}

describe("saturationSearch", () => {
  it("brackets by doubling or halving, then bisects six times in log scale", () => {
    const falling = (line: number) => (s: number) => (s <= line ? 0.95 : 0.5);
    const down = searchOn(falling(0.3));
    expect(down.probes.slice(0, 3)).toEqual([1, 0.5, 0.25]);
    expect(down.probes).toHaveLength(3 + 6);
    expect(down.scale).toBeLessThanOrEqual(0.3);
    expect(down.scale).toBeGreaterThan(0.3 / 1.012);
    const up = searchOn(falling(5));
    expect(up.probes.slice(0, 4)).toEqual([1, 2, 4, 8]);
    expect(up.scale).toBeLessThanOrEqual(5);
    expect(up.scale).toBeGreaterThan(5 / 1.012);
  });

  it("with the guesses probed beside the needed probes, in any order of completion, uses the same probes", async () => {
    // a curve that is not monotone near the line: the search's path, not only its answer, must be the same
    const bumpy = (s: number): number => 0.9 + 0.3 * Math.sin(7 * Math.log(s)) - 0.2 * Math.log(s);
    const serial = searchOn(bumpy);
    const started: number[] = [];
    const r = await findSaturatedScaleWith({ name: "curve", requests: [], rate: 2 }, async (scale) => {
      started.push(scale);
      await new Promise((done) => setTimeout(done, (started.length * 5) % 7));
      return bumpy(scale);
    });
    expect(r.scale).toBe(serial.scale);
    expect(r.probes.map(([s]) => s)).toEqual(serial.probes);
    expect(r.rps).toBe(2 * serial.scale);
    expect(started.length).toBeGreaterThan(serial.probes.length); // the guesses ran too
  });

  it("on a simulated cluster: findSaturatedScaleWith gives findSaturatedScale's scale and probes", async () => {
    const w = generate("hybrid", { seed: 1, requests: 150 });
    const config = {
      preset: PRESETS["h100-8b"]!,
      split: parseSplit("1P1D"),
      slo: SLO_PRESETS["taichi-a"]!,
      module: coreModule(),
    };
    const inTurn = findSaturatedScale(w, config);
    const probe = probeWorkload(w);
    const beside = await findSaturatedScaleWith(w, async (scale) => probeAttainment(probe, config, scale));
    expect(beside).toEqual(inTurn);
  });
});
