// Map keys on the tape, seen as src/table/codec.ts sees them after decoding: a key that appears twice keeps the position
// of its first occurrence and the value of its last (a JavaScript Map), and loops over an object's own keys visit
// array-index keys ("0", "17") first in numeric order, then the others in insertion order (JavaScript's property
// order). Keys are compared byte-wise with the names the validator asks for (ASCII string literals, static data).
//
// indexKeys sorts every map's keys once, in place in preallocated arrays (heapsort: no recursion, no allocation):
// by bytes (the canonical encoding's order; repeated keys end up side by side) and, for array-index keys, by
// value. Every lookup below is then O(1) or one pass, so a map of thousands of keys costs O(n log n), not O(n²).

import { LIMIT_MAX_TABLE_NODES } from "../generated/abi";
import { T_MAP, T_STR, nodeCount, nodeEnd, nodePos, nodeType, tableBase } from "./msgpack";

const N: usize = <usize>LIMIT_MAX_TABLE_NODES;
let repeated: usize = 0; // u8[N] by key node: 1 when an earlier entry of its map has the same key
let lastValue: usize = 0; // i32[N] by key node: the value of the last entry with that key
let byBytes: usize = 0; // i32[N]: each map's key nodes sorted by bytes, then position, from sortedAt[map]
let byIndex: usize = 0; // i32[N]: each map's distinct array-index keys sorted by value, from sortedAt[map]
let sortedAt: usize = 0; // i32[N] by map node
let indexCount: usize = 0; // i32[N] by map node: its distinct array-index keys
let indexRank: usize = 0; // i32[N] by key node: its place in byIndex

export const KEYS_BYTES: usize = N * (1 + 4 * 6);

/** Places the key index at `at` (4-byte aligned); returns the address after it. */
export function keysInit(at: usize): usize {
  lastValue = at;
  byBytes = lastValue + (N << 2);
  byIndex = byBytes + (N << 2);
  sortedAt = byIndex + (N << 2);
  indexCount = sortedAt + (N << 2);
  indexRank = indexCount + (N << 2);
  repeated = indexRank + (N << 2);
  return repeated + N;
}

// @ts-ignore: decorator
@inline function get(array: usize, i: i32): i32 { return load<i32>(array + (<usize>i << 2)); }
// @ts-ignore: decorator
@inline function set(array: usize, i: i32, v: i32): void { store<i32>(array + (<usize>i << 2), v); }

/** True when string node `key` holds exactly the ASCII text `name`. */
export function keyIs(key: i32, name: string): bool {
  if (nodeType(key) != T_STR) return false;
  const n = nodeCount(key);
  if (n != name.length) return false;
  const at = tableBase() + <usize>nodePos(key);
  for (let i = 0; i < n; i++) if (<i32>load<u8>(at + <usize>i) != name.charCodeAt(i)) return false;
  return true;
}

/** Byte-wise order of two string nodes (UTF-8 byte order = code-point order): < 0, 0 or > 0. */
export function compareKeys(a: i32, b: i32): i32 {
  const na = nodeCount(a);
  const nb = nodeCount(b);
  const pa = tableBase() + <usize>nodePos(a);
  const pb = tableBase() + <usize>nodePos(b);
  const n = na < nb ? na : nb;
  for (let i = 0; i < n; i++) {
    const x = <i32>load<u8>(pa + <usize>i);
    const y = <i32>load<u8>(pb + <usize>i);
    if (x != y) return x - y;
  }
  return na - nb;
}

/** Equal keys: two string nodes with the same bytes (other key types are never equal here: they are rejected). */
function sameKey(a: i32, b: i32): bool {
  return nodeType(a) == T_STR && nodeType(b) == T_STR && nodeCount(a) == nodeCount(b) && compareKeys(a, b) == 0;
}

/** Sort order of the byte sort: strings by bytes, then every other key, each group by position. */
function before(a: i32, b: i32, numeric: bool): bool {
  const sa = nodeType(a) == T_STR;
  const sb = nodeType(b) == T_STR;
  if (sa != sb) return sa;
  if (sa) {
    // array-index keys have no leading zeros, so their numeric order is (length, bytes)
    if (numeric && nodeCount(a) != nodeCount(b)) return nodeCount(a) < nodeCount(b);
    const c = compareKeys(a, b);
    if (c != 0) return c < 0;
  }
  return a < b;
}

/** Heapsort of the `n` key nodes array[from …] by `before`. */
function sortKeys(array: usize, from: i32, n: i32, numeric: bool): void {
  for (let start = n / 2 - 1; start >= 0; start--) siftDown(array, from, start, n, numeric);
  for (let end = n - 1; end > 0; end--) {
    const top = get(array, from);
    set(array, from, get(array, from + end));
    set(array, from + end, top);
    siftDown(array, from, 0, end, numeric);
  }
}

