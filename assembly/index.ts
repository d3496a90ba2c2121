// The core's exports: the whole ABI the hosts (Node, browser, Envoy, Python, Go) see. Every fallible call
// returns 0 or an error code from errors.ts (counts are returned as negative codes on failure); nothing traps
// on any input. Memory is allocated once in `init` (stub runtime: nothing is ever freed).

import {
  blockSize, hashTextBlocks, hashTokenBlocks, root, scheme, setBlockSizeValue, setRootFrom, setSchemeFrom,
} from "./blocks";
import {
  ABI_VERSION, E_ALREADY_INITIALIZED, E_BAD_BLOCK_SIZE, E_BAD_CONFIG, E_BAD_HASH_SCHEME, E_BAD_LENGTH, E_BAD_TABLE, E_TEXT_NEEDS_XXH64,
  SCHEME_XXH64_CHAIN, E_BAD_SIGNAL, E_NOT_INITIALIZED, E_UNKNOWN_WORKER, OK, LIMIT_MAX_INDEX_BLOCKS, LIMIT_MAX_INPUT_BYTES,
  LIMIT_MAX_WORKERS, E_BAD_TIER, TIER_GPU,
} from "./generated/abi";
import { fail } from "./errors";
import { applyOslSection, checkOslSection, clearOslModel, oslInit } from "./osl";
import { setTable as setTableValue } from "./policy/set-table";
import { policyInit, scores, setSignals as setSignalValues, staging, standardized, STAGING_F64 } from "./policy/state";
// route before prefix-index/: imports compile in order, and that order is the module's globals' (core.wasm's bytes)
import { checkInput, decision, hashes, input, inputBytes, matched, request, routeInit } from "./route";
import { indexInit } from "./prefix-index/layout";
import { matchPrefix } from "./prefix-index/match";
import {
  capacityOf, clearWorker, countOf, freeCapacity, holds, lowerCountOf, removeBlocks, setCapacity, storeBlocks,
  tiersOf, workerInRange,
} from "./prefix-index/store";
import { setTierWeight as setTierWeightValue, tierInRange, tiersInit } from "./prefix-index/tiers";
import { decodeTable, describeLoadedTable, stagedClusters, stagedFeatureCount, stagedKind, stagedOslAt, tableDecoderInit } from "./table/load";
import { errorPathPtr, errorRecordPtr, infoRecordPtr, lastProblem, oslClassRecordsPtr } from "./table/report";
import { setLoad as setLoadValue, setLoadScale as setLoadScaleValue, setRole as setRoleValue, workerSpan, workersInit } from "./workers";

export { errorDetail } from "./errors";
export { decideFeatures, route } from "./route";
export { tableKind, tableK, tableDims } from "./policy/state";
export { decodeWorkers, prefillWorkers } from "./workers";

// @ts-ignore: decorator
@inline const MAX_WORKERS: i32 = LIMIT_MAX_WORKERS;
// @ts-ignore: decorator
@inline const MAX_INPUT_BYTES: i32 = LIMIT_MAX_INPUT_BYTES;
// @ts-ignore: decorator
@inline const MAX_INDEX_BLOCKS: i32 = LIMIT_MAX_INDEX_BLOCKS;

/** The contract this core implements (spec/abi.json "abi_version"): hosts check it before anything else. */
export function abiVersion(): i32 { return ABI_VERSION; }

let ready = false;

/**
 * Allocates the core: up to `maxWorkers` workers (ids 0…maxWorkers−1), an input buffer of `maxInputBytes`
 * (token ids × 4, text bytes, or block hashes × 8), and an index pool of `indexBlocks` blocks shared by all
 * workers' capacities. Callable once per instance.
 */
