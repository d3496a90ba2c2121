// What the table decoder tells the host: the error record it fills when it rejects a table (a problem code from
// spec/abi.json table_problems, the failing field path as UTF-8 text, and the values the message needs), and the
// info record and the output-length class records it fills when a table becomes active. Hosts turn the error record
// into the same text src/table/table.ts TableError gives ("table: <field>: <problem>") with the generated TABLE_PROBLEMS
// templates.
//
// The path is built while the validator descends (key by key, index by index) in one preallocated buffer: marks
// and restores instead of strings, since the core must not allocate after init.

import {
  E_BAD_TABLE, LIMIT_ERROR_TEXT_BYTES, LIMIT_MAX_OSL_CLASSES, OSL_CLASS_SLOTS, TABLE_ERROR_SLOTS, TABLE_INFO_SLOTS,
  TE_LENGTH, TE_PATH_LENGTH, TE_PATH_TRUNCATED, TE_PROBLEM, TE_VALUE_AT, TE_VALUE_LENGTH, TE_VALUE_NUMBER,
  TE_VALUE_TYPE, TV_ARRAY, TV_BIN, TV_BOOLEAN, TV_INTEGER64, TV_MAP, TV_MAP_OBJECT, TV_MISSING, TV_NIL, TV_NUMBER,
  TV_OBJECT, TV_STRING, TV_UNDEFINED,
} from "../generated/abi";
import {
  T_ARRAY, T_BIG, T_BIN, T_BOOL, T_EXT, T_MAP, T_NIL, T_NUM, T_STR, nodeCount, nodeFormat, nodeNum, nodePos, nodeType,
  tableBase,
} from "./tape";

let record: usize = 0; // f64[TABLE_ERROR_SLOTS]
let info: usize = 0; // f64[TABLE_INFO_SLOTS]
let oslClassRecords: usize = 0; // f64[LIMIT_MAX_OSL_CLASSES × OSL_CLASS_SLOTS]: room for the most a table holds
let pathBuf: usize = 0; // u8[LIMIT_ERROR_TEXT_BYTES]: the path being built
let pathLen: i32 = 0;
let pathCut = false;
let specialPath: i32 = 0; // 0: the built path, 1: "(bytes)"

const OSL_CLASS_RECORDS_F64: i32 = LIMIT_MAX_OSL_CLASSES * OSL_CLASS_SLOTS;
export const REPORT_BYTES: usize =
  (<usize>(TABLE_ERROR_SLOTS + TABLE_INFO_SLOTS + OSL_CLASS_RECORDS_F64) << 3) + <usize>LIMIT_ERROR_TEXT_BYTES;

/** Places the records and the path buffer at `at` (8-byte aligned); returns the address after them. */
export function reportInit(at: usize): usize {
  record = at;
  info = record + (<usize>TABLE_ERROR_SLOTS << 3);
  oslClassRecords = info + (<usize>TABLE_INFO_SLOTS << 3);
  pathBuf = oslClassRecords + (<usize>OSL_CLASS_RECORDS_F64 << 3);
  return pathBuf + <usize>LIMIT_ERROR_TEXT_BYTES;
}

export function errorRecordPtr(): usize { return record; }
export function errorPathPtr(): usize { return pathBuf; }
export function infoRecordPtr(): usize { return info; }
export function oslClassRecordsPtr(): usize { return oslClassRecords; }

/** Clears the error record and the path before a load; `length` is the table's byte count. */
export function reportReset(length: i32): void {
  memory.fill(record, 0, <usize>TABLE_ERROR_SLOTS << 3);
  pathLen = 0;
  pathCut = false;
  specialPath = 0;
  note(TE_LENGTH, <f64>length);
}

/** The problem of the last rejection (index into table_problems). */
export function lastProblem(): i32 {
  return <i32>load<f64>(record + (<usize>TE_PROBLEM << 3));
}

export function note(slot: i32, v: f64): void {
  store<f64>(record + (<usize>slot << 3), v);
}

export function setInfo(slot: i32, v: f64): void {
  store<f64>(info + (<usize>slot << 3), v);
}

export function clearInfo(): void {
  memory.fill(info, 0, <usize>TABLE_INFO_SLOTS << 3);
  memory.fill(oslClassRecords, 0, <usize>OSL_CLASS_RECORDS_F64 << 3);
}

