// The table's checksum: xxh64 (seed 0) of the canonical msgpack encoding of the top-level map without its
// `checksum` key (docs/table-format.md, "Checksum"; the same rules as src/table/canonical.ts's encoder): map keys
// sorted by code point (= UTF-8 byte order) at every level, the smallest format for every length and integer,
// numbers that are integers within ±(2^53 − 1) written as integers (so 2.0 → 2 and −0 → 0), every other number as
// float64.
//
// The encoding is never materialised: its bytes stream into an incremental xxh64 (assembly/xxh64.ts's rounds,
// lane folding and finish, fed 32-byte stripes), so no buffer proportional to the table is needed. Runs only on a
// validated tape (string keys, finite numbers, nesting bounded), keys as a JavaScript Map holds them (keys.ts).

import { converge, finish, P1, P2, P5, round } from "../xxh64";
import { isFirstOccurrence, keyInByteOrder, keyIs, valueOf } from "./keys";
import { T_ARRAY, T_BOOL, T_MAP, T_NIL, T_NUM, T_STR, byteAt, isSafeInteger, nodeCount, nodeEnd, nodeNum, nodePos, nodeType } from "./msgpack";

// ---- incremental xxh64 (seed 0) ----------------------------------------------------------------------------

let stripe: usize = 0; // u8[32]: bytes not yet folded into v1…v4
let buffered: i32 = 0;
let total: u64 = 0;
let v1: u64 = 0;
let v2: u64 = 0;
let v3: u64 = 0;
let v4: u64 = 0;

export const CANONICAL_BYTES: usize = 32;

/** Places the hash's 32-byte stripe buffer at `at`; returns the address after it. */
export function canonicalInit(at: usize): usize {
  stripe = at;
  return at + 32;
}

function hashStart(): void {
  buffered = 0;
  total = 0;
  v1 = P1 + P2;
  v2 = P2;
  v3 = 0;
  v4 = 0 - P1;
}

function put(b: i32): void {
  store<u8>(stripe + <usize>buffered, <u8>b);
  buffered++;
  total++;
  if (buffered == 32) {
    v1 = round(v1, load<u64>(stripe));
    v2 = round(v2, load<u64>(stripe, 8));
    v3 = round(v3, load<u64>(stripe, 16));
    v4 = round(v4, load<u64>(stripe, 24));
    buffered = 0;
  }
}

function hashEnd(): u64 {
  const h = total >= 32 ? converge(v1, v2, v3, v4) : P5;
  return finish(h + total, stripe, stripe + <usize>buffered);
}

// ---- canonical msgpack -------------------------------------------------------------------------------------

function putBE(v: u64, bytes: i32): void {
  for (let i = bytes - 1; i >= 0; i--) put(<i32>((v >> (<u64>i << 3)) & 0xff));
}

/** The smallest format for a length: fix (≤ fixMax), 8-bit (strings only: op8 ≥ 0), 16-bit or 32-bit. */
function putLength(n: i32, fix: i32, fixMax: i32, op8: i32, op16: i32, op32: i32): void {
  if (n <= fixMax) put(fix | n);
  else if (op8 >= 0 && n < 0x100) { put(op8); put(n); }
  else if (n < 0x10000) { put(op16); putBE(<u64>n, 2); }
  else { put(op32); putBE(<u64>n, 4); }
}

function putNumber(x: f64): void {
  if (!isSafeInteger(x)) {
    put(0xcb);
    putBE(reinterpret<u64>(x), 8);
    return;
  }
  if (x >= 0) {
    const n = <u64>x; // −0 lands here and is written as 0
    if (n < 0x80) put(<i32>n);
    else if (n < 0x100) { put(0xcc); put(<i32>n); }
    else if (n < 0x10000) { put(0xcd); putBE(n, 2); }
    else if (n < 0x100000000) { put(0xce); putBE(n, 4); }
    else { put(0xcf); putBE(n, 8); }
  } else {
    const n = <i64>x;
    if (n >= -32) put(<i32>(n & 0xff));
    else if (n >= -0x80) { put(0xd0); put(<i32>(n & 0xff)); }
    else if (n >= -0x8000) { put(0xd1); putBE(<u64>n, 2); }
    else if (n >= -0x80000000) { put(0xd2); putBE(<u64>n, 4); }
    else { put(0xd3); putBE(<u64>n, 8); }
  }
}

function putString(node: i32): void {
  const n = nodeCount(node);
  putLength(n, 0xa0, 31, 0xd9, 0xda, 0xdb);
  const at = nodePos(node);
  for (let i = 0; i < n; i++) put(byteAt(at + i));
}

/** Writes the map's distinct keys in byte order, each with its (last) value; `skipChecksum` at the top level. */
function putMap(map: i32, skipChecksum: bool): void {
  const entries = nodeCount(map);
  let n = 0;
  for (let i = 0; i < entries; i++) if (written(map, keyInByteOrder(map, i), skipChecksum)) n++;
  putLength(n, 0x80, 15, -1, 0xde, 0xdf);
  for (let i = 0; i < entries; i++) {
    const k = keyInByteOrder(map, i);
    if (!written(map, k, skipChecksum)) continue;
    putString(k);
    putValue(valueOf(map, k));
  }
}

/** Whether key `k` of `map` is written: once per distinct key, and never the top level's `checksum`. */
function written(map: i32, k: i32, skipChecksum: bool): bool {
  return isFirstOccurrence(map, k) && !(skipChecksum && keyIs(k, "checksum"));
}

function putValue(node: i32): void {
  const t = nodeType(node);
  if (t == T_NIL) put(0xc0);
  else if (t == T_BOOL) put(nodeNum(node) != 0 ? 0xc3 : 0xc2);
  else if (t == T_NUM) putNumber(nodeNum(node));
  else if (t == T_STR) putString(node);
  else if (t == T_ARRAY) {
    const n = nodeCount(node);
    putLength(n, 0x90, 15, -1, 0xdc, 0xdd);
    let c = node + 1;
    for (let i = 0; i < n; i++) {
      putValue(c);
      c = nodeEnd(c);
    }
  } else if (t == T_MAP) putMap(node, false);
}

/** xxh64 of the canonical encoding of the top-level map `root` without its `checksum` key. */
export function tableChecksum(root: i32): u64 {
  hashStart();
  putMap(root, true);
  return hashEnd();
}
