// Routing-table format (src/table/): known-answer fixtures written by an independent encoder
// (spec/vectors/tables/gen-tables.mjs: msgpackr + xxhash-wasm), canonical encoding, validation with field paths,
// rule defaults, and decoding that throws nothing but TableError for any bytes.

import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import fc from "fast-check";
import { Packr, unpack } from "msgpackr";
import { describe, expect, it } from "vitest";
import { tableChecksum } from "../src/table/canonical.js";
import { decodeTable, encodeTable } from "../src/table/codec.js";
import { describeTable } from "../src/table/describe-table.js";
import { defaultParams } from "../src/table/params.js";
import { ruleTable } from "../src/table/rule-table.js";
import {
  FEATURE_NAMES,
  POLICY_KINDS,
  TABLE_FORMAT,
  TABLE_VERSION,
  TableError,
  type Table,
} from "../src/table/table.js";
import { validateTable } from "../src/table/validate.js";

const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), "..", "spec", "vectors", "tables");
const fixture = (name: string): Uint8Array => new Uint8Array(readFileSync(join(FIXTURES, name)));
interface Manifest {
  valid: { file: string; kind: string; clusters: number | null; dims: number | null; checksum: string }[];
  invalid: { file: string; field: string }[];
}
const manifest = JSON.parse(readFileSync(join(FIXTURES, "manifest.json"), "utf8")) as Manifest;
const hex = (b: Uint8Array): string => Buffer.from(b).toString("hex");
const msgpackr = new Packr({ useRecords: false, variableMapSize: true, useFloat32: 0 });

/** The error a call throws; fails the test if it throws nothing or something other than TableError. */
function tableError(f: () => unknown): TableError {
  try {
    f();
  } catch (e) {
    if (e instanceof TableError) return e;
    throw new Error(`expected a TableError, got ${String(e)}`);
  }
  throw new Error("expected a TableError, got no error");
}

/** A plain, checksummed kmeans table object (not encoded), for mutation tests. */
function kmeansObject(): Record<string, unknown> {
  const body = {
    format: TABLE_FORMAT,
    version: 1,
    kind: "kmeans",
    features: ["isl", "eff_P", "eff_D", "osl_hat"],
    scaler: { mean: [7.5, 5, 6.5, 5.5], std: [1.25, 2, 1.5, 1] },
    centroids: [
      [0.5, -1, 0.25, 1.5],
      [-0.5, 1, -0.25, -1.5],
      [1.1, 1.2, 1.3, 1.4],
    ],
    bits: [0, 1, 1],
    provenance: { tool: "test", created: "2025-01-15T00:00:00Z", workload: "unit", seed: 1 },
  };
  return { ...body, checksum: tableChecksum(body) };
}

function gmmObject(): Record<string, unknown> {
  const body = {
    ...kmeansObject(),
    kind: "gmm",
    weights: [0.5, 0.25, 0.25],
    variances: [
      [1, 1, 1, 1],
      [0.5, 0.5, 0.5, 0.5],
      [2, 2, 2, 2],
    ],
  };
  return { ...body, checksum: tableChecksum(body) };
}

describe("constants", () => {
  it("names the format, version, features and kinds", () => {
    expect(TABLE_FORMAT).toBe("dolphin-routing.table");
    expect(TABLE_VERSION).toBe(3);
    expect(FEATURE_NAMES).toEqual(["isl", "eff_P", "eff_D", "osl_hat"]);
    expect(POLICY_KINDS).toHaveLength(11);
  });
});

