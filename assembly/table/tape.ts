// The tape the msgpack reader (msgpack.ts) writes a table file onto and every later pass reads: one node per msgpack
// value in document order, in preallocated columns (type, first byte, count, payload offset, subtree end, value),
// with the input left where it is. Its own file so the error report (report.ts), which describes nodes, and the
// reader, which reports errors, both import it and neither imports the other.

import { LIMIT_MAX_TABLE_NODES } from "../generated/abi";

export const T_NIL: u8 = 1;
export const T_BOOL: u8 = 2;
export const T_NUM: u8 = 3; // any integer within ±(2^53 − 1), any float32/float64
export const T_BIG: u8 = 4; // a 64-bit integer beyond ±(2^53 − 1)
export const T_STR: u8 = 5;
export const T_BIN: u8 = 6;
export const T_ARRAY: u8 = 7;
export const T_MAP: u8 = 8; // count = entries; children alternate key, value
export const T_EXT: u8 = 9; // nodeNum = the extension type (−2 for the reserved byte 0xc1)

let types: usize = 0; // u8[N]
let formats: usize = 0; // u8[N]
let counts: usize = 0; // i32[N]
let positions: usize = 0; // i32[N]
let ends: usize = 0; // i32[N]: index past the subtree (while a container is open: its items still to read)
let nums: usize = 0; // f64[N]
let stack: usize = 0; // i32[N]: open containers

let base: usize = 0;
let used: i32 = 0;

/** Bytes the tape takes (tapeInit carves them from the decoder's one allocation). */
export const TAPE_BYTES: usize = <usize>LIMIT_MAX_TABLE_NODES * (8 + 4 * 4 + 2);

/** Places the tape at `at` (8-byte aligned); returns the address after it. */
export function tapeInit(at: usize): usize {
  const n = <usize>LIMIT_MAX_TABLE_NODES;
  nums = at;
  counts = nums + (n << 3);
  positions = counts + (n << 2);
  ends = positions + (n << 2);
  stack = ends + (n << 2);
  types = stack + (n << 2);
  formats = types + n;
  return formats + n;
}

export function tableBase(): usize { return base; }
export function nodeType(i: i32): u8 { return load<u8>(types + <usize>i); }
export function nodeFormat(i: i32): u8 { return load<u8>(formats + <usize>i); }
export function nodeCount(i: i32): i32 { return load<i32>(counts + (<usize>i << 2)); }
export function nodePos(i: i32): i32 { return load<i32>(positions + (<usize>i << 2)); }
/** The node just past `i`'s subtree: its next sibling. */
export function nodeEnd(i: i32): i32 { return load<i32>(ends + (<usize>i << 2)); }
export function nodeNum(i: i32): f64 { return load<f64>(nums + (<usize>i << 3)); }
export function byteAt(offset: i32): u8 { return load<u8>(base + <usize>offset); }

/** Starts a tape over the input at `ptr`: no nodes yet. */
export function tapeStart(ptr: usize): void {
  base = ptr;
  used = 0;
}

/** Writes node `i` (the reader's). */
// @ts-ignore: decorator
@inline export function setNode(i: i32, type: u8, format: u8, count: i32, pos: i32, num: f64): void {
  store<u8>(types + <usize>i, type);
  store<u8>(formats + <usize>i, format);
  store<i32>(counts + (<usize>i << 2), count);
  store<i32>(positions + (<usize>i << 2), pos);
  store<f64>(nums + (<usize>i << 3), num);
}

// @ts-ignore: decorator
@inline export function setEnd(i: i32, v: i32): void { store<i32>(ends + (<usize>i << 2), v); }
/** The reader's stack of open containers: slot k. */
// @ts-ignore: decorator
@inline export function stackSet(k: i32, node: i32): void { store<i32>(stack + (<usize>k << 2), node); }
// @ts-ignore: decorator
@inline export function stackGet(k: i32): i32 { return load<i32>(stack + (<usize>k << 2)); }
/** One more node on the tape. */
// @ts-ignore: decorator
@inline export function tapeGrow(): void { used++; }

/** Nodes on the tape after the last readTape. */
export function tapeSize(): i32 { return used; }
