// The core's table decoder (assembly/table/, src/core/core-table.ts) against the TypeScript decoder (src/table/codec.ts
// decodeTable + src/table/staging.ts stageTable), which stays the oracle: every table vector, generated valid tables
// with perturbations (missing, extra and mistyped keys, out-of-range values, non-canonical encodings), and
// flipped, truncated and extended bytes. Same accept/reject, same field and message, bit-identical staging;
// nothing ever traps and memory never grows. Both builds: core.debug.wasm (assertions on) and core.wasm.

import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import fc from "fast-check";
import { Packr, unpack } from "msgpackr";
import { describe, expect, it } from "vitest";
import { instantiateCore } from "../src/core/core.js";
import { loadTableInCore, type CoreTableInfo, type TableCoreExports } from "../src/core/core-table.js";
import { ErrorCode } from "../src/generated/abi.js";
import { stageTable } from "../src/table/staging.js";
import { tableChecksum } from "../src/table/canonical.js";
import { decodeTable, encodeTable } from "../src/table/codec.js";
import { ruleTable } from "../src/table/rule-table.js";
import { TableError, type Table } from "../src/table/table.js";
import { coreModule } from "./helpers.js";

const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), "..", "spec", "vectors", "tables");
const fixture = (name: string): Uint8Array => new Uint8Array(readFileSync(join(FIXTURES, name)));
interface Manifest {
  valid: { file: string; kind: string; checksum: string }[];
  invalid: { file: string; field: string }[];
}
const manifest = JSON.parse(readFileSync(join(FIXTURES, "manifest.json"), "utf8")) as Manifest;
const msgpackr = new Packr({ useRecords: false, variableMapSize: true, useFloat32: 0 });

interface CoreExports extends TableCoreExports {
  init(maxWorkers: number, maxInputBytes: number, indexBlocks: number): number;
  stagingPtr(): number;
  tableKind(): number;
  tableK(): number;
  tableDims(): number;
}

function newCore(flavour: "debug" | "release"): CoreExports {
  const x = instantiateCore(coreModule(flavour)).exports as unknown as CoreExports;
  expect(x.init(4, 1 << 20, 1024)).toBe(0);
  return x;
}

/** A table's output-length classes: names and representative lengths (empty when it has none). */
interface OslClasses {
  names: string[];
  representative: number[];
}
type Outcome =
  | {
      ok: true;
      kind: number;
      k: number;
      dims: number;
      oslAt: number;
      staged: Float64Array;
      classes: OslClasses;
      info?: CoreTableInfo;
    }
  | { ok: false; field: string; message: string };

/** The oracle: src/table/codec.ts decodes, src/table/staging.ts stages. */
// msgpackr decodes some extension types itself (BigInt, Error, Set, RegExp, typed arrays, structured-clone refs,
// bundled strings), reading their payload as it likes; the core, a plain-msgpack reader, rejects them as unknown
// "(bytes)" errors. Both reject such a table; only the field named differs, so the fuzz compares accept/reject there.
const MSGPACKR_OWN_EXTENSIONS = new Set([0x42, 0x62, 0x65, 0x69, 0x70, 0x73, 0x74, 0x78]);
function msgpackrOwnExtension(o: Outcome): boolean {
  const m = !o.ok && o.field === "(bytes)" ? /Unknown extension type (\d+)/.exec(o.message) : null;
  return m !== null && MSGPACKR_OWN_EXTENSIONS.has(Number(m[1]));
}

function viaTypeScript(bytes: Uint8Array): Outcome {
  let table: Table;
  try {
    table = decodeTable(bytes);
  } catch (e) {
    if (e instanceof TableError) return { ok: false, field: e.field, message: e.message };
    throw e;
  }
  const s = stageTable(table);
  // the core's k for PPD is its cell count, as setTable makes it
  const k = s.kind === 10 ? 3 * 9 * (table.params!["qps_levels"] as number[]).length : s.k;
  // −0 reads as 0, as the core stages numbers (numberValue)
  const classes = {
    names: table.osl_classes?.names ?? [],
    representative: (table.osl_classes?.representative ?? []).map((v) => (v === 0 ? 0 : v)),
  };
  return { ok: true, kind: s.kind, k, dims: s.dims, oslAt: s.oslAt, staged: s.staged, classes };
}

