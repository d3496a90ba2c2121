// Checks for single fields of a table, each the twin of a helper in src/table/fields.ts (expectNumber, numberArray,
// bitArray, strictlyAscending, expectString, expectIsoDate) or of src/table/validate.ts's split and checksum
// patterns. Each checks value node `node` (−1 = absent) at the current path (report.ts) and returns OK or E_BAD_TABLE
// with the record filled.

import {
  OK, P_BIT, P_CLUSTER_VALUE, P_BITS, P_FINITE, P_INTEGER, P_NON_EMPTY_STRING, P_NON_NEGATIVE, P_NOT_ASCENDING, P_NUMBER_ARRAY,
  P_MAP, P_POSITIVE, P_STRING, TE_COUNT, TE_EXPECTED, TE_PREVIOUS,
} from "../generated/abi";
import { T_ARRAY, T_MAP, T_NUM, T_STR, byteAt, isSafeInteger, nodeCount, nodeEnd, nodeNum, nodePos, nodeType } from "./msgpack";
import { note, pathIndex, pathMark, pathRestore, reject } from "./report";

/** Number rules (src/table/fields.ts NumberRule): any finite number, > 0, ≥ 0, or a safe integer. */
export const ANY: i32 = 0;
export const POSITIVE: i32 = 1;
export const NON_NEGATIVE: i32 = 2;
export const INTEGER: i32 = 3;

/** `node` must be a map (at the current path). */
export function checkMap(node: i32): i32 {
  return node >= 0 && nodeType(node) == T_MAP ? OK : reject(P_MAP, node);
}

export function isArray(node: i32): bool { return node >= 0 && nodeType(node) == T_ARRAY; }
export function isString(node: i32): bool { return node >= 0 && nodeType(node) == T_STR; }
export function isNumber(node: i32): bool { return node >= 0 && nodeType(node) == T_NUM; }

/** A number as src/table/fields.ts keeps it: −0 becomes 0. */
export function numberValue(node: i32): f64 {
  const v = nodeNum(node);
  return v == 0 ? 0 : v;
}

export function checkNumber(node: i32, rule: i32): i32 {
  if (!isNumber(node) || !isFinite(nodeNum(node))) return reject(P_FINITE, node);
  const v = nodeNum(node);
  if (rule == INTEGER && !isSafeInteger(v)) return reject(P_INTEGER, node);
  if (rule == POSITIVE && !(v > 0)) return reject(P_POSITIVE, node);
  if (rule == NON_NEGATIVE && !(v >= 0)) return reject(P_NON_NEGATIVE, node);
  return OK;
}

/** Rejects with a length problem ("expected {expected} …, got {count}"). */
export function wrongLength(problem: i32, node: i32, expected: i32): i32 {
  const rc = reject(problem, node);
  note(TE_EXPECTED, expected);
  note(TE_COUNT, nodeCount(node));
  return rc;
}

/** An array of `length` numbers (any length when < 0), each checked by `rule`. */
export function checkNumberArray(node: i32, length: i32, rule: i32, lengthProblem: i32): i32 {
  if (!isArray(node)) return reject(P_NUMBER_ARRAY, node);
  if (length >= 0 && nodeCount(node) != length) return wrongLength(lengthProblem, node, length);
  let c = node + 1;
  for (let i = 0; i < nodeCount(node); i++) {
    const mark = pathMark();
    pathIndex(i);
    const rc = checkNumber(c, rule);
    if (rc != OK) return rc;
    pathRestore(mark);
    c = nodeEnd(c);
  }
  return OK;
}

/** A checked number array's values strictly ascend. */
export function checkAscending(node: i32): i32 {
  let previous = node + 1;
  let c = nodeEnd(previous);
  for (let i = 1; i < nodeCount(node); i++) {
    if (!(nodeNum(c) > nodeNum(previous))) {
      const mark = pathMark();
      pathIndex(i);
      const rc = reject(P_NOT_ASCENDING, c);
      note(TE_PREVIOUS, numberValue(previous));
      pathRestore(mark);
      return rc;
    }
    previous = c;
    c = nodeEnd(c);
  }
  return OK;
}

/** An array of `length` bits, each exactly 0 or 1 (a number). */
export function checkBitArray(node: i32, length: i32, lengthProblem: i32, allowRule: bool = false): i32 {
  if (!isArray(node)) return reject(P_BITS, node);
  if (nodeCount(node) != length) return wrongLength(lengthProblem, node, length);
  let c = node + 1;
  for (let i = 0; i < length; i++) {
    // version-2 learned tables: 2 = the fallback rule decides the cluster
    const v = isNumber(c) ? nodeNum(c) : -1;
    if (!isNumber(c) || (v != 0 && v != 1 && !(allowRule && v == 2))) {
      pathIndex(i);
      return reject(allowRule ? P_CLUSTER_VALUE : P_BIT, c);
    }
    c = nodeEnd(c);
  }
  return OK;
}

