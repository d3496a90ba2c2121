// The calibration fit (src/sim/calibration-fit.ts) on synthetic measurements: it recovers the coefficients that made
// them, keeps coefficients ≥ 0, and writes a cluster file that loads with the engine's KV capacity and link.
import { describe, expect, it } from "vitest";
import {
  calibratedClusterFile,
  fitStepTime,
  fitTransfer,
  fittedStepMs,
  nonNegativeLeastSquares,
  prefillFeatures,
  type StepPoint,
} from "../src/sim/calibration-fit.js";
import { clusterFromFile } from "../src/sim/cluster-file.js";
import { kvCapacityTokens } from "../src/sim/model-presets.js";
import { kvTransferMs } from "../src/sim/kv-transfer.js";
import { attnPairs } from "../src/sim/step-time.js";

const truth = { tFixMs: 4, weightStreamMs: 1.6, kLinMs: 0.002, kKvMs: 2e-5, cAttnMs: 3e-6 };

function points(): StepPoint[] {
  const out: StepPoint[] = [];
  const add = (kind: StepPoint["kind"], f: Omit<StepPoint, "kind" | "label" | "measuredMs" | "spread">) =>
    out.push({ kind, label: `${kind} ${out.length}`, ...f, measuredMs: fittedStepMs(truth, f), spread: 0 });
  for (const cached of [0, 1024]) for (const n of [128, 512, 2000]) add("prefill", prefillFeatures(n, cached));
  for (const b of [1, 8, 64])
    for (const ctx of [256, 2048])
      add("decode", { decodeSeqs: b, decodeContextTokens: b * ctx, prefillTokens: 0, prefillAttnPairs: 0 });
  add("mixed", {
    decodeSeqs: 8,
    decodeContextTokens: 8 * 512,
    prefillTokens: 1024,
    prefillAttnPairs: attnPairs(1024, 0),
  });
  return out;
}

describe("fitStepTime", () => {
  it("recovers the coefficients that made exact measurements, with its corner", () => {
    const fit = fitStepTime(points());
    expect(fit.maxAbsError).toBeLessThan(1e-6);
    for (const k of Object.keys(truth) as (keyof typeof truth)[]) expect(fit.coefficients[k]).toBeCloseTo(truth[k], 8);
  });

  it("keeps every coefficient ≥ 0 when the data would pull one below", () => {
    const { coef } = nonNegativeLeastSquares(
      [
        [1, 0],
        [1, 1],
        [1, 2],
      ],
      [3, 2, 1],
    );
    expect(coef[1]).toBe(0);
    expect(coef[0]).toBeCloseTo(2, 9);
  });
});

describe("calibratedClusterFile", () => {
  it("loads as a cluster file: the engine's KV capacity, the fitted link, the points reproduced from it", () => {
    const pts = points();
    const step = fitStepTime(pts);
    const transfers = [256, 1024, 4000].map((tokens) => ({
      label: `t${tokens}`,
      tokens,
      measuredMs: 2 + tokens * 512 * 1e-6,
      spread: 0,
    }));
    const tf = fitTransfer(transfers, 512);
    expect(tf.alphaMs).toBeCloseTo(2, 6);
    expect(tf.gbPerSecond).toBeCloseTo(1, 6);
    const facts = {
      numGpuBlocks: 1000,
      blockSize: 32,
      kvBytesPerToken: 512,
      weightBytes: 2_263_848,
      maxNumBatchedTokens: 2048,
      maxNumSeqs: 128,
    };
    const json = calibratedClusterFile({
      name: "tiny-cpu",
      description: "test",
      facts,
      step,
      points: pts,
      transfer: { fit: tf, points: transfers },
      provenance: { tool: "test" },
    });
    const { preset, links } = clusterFromFile(JSON.stringify(json), "calibrated.json");
    expect(kvCapacityTokens(preset)).toBe(32_000);
    expect([preset.maxNumBatchedTokens, preset.maxNumSeqs]).toEqual([2048, 128]);
    const link = links["tiny-cpu-nixl"]!;
    expect(kvTransferMs(1024, preset, link)).toBeCloseTo(2 + 1024 * 512 * 1e-6, 4);
    const stored = (json["provenance"] as any).step_fit.points as (StepPoint & { fittedMs: number })[];
    for (const p of stored) expect(Math.abs(fittedStepMs(preset, p) / p.fittedMs - 1)).toBeLessThan(1e-4);
  });

  it("rejects a link whose eta is not a share", () => {
    const bad = { presets: { x: { base: "h100-8b" } }, links: { l: { gbPerSecond: 1, eta: 2 } } };
    expect(() => clusterFromFile(JSON.stringify(bad), "f.json")).toThrow(/links\.l\.eta/);
  });
});
