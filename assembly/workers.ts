// Workers around the bit: roles, the loads the host reports, and the KV-aware choice of the decode and the
// prefill worker. Cost in the spirit of Dynamo's KV router (lib/kv-router, reference-systems.md):
//   cost(w) = loadScale × (activePrefillTokens(w) + max(isl − cachedTokens(w), 0)) + activeDecodeTokens(w)
// i.e. the prompt tokens the worker still has to prefill (overlap credit 1.0 for device-resident blocks, the
// tier's weight for blocks held in a lower tier only: prefix-index/tiers.ts) against its load. Lowest cost wins;
// ties go to the lowest worker id, so choices are deterministic.

import { E_BAD_LOAD, E_BAD_ROLE, E_UNKNOWN_WORKER, OK, ROLE_BOTH, ROLE_DECODE, ROLE_NONE, ROLE_PREFILL } from "./generated/abi";
import { fail } from "./errors";
import { workerInRange } from "./prefix-index/store";
import { holdsLower, weightedBlocks } from "./prefix-index/tiers";


// @ts-ignore: decorator
@inline const LIST_ENTRY_BYTES: usize = 16; // a role list's entry: the worker's cost floor f64 @0, its id i32 @8

let maxWorkers: i32 = 0;
let roles: usize = 0; // u8[maxWorkers]
let prefillLoad: usize = 0; // f64[maxWorkers], active prefill tokens
let decodeLoad: usize = 0; // f64[maxWorkers], active decode tokens (KV held by running decodes)
let costFloor: usize = 0; // f64[maxWorkers], loadScale × prefill load + decode load: no cost is below it (cheapest)
let decodeList: usize = 0; // entries (floor f64 @0, id i32 @8) by (cost floor, id): see the role lists' section
let prefillList: usize = 0;
let decodeCount: i32 = 0;
let prefillCount: i32 = 0;
let highWater: i32 = 0; // 1 + the largest id ever given a role

export let loadScale: f64 = 1.0;
export let lastCost: f64 = 0; // cost of the last chosen worker

export function workersInit(workers: i32): void {
  maxWorkers = workers;
  const w = <usize>workers;
  roles = heap.alloc(w);
  memory.fill(roles, 0, w);
  prefillLoad = heap.alloc(w << 3);
  decodeLoad = heap.alloc(w << 3);
  memory.fill(prefillLoad, 0, w << 3);
  memory.fill(decodeLoad, 0, w << 3);
  costFloor = heap.alloc(w << 3);
  memory.fill(costFloor, 0, w << 3);
  decodeList = heap.alloc(w * LIST_ENTRY_BYTES);
  prefillList = heap.alloc(w * LIST_ENTRY_BYTES);
}

export function workerSpan(): i32 { return highWater; }
export function decodeWorkers(): i32 { return decodeCount; }
export function prefillWorkers(): i32 { return prefillCount; }
export function roleOf(worker: i32): u8 { return load<u8>(roles + <usize>worker); }
export function prefillLoadOf(worker: i32): f64 { return load<f64>(prefillLoad + (<usize>worker << 3)); }
/** A decode worker's load as a table's load bounds see it: its active prefill + active decode tokens. */
export function decodeLoadOf(worker: i32): f64 {
  const at = <usize>worker << 3;
  return load<f64>(prefillLoad + at) + load<f64>(decodeLoad + at);
}

export function setRole(worker: i32, role: i32): i32 {
  if (!workerInRange(worker)) return fail(E_UNKNOWN_WORKER, worker);
  if (<u32>role > <u32>ROLE_BOTH) return fail(E_BAD_ROLE, role);
  const old = load<u8>(roles + <usize>worker);
  store<u8>(roles + <usize>worker, <u8>role);
  if (role != ROLE_NONE && worker >= highWater) highWater = worker + 1;
  if (old & ROLE_DECODE) decodeCount = listRemove(decodeList, decodeCount, worker);
  if (old & ROLE_PREFILL) prefillCount = listRemove(prefillList, prefillCount, worker);
  if (role & ROLE_DECODE) decodeCount = listInsert(decodeList, decodeCount, worker);
  if (role & ROLE_PREFILL) prefillCount = listInsert(prefillList, prefillCount, worker);
  return OK;
}

