// The canonical msgpack encoding of a table and its checksum: xxh64 of that encoding (docs/table-format.md,
// "Checksum"; the twin of assembly/table/canonical.ts). Written here, not left to msgpackr, so it cannot drift with
// an encoder's options or version: map keys sorted by code point at every level; the smallest msgpack format for every
// length and integer; numbers that are safe integers (|x| ≤ 2^53 − 1) as msgpack integers, all other numbers as
// float64. For every value msgpackr can write as an integer (−2^31 … 2^32 − 1) this gives the same bytes as
// `new Packr({ useRecords: false, variableMapSize: true })`; beyond that msgpackr writes float64 and Python writes an
// integer, so we follow Python.

import { xxh64Hex } from "../hashing/xxh64.js";
import { child, describe, isPlainMap, MAX_NESTING, TOP_LEVEL, type PlainMap } from "./fields.js";
import { TableError } from "./table.js";

const UTF8 = new TextEncoder();

class ByteWriter {
  private bytes = new Uint8Array(256);
  private view = new DataView(this.bytes.buffer);
  length = 0;
  private reserve(n: number): void {
    if (this.length + n <= this.bytes.length) return;
    const grown = new Uint8Array(Math.max(this.bytes.length * 2, this.length + n));
    grown.set(this.bytes.subarray(0, this.length));
    this.bytes = grown;
    this.view = new DataView(grown.buffer); // the old view still points at the old buffer
  }
  u8(b: number): void {
    this.reserve(1);
    this.bytes[this.length++] = b;
  }
  u16(n: number): void {
    this.reserve(2);
    this.view.setUint16(this.length, n);
    this.length += 2;
  }
  u32(n: number): void {
    this.reserve(4);
    this.view.setUint32(this.length, n);
    this.length += 4;
  }
  i8(n: number): void {
    this.reserve(1);
    this.view.setInt8(this.length, n);
    this.length += 1;
  }
  i16(n: number): void {
    this.reserve(2);
    this.view.setInt16(this.length, n);
    this.length += 2;
  }
  i32(n: number): void {
    this.reserve(4);
    this.view.setInt32(this.length, n);
    this.length += 4;
  }
  u64(n: bigint): void {
    this.reserve(8);
    this.view.setBigUint64(this.length, n);
    this.length += 8;
  }
  i64(n: bigint): void {
    this.reserve(8);
    this.view.setBigInt64(this.length, n);
    this.length += 8;
  }
  f64(n: number): void {
    this.reserve(8);
    this.view.setFloat64(this.length, n);
    this.length += 8;
  }
  raw(b: Uint8Array): void {
    this.reserve(b.length);
    this.bytes.set(b, this.length);
    this.length += b.length;
  }
  result(): Uint8Array {
    return this.bytes.slice(0, this.length);
  }
}

/** Smallest msgpack integer format, the same choice as Python's msgpack and msgpackr (uint formats for n ≥ 0). */
function writeInteger(w: ByteWriter, n: bigint): void {
  if (n >= 0n) {
    if (n < 0x80n) w.u8(Number(n));
    else if (n < 0x100n) {
      w.u8(0xcc);
      w.u8(Number(n));
    } else if (n < 0x10000n) {
      w.u8(0xcd);
      w.u16(Number(n));
    } else if (n < 0x100000000n) {
      w.u8(0xce);
      w.u32(Number(n));
    } else {
      w.u8(0xcf);
      w.u64(n);
    }
  } else if (n >= -32n) w.i8(Number(n));
  else if (n >= -0x80n) {
    w.u8(0xd0);
    w.i8(Number(n));
  } else if (n >= -0x8000n) {
    w.u8(0xd1);
    w.i16(Number(n));
  } else if (n >= -0x80000000n) {
    w.u8(0xd2);
    w.i32(Number(n));
  } else {
    w.u8(0xd3);
    w.i64(n);
  }
}