function siftDown(array: usize, from: i32, root: i32, n: i32, numeric: bool): void {
  while (true) {
    let child = 2 * root + 1;
    if (child >= n) return;
    if (child + 1 < n && before(get(array, from + child), get(array, from + child + 1), numeric)) child++;
    if (!before(get(array, from + root), get(array, from + child), numeric)) return;
    const t = get(array, from + root);
    set(array, from + root, get(array, from + child));
    set(array, from + child, t);
    root = child;
  }
}

/** The first key node of `map` (−1 when empty); continue with nextKey. Raw order, repeats included. */
export function firstKey(map: i32): i32 { return nodeCount(map) > 0 ? map + 1 : -1; }

/** The key node after `key` in `map`, or −1. */
export function nextKey(map: i32, key: i32): i32 {
  const next = nodeEnd(nodeEnd(key));
  return next < nodeEnd(map) ? next : -1;
}

/** Resolves repeated keys and sorts the keys of every map on the tape (nodes 0 … used − 1), once. */
export function indexKeys(used: i32): void {
  let at = 0;
  for (let map = 0; map < used; map++) {
    if (nodeType(map) != T_MAP) continue;
    const n = nodeCount(map);
    set(sortedAt, map, at);
    let i = 0;
    for (let k = firstKey(map); k >= 0; k = nextKey(map, k)) set(byBytes, at + i++, k);
    sortKeys(byBytes, at, n, false);
    let head = -1;
    for (i = 0; i < n; i++) {
      const k = get(byBytes, at + i);
      if (head >= 0 && sameKey(head, k)) {
        store<u8>(repeated + <usize>k, 1);
        set(lastValue, head, nodeEnd(k));
      } else {
        head = k;
        store<u8>(repeated + <usize>k, 0);
        set(lastValue, k, nodeEnd(k));
      }
    }
    let m = 0;
    for (let k = firstKey(map); k >= 0; k = nextKey(map, k)) {
      if (isArrayIndex(k) && load<u8>(repeated + <usize>k) == 0) set(byIndex, at + m++, k);
    }
    sortKeys(byIndex, at, m, true);
    for (i = 0; i < m; i++) set(indexRank, get(byIndex, at + i), i);
    set(indexCount, map, m);
    at += n;
  }
}

/** The value of the entry whose key is `key` as a JavaScript Map holds it: the last entry with an equal key. */
export function valueOf(map: i32, key: i32): i32 {
  return get(lastValue, key);
}

/** True when no earlier entry of `map` has the same key (the entry a JavaScript Map keeps the position of). */
export function isFirstOccurrence(map: i32, key: i32): bool {
  return load<u8>(repeated + <usize>key) == 0;
}

/** The value node of the entry of `map` whose key is `name` (the last such entry), or −1 (absent). */
export function mapGet(map: i32, name: string): i32 {
  for (let k = firstKey(map); k >= 0; k = nextKey(map, k)) if (keyIs(k, name)) return valueOf(map, k);
  return -1;
}

/** Keys of `map` in byte order, repeats included (skip them with isFirstOccurrence): i = 0 … nodeCount(map) − 1. */
export function keyInByteOrder(map: i32, i: i32): i32 {
  return get(byBytes, get(sortedAt, map) + i);
}

/** A key JavaScript lists first among an object's keys: "0", "17" (no leading zero, at most 2^32 − 2). */
function isArrayIndex(key: i32): bool {
  if (nodeType(key) != T_STR) return false;
  const n = nodeCount(key);
  if (n < 1 || n > 10) return false;
  const at = tableBase() + <usize>nodePos(key);
  if (n > 1 && load<u8>(at) == 0x30) return false;
  let v: f64 = 0;
  for (let i = 0; i < n; i++) {
    const c = <i32>load<u8>(at + <usize>i);
    if (c < 0x30 || c > 0x39) return false;
    v = v * 10 + (c - 0x30);
  }
  return v <= 4294967294;
}

/**
 * The next distinct key of `map` in JavaScript's own-property order after `key` (−1 to start), or −1 at the end.
 * Map keys here are strings (plain.ts has rejected any other).
 */
export function nextKeyInObjectOrder(map: i32, key: i32): i32 {
  const indexKeys = get(indexCount, map);
  let from = -1; // continue with the other keys after this one (−1: from the start)
  if (key < 0 || isArrayIndex(key)) {
    const next = key < 0 ? 0 : get(indexRank, key) + 1;
    if (next < indexKeys) return get(byIndex, get(sortedAt, map) + next);
  } else from = key;
  for (let k = from < 0 ? firstKey(map) : nextKey(map, from); k >= 0; k = nextKey(map, k)) {
    if (!isArrayIndex(k) && load<u8>(repeated + <usize>k) == 0) return k;
  }
  return -1;
}