/** The core decodes and stages; the outcome is read back from its exports and memory. */
function viaCore(x: CoreExports, bytes: Uint8Array): Outcome {
  const before = x.memory.buffer.byteLength;
  let info: CoreTableInfo;
  try {
    info = loadTableInCore(x, bytes);
  } catch (e) {
    expect(x.memory.buffer.byteLength).toBe(before);
    if (e instanceof TableError) return { ok: false, field: e.field, message: e.message };
    throw e;
  }
  expect(x.memory.buffer.byteLength).toBe(before);
  const staged = new Float64Array(x.memory.buffer, x.stagingPtr(), info.stagedLength).slice();
  const classes = { names: info.oslClassNames, representative: info.oslClassRepresentative };
  return {
    ok: true,
    kind: x.tableKind(),
    k: x.tableK(),
    dims: x.tableDims(),
    oslAt: info.oslAt,
    staged,
    classes,
    info,
  };
}

/** Bit-for-bit equality of two staged arrays (−0 ≠ 0, NaN payloads compared). */
function sameBits(a: Float64Array, b: Float64Array): boolean {
  if (a.length !== b.length) return false;
  const x = new BigUint64Array(a.buffer, a.byteOffset, a.length);
  const y = new BigUint64Array(b.buffer, b.byteOffset, b.length);
  return x.every((v, i) => v === y[i]);
}

function expectSameOutcome(x: CoreExports, bytes: Uint8Array): Outcome {
  const want = viaTypeScript(bytes);
  const got = viaCore(x, bytes);
  if (!want.ok || !got.ok) {
    expect(got.ok ? "accepted" : { field: got.field, message: got.message }).toEqual(
      want.ok ? "accepted" : { field: want.field, message: want.message },
    );
    return got;
  }
  expect({ kind: got.kind, k: got.k, dims: got.dims, oslAt: got.oslAt, classes: got.classes }).toEqual({
    kind: want.kind,
    k: want.k,
    dims: want.dims,
    oslAt: want.oslAt,
    classes: want.classes,
  });
  if (!sameBits(got.staged, want.staged)) expect(Array.from(got.staged)).toEqual(Array.from(want.staged));
  expect(sameBits(got.staged, want.staged)).toBe(true);
  return got;
}

// ---- generated tables ------------------------------------------------------------------------------------------

const FEATURES = ["isl", "eff_P", "eff_D", "osl_hat"];
const OSL_FEATURES = ["log_isl", "prefix_reuse", "log_turn", "log_prev_output", "log_max_tokens", "has_max_tokens"];
const finite = fc.oneof(
  fc.double({ noNaN: true, noDefaultInfinity: true, min: -1e6, max: 1e6 }),
  fc.integer({ min: -1000, max: 1000 }),
);
const positive = fc.oneof(fc.double({ noNaN: true, min: 1e-3, max: 1e4 }), fc.integer({ min: 1, max: 100000 }));
const nonNegative = fc.oneof(positive, fc.constant(0));
const bit = fc.constantFrom(0, 1);
const ascending = (values: number[]): number[] => [...new Set(values)].sort((a, b) => a - b);

const provenance = fc
  .record(
    {
      tool: fc.constantFrom("dolphin-routing", "gen", "ü"),
      created: fc.constantFrom(
        "2025-01-15T00:00:00Z",
        "2025-01-15",
        "2025-01-15T12:30:45.123+05:30",
        "2025-01-15 12:30",
        "2025-12-31t23:59:60,5-0800",
      ),
      workload: fc.string({ maxLength: 8 }),
      seed: fc.oneof(fc.integer(), fc.constant(4294967295), fc.constant(-(2 ** 40))),
    },
    { requiredKeys: ["tool", "created", "workload", "seed"] },
  )
  .chain((p) =>
    fc
      .record(
        { notes: fc.string({ maxLength: 6 }), gpu: fc.oneof(fc.string({ maxLength: 4 }), finite) },
        { requiredKeys: [] },
      )
      .map((extra) => ({ ...p, ...extra })),
  );