describe("fixtures (written by gen-tables.mjs with msgpackr + xxhash-wasm)", () => {
  it.each(manifest.valid.map((v) => [v.file, v] as const))(
    "%s decodes, with the manifest's kind, K, D and checksum",
    (_name, v) => {
      const t = decodeTable(fixture(v.file));
      expect(t.kind).toBe(v.kind);
      expect(t.checksum).toBe(v.checksum);
      if (v.clusters !== null) expect(t.centroids).toHaveLength(v.clusters);
      if (v.dims !== null) expect(t.features).toHaveLength(v.dims);
    },
  );

  it.each(manifest.valid.filter((v) => !v.file.includes("minimal")).map((v) => [v.file] as const))(
    "%s re-encodes to the same bytes",
    (file) => {
      const bytes = fixture(file);
      expect(hex(encodeTable(decodeTable(bytes)))).toBe(hex(bytes));
    },
  );

  it("fills rule defaults for a table stored without params, keeping the stored checksum", () => {
    const t = decodeTable(fixture("dynamo-isl-minimal.msgpack"));
    expect(t.params).toEqual({ max_local_prefill_tokens: 2048, max_local_prefill_ratio: 0.7 });
    expect(decodeTable(encodeTable(t)).params).toEqual(t.params);
  });

  it("covers every kind", () => {
    expect(new Set(manifest.valid.map((v) => v.kind))).toEqual(new Set(POLICY_KINDS));
  });

  it("are plain msgpack: a generic decoder reads plain maps and arrays", () => {
    const t = unpack(fixture("kmeans.msgpack")) as Record<string, unknown>;
    expect(Array.isArray(t.centroids)).toBe(true);
    expect(t.format).toBe(TABLE_FORMAT);
  });

  it.each(manifest.invalid.map((v) => [v.file, v.field] as const))("%s is rejected naming %s", (file, field) => {
    const e = tableError(() => decodeTable(fixture(file)));
    expect(e.field).toBe(field);
    expect(e.message.startsWith(`table: ${field}: `)).toBe(true);
  });
});

describe("canonical encoding", () => {
  it("writes integers beyond msgpackr's 32-bit range as msgpack integers, as Python's msgpack does", () => {
    // The same bytes came from Python (msgpack.packb(canon(...)), docs/table-format.md) and from Go
    // (vmihailenco/msgpack/v5 with SetSortMapKeys and UseCompactInts, after the same canon step).
    const body = { seed: 2 ** 40, neg: -(2 ** 31) - 1, f: 2 ** 40, m: -0, x: 0.5, big: 1e300 };
    const t = { ...kmeansObject(), x_probe: body };
    const bytes = encodeTable(t as unknown as Table);
    expect(hex(bytes)).toContain(
      "86a3626967cb7e37e43c8800759ca166cf0000010000000000a16d00a36e6567d3ffffffff7fffffffa473656564cf0000010000000000a178cb3fe0000000000000",
    );
  });

  it("writes non-integral and unsafe-integral numbers as float64, never float32", () => {
    const bytes = encodeTable({ ...kmeansObject(), x_n: [0.1, 2 ** 60, 1.5] } as unknown as Table);
    expect(hex(bytes)).toContain(`93cb3fb999999999999acb${"43b0000000000000"}cb3ff8000000000000`);
  });

  it("sorts keys by code point, not by UTF-16 code unit", () => {
    const t = { ...kmeansObject(), x_keys: { "\u{10000}": 1, "\uE000": 2, a: 3 } } as unknown as Table;
    // a (61) < U+E000 (ee 80 80) < U+10000 (f0 90 80 80)
    expect(hex(encodeTable(t))).toContain("83a16103a3ee808002a4f090808001");
  });

  it("gives msgpackr's bytes for any plain value in msgpackr's integer range", () => {
    // Maps, not objects: a plain object lists integer-like keys ("0") first whatever the insertion order.
    const sortKeys = (v: unknown): unknown => {
      if (Array.isArray(v)) return v.map(sortKeys);
      if (v !== null && typeof v === "object") {
        const entries = Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)); // ASCII keys: code-unit order is code-point order
        return new Map(entries.map(([k, x]) => [k, sortKeys(x)]));
      }
      return v;
    };
    const toObject = (v: unknown): unknown =>
      v instanceof Map
        ? Object.fromEntries([...v].map(([k, x]) => [k, toObject(x)]))
        : Array.isArray(v)
          ? v.map(toObject)
          : v;
    const key = fc.string({ unit: fc.constantFrom("a", "b", "c", "x", "_", "0"), maxLength: 40 });
    const leaf = fc.oneof(
      fc.integer({ min: -(2 ** 31), max: 2 ** 32 - 1 }),
      fc
        .double({ noNaN: true, noDefaultInfinity: true })
        .filter((x) => !(Number.isSafeInteger(x) && (x >= 2 ** 32 || x < -(2 ** 31)))),
      fc.string({ maxLength: 300 }),
      fc.boolean(),
      fc.constant(null),
    );
    const value = fc.letrec((tie) => ({
      v: fc.oneof(
        { depthSize: "small" },
        leaf,
        fc.array(tie("v"), { maxLength: 20 }),
        fc.dictionary(key, tie("v"), { maxKeys: 20 }),
      ),
    })).v;
    fc.assert(
      fc.property(value, (v) => {
        const t = { ...kmeansObject(), x_v: toObject(v) } as unknown as Table;
        const ours = encodeTable(t);
        const decoded = decodeTable(ours);
        const theirs = msgpackr.pack(sortKeys(decoded));
        expect(hex(ours)).toBe(hex(theirs));
      }),
      { numRuns: 300 },
    );
  });
});

