// The plain-data check, run on the whole tape before field validation, as src/table/codec.ts's fromMsgpack runs before
// validateTable: nesting at most LIMIT_MAX_TABLE_NESTING levels below the top, integers within ±(2^53 − 1), string
// map keys only, no bin and no extension values. Entries are visited as a JavaScript Map holds them (keys.ts), so
// the first problem found is the one src/table/codec.ts names. Recursion depth is bounded by the nesting check.

import {
  LIMIT_MAX_TABLE_NESTING, OK, P_BIN, P_EXTENSION, P_KEY_NOT_STRING, P_TOO_DEEP, P_UNSAFE_INTEGER, TE_LIMIT,
} from "../generated/abi";
import { firstKey, isFirstOccurrence, nextKey, valueOf } from "./keys";
import { T_ARRAY, T_BIG, T_BIN, T_EXT, T_MAP, T_STR, nodeCount, nodeEnd, nodeType } from "./msgpack";
import { note, pathIndex, pathKey, pathMark, pathRestore, reject, rejectKey } from "./report";

export function checkPlain(node: i32, depth: i32): i32 {
  if (depth > LIMIT_MAX_TABLE_NESTING) {
    note(TE_LIMIT, LIMIT_MAX_TABLE_NESTING);
    return reject(P_TOO_DEEP, node);
  }
  const t = nodeType(node);
  if (t == T_BIG) return reject(P_UNSAFE_INTEGER, node);
  if (t == T_BIN) return reject(P_BIN, node);
  if (t == T_EXT) return reject(P_EXTENSION, node);
  if (t == T_ARRAY) {
    let c = node + 1;
    for (let i = 0; i < nodeCount(node); i++) {
      const mark = pathMark();
      pathIndex(i);
      const rc = checkPlain(c, depth + 1);
      if (rc != OK) return rc;
      pathRestore(mark);
      c = nodeEnd(c);
    }
  } else if (t == T_MAP) {
    for (let k = firstKey(node); k >= 0; k = nextKey(node, k)) {
      if (nodeType(k) != T_STR) return rejectKey(P_KEY_NOT_STRING, k);
      if (!isFirstOccurrence(node, k)) continue;
      const mark = pathMark();
      pathKey(k);
      const rc = checkPlain(valueOf(node, k), depth + 1);
      if (rc != OK) return rc;
      pathRestore(mark);
    }
  }
  return OK;
}
