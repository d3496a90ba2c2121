// Decoding a table file in the core, in src/table/codec.ts decodeTable's order: one complete msgpack value (msgpack.ts),
// plain data only (plain.ts), every field (validate.ts), then the checksum over the canonical encoding
// (canonical.ts); only then is it staged (stage.ts). Any failure leaves the error record (report.ts) naming the
// field and the problem; the active table is never touched here (index.ts makes the staged table active).

import {
  LIMIT_MAX_OSL_CLASSES, OC_NAME_AT, OC_NAME_LENGTH, OC_REPRESENTATIVE, OK, P_CHECKSUM_MISMATCH, P_EMPTY, TE_HASH_HI,
  TE_HASH_LO, TI_CELLS, TI_CHECKSUM_HI, TI_CHECKSUM_LO, TI_CREATED_AT, TI_CREATED_LENGTH, TI_DIMS, TI_FEATURE0, TI_K,
  TI_KIND, TI_NOTES_AT, TI_NOTES_LENGTH, TI_OSL_AT, TI_OSL_CLASSES, TI_OSL_MODEL_FEATURES, TI_REMOTE_BITS, TI_SEED,
  TI_SLO_TPOT_MS, TI_SLO_TTFT_MS, TI_SPLIT_AT, TI_SPLIT_LENGTH, TI_STAGED_LENGTH, TI_TOOL_AT, TI_TOOL_LENGTH,
  TI_WORKLOAD_AT, TI_WORKLOAD_LENGTH, KIND_PPD,
} from "../generated/abi";
import { CANONICAL_BYTES, canonicalInit, tableChecksum } from "./canonical";
import { checksumValue, isString, numberValue } from "./fields";
import { KEYS_BYTES, indexKeys, keysInit, mapGet } from "./keys";
import { TAPE_BYTES, T_MAP, nodeCount, nodeEnd, nodeNum, nodePos, nodeType, readTape, tapeInit, tapeSize } from "./msgpack";
import { checkPlain } from "./plain";
import {
  REPORT_BYTES, clearInfo, note, pathBytes, pathName, reject, reportInit, reportReset, setInfo, setOslClass,
} from "./report";
import { oslAt, stageTable, stagedDims, stagedK, stagedLength } from "./stage";
import {
  bits, checksum, clusters, dims, featureIndex, features, kind, oslClasses, oslModel, params, provenance, slo, split,
  validateTable,
} from "./validate";

/** Allocates the decoder's memory, once (called from init): the tape, the key index, the records, the hash state. */
export function tableDecoderInit(): void {
  // f64 arrays first, then i32, then bytes, so every part stays aligned
  let at = heap.alloc(REPORT_BYTES + TAPE_BYTES + KEYS_BYTES + CANONICAL_BYTES + 24); // + alignment
  at = reportInit(at);
  at = tapeInit((at + 7) & ~7);
  at = keysInit((at + 7) & ~7);
  canonicalInit((at + 7) & ~7);
}

/**
 * Decodes, validates, verifies and stages the `len` table bytes at `ptr`. OK (then stagedKind() … describe the
 * staged table), E_BAD_TABLE with the error record filled, or E_TABLE_TOO_LARGE.
 */
export function decodeTable(ptr: usize, len: i32): i32 {
  reportReset(len);
  if (len <= 0) {
    pathBytes();
    return reject(P_EMPTY, -1);
  }
  let rc = readTape(ptr, len);
  if (rc != OK) return rc;
  indexKeys(tapeSize());
  rc = checkPlain(0, 0);
  if (rc != OK) return rc;
  rc = validateTable(0);
  if (rc != OK) return rc;
  const actual = tableChecksum(0);
  if (actual != checksumValue) {
    pathName("checksum");
    rc = reject(P_CHECKSUM_MISMATCH, checksum);
    note(TE_HASH_HI, <f64>(actual >> 32));
    note(TE_HASH_LO, <f64>(actual & 0xffffffff));
    return rc;
  }
  return stageTable();
}

export function stagedKind(): i32 { return kind; }
export function stagedClusters(): i32 { return stagedK; }
export function stagedFeatureCount(): i32 { return stagedDims; }
export function stagedOslAt(): i32 { return oslAt; }