describe("docs/table-format.md", () => {
  it("shows an example table that validates and whose checksum is right", () => {
    const doc = readFileSync(join(FIXTURES, "..", "..", "..", "docs", "table-format.md"), "utf8");
    const block = /## Example[\s\S]*?```json\n([\s\S]*?)\n```/.exec(doc)?.[1];
    expect(block).toBeDefined();
    const obj = JSON.parse(block!) as Record<string, unknown>;
    const t = validateTable(obj);
    expect(tableChecksum(obj)).toBe(t.checksum);
    expect(decodeTable(encodeTable(t))).toEqual(t);
  });
});

describe("checksum", () => {
  it("ignores the checksum key and key order", () => {
    const t = kmeansObject();
    const reordered = Object.fromEntries(Object.entries(t).reverse());
    expect(tableChecksum({ ...t, checksum: "xxh64:0000000000000000" })).toBe(t.checksum);
    expect(tableChecksum(reordered)).toBe(t.checksum);
    expect(t.checksum).toMatch(/^xxh64:[0-9a-f]{16}$/);
  });

  it("changes when any value changes", () => {
    const t = kmeansObject();
    expect(tableChecksum({ ...t, bits: [1, 1, 1] })).not.toBe(t.checksum);
  });

  it("mismatch names the field and both values", () => {
    const t = kmeansObject();
    const bytes = msgpackr.pack({ ...t, checksum: "xxh64:0123456789abcdef" });
    const e = tableError(() => decodeTable(bytes));
    expect(e.field).toBe("checksum");
    expect(e.message).toContain("xxh64:0123456789abcdef");
    expect(e.message).toContain(String(t.checksum));
  });
});

describe("encodeTable / decodeTable", () => {
  it("round-trips kmeans and gmm tables", () => {
    for (const obj of [kmeansObject(), gmmObject()]) {
      const t = validateTable(obj);
      const back = decodeTable(encodeTable(t));
      expect(back).toEqual(t);
    }
  });

  it("fills in format and version and ignores a stale checksum", () => {
    const { format: _f, version: _v, ...rest } = kmeansObject();
    const t = decodeTable(encodeTable({ ...rest, checksum: "xxh64:ffffffffffffffff" } as unknown as Table));
    expect(t.format).toBe(TABLE_FORMAT);
    expect(t.checksum).toBe(kmeansObject().checksum);
  });

  it("writes typed-array input as plain msgpack arrays", () => {
    const t = validateTable(kmeansObject());
    const typed = { ...t, centroids: t.centroids!.map((r) => Float64Array.from(r)), bits: Uint8Array.from(t.bits!) };
    const bytes = encodeTable(typed as unknown as Table);
    expect(hex(bytes)).toBe(hex(encodeTable(t)));
    expect(Array.isArray((unpack(bytes) as { centroids: unknown[] }).centroids[0])).toBe(true);
  });

  it("round-trips random valid kmeans and gmm tables", () => {
    const finite = fc.double({ noNaN: true, noDefaultInfinity: true, min: -1e6, max: 1e6 });
    const arb = fc
      .record({
        k: fc.integer({ min: 1, max: 40 }),
        d: fc.integer({ min: 1, max: 4 }),
        gmm: fc.boolean(),
        seed: fc.integer(),
      })
      .chain(({ k, d, gmm, seed }) =>
        fc.record({
          kind: fc.constant(gmm ? "gmm" : "kmeans"),
          features: fc.shuffledSubarray([...FEATURE_NAMES], { minLength: d, maxLength: d }),
          scaler: fc.record({
            mean: fc.array(finite, { minLength: d, maxLength: d }),
            std: fc.array(fc.double({ min: 1e-3, max: 10, noNaN: true }), { minLength: d, maxLength: d }),
          }),
          centroids: fc.array(fc.array(finite, { minLength: d, maxLength: d }), { minLength: k, maxLength: k }),
          bits: fc.array(fc.constantFrom(0, 1), { minLength: k, maxLength: k }),
          ...(gmm
            ? {
                weights: fc.constant(Array.from({ length: k }, () => 1 / k)),
                variances: fc.array(
                  fc.array(fc.double({ min: 1e-6, max: 100, noNaN: true }), { minLength: d, maxLength: d }),
                  { minLength: k, maxLength: k },
                ),
              }
            : {}),
          provenance: fc.constant({ tool: "fc", created: "2025-01-15", workload: "random", seed }),
        }),
      );
    fc.assert(
      fc.property(arb, (t) => {
        const decoded = decodeTable(encodeTable(t as unknown as Table));
        expect(decoded.centroids).toEqual(t.centroids.map((row) => row.map((x) => x + 0))); // -0 is stored as 0
        expect(decoded.bits).toEqual(t.bits);
        expect(decoded.features).toEqual(t.features);
      }),
      { numRuns: 200 },
    );
  });

  it("keeps x_ extension keys and checksums them", () => {
    const t = decodeTable(encodeTable({ ...kmeansObject(), x_learner: { rounds: 26, eps: 0.1 } } as unknown as Table));
    expect(t.x_learner).toEqual({ rounds: 26, eps: 0.1 });
    expect(t.checksum).not.toBe(kmeansObject().checksum);
  });

  it("keeps a provenance key named __proto__ as data without touching the prototype", () => {
    const prov = JSON.parse('{"tool":"t","created":"2025-01-15","workload":"w","seed":0,"__proto__":"x"}') as Record<
      string,
      unknown
    >;
    const t = decodeTable(encodeTable({ ...kmeansObject(), provenance: prov } as unknown as Table));
    expect(Object.getOwnPropertyDescriptor(t.provenance, "__proto__")?.value).toBe("x");
    expect(Object.getPrototypeOf(t.provenance)).toBe(Object.prototype);
  });
});

