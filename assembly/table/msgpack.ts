// A small, bounded msgpack reader: it checks that the input is exactly one complete msgpack value and records
// every value, in document order (pre-order), as a node on a preallocated tape of LIMIT_MAX_TABLE_NODES nodes.
// Nothing is allocated after init and nothing recurses: containers are tracked on an explicit stack. A node keeps
// its type, its first byte (the msgpack format), a count (array items, map entries, string/bin bytes), the offset
// of its payload in the input, the index just past its subtree (to skip it) and its value as f64 (numbers,
// booleans; an extension's type). Strings stay in the input: keys are compared byte-wise, never copied.
//
// What is accepted mirrors src/table/codec.ts's decoder (msgpackr with mapsAsObjects: false, int64AsType: "bigint"), so
// the field a rejection names is the same: truncation, trailing bytes and extension types msgpackr does not know
// are "(bytes)" errors; bin values, extension types −1 (timestamps) and 0 (undefined), and the reserved 0xc1 byte
// decode here and are rejected by the plain-data check (plain.ts) at their field path, as they are there.

import { LIMIT_MAX_TABLE_NODES, OK, P_TOO_MANY_VALUES, P_TRAILING, P_TRUNCATED, P_UNKNOWN_EXTENSION, TE_LIMIT, TE_VALUE_NUMBER } from "../generated/abi";
import { note, pathBytes, reject } from "./report";
import {
  T_ARRAY, T_BIG, T_BIN, T_BOOL, T_EXT, T_MAP, T_NIL, T_NUM, T_STR, nodeCount, nodeEnd, nodeType, setEnd, setNode,
  stackGet, stackSet, tapeGrow, tapeSize, tapeStart,
} from "./tape";

// the tape's names, for the passes that import them from here
export {
  TAPE_BYTES, T_ARRAY, T_BIG, T_BIN, T_BOOL, T_EXT, T_MAP, T_NIL, T_NUM, T_STR, byteAt, nodeCount, nodeEnd, nodeFormat,
  nodeNum, nodePos, nodeType, tableBase, tapeInit, tapeSize,
} from "./tape";

const SAFE: f64 = 9007199254740991; // 2^53 − 1

let input: usize = 0; // the bytes being read (the tape's base)
let length: i32 = 0;
let at: i32 = 0; // read position


function truncated(): i32 {
  pathBytes();
  return reject(P_TRUNCATED, -1);
}

/** True when `n` more bytes can be read. */
// @ts-ignore: decorator
@inline function has(n: i64): bool { return <i64>at + n <= <i64>length; }

function be16(): u32 { const v = <u32>bswap<u16>(load<u16>(input + <usize>at)); at += 2; return v; }
function be32(): u32 { const v = bswap<u32>(load<u32>(input + <usize>at)); at += 4; return v; }
function be64(): u64 { const v = bswap<u64>(load<u64>(input + <usize>at)); at += 8; return v; }

