// Table format version 3: load bounds and cluster shares. The version a table is written as, the rejections (the
// core's message equal to src/table/'s), and deciding under load through the Router on both engines, with explain's
// sentences. The vectors (spec/vectors/) cover the same ground for every host.
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { instantiateCore } from "../src/core/core.js";
import { loadTableInCore, type TableCoreExports } from "../src/core/core-table.js";
import { encodeCanonical, tableChecksum } from "../src/table/canonical.js";
import { decodeTable, encodeTable, versionNeeded } from "../src/table/codec.js";
import { describeTable } from "../src/table/describe-table.js";
import { TableError, type Table } from "../src/table/table.js";
import { coreModule, routerOn } from "./helpers.js";

const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), "..", "spec", "vectors", "tables");
const loadTable = (): Table => decodeTable(new Uint8Array(readFileSync(join(FIXTURES, "kmeans-load.msgpack"))));

/** The bytes of `t` changed by `change`, with a fresh checksum, written unvalidated (encodeTable would reject them). */
function bytesOf(t: Table, change: (m: Record<string, unknown>) => void): Uint8Array {
  const { checksum: _c, ...body } = structuredClone(t) as Table & Record<string, unknown>;
  change(body);
  return encodeCanonical({ ...body, checksum: tableChecksum(body) });
}

function problemOf(read: () => unknown): { field: string; message: string } {
  try {
    read();
  } catch (e) {
    if (e instanceof TableError) return { field: e.field, message: e.message };
    throw e;
  }
  throw new Error("accepted");
}

describe("table version 3", () => {
  it("is written only when a table holds a version-3 field", () => {
    const t = loadTable();
    expect(t.version).toBe(3);
    expect(versionNeeded(t)).toBe(3);
    const { load_bound: _l, cluster_share: _s, version: _v, checksum: _c, ...v2 } = t;
    expect(versionNeeded(v2)).toBe(2);
    expect(decodeTable(encodeTable(v2)).version).toBe(2);
    expect(decodeTable(encodeTable({ ...v2, cluster_share: t.cluster_share })).version).toBe(3);
    expect(decodeTable(encodeTable(t))).toEqual(t);
    expect(describeTable(t)).toContain("load bounds per cluster (prefill, decode), training share per cluster");
  });

  const x = instantiateCore(coreModule("release")).exports as unknown as TableCoreExports & {
    init(a: number, b: number, c: number): number;
  };
  x.init(4, 1 << 20, 1024);
  const cases: [string, (m: Record<string, unknown>) => void, string, RegExp][] = [
    ["load_bound in version 2", (m) => void (m.version = 2), "load_bound", /needs table version 3/],
    [
      "cluster_share in version 1",
      (m) => {
        m.version = 1;
        m.bits = [0, 1, 1, 0, 1, 0, 0, 1];
        delete m.fallback;
        delete m.ood_bound;
        delete m.load_bound;
      },
      "cluster_share",
      /needs table version 3 \(versions 1 and 2 have no load bounds and no cluster shares\)/,
    ],
    [
      "a negative decode bound",
      (m) => void ((m.load_bound as { decode: number[] }).decode[5] = -0.5),
      "load_bound.decode[5]",
      /expected a number ≥ 0, got -0.5/,
    ],
    ["load_bound not a map", (m) => void (m.load_bound = [1, 2]), "load_bound", /expected a map/],
    [
      "no prefill bounds",
      (m) => void delete (m.load_bound as { prefill?: unknown }).prefill,
      "load_bound.prefill",
      /missing/,
    ],
    [
      "shares not summing to 1",
      (m) => void (m.cluster_share = [0.5, 0.5, 0.5, 0, 0, 0, 0, 0]),
      "cluster_share",
      /expected shares summing to 1 \(within 0.000001\), got a sum of 1.5/,
    ],
    [
      "too few shares",
      (m) => void (m.cluster_share = [1]),
      "cluster_share",
      /expected 8 shares \(one per cluster\), got 1/,
    ],
    ["version 4", (m) => void (m.version = 4), "version", /unsupported table version 4 \(this build reads 1 to 3\)/],
  ];
  for (const [what, change, field, message] of cases) {
    it(`rejects ${what} (core and src/table/ alike)`, () => {
      const bytes = bytesOf(loadTable(), change);
      const ts = problemOf(() => decodeTable(bytes));
      expect(ts.field).toBe(field);
      expect(ts.message).toMatch(message);
      expect(problemOf(() => loadTableInCore(x, bytes))).toEqual(ts);
    });
  }
});

const WORKERS = [
  { id: "d0", role: "decode" as const },
  { id: "p0", role: "prefill" as const },
];
// an uncached 16-token prompt with osl_hat 16 lands in cluster 3 (value 0; bounds prefill 16384, decode 10000)
const tokens = Array.from({ length: 16 }, (_, i) => (i * 7919 + 3) % 50000);

for (const engine of ["wasm", "reference"] as const) {
  describe(`deciding under load (${engine} engine)`, () => {
    it("keeps the cluster's bit within its bounds and names the loads as fractions of them", () => {
      const r = routerOn(engine, loadTable(), { workers: WORKERS });
      r.setLoad("d0", { activePrefillTokens: 1000, activeDecodeTokens: 7000 });
      r.setLoad("p0", { activePrefillTokens: 8192, activeDecodeTokens: 0 });
      const e = r.explain({ tokens, oslHat: 16 });
      expect(e.decision).toMatchObject({
        reason: "cluster",
        cluster: 3,
        bit: 0,
        load: { prefill: 8192, decode: 8000 },
      });
      expect(e.why).toMatch(
        /^nearest centroid is cluster 3 \(squared distance \d+\.\d{4}\) at decode load 0\.80 and prefill load 0\.50 of its bounds, whose bit is 0: local prefill$/,
      );
    });

    it("hands a load above a bound to the fallback rule (load-out-of-range), naming the load and the bound", () => {
      const r = routerOn(engine, loadTable(), { workers: WORKERS });
      r.setLoad("d0", { activePrefillTokens: 2000, activeDecodeTokens: 10000 });
      const e = r.explain({ tokens, oslHat: 16 });
      expect(e.decision).toMatchObject({ reason: "load-out-of-range", cluster: 3, bit: 1, path: "remote" });
      expect(e.why).toBe(
        "cluster 3 is beyond the load it was trained at (decode load 12000 > bound 10000) → rule → remote because " +
          "nothing matched on the decode worker or isl − match > 512 (trtllm): remote prefill",
      );
      r.setLoad("d0", { activePrefillTokens: 0, activeDecodeTokens: 0 });
      r.setLoad("p0", { activePrefillTokens: 16385, activeDecodeTokens: 0 });
      expect(r.explain({ tokens, oslHat: 16 }).why).toMatch(/\(prefill load 16385 > bound 16384\) → rule → remote/);
    });

    it("does not check the prefill load without a prefill worker", () => {
      const r = routerOn(engine, loadTable(), { workers: [WORKERS[0]!] });
      r.setLoad("d0", { activePrefillTokens: 0, activeDecodeTokens: 5000 });
      const e = r.explain({ tokens, oslHat: 16 });
      expect(e.decision).toMatchObject({ reason: "cluster", load: { prefill: null, decode: 5000 } });
      expect(e.why).toMatch(/at decode load 0\.50 of its bound, whose bit is 0: local prefill$/);
    });
  });
}
