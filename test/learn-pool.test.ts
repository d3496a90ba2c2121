// The learner on worker threads (src/learn/pool.ts): the tables and figures must not depend on how many jobs ran
// them. Through the CLI (dist/), since the worker thread is the compiled pool-worker.js. Small workloads; generous
// time limits, since the machine that runs them may be busy (the tests check results, never speed).
import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { decodeTable, encodeTable } from "../src/table/codec.js";

const BIN = new URL("../bin/dolphin.js", import.meta.url).pathname;
const dolphin = (args: string[]) => {
  const r = spawnSync(process.execPath, [BIN, ...args], { encoding: "utf8", timeout: 300_000 });
  return { code: r.status ?? -1, out: r.stdout, err: r.stderr };
};

/** A table's bytes with its creation time fixed: the one field that differs between two runs of the same job. */
const withoutCreationTime = (bytes: Uint8Array): Uint8Array => {
  const t = decodeTable(bytes);
  return encodeTable({ ...t, provenance: { ...t.provenance, created: "2000-01-01T00:00:00.000Z" } });
};

describe("dolphin train --jobs", () => {
  // the saturated load is searched with its probes on the pool (a guessed probe beside the needed one)
  for (const [reward, load] of [
    ["both", "x1"],
    ["paper", "x1"],
    ["both", "saturated"],
  ] as const) {
    it(`writes the same table with --jobs 1 and --jobs 2 (reward ${reward}, load ${load})`, () => {
      const dir = mkdtempSync(join(tmpdir(), "dolphin-jobs-"));
      const run = (jobs: number) => {
        const out = join(dir, `table-${jobs}.msgpack`);
        const r = dolphin([
          "train",
          "--workload",
          "hybrid",
          "--requests",
          "300",
          "--split",
          "2P2D",
          "--load",
          load,
          "--reward",
          reward,
          "--jobs",
          String(jobs),
          "--out",
          out,
          "--json",
        ]);
        expect(r.code, r.err).toBe(0);
        const { wall_s: _wall, out: _out, ...report } = JSON.parse(r.out);
        return { report, bytes: readFileSync(out) };
      };
      const serial = run(1);
      const parallel = run(2);
      expect(parallel.report).toEqual(serial.report);
      expect(serial.report.rounds).toBeGreaterThan(3);
      expect(Buffer.from(withoutCreationTime(parallel.bytes))).toEqual(Buffer.from(withoutCreationTime(serial.bytes)));
    }, 300_000);
  }

  it("rejects a --jobs that is not a positive integer", () => {
    const r = dolphin(["train", "--workload", "hybrid", "--split", "2P2D", "--jobs", "0", "--out", "/dev/null"]);
    expect(r.code).toBe(2); // a usage error
    expect(r.err).toContain("--jobs must be an integer");
  });
});

describe("dolphin start --jobs", () => {
  it("prints the same figures and writes the same files with --jobs 1 and --jobs 2", () => {
    const run = (jobs: number) => {
      const dir = mkdtempSync(join(tmpdir(), `dolphin-start-${jobs}-`));
      const r = dolphin(["start", "--requests", "100", "--jobs", String(jobs), "--out", dir]);
      expect(r.code, r.err).toBe(0);
      // wall times (of the search and the whole job) and the output folder are the only lines that may differ
      const figures = r.out
        .replace(/\([0-9.]+ s\)/g, "(T s)")
        .replace(/wrote [^:]*:/, "wrote OUT:")
        .replace(/ \([0-9]+ s\)\n$/, "\n");
      const files = Object.fromEntries(
        readdirSync(dir).map((f) => {
          const bytes = readFileSync(join(dir, f));
          return [f, f.endsWith(".msgpack") ? Buffer.from(withoutCreationTime(bytes)) : bytes];
        }),
      );
      return { figures, files };
    };
    const serial = run(1);
    const parallel = run(2);
    expect(parallel.figures).toEqual(serial.figures);
    expect(Object.keys(parallel.files).sort()).toEqual(Object.keys(serial.files).sort());
    for (const [f, bytes] of Object.entries(serial.files)) expect(parallel.files[f], f).toEqual(bytes);
  }, 300_000);
});
