// Map keys on the tape, seen as src/table.ts sees them after decoding: a key that appears twice keeps the position
// of its first occurrence and the value of its last (a JavaScript Map), and loops over an object's own keys visit
// array-index keys ("0", "17") first in numeric order, then the others in insertion order (JavaScript's property
// order). Keys are compared byte-wise with the names the validator asks for (ASCII string literals, static data).

import { LIMIT_MAX_TABLE_NODES } from "../generated/abi";
import { T_MAP, T_STR, nodeCount, nodeEnd, nodePos, nodeType, tableBase } from "./msgpack";

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
export function sameKey(a: i32, b: i32): bool {
  return nodeType(a) == T_STR && nodeType(b) == T_STR && nodeCount(a) == nodeCount(b) && compareKeys(a, b) == 0;
}

/** The value node of the last entry of `map` whose key is `name`, or −1 (absent). */
export function mapGet(map: i32, name: string): i32 {
  for (let k = firstKey(map); k >= 0; k = nextKey(map, k)) if (keyIs(k, name)) return valueOf(map, k);
  return -1;
}

/** The first key node of `map` (−1 when empty); continue with nextEntryKey. Raw order, duplicates included. */
export function firstKey(map: i32): i32 { return nodeCount(map) > 0 ? map + 1 : -1; }

/** The key node after `key` in `map`, or −1. */
export function nextKey(map: i32, key: i32): i32 {
  const next = nodeEnd(nodeEnd(key));
  return next < nodeEnd(map) ? next : -1;
}

let repeated: usize = 0; // u8[N] by key node: 1 when an earlier entry of its map has the same key
let lastValue: usize = 0; // i32[N] by key node: the value of the last entry with that key

export function keysInit(): void {
  repeated = heap.alloc(<usize>LIMIT_MAX_TABLE_NODES);
  lastValue = heap.alloc(<usize>LIMIT_MAX_TABLE_NODES << 2);
}

/** Resolves repeated keys of every map on the tape (nodes 0 … used − 1) once, so lookups below are O(1). */
export function indexKeys(used: i32): void {
  for (let map = 0; map < used; map++) {
    if (nodeType(map) != T_MAP) continue;
    for (let k = firstKey(map); k >= 0; k = nextKey(map, k)) {
      store<u8>(repeated + <usize>k, 0);
      store<i32>(lastValue + (<usize>k << 2), nodeEnd(k));
      if (nodeType(k) != T_STR) continue;
      for (let j = firstKey(map); j != k; j = nextKey(map, j)) {
        if (load<u8>(repeated + <usize>j) == 0 && sameKey(j, k)) {
          store<u8>(repeated + <usize>k, 1);
          store<i32>(lastValue + (<usize>j << 2), nodeEnd(k));
          break;
        }
      }
    }
  }
}

/** The value of the entry whose key is `key` as a JavaScript Map holds it: the last entry with an equal key. */
export function valueOf(map: i32, key: i32): i32 {
  return load<i32>(lastValue + (<usize>key << 2));
}

/** True when no earlier entry of `map` has the same key (the entry a JavaScript Map keeps the position of). */
export function isFirstOccurrence(map: i32, key: i32): bool {
  return load<u8>(repeated + <usize>key) == 0;
}

/** Distinct keys of `map` (entries a JavaScript Map would hold). */
export function distinctKeys(map: i32): i32 {
  let n = 0;
  for (let k = firstKey(map); k >= 0; k = nextKey(map, k)) if (isFirstOccurrence(map, k)) n++;
  return n;
}

/** The array index a key names ("0", "17": what JavaScript lists first among an object's keys), or −1. */
function arrayIndex(key: i32): f64 {
  const n = nodeCount(key);
  if (n < 1 || n > 10) return -1;
  const at = tableBase() + <usize>nodePos(key);
  if (n > 1 && load<u8>(at) == 0x30) return -1;
  let v: f64 = 0;
  for (let i = 0; i < n; i++) {
    const c = <i32>load<u8>(at + <usize>i);
    if (c < 0x30 || c > 0x39) return -1;
    v = v * 10 + (c - 0x30);
  }
  return v <= 4294967294 ? v : -1;
}

/**
 * The next distinct key of `map` in JavaScript's own-property order after `key` (−1 to start), or −1 at the end.
 * Map keys here are strings (plain.ts has rejected any other).
 */
export function nextKeyInObjectOrder(map: i32, key: i32): i32 {
  const after = key < 0 ? -1 : arrayIndex(key);
  if (key < 0 || after >= 0) {
    // the next array-index key by value
    let best = -1;
    let bestValue: f64 = Infinity;
    for (let k = firstKey(map); k >= 0; k = nextKey(map, k)) {
      const v = arrayIndex(k);
      if (v > after && v < bestValue && isFirstOccurrence(map, k)) { best = k; bestValue = v; }
    }
    if (best >= 0) return best;
    key = -1; // then the other keys from the start
  }
  for (let k = key < 0 ? firstKey(map) : nextKey(map, key); k >= 0; k = nextKey(map, k)) {
    if (arrayIndex(k) < 0 && isFirstOccurrence(map, k)) return k;
  }
  return -1;
}