/** Reads one value's header (and a scalar's or string's payload) into node `i`; OK or E_BAD_TABLE. */
function readNode(i: i32): i32 {
  if (!has(1)) return truncated();
  const b = <i32>load<u8>(input + <usize>at);
  at++;
  let type: u8 = T_NUM;
  let count: i64 = 0;
  let num: f64 = 0;
  let pos = at;
  if (b <= 0x7f) num = b;
  else if (b >= 0xe0) num = <f64>(b - 256);
  else if (b <= 0x8f) { type = T_MAP; count = b & 15; }
  else if (b <= 0x9f) { type = T_ARRAY; count = b & 15; }
  else if (b <= 0xbf) { type = T_STR; count = b & 31; }
  else {
    switch (b) {
      case 0xc0: type = T_NIL; break;
      case 0xc1: type = T_EXT; num = -2; break;
      case 0xc2: case 0xc3: type = T_BOOL; num = b - 0xc2; break;
      case 0xc4: case 0xd9: { if (!has(1)) return truncated(); type = b == 0xc4 ? T_BIN : T_STR; count = load<u8>(input + <usize>at); at++; break; }
      case 0xc5: case 0xda: { if (!has(2)) return truncated(); type = b == 0xc5 ? T_BIN : T_STR; count = be16(); break; }
      case 0xc6: case 0xdb: { if (!has(4)) return truncated(); type = b == 0xc6 ? T_BIN : T_STR; count = be32(); break; }
      case 0xca: { if (!has(4)) return truncated(); num = <f64>reinterpret<f32>(be32()); break; }
      case 0xcb: { if (!has(8)) return truncated(); num = reinterpret<f64>(be64()); break; }
      case 0xcc: { if (!has(1)) return truncated(); num = load<u8>(input + <usize>at); at++; break; }
      case 0xcd: { if (!has(2)) return truncated(); num = be16(); break; }
      case 0xce: { if (!has(4)) return truncated(); num = be32(); break; }
      case 0xcf: {
        if (!has(8)) return truncated();
        const u = be64();
        if (u > <u64>SAFE) type = T_BIG;
        else num = <f64>u;
        break;
      }
      case 0xd0: { if (!has(1)) return truncated(); num = load<i8>(input + <usize>at); at++; break; }
      case 0xd1: { if (!has(2)) return truncated(); num = <i16>be16(); break; }
      case 0xd2: { if (!has(4)) return truncated(); num = <i32>be32(); break; }
      case 0xd3: {
        if (!has(8)) return truncated();
        const v = <i64>be64();
        if (v > <i64>SAFE || v < -<i64>SAFE) type = T_BIG;
        else num = <f64>v;
        break;
      }
      case 0xd4: case 0xd5: case 0xd6: case 0xd7: case 0xd8:
      case 0xc7: case 0xc8: case 0xc9: {
        let size: i64 = 0;
        if (b >= 0xd4) size = <i64>1 << (b - 0xd4);
        else if (b == 0xc7) { if (!has(1)) return truncated(); size = load<u8>(input + <usize>at); at++; }
        else if (b == 0xc8) { if (!has(2)) return truncated(); size = be16(); }
        else { if (!has(4)) return truncated(); size = be32(); }
        if (!has(1)) return truncated();
        const extType = load<i8>(input + <usize>at);
        at++;
        if (!has(size)) return truncated();
        at += <i32>size;
        // msgpackr decodes type −1 as a Date and type 0 as undefined; it throws for types it does not know
        if (extType != -1 && extType != 0) {
          pathBytes();
          note(TE_VALUE_NUMBER, extType);
          return reject(P_UNKNOWN_EXTENSION, -1);
        }
        type = T_EXT;
        num = extType;
        break;
      }
      case 0xdc: { if (!has(2)) return truncated(); type = T_ARRAY; count = be16(); break; }
      case 0xdd: { if (!has(4)) return truncated(); type = T_ARRAY; count = be32(); break; }
      case 0xde: { if (!has(2)) return truncated(); type = T_MAP; count = be16(); break; }
      case 0xdf: { if (!has(4)) return truncated(); type = T_MAP; count = be32(); break; }
      default: return truncated(); // unreachable: every byte is a format
    }
  }
  if (type == T_STR || type == T_BIN) {
    pos = at;
    if (!has(count)) return truncated();
    at += <i32>count;
  }
  // every item takes at least one byte: a count beyond the bytes left is a truncated value
  if (type == T_ARRAY && !has(count)) return truncated();
  if (type == T_MAP && !has(count * 2)) return truncated();
  setNode(i, type, <u8>b, <i32>count, pos, num);
  return OK;
}

/**
 * Reads the `len` bytes at `ptr` onto the tape. OK, or E_BAD_TABLE with the error record filled (field "(bytes)").
 * Node 0 is the top-level value.
 */
export function readTape(ptr: usize, len: i32): i32 {
  input = ptr;
  length = len;
  at = 0;
  tapeStart(ptr);
  let open = 0;
  do {
    if (tapeSize() >= LIMIT_MAX_TABLE_NODES) {
      pathBytes();
      note(TE_LIMIT, LIMIT_MAX_TABLE_NODES);
      return reject(P_TOO_MANY_VALUES, -1);
    }
    const i = tapeSize();
    const rc = readNode(i);
    if (rc != OK) return rc;
    tapeGrow();
    const t = nodeType(i);
    const items = t == T_MAP ? nodeCount(i) * 2 : t == T_ARRAY ? nodeCount(i) : 0;
    if (items > 0) {
      setEnd(i, items);
      stackSet(open, i);
      open++;
      continue;
    }
    setEnd(i, tapeSize());
    // close every container whose last item this was
    while (open > 0) {
      const top = stackGet(open - 1);
      const left = nodeEnd(top) - 1;
      if (left > 0) {
        setEnd(top, left);
        break;
      }
      setEnd(top, tapeSize());
      open--;
    }
  } while (open > 0);
  if (at != length) {
    pathBytes();
    return reject(P_TRAILING, -1);
  }
  return OK;
}

/** True for a number that is an integer within ±(2^53 − 1) (JavaScript's Number.isSafeInteger). */
export function isSafeInteger(v: f64): bool {
  return isFinite(v) && Math.trunc(v) == v && Math.abs(v) <= SAFE;
}
