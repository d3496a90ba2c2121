// `dolphin eval --drift-guard` (src/cli/eval-guard.ts) and the simulation under it (src/sim/drift-guard-run.ts): the
// simulator routes each request through the serving drift guard and reports each outcome at its finish time.
import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { parseGuardOptions } from "../src/cli/eval-guard.js";
import { prepare } from "../src/learn/prepare.js";
import { SimEnvironment } from "../src/learn/sim-environment.js";
import { simulateWithDriftGuard } from "../src/sim/drift-guard-run.js";
import { parseSlo } from "../src/sim/metrics.js";
import { PRESETS } from "../src/sim/model-presets.js";
import { atScale } from "../src/sim/saturation.js";
import { parseSplit } from "../src/sim/split.js";
import { simulate } from "../src/sim/simulator.js";
import { loadWorkload } from "../src/sim/workload-files.js";
import { decodeTable, encodeTable } from "../src/table/codec.js";
import { CLUSTER_RULE, type Table } from "../src/table/table.js";
import { coreModule } from "./helpers.js";

const BASE = { preset: PRESETS["h100-8b"]!, split: parseSplit("2P2D"), slo: parseSlo("2000,50") };
const SCALE = 4;
const humaneval = (seed: number, requests: number) =>
  atScale(loadWorkload("humaneval", "auto", { seed, requests }), SCALE);

/** A k-means table learned on humaneval (prepare's clusters and initial values) with its training shares. */
let table: Table;
beforeAll(async () => {
  const p = await prepare(new SimEnvironment(humaneval(11, 800), BASE), { k: 8, seed: 11 });
  const n = p.clusterSizes.reduce((a, b) => a + b, 0);
  const share = p.clusterSizes.map((s) => s / n);
  share[share.length - 1] = 1 - share.slice(0, -1).reduce((a, b) => a + b, 0);
  const { checksum: _, version: _v, ...t } = p.makeTable(p.initial);
  table = decodeTable(encodeTable({ ...t, cluster_share: share })); // version 3, checksum computed
}, 60_000);

describe("the simulator through the drift guard", () => {
  it("routes exactly as without it when the guard has nothing to do (no control share, no mix guard)", () => {
    const w = humaneval(12, 300);
    const config = { ...BASE, table, module: coreModule("release") };
    const plain = simulate(w, config);
    const guarded = simulateWithDriftGuard(w, config, { controlShare: 0 }, false);
    expect(guarded.result.records).toEqual(plain.records);
    expect(guarded.result.summary).toEqual(plain.summary);
    expect(guarded.guard).toMatchObject({ mixGuard: false, reverts: 0, handovers: 0, timeline: [] });
  });

  it("stays quiet on the training family and hands every learned cluster over on another family's mix", () => {
    const learned = table.bits!.filter((v) => v !== CLUSTER_RULE).length;
    expect(learned).toBeGreaterThan(0);
    const config = { ...BASE, table, module: coreModule("release") };
    const same = simulateWithDriftGuard(humaneval(12, 600), config);
    expect(same.guard).toMatchObject({ mixGuard: true, mixAlarms: 0, handovers: 0 });
    const other = simulateWithDriftGuard(
      atScale(loadWorkload("hybrid", "auto", { seed: 12, requests: 400 }), 1),
      config,
    );
    expect(other.guard.mixAlarms).toBe(1);
    expect(other.guard.handovers).toBe(learned);
    expect(other.guard.timeline[0]).toMatchObject({ type: "mix-alarm", cluster: -1 });
    expect(other.guard.timeline.filter((e) => e.type === "handover")).toHaveLength(learned);
    expect(other.guard.routed.handedOver).toBeGreaterThan(0);
    const routed = other.guard.routed;
    expect(routed.learned + routed.control + routed.handedOver + routed.reverted).toBeLessThanOrEqual(400);
  });
});

describe("--guard-options", () => {
  it("reads the drift guard's and the mix guard's options and names a bad one", () => {
    expect(parseGuardOptions("controlShare=0.2,windowS=120,mixWindow=100,psiAlarm=0.5")).toEqual({
      drift: { controlShare: 0.2, windowS: 120 },
      mix: { window: 100, psiAlarm: 0.5 },
    });
    expect(parseGuardOptions("mix=off").mix).toBe(false);
    expect(parseGuardOptions(undefined)).toEqual({ drift: {}, mix: {} });
    expect(() => parseGuardOptions("speed=3")).toThrow(/unknown option speed/);
    expect(() => parseGuardOptions("windowS=soon")).toThrow(/windowS needs a number/);
  });
});

const BIN = new URL("../bin/dolphin.js", import.meta.url).pathname;
const dolphin = (args: string[]) => {
  const r = spawnSync(process.execPath, [BIN, ...args], { encoding: "utf8", timeout: 120_000 });
  return { code: r.status ?? -1, out: r.stdout, err: r.stderr };
};

describe("dolphin eval --drift-guard", () => {
  it("adds the guarded run (dolphin+guard) and the guard's report to the evaluation", () => {
    const file = join(mkdtempSync(join(tmpdir(), "dolphin-eval-guard-")), "table.msgpack");
    writeFileSync(file, encodeTable(table));
    const common = ["eval", "--workload", "hybrid", "--requests", "300", "--cluster", "h100-8b", "--split", "2P2D"];
    const args = [...common, "--slo", "2000,50", "--load", "x1", "--table", file, "--policies", "dolphin,dynamo-isl"];
    const r = dolphin([...args, "--drift-guard", "--json"]);
    expect(r.err).toBe("");
    const out = JSON.parse(r.out);
    expect(Object.keys(out.policies).sort()).toEqual(["dolphin", "dolphin+guard", "dynamo-isl"]);
    expect(out.policies["dolphin+guard"].slo_attainment).toBeGreaterThanOrEqual(0);
    expect(out.drift_guard).toMatchObject({ mixGuard: true, mixAlarms: 1, reverts: 0 });
    expect(out.drift_guard.handovers).toBeGreaterThan(0);
    expect(out.drift_guard.options).toMatchObject({ controlShare: 0.05, windowS: 600 });
    const text = dolphin([...args, "--drift-guard", "--guard-options", "controlShare=0.1"]);
    expect(text.out).toMatch(/^dolphin\+guard +attainment/m);
    expect(text.out).toMatch(/^drift guard: control 10%, window 600 s.*mix-shift guard on \(1 alarm\)$/m);
    expect(text.out).toMatch(/^ {2}reverts 0, hand-overs \d+, hand-backs \d+/m);
    expect(dolphin([...args, "--guard-options", "controlShare=0.1"]).err).toMatch(
      /--guard-options needs --drift-guard/,
    );
  }, 120_000);
});