describe("validation", () => {
  type Mutate = (t: Record<string, unknown>) => void;
  const cases: [string, Mutate, string, RegExp][] = [
    ["non-map top level", () => undefined, "(top level)", /expected a map/],
    [
      "wrong format",
      (t) => {
        t.format = "dolphin.table";
      },
      "format",
      /expected "dolphin-routing.table"/,
    ],
    [
      "missing format",
      (t) => {
        delete t.format;
      },
      "format",
      /missing/,
    ],
    [
      "version 0",
      (t) => {
        t.version = 0;
      },
      "version",
      /expected the integer 1, 2 or 3, got 0/,
    ],
    [
      "version 4",
      (t) => {
        t.version = 4;
      },
      "version",
      /^table: version: unsupported table version 4 \(this build reads 1 to 3\)$/,
    ],
    [
      "version as string",
      (t) => {
        t.version = "1";
      },
      "version",
      /got the string "1"/,
    ],
    [
      "unknown kind",
      (t) => {
        t.kind = "random";
      },
      "kind",
      /one of kmeans, gmm/,
    ],
    [
      "unknown top-level key",
      (t) => {
        t.policy = 1;
      },
      "policy",
      /extension keys must start with "x_"/,
    ],
    [
      "missing features",
      (t) => {
        delete t.features;
      },
      "features",
      /missing/,
    ],
    [
      "empty features",
      (t) => {
        t.features = [];
      },
      "features",
      /at least one/,
    ],
    [
      "duplicate feature",
      (t) => {
        t.features = ["isl", "isl", "eff_D", "osl_hat"];
      },
      "features[1]",
      /duplicate/,
    ],
    [
      "unknown feature",
      (t) => {
        t.features = ["isl", "eff_P", "eff_D", "osl"];
      },
      "features[3]",
      /one of isl/,
    ],
    [
      "scaler std zero",
      (t) => {
        t.scaler = { mean: [0, 0, 0, 0], std: [1, 0, 1, 1] };
      },
      "scaler.std[1]",
      /> 0/,
    ],
    [
      "scaler wrong length",
      (t) => {
        t.scaler = { mean: [0, 0, 0], std: [1, 1, 1, 1] };
      },
      "scaler.mean",
      /expected 4/,
    ],
    [
      "scaler unknown key",
      (t) => {
        t.scaler = { mean: [0, 0, 0, 0], std: [1, 1, 1, 1], min: 0 };
      },
      "scaler.min",
      /unknown key/,
    ],
    [
      "K = 0",
      (t) => {
        t.centroids = [];
        t.bits = [];
      },
      "centroids",
      /1 to 256 clusters, got 0/,
    ],
    [
      "K > 256",
      (t) => {
        t.centroids = Array.from({ length: 257 }, () => [0, 0, 0, 0]);
      },
      "centroids",
      /got 257/,
    ],
    [
      "ragged centroids",
      (t) => {
        (t.centroids as number[][])[1] = [1, 2, 3];
      },
      "centroids[1]",
      /expected 4 values/,
    ],
    [
      "centroid NaN",
      (t) => {
        (t.centroids as number[][])[2]![1] = NaN;
      },
      "centroids[2][1]",
      /^table: centroids\[2\]\[1\]: expected a finite number, got NaN$/,
    ],
    [
      "centroid Infinity",
      (t) => {
        (t.centroids as number[][])[0]![0] = Infinity;
      },
      "centroids[0][0]",
      /got Infinity/,
    ],
    [
      "centroid string",
      (t) => {
        (t.centroids as number[][])[0]![0] = "1" as unknown as number;
      },
      "centroids[0][0]",
      /got the string/,
    ],
    [
      "bits length",
      (t) => {
        t.bits = [0, 1];
      },
      "bits",
      /expected 3/,
    ],
    [
      "bit 2",
      (t) => {
        t.bits = [0, 2, 1];
      },
      "bits[1]",
      /0 \(local\) or 1 \(remote\)/,
    ],
    [
      "bit true",
      (t) => {
        t.bits = [0, true, 1];
      },
      "bits[1]",
      /got true/,
    ],
    [
      "v1 with fallback",
      (t) => {
        t.fallback = { kind: "dynamo-isl" };
      },
      "fallback",
      /needs table version 2/,
    ],
    [
      "v1 with ood_bound",
      (t) => {
        t.ood_bound = [1, 1, 1];
      },
      "ood_bound",
      /needs table version 2/,
    ],
    [
      "v2 cluster value 3",
      (t) => {
        t.version = 2;
        t.bits = [0, 3, 1];
      },
      "bits[1]",
      /^table: bits\[1\]: expected 0 \(local\), 1 \(remote\) or 2 \(rule\), got 3$/,
    ],
    [
      "v2 fallback not a map",
      (t) => {
        t.version = 2;
        t.fallback = "dynamo-isl";
      },
      "fallback",
      /expected a map/,
    ],
    [
      "v2 fallback unknown key",
      (t) => {
        t.version = 2;
        t.fallback = { kind: "dynamo-isl", rule: 1 };
      },
      "fallback.rule",
      /known in fallback: kind, params/,
    ],
    [
      "v2 fallback ppd",
      (t) => {
        t.version = 2;
        t.fallback = { kind: "ppd" };
      },
      "fallback.kind",
      /a rule kind other than ppd/,
    ],
    [
      "v2 fallback learned",
      (t) => {
        t.version = 2;
        t.fallback = { kind: "kmeans" };
      },
      "fallback.kind",
      /a rule kind other than ppd/,
    ],
    [
      "v2 fallback missing kind",
      (t) => {
        t.version = 2;
        t.fallback = {};
      },
      "fallback.kind",
      /missing/,
    ],
    [
      "v2 fallback unknown param",
      (t) => {
        t.version = 2;
        t.fallback = { kind: "trtllm", params: { x: 1 } };
      },
      "fallback.params.x",
      /unknown parameter for kind "trtllm"/,
    ],
    [
      "v2 fallback negative param",
      (t) => {
        t.version = 2;
        t.fallback = { kind: "dynamo-isl", params: { max_local_prefill_tokens: -1 } };
      },
      "fallback.params.max_local_prefill_tokens",
      /≥ 0/,
    ],
    [
      "v2 fallback required param",
      (t) => {
        t.version = 2;
        t.fallback = { kind: "dynamo-load" };
      },
      "fallback.params.prefill_busy_threshold",
      /required/,
    ],
    [
      "v2 ood_bound count",
      (t) => {
        t.version = 2;
        t.ood_bound = [1, 2];
      },
      "ood_bound",
      /expected 3 bounds \(one per cluster\), got 2/,
    ],
    [
      "v2 kmeans ood_bound negative",
      (t) => {
        t.version = 2;
        t.ood_bound = [1, -2, 3];
      },
      "ood_bound[1]",
      /≥ 0/,
    ],
    [
      "rule table with fallback",
      (t) => {
        for (const k of ["features", "scaler", "centroids", "bits"]) delete t[k];
        t.kind = "trtllm";
        t.fallback = {};
      },
      "fallback",
      /not used by kind "trtllm"/,
    ],
    [
      "kmeans with weights",
      (t) => {
        t.weights = [1, 0, 0];
      },
      "weights",
      /only by kind "gmm"/,
    ],
    [
      "learned with params",
      (t) => {
        t.params = {};
      },
      "params",
      /only rule kinds/,
    ],
    [
      "missing provenance",
      (t) => {
        delete t.provenance;
      },
      "provenance",
      /missing/,
    ],
    [
      "bad created date",
      (t) => {
        t.provenance = { tool: "t", created: "yesterday", workload: "w", seed: 0 };
      },
      "provenance.created",
      /ISO-8601/,
    ],
    [
      "fractional seed",
      (t) => {
        t.provenance = { tool: "t", created: "2025-01-15", workload: "w", seed: 1.5 };
      },
      "provenance.seed",
      /integer/,
    ],
    [
      "provenance nested extra",
      (t) => {
        t.provenance = { tool: "t", created: "2025-01-15", workload: "w", seed: 0, git: {} };
      },
      "provenance.git",
      /string or a finite number/,
    ],
    [
      "split pattern",
      (t) => {
        t.split = "3:1";
      },
      "split",
      /"3P1D"/,
    ],
    [
      "slo zero",
      (t) => {
        t.slo = { ttft_ms: 0, tpot_ms: 50 };
      },
      "slo.ttft_ms",
      /> 0/,
    ],
    [
      "osl thresholds not ascending",
      (t) => {
        t.osl_classes = { names: ["s", "m", "l"], thresholds: [1024, 128], representative: [1, 2, 3] };
      },
      "osl_classes.thresholds[1]",
      /strictly ascending/,
    ],
    [
      "osl too many classes",
      (t) => {
        t.osl_classes = { names: Array.from({ length: 17 }, (_, i) => `c${i}`), thresholds: [], representative: [] };
      },
      "osl_classes.names",
      /1 to 16/,
    ],
    [
      "osl representative negative",
      (t) => {
        t.osl_classes = { names: ["s"], thresholds: [], representative: [-1] };
      },
      "osl_classes.representative[0]",
      /≥ 0/,
    ],
    [
      "extension NaN",
      (t) => {
        t.x_probe = { a: [NaN] };
      },
      "x_probe.a[0]",
      /finite number/,
    ],
    [
      "bad checksum form",
      (t) => {
        t.checksum = "md5:abc";
      },
      "checksum",
      /16 lowercase hex/,
    ],
  ];
  it.each(cases)("rejects %s", (_name, mutate, field, message) => {
    const t = kmeansObject();
    mutate(t);
    const e = tableError(() => validateTable(_name === "non-map top level" ? [t] : t));
    expect(e.field).toBe(field);
    expect(e.message).toMatch(message);
    expect(e.message.startsWith(`table: ${field}: `)).toBe(true);
  });

  const gmmCases: [string, Mutate, string, RegExp][] = [
    [
      "weights not summing to 1",
      (t) => {
        t.weights = [0.5, 0.25, 0.2];
      },
      "weights",
      /summing to 1/,
    ],
    [
      "zero weight",
      (t) => {
        t.weights = [0.75, 0.25, 0];
      },
      "weights[2]",
      /> 0/,
    ],
    [
      "negative variance",
      (t) => {
        (t.variances as number[][])[1]![2] = -1;
      },
      "variances[1][2]",
      /> 0/,
    ],
    [
      "missing variances",
      (t) => {
        delete t.variances;
      },
      "variances",
      /missing/,
    ],
    [
      "variances wrong K",
      (t) => {
        t.variances = [[1, 1, 1, 1]];
      },
      "variances",
      /expected 3 rows/,
    ],
  ];
  it.each(gmmCases)("rejects a gmm table with %s", (_name, mutate, field, message) => {
    const t = gmmObject();
    mutate(t);
    const e = tableError(() => validateTable(t));
    expect(e.field).toBe(field);
    expect(e.message).toMatch(message);
  });

  it("accepts weights summing to 1 within 1e-6", () => {
    expect(() => validateTable({ ...gmmObject(), weights: [0.5, 0.25, 0.2500009] })).not.toThrow();
  });

  it("rejects rule-kind params: unknown, negative, missing required, ppd shapes", () => {
    const base = ruleTable("always-local");
    const rule = (kind: string, params: unknown): TableError =>
      tableError(() => validateTable({ ...base, kind, params }));
    expect(rule("trtllm", { max_local_prefill_len: 1 }).field).toBe("params.max_local_prefill_len");
    expect(rule("trtllm", { max_local_prefill_length: -1 }).message).toMatch(/≥ 0/);
    expect(rule("dynamo-load", { prefill_busy_threshold: 0.8 }).field).toBe("params.max_num_batched_tokens");
    expect(rule("dynamo-load", { prefill_busy_threshold: 0, max_num_batched_tokens: 1 }).message).toMatch(/> 0/);
    expect(rule("always-local", { x: 1 }).message).toMatch(/known: none/);
    expect(rule("ppd", {}).field).toBe("params.bits");
    const bits = Array.from({ length: 3 }, () => Array.from({ length: 9 }, () => Array.from({ length: 10 }, () => 0)));
    expect(() => validateTable({ ...base, kind: "ppd", params: { bits } })).not.toThrow();
    expect(rule("ppd", { bits: bits.slice(0, 2) }).message).toMatch(/expected 3 context classes, got 2/);
    expect(rule("ppd", { bits: [bits[0], bits[1]!.slice(1), bits[2]] }).field).toBe("params.bits[1]");
    expect(rule("ppd", { bits, qps_levels: [1, 2] }).field).toBe("params.bits[0][0]");
    expect(rule("ppd", { bits, ratio_edges: [1, 2, 3] }).message).toMatch(/expected 8 values/);
    expect(rule("ppd", { bits, context_edges: [4096, 512] }).field).toBe("params.context_edges[1]");
    expect(rule("ppd", { bits, qps_levels: [0, 1] }).field).toBe("params.qps_levels[0]");
  });

  it("rejects learned-table fields on rule tables, and allows a features list there", () => {
    const base = ruleTable("trtllm");
    expect(tableError(() => validateTable({ ...base, centroids: [[0]] })).field).toBe("centroids");
    expect(validateTable({ ...base, features: ["isl"] }).features).toEqual(["isl"]);
  });
});