const learned = fc
  .tuple(fc.integer({ min: 1, max: 4 }), fc.integer({ min: 1, max: 6 }), fc.constantFrom("kmeans", "gmm"))
  .chain(([d, k, kind]) =>
    fc
      .record({
        features: fc.shuffledSubarray(FEATURES, { minLength: d, maxLength: d }),
        scaler: fc.record({
          mean: fc.array(finite, { minLength: d, maxLength: d }),
          std: fc.array(positive, { minLength: d, maxLength: d }),
        }),
        centroids: fc.array(fc.array(finite, { minLength: d, maxLength: d }), { minLength: k, maxLength: k }),
        bits: fc.array(bit, { minLength: k, maxLength: k }),
        weights: fc.array(fc.integer({ min: 1, max: 1000 }), { minLength: k, maxLength: k }),
        variances: fc.array(fc.array(positive, { minLength: d, maxLength: d }), { minLength: k, maxLength: k }),
        // version 2: 0 = none (a version-1 table), 1 = rule clusters and a fallback, 2 = those and bounds
        guard: fc.constantFrom(0, 1, 2),
        values: fc.array(fc.constantFrom(0, 1, 2), { minLength: k, maxLength: k }),
        fallback: fc.option(
          fc.oneof(
            fc.record(
              {
                kind: fc.constant("dynamo-isl"),
                params: fc.record({ max_local_prefill_tokens: nonNegative }, { requiredKeys: [] }),
              },
              { requiredKeys: ["kind"] },
            ),
            fc.record({
              kind: fc.constant("dynamo-load"),
              params: fc.record({ prefill_busy_threshold: positive, max_num_batched_tokens: positive }),
            }),
            fc.record({ kind: fc.constantFrom("trtllm", "always-local", "always-remote", "llm-d", "dynamo-legacy") }),
          ),
          { nil: undefined },
        ),
        bounds: fc.array(kind === "kmeans" ? nonNegative : finite, { minLength: k, maxLength: k }),
      })
      .map(({ guard, values, fallback, bounds, ...t }) => {
        const v2 =
          guard === 0
            ? {}
            : {
                version: 2,
                bits: values,
                ...(fallback ? { fallback } : {}),
                ...(guard === 2 ? { ood_bound: bounds } : {}),
              };
        if (kind === "kmeans")
          return { kind, features: t.features, scaler: t.scaler, centroids: t.centroids, bits: t.bits, ...v2 };
        const sum = t.weights.reduce((a, b) => a + b, 0);
        return { kind, ...t, weights: t.weights.map((w) => w / sum), ...v2 };
      }),
  );

const ppdParams = fc
  .record(
    {
      context_edges: fc
        .tuple(fc.integer({ min: 0, max: 1000 }), fc.integer({ min: 1, max: 5000 }))
        .map(([a, b]) => [a, a + b]),
      ratio_edges: fc.constant([0.125, 0.25, 0.5, 1, 2, 4, 8, 16]),
      w_ttft: nonNegative,
      w_tpot: nonNegative,
    },
    { requiredKeys: [] },
  )
  .chain((p) =>
    fc
      .array(positive, { minLength: 1, maxLength: 5 })
      .map(ascending)
      .chain((qps) =>
        fc
          .array(
            fc.array(fc.array(bit, { minLength: qps.length, maxLength: qps.length }), { minLength: 9, maxLength: 9 }),
            { minLength: 3, maxLength: 3 },
          )
          .map((bits) => ({ ...p, qps_levels: qps, bits })),
      ),
  );