export function checkString(node: i32, nonEmpty: bool): i32 {
  if (!isString(node) || (nonEmpty && nodeCount(node) == 0)) return reject(nonEmpty ? P_NON_EMPTY_STRING : P_STRING, node);
  return OK;
}

/** Two strings with the same bytes. */
export function sameString(a: i32, b: i32): bool {
  const n = nodeCount(a);
  if (n != nodeCount(b)) return false;
  for (let i = 0; i < n; i++) if (byteAt(nodePos(a) + i) != byteAt(nodePos(b) + i)) return false;
  return true;
}

// ---- patterns (byte-wise twins of the regular expressions in src/table/) -----------------------------------------

let cursor: i32 = 0;
let stop: i32 = 0;

// @ts-ignore: decorator
@inline function isDigit(c: i32): bool { return c >= 0x30 && c <= 0x39; }

/** Reads exactly `n` digits; their value, or −1. */
function digits(n: i32): i32 {
  if (cursor + n > stop) return -1;
  let v = 0;
  for (let i = 0; i < n; i++) {
    const c = <i32>byteAt(cursor + i);
    if (!isDigit(c)) return -1;
    v = v * 10 + c - 0x30;
  }
  cursor += n;
  return v;
}

function accept(c: i32): bool {
  if (cursor < stop && <i32>byteAt(cursor) == c) { cursor++; return true; }
  return false;
}

/** ^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,]\d+)?)?(?:[Zz]|[+-]\d{2}(?::?\d{2})?)?)?$ with
 *  month 1–12, day 1–31, hour ≤ 24, minute ≤ 59, second ≤ 60 (src/table/fields.ts expectIsoDate). */
export function isIsoDate(node: i32): bool {
  if (!isString(node)) return false;
  cursor = nodePos(node);
  stop = cursor + nodeCount(node);
  if (digits(4) < 0 || !accept(0x2d)) return false;
  const month = digits(2);
  if (month < 0 || !accept(0x2d)) return false;
  const day = digits(2);
  if (day < 0) return false;
  let hour = 0;
  let minute = 0;
  let second = 0;
  if (cursor < stop) {
    if (!accept(0x54) && !accept(0x74) && !accept(0x20)) return false;
    hour = digits(2);
    if (hour < 0 || !accept(0x3a)) return false;
    minute = digits(2);
    if (minute < 0) return false;
    if (accept(0x3a)) {
      second = digits(2);
      if (second < 0) return false;
      if (accept(0x2e) || accept(0x2c)) {
        const from = cursor;
        while (cursor < stop && isDigit(<i32>byteAt(cursor))) cursor++;
        if (cursor == from) return false;
      }
    }
    if (!accept(0x5a) && !accept(0x7a) && (accept(0x2b) || accept(0x2d))) {
      if (digits(2) < 0) return false;
      if (cursor < stop) {
        accept(0x3a);
        if (digits(2) < 0) return false;
      }
    }
    if (cursor != stop) return false;
  }
  return month >= 1 && month <= 12 && day >= 1 && day <= 31 && hour <= 24 && minute <= 59 && second <= 60;
}

/** ^\d+P\d+D$ */
export function isSplit(node: i32): bool {
  if (!isString(node)) return false;
  cursor = nodePos(node);
  stop = cursor + nodeCount(node);
  return someDigits() && accept(0x50) && someDigits() && accept(0x44) && cursor == stop;
}

function someDigits(): bool {
  const from = cursor;
  while (cursor < stop && isDigit(<i32>byteAt(cursor))) cursor++;
  return cursor > from;
}

/** ^xxh64:[0-9a-f]{16}$ ; the 16 digits' value is left in `checksumValue`. */
export let checksumValue: u64 = 0;

export function isChecksum(node: i32): bool {
  if (!isString(node) || nodeCount(node) != 22) return false;
  const at = nodePos(node);
  const prefix = "xxh64:";
  for (let i = 0; i < 6; i++) if (<i32>byteAt(at + i) != prefix.charCodeAt(i)) return false;
  let v: u64 = 0;
  for (let i = 6; i < 22; i++) {
    const c = <i32>byteAt(at + i);
    let d = 0;
    if (isDigit(c)) d = c - 0x30;
    else if (c >= 0x61 && c <= 0x66) d = c - 0x61 + 10;
    else return false;
    v = (v << 4) | <u64>d;
  }
  checksumValue = v;
  return true;
}