describe("ruleTable and defaultParams", () => {
  it("gives the reference-systems defaults", () => {
    expect(defaultParams("dynamo-isl")).toEqual({ max_local_prefill_tokens: 2048, max_local_prefill_ratio: 0.7 });
    expect(defaultParams("dynamo-load")).toEqual({});
    expect(defaultParams("dynamo-legacy")).toEqual({ max_local_prefill_length: 1000, max_prefill_queue_size: 2 });
    expect(defaultParams("trtllm")).toEqual({ max_local_prefill_length: 0 });
    expect(defaultParams("llm-d")).toEqual({ non_cached_tokens: 0, prompt_tokens: 0 });
    expect(defaultParams("always-remote")).toEqual({});
    expect(defaultParams("kmeans")).toEqual({});
    expect(defaultParams("ppd")).toEqual({
      context_edges: [512, 4096],
      ratio_edges: [0.125, 0.25, 0.5, 1, 2, 4, 8, 16],
      qps_levels: [0.5, 1, 2, 4, 6, 8, 10, 12, 16, 20],
      w_ttft: 1,
      w_tpot: 1,
    });
  });

  it("returns copies the caller may change", () => {
    (defaultParams("ppd").context_edges as number[]).push(9999);
    expect(defaultParams("ppd").context_edges).toEqual([512, 4096]);
  });

  it("builds a checksummed rule table with defaults and rule provenance", () => {
    const t = ruleTable("dynamo-isl", { max_local_prefill_ratio: 0.5 }, { split: "3P1D" });
    expect(t.params).toEqual({ max_local_prefill_tokens: 2048, max_local_prefill_ratio: 0.5 });
    expect(t.provenance).toMatchObject({ tool: "dolphin-routing", workload: "(rule)", seed: 0 });
    expect(t.split).toBe("3P1D");
    expect(t.checksum).toBe(tableChecksum(t));
    expect(decodeTable(encodeTable(t))).toEqual(t);
  });

  it("requires dynamo-load's thresholds and ppd's bits", () => {
    expect(tableError(() => ruleTable("dynamo-load")).field).toBe("params.prefill_busy_threshold");
    expect(ruleTable("dynamo-load", { prefill_busy_threshold: 0.8, max_num_batched_tokens: 8192 }).params).toEqual({
      prefill_busy_threshold: 0.8,
      max_num_batched_tokens: 8192,
    });
    expect(tableError(() => ruleTable("ppd")).field).toBe("params.bits");
  });

  it("refuses learned kinds", () => {
    expect(tableError(() => ruleTable("kmeans")).field).toBe("kind");
  });
});