export function init(maxWorkers: i32, maxInputBytes: i32, indexBlocks: i32): i32 {
  if (ready) return fail(E_ALREADY_INITIALIZED, 0);
  if (maxWorkers < 1 || maxWorkers > MAX_WORKERS) return fail(E_BAD_CONFIG, 0);
  if (maxInputBytes < 64 || maxInputBytes > MAX_INPUT_BYTES) return fail(E_BAD_CONFIG, 1);
  if (indexBlocks < 0 || indexBlocks > MAX_INDEX_BLOCKS) return fail(E_BAD_CONFIG, 2);
  const bytes = (maxInputBytes + 7) & ~7;
  routeInit(bytes, maxWorkers);
  workersInit(maxWorkers);
  policyInit();
  oslInit();
  tableDecoderInit();
  tiersInit(maxWorkers);
  indexInit(maxWorkers, <u32>indexBlocks); // last: its tables are the one large allocation (prefix-index/layout.ts)
  ready = true;
  return OK;
}

export function isReady(): bool { return ready; }
export function inputPtr(): usize { return input; }
export function inputCapacity(): i32 { return inputBytes; }
export function hashesPtr(): usize { return hashes; }
export function matchedPtr(): usize { return matched; }
export function decisionPtr(): usize { return decision; }
export function requestPtr(): usize { return request; }
export function stagingPtr(): usize { return staging; }
export function scoresPtr(): usize { return scores; }
export function standardizedPtr(): usize { return standardized; }
export function workerSpanNow(): i32 { return workerSpan(); }
export function currentBlockSize(): i32 { return blockSize; }
export function rootHash(): u64 { return root; }

export function setBlockSize(n: i32): i32 {
  if (!ready) return fail(E_NOT_INITIALIZED, 0);
  return setBlockSizeValue(n) ? OK : fail(E_BAD_BLOCK_SIZE, n);
}

/** Root hash from the `len` bytes the host wrote at the input buffer (model ‖ "\0" ‖ salt, or nothing). */
export function setRoot(len: i32): i32 {
  if (!ready) return fail(E_NOT_INITIALIZED, 0);
  const rc = checkInput(len, 1);
  if (rc != OK) return rc;
  setRootFrom(input, len);
  return OK;
}

/** Block-hash scheme `s` with its root from the input buffer: `seedLen` bytes of hash seed, then `modelLen` of model. */
export function setHashScheme(s: i32, seedLen: i32, modelLen: i32): i32 {
  if (!ready) return fail(E_NOT_INITIALIZED, 0);
  if (seedLen < 0 || modelLen < 0) return fail(E_BAD_LENGTH, min(seedLen, modelLen));
  const rc = checkInput(seedLen + modelLen, 1);
  if (rc != OK) return rc;
  return setSchemeFrom(s, input, seedLen, modelLen) ? OK : fail(E_BAD_HASH_SCHEME, s);
}

/** Hashes `n` token ids from the input buffer into the hashes buffer; returns the block count or −error. */
export function hashTokens(n: i32): i32 {
  if (!ready) return -fail(E_NOT_INITIALIZED, 0);
  const rc = checkInput(n, 4);
  if (rc != OK) return -rc;
  return hashTokenBlocks(input, n, hashes);
}

/** Hashes `n` UTF-8 bytes from the input buffer into the hashes buffer; returns the block count or −error. */
export function hashText(n: i32): i32 {
  if (!ready) return -fail(E_NOT_INITIALIZED, 0);
  const rc = checkInput(n, 1);
  if (rc != OK) return -rc;
  if (scheme != SCHEME_XXH64_CHAIN) return -fail(E_TEXT_NEEDS_XXH64, scheme);
  return hashTextBlocks(input, n, hashes);
}

/** Longest cached prefix per worker for `n` hashes in the input buffer (or the hashes buffer if fromHashes). */
export function match(n: i32, fromHashes: bool): i32 {
  if (!ready) return -fail(E_NOT_INITIALIZED, 0);
  const rc = checkInput(n, 8);
  if (rc != OK) return -rc;
  return matchPrefix(fromHashes ? hashes : input, n, matched, workerSpan());
}

