// A table to and from its bytes: decoding (msgpackr, plain data only, validation, the checksum verified) and encoding
// (validation with rule defaults filled, the version a table needs, the canonical bytes with their checksum).

import { Unpackr } from "msgpackr";
import { encodeCanonical, tableChecksum } from "./canonical.js";
import { child, describe, expected, MAX_NESTING, setOwn, TOP_LEVEL, type PlainMap } from "./fields.js";
import { CLUSTER_RULE, TABLE_FORMAT, TableError, type Table, type TableVersion } from "./table.js";
import { validateBody, validateTable } from "./validate.js";

// ------------------------------------------------------------------------------------------------------------------
// Decoding.

const BYTES = "(bytes)";

// int64AsType "bigint": 64-bit msgpack integers arrive as bigint whatever their size; fromMsgpack turns the safe ones
// into numbers. mapsAsObjects false: maps arrive as Map, so non-string keys and "__proto__" are seen, not mangled.
const UNPACKR = new Unpackr({ useRecords: false, mapsAsObjects: false, int64AsType: "bigint" });
const SAFE_BIG = BigInt(Number.MAX_SAFE_INTEGER);

/** Decoded msgpack value → plain data (objects, arrays, numbers, strings, booleans, null). Rejects bin and ext. */
function fromMsgpack(v: unknown, path: string, depth: number): unknown {
  if (depth > MAX_NESTING) throw new TableError(path, `nested deeper than ${MAX_NESTING} levels`);
  if (v === null || typeof v === "number" || typeof v === "string" || typeof v === "boolean") return v;
  if (typeof v === "bigint") {
    if (v < -SAFE_BIG || v > SAFE_BIG) throw new TableError(path, `integer ${v} is outside the safe range ±(2^53 − 1)`);
    return Number(v);
  }
  if (Array.isArray(v)) return v.map((x, i) => fromMsgpack(x, `${path}[${i}]`, depth + 1));
  if (v instanceof Map) {
    const out: PlainMap = {};
    for (const [key, x] of v) {
      if (typeof key !== "string") throw new TableError(path, `map key ${describe(key)} is not a string`);
      setOwn(out, key, fromMsgpack(x, child(path, key), depth + 1));
    }
    return out;
  }
  if (v instanceof Uint8Array) throw new TableError(path, `msgpack bin values are not allowed, got ${describe(v)}`);
  throw new TableError(path, "msgpack extension values are not allowed (plain msgpack only)");
}

/** Decodes, validates and verifies the checksum. Throws only TableError, whatever the bytes. */
export function decodeTable(bytes: Uint8Array): Table {
  if (!(bytes instanceof Uint8Array)) throw expected(BYTES, "a Uint8Array", bytes);
  if (bytes.length === 0) throw new TableError(BYTES, "empty input (expected a msgpack map)");
  let decoded: unknown;
  try {
    decoded = UNPACKR.unpack(bytes);
  } catch (e) {
    const reason = e instanceof Error ? e.message : String(e);
    throw new TableError(BYTES, `truncated or corrupt msgpack (${bytes.length} bytes): ${reason}`);
  }
  const raw = fromMsgpack(decoded, TOP_LEVEL, 0);
  const table = validateTable(raw);
  const actual = tableChecksum(raw as PlainMap); // over the map as stored, before rule defaults are filled in
  if (actual !== table.checksum) {
    throw new TableError(
      "checksum",
      `mismatch: the table says ${table.checksum} but its contents hash to ${actual} (changed or corrupted after writing)`,
    );
  }
  return table;
}

// ------------------------------------------------------------------------------------------------------------------
// Encoding.

type TableInput = Omit<Table, "checksum" | "format" | "version"> & Partial<Pick<Table, "format" | "version">>;

/** The oldest version that holds `t`: 3 for a learned table with load bounds or cluster shares, 2 for one with a
 *  guard or a `rule` cluster, else 1. */
export function versionNeeded(t: {
  fallback?: unknown;
  ood_bound?: unknown;
  load_bound?: unknown;
  cluster_share?: unknown;
  bits?: ArrayLike<number>;
}): TableVersion {
  if (t.load_bound !== undefined || t.cluster_share !== undefined) return 3;
  const bits = t.bits ? Array.from(t.bits) : [];
  return t.fallback !== undefined || t.ood_bound !== undefined || bits.includes(CLUSTER_RULE) ? 2 : 1;
}

/** Validates (filling rule defaults), computes the checksum, returns the canonical msgpack bytes. */
export function encodeTable(t: TableInput): Uint8Array {
  const { checksum: _recomputed, ...rest } = t as TableInput & { checksum?: unknown };
  const body = validateBody({
    ...rest,
    format: rest.format ?? TABLE_FORMAT,
    version: rest.version ?? versionNeeded(rest),
  });
  return encodeCanonical({ ...body, checksum: tableChecksum(body) });
}