describe("describeTable", () => {
  it("summarizes a learned table", () => {
    const s = describeTable(decodeTable(fixture("kmeans.msgpack")));
    expect(s).toContain("K = 8");
    expect(s).toContain("isl, eff_P, eff_D, osl_hat");
    expect(s).toContain("3P1D");
    expect(s).toContain("TTFT 2000 ms");
    expect(s).toContain("gen-tables.mjs");
  });

  it("states each rule", () => {
    expect(describeTable(ruleTable("dynamo-isl"))).toContain("eff_D < 2048 and eff_D / max(isl, 1) < 0.7");
    expect(describeTable(decodeTable(fixture("ppd.msgpack")))).toMatch(/3×9×10/);
  });
});

describe("decodeTable on hostile bytes", () => {
  const valid = fixture("kmeans.msgpack");

  it("names (bytes) for empty, truncated and trailing input", () => {
    expect(tableError(() => decodeTable(new Uint8Array())).field).toBe("(bytes)");
    expect(tableError(() => decodeTable(valid.subarray(0, 100))).message).toMatch(
      /^table: \(bytes\): truncated or corrupt/,
    );
    const trailing = new Uint8Array([...valid, 0]);
    expect(tableError(() => decodeTable(trailing)).field).toBe("(bytes)");
    expect(tableError(() => decodeTable("abc" as unknown as Uint8Array)).field).toBe("(bytes)");
  });

  it("rejects bin, ext, non-string keys and integers beyond 2^53", () => {
    const t = kmeansObject();
    const withX = (x: unknown): Uint8Array => msgpackr.pack({ ...t, x_probe: x });
    expect(tableError(() => decodeTable(withX(new Uint8Array([1, 2])))).message).toMatch(/x_probe: msgpack bin values/);
    expect(tableError(() => decodeTable(withX(new Date(0)))).message).toMatch(/x_probe: msgpack extension values/);
    expect(tableError(() => decodeTable(withX(new Map([[1, 2]])))).message).toMatch(
      /x_probe: map key 1 is not a string/,
    );
    expect(tableError(() => decodeTable(withX(2n ** 60n))).message).toMatch(
      /x_probe: integer 1152921504606846976 is outside/,
    );
  });

  it("reads 64-bit-encoded small integers (as Go encoders may write them) as numbers", () => {
    const t = kmeansObject();
    const bytes = msgpackr.pack({ ...t, x_int: 5n }); // msgpackr writes bigint as int64 (d3)
    expect(hex(bytes)).toContain("d30000000000000005");
    const e = tableError(() => decodeTable(bytes)); // decodes, validates, then the checksum (which lacks x_int) differs
    expect(e.field).toBe("checksum");
  });

  it("rejects nesting deeper than the limit", () => {
    const deep = new Uint8Array([0x81, 0xa3, 0x78, 0x5f, 0x61, ...new Array(100_000).fill(0x91), 0x00]);
    expect(tableError(() => decodeTable(deep))).toBeInstanceOf(TableError);
  });

  it("throws only TableError for random bytes", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 400 }), (bytes) => {
        tableError(() => decodeTable(bytes));
      }),
      { numRuns: 2000 },
    );
  });

  it("throws only TableError for random bytes after a valid map header", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), (tail) => {
        tableError(() => decodeTable(new Uint8Array([0x8f, ...tail])));
      }),
      { numRuns: 2000 },
    );
  });

  it("throws TableError for every truncation of a valid table", () => {
    for (let n = 0; n < valid.length; n++) tableError(() => decodeTable(valid.subarray(0, n)));
  });

  it("throws TableError for every single-bit flip of a valid table", () => {
    for (const file of ["kmeans.msgpack", "gmm.msgpack", "ppd.msgpack"]) {
      const bytes = fixture(file);
      for (let i = 0; i < bytes.length * 8; i++) {
        const flipped = bytes.slice();
        flipped[i >> 3]! ^= 1 << (i & 7);
        tableError(() => decodeTable(flipped));
      }
    }
  });
});