// ---- workers -------------------------------------------------------------------------------------------

/** Role 0 none, 1 prefill, 2 decode, 3 both; `capacityBlocks` bounds what the index keeps for it. */
export function setWorker(worker: i32, role: i32, capacityBlocks: i32): i32 {
  if (!ready) return fail(E_NOT_INITIALIZED, 0);
  if (!workerInRange(worker)) return fail(E_UNKNOWN_WORKER, worker);
  if (capacityBlocks < 0) return fail(E_BAD_CONFIG, capacityBlocks);
  const rc = setCapacity(worker, <u32>capacityBlocks);
  if (rc != OK) return rc;
  if (role == 0) clearWorker(<u32>worker);
  return setRoleValue(worker, role);
}

export function setLoad(worker: i32, activePrefillTokens: f64, activeDecodeTokens: f64): i32 {
  if (!ready) return fail(E_NOT_INITIALIZED, 0);
  return setLoadValue(worker, activePrefillTokens, activeDecodeTokens);
}

export function setLoadScale(scale: f64): i32 {
  if (!ready) return fail(E_NOT_INITIALIZED, 0);
  return setLoadScaleValue(scale);
}

/** Cluster-wide signals: queued prefill requests (Dynamo legacy) and the current request rate (PPD). */
export function setSignals(prefillQueue: f64, qps: f64): i32 {
  if (!ready) return fail(E_NOT_INITIALIZED, 0);
  return setSignalValues(prefillQueue, qps) ? OK : fail(E_BAD_SIGNAL, isNaN(prefillQueue) || prefillQueue < 0 ? 0 : 1);
}

// ---- index ---------------------------------------------------------------------------------------------

/** `worker` now holds the `n` hashes in the input buffer (a KV event's BlockStored, or a routed prompt). */
export function indexStore(worker: i32, n: i32): i32 {
  if (!ready) return fail(E_NOT_INITIALIZED, 0);
  if (!workerInRange(worker)) return fail(E_UNKNOWN_WORKER, worker);
  const rc = checkInput(n, 8);
  if (rc != OK) return rc;
  storeBlocks(<u32>worker, input, n);
  return OK;
}

export function indexRemove(worker: i32, n: i32): i32 {
  if (!ready) return fail(E_NOT_INITIALIZED, 0);
  if (!workerInRange(worker)) return fail(E_UNKNOWN_WORKER, worker);
  const rc = checkInput(n, 8);
  if (rc != OK) return rc;
  removeBlocks(<u32>worker, input, n);
  return OK;
}

/** `worker` now holds the `n` hashes in the input buffer in `tier` (a BlockStored with its medium). */
export function indexStoreTier(worker: i32, n: i32, tier: i32): i32 {
  if (!ready) return fail(E_NOT_INITIALIZED, 0);
  if (!workerInRange(worker)) return fail(E_UNKNOWN_WORKER, worker);
  if (!tierInRange(tier)) return fail(E_BAD_TIER, tier);
  const rc = checkInput(n, 8);
  if (rc != OK) return rc;
  storeBlocks(<u32>worker, input, n, tier != TIER_GPU);
  return OK;
}

/** `worker` no longer holds the `n` hashes in `tier`; a block no tier holds is forgotten. */
export function indexRemoveTier(worker: i32, n: i32, tier: i32): i32 {
  if (!ready) return fail(E_NOT_INITIALIZED, 0);
  if (!workerInRange(worker)) return fail(E_UNKNOWN_WORKER, worker);
  if (!tierInRange(tier)) return fail(E_BAD_TIER, tier);
  const rc = checkInput(n, 8);
  if (rc != OK) return rc;
  removeBlocks(<u32>worker, input, n, tier != TIER_GPU);
  return OK;
}