const rule = fc
  .oneof(
    fc.record({
      kind: fc.constant("dynamo-isl"),
      params: fc.record(
        { max_local_prefill_tokens: nonNegative, max_local_prefill_ratio: nonNegative },
        { requiredKeys: [] },
      ),
    }),
    fc.record({
      kind: fc.constant("dynamo-load"),
      params: fc.record({ prefill_busy_threshold: positive, max_num_batched_tokens: positive }),
    }),
    fc.record({
      kind: fc.constant("dynamo-legacy"),
      params: fc.record(
        { max_local_prefill_length: nonNegative, max_prefill_queue_size: nonNegative },
        { requiredKeys: [] },
      ),
    }),
    fc.record({
      kind: fc.constant("trtllm"),
      params: fc.record({ max_local_prefill_length: nonNegative }, { requiredKeys: [] }),
    }),
    fc.record({
      kind: fc.constant("llm-d"),
      params: fc.record({ non_cached_tokens: nonNegative, prompt_tokens: nonNegative }, { requiredKeys: [] }),
    }),
    fc.record({ kind: fc.constantFrom("always-local", "always-remote") }),
    fc.record({ kind: fc.constant("ppd"), params: ppdParams }),
  )
  .chain((t) =>
    fc.record({ features: fc.shuffledSubarray(FEATURES) }, { requiredKeys: [] }).map((f) => ({ ...t, ...f })),
  );

const osl = fc.tuple(fc.integer({ min: 1, max: 4 }), fc.integer({ min: 1, max: 6 })).chain(([c, f]) =>
  fc.record(
    {
      osl_classes: fc.record({
        names: fc.uniqueArray(fc.string({ minLength: 1, maxLength: 5 }), { minLength: c, maxLength: c }),
        thresholds: fc
          .uniqueArray(fc.integer({ min: 1, max: 100000 }), { minLength: c - 1, maxLength: c - 1 })
          .map(ascending),
        representative: fc.array(nonNegative, { minLength: c, maxLength: c }),
      }),
      osl_model: fc.record({
        kind: fc.constant("logistic"),
        features: fc.shuffledSubarray(OSL_FEATURES, { minLength: f, maxLength: f }),
        mean: fc.array(finite, { minLength: f, maxLength: f }),
        std: fc.array(positive, { minLength: f, maxLength: f }),
        weights: fc.array(fc.array(finite, { minLength: f, maxLength: f }), { minLength: c, maxLength: c }),
        bias: fc.array(finite, { minLength: c, maxLength: c }),
      }),
    },
    { requiredKeys: ["osl_classes"] },
  ),
);

const extension = fc.jsonValue({ maxDepth: 3 });

const tableInput = fc
  .record({
    body: fc.oneof(learned, rule),
    osl: fc.option(osl),
    split: fc.option(fc.constantFrom("3P1D", "12P4D", null), { nil: undefined }),
    slo: fc.option(fc.oneof(fc.constant(null), fc.record({ ttft_ms: positive, tpot_ms: positive })), {
      nil: undefined,
    }),
    provenance,
    x: fc.option(extension, { nil: undefined }),
  })
  .map(({ body, osl, split, slo, provenance, x }) => ({
    ...body,
    ...(osl ?? {}),
    ...(split === undefined ? {} : { split }),
    ...(slo === undefined ? {} : { slo }),
    provenance,
    ...(x === undefined ? {} : { x_ext: x }),
  }));

// ---- perturbations ---------------------------------------------------------------------------------------------

type Plain = Record<string, unknown> | unknown[];
const ODD_VALUES: unknown[] = [
  null,
  true,
  false,
  NaN,
  Infinity,
  -Infinity,
  -1,
  0,
  -0,
  0.5,
  1,
  2,
  3,
  1e300,
  2 ** 53,
  2 ** 60,
  -(2 ** 40),
  "",
  "x",
  "kmeans",
  "isl",
  "2025-13-01",
  "3P1D",
  [],
  [1],
  [0, 1, 2],
  [[1, 2]],
  {},
  { a: 1 },
  5n,
  2n ** 60n,
  -(2n ** 62n),
  new Uint8Array([1, 2]),
  undefined,
  ["isl", "isl"],
  [3, 2, 1],
];
const ODD_KEYS = [
  "bogus",
  "x_extra",
  "__proto__",
  "0",
  "17",
  "é",
  "mean",
  "names",
  "kind",
  "bits",
  "params",
  "checksum",
];