function writeNumber(w: ByteWriter, n: number): void {
  if (Number.isSafeInteger(n)) {
    // Fast path for the common small case; -0 is a safe integer and is written as 0, as Python's int(-0.0) is.
    if (n >= 0 && n < 0x80) w.u8(n);
    else writeInteger(w, BigInt(n));
  } else {
    w.u8(0xcb);
    w.f64(n);
  }
}

function writeLength(
  w: ByteWriter,
  n: number,
  fix: number,
  fixMax: number,
  op16: number,
  op32: number,
  op8?: number,
): void {
  if (n <= fixMax) w.u8(fix | n);
  else if (op8 !== undefined && n < 0x100) {
    w.u8(op8);
    w.u8(n);
  } else if (n < 0x10000) {
    w.u8(op16);
    w.u16(n);
  } else {
    w.u8(op32);
    w.u32(n);
  }
}

/** Order of code points (what Python's sorted() and Go's byte-wise string order give), not of UTF-16 code units. */
function compareCodePoints(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    let x = a.charCodeAt(i),
      y = b.charCodeAt(i);
    if (x === y) continue;
    // Surrogates (D800–DFFF) encode code points above FFFF, so they must sort after E000–FFFF.
    if (x >= 0xd800) x += x >= 0xe000 ? -0x800 : 0x2000;
    if (y >= 0xd800) y += y >= 0xe000 ? -0x800 : 0x2000;
    return x - y;
  }
  return a.length - b.length;
}

function writeCanonical(w: ByteWriter, v: unknown, path: string, depth: number): void {
  if (depth > MAX_NESTING) throw new TableError(path, `nested deeper than ${MAX_NESTING} levels`);
  if (v === null) w.u8(0xc0);
  else if (typeof v === "boolean") w.u8(v ? 0xc3 : 0xc2);
  else if (typeof v === "number") writeNumber(w, v);
  else if (typeof v === "bigint") {
    if (v < -(2n ** 63n) || v >= 2n ** 64n) throw new TableError(path, `integer ${v} does not fit in 64 bits`);
    if (v >= -BigInt(Number.MAX_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER)) writeNumber(w, Number(v));
    else writeInteger(w, v);
  } else if (typeof v === "string") {
    const bytes = UTF8.encode(v);
    writeLength(w, bytes.length, 0xa0, 31, 0xda, 0xdb, 0xd9);
    w.raw(bytes);
  } else if (Array.isArray(v) || (ArrayBuffer.isView(v) && !(v instanceof DataView) && !(v instanceof Uint8Array))) {
    const items = Array.from(v as ArrayLike<unknown>);
    writeLength(w, items.length, 0x90, 15, 0xdc, 0xdd);
    items.forEach((x, i) => writeCanonical(w, x, `${path}[${i}]`, depth + 1));
  } else if (isPlainMap(v)) {
    const keys = Object.keys(v)
      .filter((k) => v[k] !== undefined)
      .sort(compareCodePoints);
    writeLength(w, keys.length, 0x80, 15, 0xde, 0xdf);
    for (const key of keys) {
      writeCanonical(w, key, path, depth + 1);
      writeCanonical(w, v[key], child(path, key), depth + 1);
    }
  } else {
    throw new TableError(path, `cannot be written to a table: ${describe(v)} (plain msgpack data only)`);
  }
}

/** Canonical msgpack bytes of `v` (object keys whose value is undefined are left out, as JSON does). */
export function encodeCanonical(v: unknown): Uint8Array {
  const w = new ByteWriter();
  writeCanonical(w, v, TOP_LEVEL, 0);
  return w.result();
}

/** "xxh64:" + 16 hex digits: xxh64 (seed 0) of the canonical encoding of `t` without its `checksum` key. */
export function tableChecksum(t: object): string {
  const { checksum: _ignored, ...body } = t as PlainMap;
  return `xxh64:${xxh64Hex(encodeCanonical(body))}`;
}