/** One slot of class `i`'s record; `i` < LIMIT_MAX_OSL_CLASSES (the validator's bound on osl_classes). */
export function setOslClass(i: i32, slot: i32, v: f64): void {
  store<f64>(oslClassRecords + (<usize>(i * OSL_CLASS_SLOTS + slot) << 3), v);
}

// ---- the path ----------------------------------------------------------------------------------------------

function pathByte(b: i32): void {
  if (pathLen >= LIMIT_ERROR_TEXT_BYTES) {
    pathCut = true;
    return;
  }
  store<u8>(pathBuf + <usize>pathLen, <u8>b);
  pathLen++;
}

export function pathMark(): i32 { return pathLen | (pathCut ? 1 << 30 : 0); }

export function pathRestore(mark: i32): void {
  pathLen = mark & ((1 << 30) - 1);
  pathCut = (mark & (1 << 30)) != 0;
}

/** Appends `.name` (or `name` at the top level, where the path is empty). `name` is ASCII. */
export function pathName(name: string): void {
  if (pathLen > 0) pathByte(0x2e);
  for (let i = 0; i < name.length; i++) pathByte(name.charCodeAt(i));
}

/** Appends the string node `key` as a path segment, like pathName. */
export function pathKey(key: i32): void {
  if (pathLen > 0) pathByte(0x2e);
  const at = tableBase() + <usize>nodePos(key);
  const n = nodeCount(key);
  for (let i = 0; i < n; i++) pathByte(load<u8>(at + <usize>i));
}

/** Appends `[i]`. */
export function pathIndex(i: i32): void {
  pathByte(0x5b);
  pathDecimal(i);
  pathByte(0x5d);
}

function pathDecimal(n: i32): void {
  if (n >= 10) pathDecimal(n / 10);
  pathByte(0x30 + n % 10);
}

/** The path of the failing field is "(bytes)": the input is not one complete msgpack value. */
export function pathBytes(): void {
  specialPath = 1;
}

function writeText(text: string): void {
  pathLen = 0;
  for (let i = 0; i < text.length; i++) pathByte(text.charCodeAt(i));
}

// ---- rejecting ---------------------------------------------------------------------------------------------

/** Fills the record for `problem` about value node `node` (−1: missing) at the current path; returns E_BAD_TABLE. */
export function reject(problem: i32, node: i32): i32 {
  note(TE_PROBLEM, problem);
  describeValue(node, false);
  if (specialPath == 1) writeText("(bytes)");
  else if (pathLen == 0) writeText("(top level)");
  note(TE_PATH_LENGTH, pathLen);
  note(TE_PATH_TRUNCATED, pathCut ? 1 : 0);
  return E_BAD_TABLE;
}

/** Like reject, describing `key` as src/table/codec.ts describes a decoded map key (maps and 64-bit integers differ). */
export function rejectKey(problem: i32, key: i32): i32 {
  const rc = reject(problem, key);
  describeValue(key, true);
  return rc;
}

function describeValue(node: i32, asKey: bool): void {
  if (node < 0) {
    note(TE_VALUE_TYPE, TV_MISSING);
    return;
  }
  const t = nodeType(node);
  let type = TV_MISSING;
  let number: f64 = 0;
  if (t == T_NIL) type = TV_NIL;
  else if (t == T_BOOL) { type = TV_BOOLEAN; number = nodeNum(node); }
  else if (t == T_NUM) {
    const f = nodeFormat(node);
    if (asKey && (f == 0xcf || f == 0xd3)) { type = TV_INTEGER64; number = f == 0xd3 ? 1 : 0; }
    else { type = TV_NUMBER; number = nodeNum(node); }
  } else if (t == T_BIG) { type = TV_INTEGER64; number = nodeFormat(node) == 0xd3 ? 1 : 0; }
  else if (t == T_STR) type = TV_STRING;
  else if (t == T_ARRAY) { type = TV_ARRAY; number = nodeCount(node); }
  else if (t == T_MAP) { type = asKey ? TV_MAP_OBJECT : TV_MAP; number = nodeCount(node); }
  else if (t == T_BIN) { type = TV_BIN; number = nodeCount(node); }
  else if (t == T_EXT) type = nodeNum(node) == 0 ? TV_UNDEFINED : TV_OBJECT;
  note(TE_VALUE_TYPE, type);
  note(TE_VALUE_NUMBER, number);
  note(TE_VALUE_AT, nodePos(node));
  note(TE_VALUE_LENGTH, t == T_STR ? nodeCount(node) : t == T_BIG || (t == T_NUM && type == TV_INTEGER64) ? 8 : 0);
}