/** Every container and key/index in `v` (for picking a place to perturb). */
function places(v: unknown, out: [Plain, string | number][] = []): [Plain, string | number][] {
  if (Array.isArray(v))
    v.forEach((x, i) => {
      out.push([v, i]);
      places(x, out);
    });
  else if (v && typeof v === "object" && !(v instanceof Uint8Array)) {
    for (const key of Object.keys(v)) {
      out.push([v as Plain, key]);
      places((v as Record<string, unknown>)[key], out);
    }
  }
  return out;
}

/** Rebuilds every map with its keys in a shuffled order (msgpackr then writes them non-canonically). */
function reorder(v: unknown, rnd: () => number): unknown {
  if (Array.isArray(v)) return v.map((x) => reorder(x, rnd));
  if (v && typeof v === "object" && !(v instanceof Uint8Array)) {
    const entries = Object.entries(v).sort(() => rnd() - 0.5);
    const out: Record<string, unknown> = {};
    for (const [k, x] of entries)
      Object.defineProperty(out, k, { value: reorder(x, rnd), enumerable: true, writable: true, configurable: true });
    return out;
  }
  return v;
}

interface Perturbation {
  op: "delete" | "set" | "add" | "none";
  at: number;
  value: number;
  key: number;
  rechecksum: boolean;
  seed: number;
}
const perturbation = fc.record({
  op: fc.constantFrom("delete", "set", "add", "none"),
  at: fc.nat(),
  value: fc.nat(),
  key: fc.nat(),
  rechecksum: fc.boolean(),
  seed: fc.integer(),
});

function perturb(table: Record<string, unknown>, p: Perturbation): Uint8Array {
  const obj = unpack(encodeTable(table as unknown as Parameters<typeof encodeTable>[0])) as Record<string, unknown>;
  const all = places(obj);
  const [container, key] = all[p.at % all.length]!;
  const value = ODD_VALUES[p.value % ODD_VALUES.length];
  if (p.op === "delete") {
    if (Array.isArray(container)) container.splice(key as number, 1);
    else delete (container as Record<string, unknown>)[key as string];
  } else if (p.op === "set") {
    Object.defineProperty(container, key, { value, enumerable: true, writable: true, configurable: true });
  } else if (p.op === "add") {
    const target = Array.isArray(container) ? container : (container as Record<string, unknown>);
    if (Array.isArray(target)) target.push(value);
    else
      Object.defineProperty(target, ODD_KEYS[p.key % ODD_KEYS.length]!, {
        value,
        enumerable: true,
        writable: true,
        configurable: true,
      });
  }
  let rnd = p.seed;
  const shuffled = reorder(obj, () => ((rnd = (rnd * 1103515245 + 12345) | 0) >>> 0) / 2 ** 32) as Record<
    string,
    unknown
  >;
  if (p.rechecksum) {
    try {
      shuffled.checksum = tableChecksum(shuffled);
    } catch {
      // a value the canonical encoder cannot write (bin, undefined): keep the old checksum
    }
  }
  return msgpackr.pack(shuffled);
}

// ---- hand-made msgpack: what no JavaScript object encodes (repeated keys, non-string keys, bin, extensions) -------

/** A msgpack map from raw entries (each key and value encoded by msgpackr, or given as bytes). */
function rawMap(entries: [unknown, unknown][]): Uint8Array {
  const enc = (v: unknown): Uint8Array => (v instanceof RawBytes ? v.bytes : msgpackr.pack(v));
  const parts = entries.flatMap(([k, v]) => [enc(k), enc(v)]);
  const header = entries.length < 16 ? [0x80 | entries.length] : [0xde, entries.length >> 8, entries.length & 255];
  return Uint8Array.from([...header, ...parts.flatMap((b) => [...b])]);
}
class RawBytes {
  constructor(readonly bytes: Uint8Array) {}
}
const raw = (...bytes: number[]): RawBytes => new RawBytes(Uint8Array.from(bytes));