function setString(atSlot: i32, lengthSlot: i32, node: i32): void {
  const present = isString(node);
  setInfo(atSlot, present ? nodePos(node) : -1);
  setInfo(lengthSlot, present ? nodeCount(node) : 0);
}

function countOnes(node: i32): i32 {
  let n = 0;
  let c = node + 1;
  for (let i = 0; i < nodeCount(node); i++, c = nodeEnd(c)) if (nodeNum(c) == 1) n++;
  return n;
}

/**
 * Fills the output-length class records: each class's name (where its UTF-8 text lies in the table bytes, as the
 * info record gives provenance strings) and representative length, so a host can route by class name without
 * decoding the table. Validated: 1–16 classes, names are strings, one representative per name.
 */
function describeOslClasses(): void {
  if (oslClasses < 0) return;
  const names = mapGet(oslClasses, "names");
  let name = names + 1;
  let representative = mapGet(oslClasses, "representative") + 1;
  const n = min(nodeCount(names), LIMIT_MAX_OSL_CLASSES);
  for (let i = 0; i < n; i++, name = nodeEnd(name), representative = nodeEnd(representative)) {
    setOslClass(i, OC_NAME_AT, nodePos(name));
    setOslClass(i, OC_NAME_LENGTH, nodeCount(name));
    setOslClass(i, OC_REPRESENTATIVE, numberValue(representative));
  }
}

/** Fills the info record and the class records from the table just decoded (call once it is active). */
export function describeLoadedTable(): void {
  clearInfo();
  setInfo(TI_KIND, kind);
  setInfo(TI_K, clusters);
  setInfo(TI_DIMS, dims);
  let f = features + 1;
  for (let j = 0; j < 4; j++) {
    const present = features >= 0 && j < nodeCount(features);
    setInfo(TI_FEATURE0 + j, present ? featureIndex(f) : -1);
    if (present) f = nodeEnd(f);
  }
  if (kind == KIND_PPD) {
    const grid = mapGet(params, "bits");
    let remote = 0;
    let cells = 0;
    let ratios = grid + 1;
    for (let i = 0; i < nodeCount(grid); i++, ratios = nodeEnd(ratios)) {
      let row = ratios + 1;
      for (let j = 0; j < nodeCount(ratios); j++, row = nodeEnd(row)) {
        remote += countOnes(row);
        cells += nodeCount(row);
      }
    }
    setInfo(TI_REMOTE_BITS, remote);
    setInfo(TI_CELLS, cells);
  } else if (bits >= 0 && clusters > 0) {
    setInfo(TI_REMOTE_BITS, countOnes(bits));
    setInfo(TI_CELLS, clusters);
  }
  setInfo(TI_OSL_CLASSES, oslClasses >= 0 ? nodeCount(mapGet(oslClasses, "names")) : 0);
  setInfo(TI_OSL_MODEL_FEATURES, oslModel >= 0 ? nodeCount(mapGet(oslModel, "features")) : 0);
  setInfo(TI_STAGED_LENGTH, stagedLength());
  setInfo(TI_OSL_AT, oslAt);
  const sloMap = slo >= 0 && nodeType(slo) == T_MAP;
  setInfo(TI_SLO_TTFT_MS, sloMap ? nodeNum(mapGet(slo, "ttft_ms")) : -1);
  setInfo(TI_SLO_TPOT_MS, sloMap ? nodeNum(mapGet(slo, "tpot_ms")) : -1);
  setInfo(TI_SEED, nodeNum(mapGet(provenance, "seed")));
  setInfo(TI_CHECKSUM_HI, <f64>(checksumValue >> 32));
  setInfo(TI_CHECKSUM_LO, <f64>(checksumValue & 0xffffffff));
  setString(TI_SPLIT_AT, TI_SPLIT_LENGTH, split);
  setString(TI_TOOL_AT, TI_TOOL_LENGTH, mapGet(provenance, "tool"));
  setString(TI_CREATED_AT, TI_CREATED_LENGTH, mapGet(provenance, "created"));
  setString(TI_WORKLOAD_AT, TI_WORKLOAD_LENGTH, mapGet(provenance, "workload"));
  setString(TI_NOTES_AT, TI_NOTES_LENGTH, mapGet(provenance, "notes"));
  describeOslClasses();
}
