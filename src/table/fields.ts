// Small validation helpers for single fields of a table (the twins of assembly/table/fields.ts). Each takes the value
// and its field path, and returns a fresh, plain copy; each error is a TableError naming the path. Field paths
// (TOP_LEVEL, child) and the nesting bound live here too: the validators, the decoder and the canonical encoder share
// them.

import { describeValue, MSGPACK_WORDS } from "../contract/values.js";
import { TableError } from "./table.js";

/** Deepest nesting accepted anywhere (the format itself needs 4: params.bits[i][j][k]); bounds recursion on bad input. */
export const MAX_NESTING = 32;
export const TOP_LEVEL = "(top level)";

export type PlainMap = Record<string, unknown>;

export const describe = (v: unknown): string => describeValue(v, MSGPACK_WORDS);

export function expected(path: string, what: string, v: unknown): TableError {
  return new TableError(path, v === undefined ? `missing (expected ${what})` : `expected ${what}, got ${describe(v)}`);
}

export const child = (path: string, key: string): string => (path === TOP_LEVEL ? key : `${path}.${key}`);

export function setOwn(obj: PlainMap, key: string, value: unknown): void {
  // defineProperty, not assignment: a key named "__proto__" must stay an ordinary field.
  Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
}

export function isPlainMap(v: unknown): v is PlainMap {
  if (typeof v !== "object" || v === null || Array.isArray(v)) return false;
  const proto: unknown = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

export function expectMap(v: unknown, path: string): PlainMap {
  if (!isPlainMap(v)) throw expected(path, "a map", v);
  return v;
}

export function rejectUnknownKeys(m: PlainMap, path: string, known: readonly string[]): void {
  for (const key of Object.keys(m)) {
    if (!known.includes(key)) {
      throw new TableError(child(path, key), `unknown key (known in ${path}: ${known.join(", ") || "none"})`);
    }
  }
}

export interface NumberRule {
  min?: number;
  minExclusive?: boolean;
  integer?: boolean;
}

export function expectNumber(v: unknown, path: string, rule: NumberRule = {}): number {
  if (typeof v !== "number" || !Number.isFinite(v)) throw expected(path, "a finite number", v);
  if (rule.integer && !Number.isSafeInteger(v)) throw expected(path, "an integer", v);
  if (rule.min !== undefined) {
    if (rule.minExclusive ? !(v > rule.min) : !(v >= rule.min)) {
      throw expected(path, `a number ${rule.minExclusive ? ">" : "≥"} ${rule.min}`, v);
    }
  }
  return v === 0 ? 0 : v; // -0 becomes 0, as the canonical encoding writes it
}

/** Plain arrays, or (in-memory input only) numeric typed arrays, which are copied to plain arrays. */
export function expectArray(v: unknown, path: string, what: string): unknown[] {
  if (Array.isArray(v)) return v;
  if (ArrayBuffer.isView(v) && !(v instanceof DataView)) return Array.from(v as unknown as ArrayLike<unknown>);
  throw expected(path, what, v);
}

export function expectLength(arr: unknown[], path: string, length: number, what: string): void {
  if (arr.length !== length) throw new TableError(path, `expected ${length} ${what}, got ${arr.length}`);
}

export function numberArray(
  v: unknown,
  path: string,
  length: number | undefined,
  rule: NumberRule,
  what = "entries",
): number[] {
  const arr = expectArray(v, path, "an array of numbers");
  if (length !== undefined) expectLength(arr, path, length, what);
  return arr.map((x, i) => expectNumber(x, `${path}[${i}]`, rule));
}

export function strictlyAscending(values: number[], path: string): void {
  for (let i = 1; i < values.length; i++) {
    if (!(values[i]! > values[i - 1]!)) {
      throw new TableError(
        `${path}[${i}]`,
        `expected strictly ascending values, got ${values[i]} after ${values[i - 1]}`,
      );
    }
  }
}

export function bitArray(v: unknown, path: string, length: number, what: string, allowRule = false): number[] {
  const arr = expectArray(v, path, "an array of 0/1 bits");
  expectLength(arr, path, length, what);
  return arr.map((x, i) => {
    if (allowRule) {
      if (x !== 0 && x !== 1 && x !== 2) throw expected(`${path}[${i}]`, "0 (local), 1 (remote) or 2 (rule)", x);
    } else if (x !== 0 && x !== 1) throw expected(`${path}[${i}]`, "0 (local) or 1 (remote)", x);
    return x;
  });
}

export function expectString(v: unknown, path: string, nonEmpty = false): string {
  if (typeof v !== "string" || (nonEmpty && v.length === 0))
    throw expected(path, nonEmpty ? "a non-empty string" : "a string", v);
  return v;
}

const ISO_8601 =
  /^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,]\d+)?)?(?:[Zz]|[+-]\d{2}(?::?\d{2})?)?)?$/;

export function expectIsoDate(v: unknown, path: string): string {
  const what = 'an ISO-8601 date-time such as "2025-01-31T12:00:00Z"';
  const m = typeof v === "string" ? ISO_8601.exec(v) : null;
  if (!m) throw expected(path, what, v);
  const [month, day, hour, minute, second] = [m[2], m[3], m[4], m[5], m[6]].map((s) =>
    s === undefined ? 0 : Number(s),
  );
  if (month! < 1 || month! > 12 || day! < 1 || day! > 31 || hour! > 24 || minute! > 59 || second! > 60)
    throw expected(path, what, v);
  return v as string;
}

/** Plain msgpack-able data (extension fields): null, booleans, finite numbers, strings, arrays, string-keyed maps. */
export function plainData(v: unknown, path: string, depth: number): unknown {
  if (depth > MAX_NESTING) throw new TableError(path, `nested deeper than ${MAX_NESTING} levels`);
  if (v === null || typeof v === "boolean" || typeof v === "string") return v;
  if (typeof v === "number") return expectNumber(v, path);
  if (Array.isArray(v)) return v.map((x, i) => plainData(x, `${path}[${i}]`, depth + 1));
  if (isPlainMap(v)) {
    const out: PlainMap = {};
    for (const [key, x] of Object.entries(v)) {
      if (x !== undefined) setOwn(out, key, plainData(x, child(path, key), depth + 1));
    }
    return out;
  }
  throw expected(path, "plain data (null, boolean, finite number, string, array or map)", v);
}