// ---- the role lists, in order of cost floor --------------------------------------------------------------
// Each list holds its role's workers sorted by (cost floor, id), each entry with its floor (so the walk reads the
// floors in order, not each worker's from the floor array), so `cheapest` visits them from the least loaded and
// stops at the first whose floor is above the best cost found: at 1,024 workers it scores the few that could still
// win instead of every one. A load or role change moves one worker (O(workers), like the id-ordered list
// rebuilt on each role change it replaced); a new load scale re-sorts the lists.

/** The address of entry k of a role list. */
// @ts-ignore: decorator
@inline function entryAt(list: usize, k: i32): usize { return list + <usize>k * LIST_ENTRY_BYTES; }

/** Whether (floor, id) comes before entry `e`: the lower cost floor, then the lower id. */
// @ts-ignore: decorator
@inline function before(floor: f64, id: i32, e: usize): bool {
  const f = load<f64>(e);
  return floor < f || (floor == f && id < load<i32>(e, 8));
}

/** Removes `worker` from `list` (`count` entries) if listed; returns the new count. */
function listRemove(list: usize, count: i32, worker: i32): i32 {
  let k = 0;
  while (k < count && load<i32>(entryAt(list, k), 8) != worker) k++;
  if (k == count) return count;
  memory.copy(entryAt(list, k), entryAt(list, k + 1), <usize>(count - k - 1) * LIST_ENTRY_BYTES);
  return count - 1;
}

/**
 * Writes (floor, worker) into the sorted first `sorted` entries of `list` at its place, moving the entries it comes
 * before one place up (entry `sorted` is free or is the one being placed).
 */
function placeEntry(list: usize, sorted: i32, floor: f64, worker: i32): void {
  let k = sorted;
  while (k > 0 && before(floor, worker, entryAt(list, k - 1))) {
    memory.copy(entryAt(list, k), entryAt(list, k - 1), LIST_ENTRY_BYTES);
    k--;
  }
  store<f64>(entryAt(list, k), floor);
  store<i32>(entryAt(list, k), worker, 8);
}

/** Inserts `worker` (not listed) into `list` (`count` entries, sorted) at its place; returns the new count. */
function listInsert(list: usize, count: i32, worker: i32): i32 {
  placeEntry(list, count, load<f64>(costFloor + (<usize>worker << 3)), worker);
  return count + 1;
}

/** Puts a worker whose cost floor changed back in its place in the lists of its roles. */
function relist(worker: i32): void {
  const role = load<u8>(roles + <usize>worker);
  if (role & ROLE_DECODE) {
    decodeCount = listInsert(decodeList, listRemove(decodeList, decodeCount, worker), worker);
  }
  if (role & ROLE_PREFILL) {
    prefillCount = listInsert(prefillList, listRemove(prefillList, prefillCount, worker), worker);
  }
}

/** Re-reads each entry's floor, then sorts `list` (`count` entries) by (cost floor, id): insertion sort. */
function sortList(list: usize, count: i32): void {
  for (let k = 0; k < count; k++) {
    const e = entryAt(list, k);
    store<f64>(e, load<f64>(costFloor + (<usize>load<i32>(e, 8) << 3)));
  }
  for (let i = 1; i < count; i++) placeEntry(list, i, load<f64>(entryAt(list, i)), load<i32>(entryAt(list, i), 8));
}

export function setLoad(worker: i32, activePrefillTokens: f64, activeDecodeTokens: f64): i32 {
  if (!workerInRange(worker)) return fail(E_UNKNOWN_WORKER, worker);
  // `!(x >= 0)` also rejects NaN; the upper bound keeps costs finite
  if (!(activePrefillTokens >= 0) || activePrefillTokens > 1e15) return fail(E_BAD_LOAD, activePrefillTokens);
  if (!(activeDecodeTokens >= 0) || activeDecodeTokens > 1e15) return fail(E_BAD_LOAD, activeDecodeTokens);
  store<f64>(prefillLoad + (<usize>worker << 3), activePrefillTokens);
  store<f64>(decodeLoad + (<usize>worker << 3), activeDecodeTokens);
  setFloor(worker);
  relist(worker);
  return OK;
}