/** A valid kmeans table's entries, checksummed over `entries` as src/table/codec.ts sees them (repeats: the last wins). */
function kmeansEntries(extra: [unknown, unknown][] = [], checksum = true): [unknown, unknown][] {
  const base: [unknown, unknown][] = [
    ["format", "dolphin-routing.table"],
    ["version", 1],
    ["kind", "kmeans"],
    ["features", ["isl", "eff_D"]],
    ["scaler", { mean: [7, 6], std: [2, 1.5] }],
    [
      "centroids",
      [
        [0, 0],
        [1, -1],
      ],
    ],
    ["bits", [0, 1]],
    ["provenance", { tool: "t", created: "2025-01-15T00:00:00Z", workload: "w", seed: 3 }],
  ];
  const all = [...base, ...extra];
  if (!checksum) return all;
  let sum = "xxh64:0000000000000000";
  try {
    sum = tableChecksum(unpack(rawMap(all)) as object); // over what a decoder reads (repeated keys: the last wins)
  } catch {
    // bytes the canonical encoder cannot write (bin, extensions, non-string keys): a dummy checksum
  }
  return [...all, ["checksum", sum]];
}

for (const flavour of ["debug", "release"] as const) {
  describe(`core table decoder (${flavour} build)`, () => {
    const x = newCore(flavour);

    it("loads every valid vector, staged bit-identically to stageTable(decodeTable(bytes))", () => {
      for (const v of manifest.valid) {
        const got = expectSameOutcome(x, fixture(v.file));
        expect(got.ok && got.info?.checksum).toBe(v.checksum);
        expect(got.ok && got.info?.kind).toBe(v.kind);
      }
    });

    it("rejects every invalid vector, naming the manifest's field with decodeTable's message", () => {
      for (const v of manifest.invalid) {
        const got = expectSameOutcome(x, fixture(v.file));
        expect(got.ok ? "accepted" : got.field).toBe(v.field);
      }
    });

    it("accepts generated valid tables, encoded canonically or not, exactly as the TypeScript decoder does", () => {
      fc.assert(
        fc.property(tableInput, fc.integer(), (t, seed) => {
          expectSameOutcome(x, encodeTable(t as unknown as Parameters<typeof encodeTable>[0]));
          expectSameOutcome(x, perturb(t, { op: "none", at: 0, value: 0, key: 0, rechecksum: true, seed }));
        }),
        { numRuns: 300 },
      );
    });

    it("rejects perturbed tables (missing, extra, mistyped, out-of-range values) with decodeTable's field and message", () => {
      const problems = new Set<string>();
      let rejected = 0;
      fc.assert(
        fc.property(tableInput, perturbation, (t, p) => {
          const got = expectSameOutcome(x, perturb(t, p));
          if (!got.ok) {
            rejected++;
            problems.add(
              got.message
                .replace(/^table: [^:]*: /, "")
                .replace(/[\d.e+-]+|"[^"]*"/g, "#")
                .slice(0, 40),
            );
          }
        }),
        { numRuns: 1500 },
      );
      // the perturbations reach the validator's many rules, not one early rejection
      expect(rejected).toBeGreaterThan(500);
      expect(problems.size).toBeGreaterThan(25);
    });

    it("stages large GMMs bit-identically (the log-constants use V8's logarithm, assembly/table/fdlibm-log.ts)", () => {
      fc.assert(
        fc.property(
          fc.array(fc.array(fc.double({ min: 1e-300, max: 1e300, noNaN: true }), { minLength: 4, maxLength: 4 }), {
            minLength: 256,
            maxLength: 256,
          }),
          fc.array(fc.double({ min: 1e-3, max: 1, noNaN: true }), { minLength: 256, maxLength: 256 }),
          (variances, raw) => {
            const sum = raw.reduce((a, b) => a + b, 0);
            const table = {
              kind: "gmm" as const,
              features: ["isl", "eff_P", "eff_D", "osl_hat"] as Table["features"],
              scaler: { mean: [0, 0, 0, 0], std: [1, 1, 1, 1] },
              centroids: variances.map(() => [0, 0, 0, 0]),
              bits: variances.map((_, i) => i & 1),
              weights: raw.map((w) => w / sum),
              variances,
              provenance: { tool: "t", created: "2025-01-15", workload: "w", seed: 1 },
            };
            expectSameOutcome(x, encodeTable(table));
          },
        ),
        { numRuns: 20 },
      );
    });

    it("reads what only hand-made msgpack holds exactly as decodeTable does", () => {
      const cases: [string, Uint8Array][] = [
        ["a repeated key: first position, last value", rawMap(kmeansEntries([["bits", [1, 1]]]))],
        ["a repeated key whose earlier value is bad", rawMap([["bits", [7, 7]], ...kmeansEntries()])],
        ["a repeated top-level checksum", rawMap([...kmeansEntries(), ["checksum", "xxh64:0000000000000000"]])],
        ["a number as a map key", rawMap(kmeansEntries([[5, 1]]))],
        ["a uint64-format key", rawMap(kmeansEntries([[raw(0xcf, 0, 0, 0, 0, 0, 0, 0, 5), 1]]))],
        ["an array as a map key", rawMap(kmeansEntries([[[1, 2], 1]]))],
        ["a map as a map key", rawMap(kmeansEntries([[raw(0x80), 1]]))],
        ["null as a map key", rawMap(kmeansEntries([[null, 1]]))],
        ["bin as a map key", rawMap(kmeansEntries([[raw(0xc4, 1, 9), 1]]))],
        ["a timestamp as a map key", rawMap(kmeansEntries([[raw(0xd6, 0xff, 0, 0, 0, 1), 1]]))],
        ["extension type 0 as a map key", rawMap(kmeansEntries([[raw(0xd4, 0, 0), 1]]))],
        ["a bin value", rawMap(kmeansEntries([["x_blob", raw(0xc4, 2, 1, 2)]]))],
        ["a timestamp value", rawMap(kmeansEntries([["x_when", raw(0xd6, 0xff, 0, 0, 0, 1)]]))],
        ["an undefined value (extension type 0)", rawMap(kmeansEntries([["x_u", raw(0xd4, 0, 0)]]))],
        ["the reserved byte 0xc1", rawMap(kmeansEntries([["x_c1", raw(0xc1)]]))],
        ["an unknown extension type", rawMap(kmeansEntries([["x_e", raw(0xd5, 0x07, 0, 0)]]))],
        ["a uint64 beyond 2^53", rawMap(kmeansEntries([["x_big", raw(0xcf, 0, 0x20, 0, 0, 0, 0, 0, 0)]]))],
        ["an int64 beyond −2^53", rawMap(kmeansEntries([["x_big", raw(0xd3, 0xff, 0xc0, 0, 0, 0, 0, 0, 0)]]))],
        [
          "an int64-format seed",
          rawMap(
            kmeansEntries([
              [
                "provenance",
                new RawBytes(
                  rawMap([
                    ["tool", "t"],
                    ["created", "2025-01-15"],
                    ["workload", "w"],
                    ["seed", raw(0xd3, 0, 0, 0, 0, 0, 0, 0, 9)],
                  ]),
                ),
              ],
            ]),
          ),
        ],
        ["float32 numbers", rawMap(kmeansEntries([["x_f", raw(0xca, 0x3f, 0xc0, 0, 0)]]))],
        [
          "nesting 32 levels deep",
          rawMap(kmeansEntries([["x_deep", JSON.parse("[".repeat(31) + "1" + "]".repeat(31))]])),
        ],
        [
          "nesting 33 levels deep",
          rawMap(kmeansEntries([["x_deep", JSON.parse("[".repeat(32) + "1" + "]".repeat(32))]])),
        ],
        [
          "array-index keys first (JavaScript's key order)",
          rawMap(kmeansEntries([["x_m", { b: NaN, 7: NaN, 3: Infinity }]])),
        ],
        ["__proto__ as a top-level key", rawMap(kmeansEntries([["__proto__", 1]]))],
        ["__proto__ inside an extension", rawMap(kmeansEntries([["x_p", { ["__proto__"]: NaN }]]))],
        ["a non-ASCII unknown key", rawMap(kmeansEntries([["kïnd", 1]]))],
        ["a non-string top level", msgpackr.pack([1, 2])],
        ["nil", Uint8Array.of(0xc0)],
        ["empty input", new Uint8Array(0)],
        ["trailing bytes", Uint8Array.from([...rawMap(kmeansEntries()), 0])],
        ["a truncated map", rawMap(kmeansEntries()).subarray(0, 40)],
        ["a count beyond the bytes", Uint8Array.of(0xdf, 0xff, 0xff, 0xff, 0xff)],
      ];
      for (const [name, bytes] of cases) {
        const want = viaTypeScript(bytes);
        const got = viaCore(x, bytes);
        const show = (o: Outcome) => (o.ok ? "accepted" : { field: o.field, message: o.message });
        if (!want.ok && !got.ok && want.field === "(bytes)") {
          expect(got.field, name).toBe("(bytes)"); // msgpackr's own parse-error text differs (see docs/table-format.md)
          continue;
        }
        expect(show(got), name).toEqual(show(want));
      }
    });

    it("reports every output-length class, up to max_osl_classes, with its name and representative length", () => {
      const names = Array.from({ length: 16 }, (_, i) => (i % 2 ? `class ${i}` : `クラス🐬${i}`));
      const representative = names.map((_, i) => 10 * i + 0.5);
      const thresholds = names.slice(1).map((_, i) => 100 * (i + 1));
      const table = encodeTable({ ...ruleTable("trtllm"), osl_classes: { names, thresholds, representative } });
      const got = expectSameOutcome(x, table);
      expect(got.ok && got.classes).toEqual({ names, representative });
      const none = expectSameOutcome(x, encodeTable(ruleTable("trtllm")));
      expect(none.ok && none.classes).toEqual({ names: [], representative: [] });
    });

    it("names what it cannot hold: more than max_table_nodes values, and paths beyond error_text_bytes", () => {
      const huge = rawMap(kmeansEntries([["x_many", new Array(20000).fill(0)]]));
      expect(viaTypeScript(huge).ok).toBe(true); // the TypeScript decoder has no node budget
      expect(viaCore(x, huge)).toMatchObject({
        ok: false,
        field: "(bytes)",
        message: `table: (bytes): too large for the core: more than 16384 msgpack values (max_table_nodes)`,
      });
      const longKey = "x_" + "k".repeat(300);
      const long = rawMap(kmeansEntries([[longKey, NaN]]));
      const want = viaTypeScript(long);
      const got = viaCore(x, long);
      expect(want).toMatchObject({ ok: false, field: longKey });
      expect(got.ok ? "" : got.field).toBe(`${longKey.slice(0, 256)}…`);
    });

    it("rejects bytes beyond the input buffer with a CoreError, and keeps the active table on every error", () => {
      expect(() => loadTableInCore(x, new Uint8Array((1 << 20) + 1))).toThrow(/does not fit the input buffer/);
      const good = fixture("ppd.msgpack");
      viaCore(x, good);
      const kind = x.tableKind();
      const k = x.tableK();
      expect(viaCore(x, fixture("invalid-kind.msgpack")).ok).toBe(false);
      expect(x.loadTable(-1)).toBe(ErrorCode.BAD_LENGTH);
      expect([x.tableKind(), x.tableK()]).toEqual([kind, k]);
    });

    it("survives flipped, truncated and extended table bytes: errors only, never a trap, memory unchanged", () => {
      const valid = manifest.valid.map((v) => fixture(v.file));
      const before = x.memory.buffer.byteLength;
      fc.assert(
        fc.property(
          fc.nat(valid.length - 1),
          fc.array(fc.record({ at: fc.nat(), byte: fc.nat(255) }), { maxLength: 4 }),
          fc.oneof(fc.constant(-1), fc.nat()),
          fc.uint8Array({ maxLength: 16 }),
          (which, flips, cut, extra) => {
            let bytes = valid[which]!.slice();
            for (const f of flips) bytes[f.at % bytes.length] = f.byte;
            if (cut >= 0) bytes = bytes.subarray(0, cut % (bytes.length + 1));
            if (extra.length > 0 && cut < 0) bytes = Uint8Array.from([...bytes, ...extra]);
            const want = viaTypeScript(bytes);
            const got = viaCore(x, bytes);
            expect(got.ok).toBe(want.ok);
            if (!want.ok && !got.ok && !msgpackrOwnExtension(got)) expect(got.field).toBe(want.field);
          },
        ),
        { numRuns: 3000 },
      );
      expect(x.memory.buffer.byteLength).toBe(before);
    });
  });
}