/** The tiers (bits 1 << tier) in which `worker` holds the hash at input[0]; 0 if none, −1 on a bad worker. */
export function indexTiers(worker: i32): i32 {
  if (!ready || !workerInRange(worker)) return -1;
  return tiersOf(<u32>worker, load<u64>(input));
}

/** Blocks `worker` holds in a lower tier only, or −1 on a bad worker. */
export function indexLowerCount(worker: i32): i32 {
  if (!ready || !workerInRange(worker)) return -1;
  return <i32>lowerCountOf(<u32>worker);
}

/** A lower tier's weight against a device hit, in [0, 1] (tier 0's is 1). */
export function setTierWeight(tier: i32, weight: f64): i32 {
  return setTierWeightValue(tier, weight);
}

/** Forgets what `worker` holds; −1 clears every worker. */
export function indexClear(worker: i32): i32 {
  if (!ready) return fail(E_NOT_INITIALIZED, 0);
  if (worker == -1) {
    for (let w = 0; w < workerSpan(); w++) clearWorker(<u32>w);
    return OK;
  }
  if (!workerInRange(worker)) return fail(E_UNKNOWN_WORKER, worker);
  clearWorker(<u32>worker);
  return OK;
}

export function indexCount(worker: i32): i32 {
  if (!ready || !workerInRange(worker)) return -1;
  return <i32>countOf(worker);
}

export function indexCapacity(worker: i32): i32 {
  if (!ready || !workerInRange(worker)) return -1;
  return <i32>capacityOf(worker);
}

export function indexFree(): f64 {
  return ready ? freeCapacity() : 0;
}

/** 1 if `worker` holds the hash at input[0], 0 if not, −1 on a bad worker. */
export function indexHolds(worker: i32): i32 {
  if (!ready || !workerInRange(worker)) return -1;
  return holds(<u32>worker, load<u64>(input)) ? 1 : 0;
}

// ---- table ---------------------------------------------------------------------------------------------

/**
 * Validates the table staged at stagingPtr() (see policy.ts for the layouts) and, when `oslAt` ≥ 0, the
 * output-length model staged from f64 index `oslAt` (osl.ts); only when both are valid do both become active.
 * `oslAt` < 0 removes any output-length model.
 */
export function setTable(kind: i32, k: i32, dims: i32, oslAt: i32): i32 {
  if (!ready) return fail(E_NOT_INITIALIZED, 0);
  if (oslAt >= 0) {
    const rc = checkOslSection(staging, oslAt, STAGING_F64);
    if (rc != OK) return rc;
  }
  const rc = setTableValue(kind, k, dims);
  if (rc != OK) return rc;
  if (oslAt >= 0) applyOslSection(staging, oslAt);
  else clearOslModel();
  return OK;
}

/**
 * Decodes, validates and verifies the table file (msgpack, docs/table-format.md) the host wrote as `len` bytes at
 * the input buffer, stages it and makes it active: the same result as staging it on the host and calling setTable.
 * On E_BAD_TABLE the table error record (tableErrorPtr(), the path at tableErrorPathPtr()) says which field is
 * wrong and how; on any error the active table stays as it was. On OK the table info record describes it.
 */
export function loadTable(len: i32): i32 {
  if (!ready) return fail(E_NOT_INITIALIZED, 0);
  const rc = checkInput(len, 1);
  if (rc != OK) return rc;
  const decoded = decodeTable(input, len);
  if (decoded != OK) return decoded == E_BAD_TABLE ? fail(decoded, lastProblem()) : decoded; // detail: the problem code
  const set = setTable(stagedKind(), stagedClusters(), stagedFeatureCount(), stagedOslAt());
  if (set == OK) describeLoadedTable();
  return set;
}

export function tableErrorPtr(): usize { return errorRecordPtr(); }
export function tableErrorPathPtr(): usize { return errorPathPtr(); }
export function tableInfoPtr(): usize { return infoRecordPtr(); }
export function tableOslClassesPtr(): usize { return oslClassRecordsPtr(); }