/**
 * The cost a worker cannot go below, whatever it has cached: its cost with nothing left to prefill, in the same
 * operations (rounding is monotone, and the uncached tokens are ≥ 0, so floor ≤ cost as doubles, exactly).
 */
function setFloor(w: i32): void {
  const at = <usize>w << 3;
  store<f64>(costFloor + at, loadScale * load<f64>(prefillLoad + at) + load<f64>(decodeLoad + at));
}

export function setLoadScale(scale: f64): i32 {
  if (!(scale >= 0) || scale > 1e6) return fail(E_BAD_LOAD, scale);
  loadScale = scale;
  for (let w = 0; w < maxWorkers; w++) setFloor(w);
  sortList(decodeList, decodeCount);
  sortList(prefillList, prefillCount);
  return OK;
}

// @ts-ignore: decorator
@inline function cost(w: i32, isl: f64, matched: usize, tokensPerBlock: f64): f64 {
  const cached = weightedBlocks(w, load<u32>(matched + (<usize>w << 2))) * tokensPerBlock;
  const uncached = isl > cached ? isl - cached : 0.0;
  return loadScale * (load<f64>(prefillLoad + (<usize>w << 3)) + uncached) + load<f64>(decodeLoad + (<usize>w << 3));
}

/**
 * The worker of `list` (`count` ids) with the lowest cost other than `exclude` (−1 for none), or −1; its cost in
 * lastCost. Ties go to the lowest id. The list is in order of cost floor (setFloor), and no worker costs less than
 * its floor, so the walk ends at the first worker whose floor is above the best cost so far: none after it can
 * win (one whose floor equals the best may tie it with a lower id, so it is scored).
 */
function cheapest(list: usize, count: i32, exclude: i32, isl: f64, matched: usize, tokensPerBlock: f64): i32 {
  const scale = loadScale;
  const prefill = prefillLoad;
  const decode = decodeLoad;
  let best = -1;
  let bestCost = Infinity;
  for (let i = 0; i < count; i++) {
    const e = entryAt(list, i); // bounded by count ≤ maxWorkers
    if (load<f64>(e) > bestCost) break;
    const w = load<i32>(e, 8);
    if (w == exclude) continue;
    const m = load<u32>(matched + (<usize>w << 2));
    let cached = <f64>m * tokensPerBlock;
    if (holdsLower(w)) {
      // its cost with every matched block counted in full is a lower bound (a lower tier weighs ≤ 1): when that
      // cannot win, its lower-tier blocks need not be counted (a walk of its matched prefix)
      const bound = scale * (load<f64>(prefill + (<usize>w << 3)) + (isl > cached ? isl - cached : 0.0)) +
        load<f64>(decode + (<usize>w << 3));
      if (bound > bestCost || (bound == bestCost && w > best)) continue;
      cached = weightedBlocks(w, m) * tokensPerBlock;
    }
    const uncached = isl > cached ? isl - cached : 0.0;
    const c = scale * (load<f64>(prefill + (<usize>w << 3)) + uncached) + load<f64>(decode + (<usize>w << 3));
    if (c < bestCost || (c == bestCost && w < best)) {
      bestCost = c;
      best = w;
    }
  }
  lastCost = bestCost;
  return best;
}

/** The decode worker with the lowest cost, or -1 when there is none. */
export function chooseDecode(isl: f64, matched: usize, tokensPerBlock: f64): i32 {
  return cheapest(decodeList, decodeCount, -1, isl, matched, tokensPerBlock);
}

/** The prefill worker with the lowest cost other than `exclude`, or -1 when there is none. */
export function choosePrefill(isl: f64, matched: usize, tokensPerBlock: f64, exclude: i32): i32 {
  return cheapest(prefillList, prefillCount, exclude, isl, matched, tokensPerBlock);
}

/** Cost of a given worker (used when the decode worker is pinned by a session). */
export function costOf(w: i32, isl: f64, matched: usize, tokensPerBlock: f64): f64 {
  return cost(w, isl, matched, tokensPerBlock);
}
