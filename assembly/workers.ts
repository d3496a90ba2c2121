// Workers around the bit: roles, the loads the host reports, and the KV-aware choice of the decode and the
// prefill worker. Cost in the spirit of Dynamo's KV router (lib/kv-router, reference-systems.md):
//   cost(w) = loadScale × (activePrefillTokens(w) + max(isl − cachedTokens(w), 0)) + activeDecodeTokens(w)
// i.e. the prompt tokens the worker still has to prefill (overlap credit 1.0 for device-resident blocks)
// against its load. Lowest cost wins; ties go to the lowest worker id, so choices are deterministic.

import { E_BAD_LOAD, E_BAD_ROLE, E_UNKNOWN_WORKER, OK, ROLE_BOTH, ROLE_DECODE, ROLE_NONE, ROLE_PREFILL } from "./generated/abi";
import { fail } from "./errors";
import { workerInRange } from "./prefix-index";


let maxWorkers: i32 = 0;
let roles: usize = 0; // u8[maxWorkers]
let prefillLoad: usize = 0; // f64[maxWorkers], active prefill tokens
let decodeLoad: usize = 0; // f64[maxWorkers], active decode tokens (KV held by running decodes)
let costFloor: usize = 0; // f64[maxWorkers], loadScale × prefill load + decode load: no cost is below it (cheapest)
let decodeList: usize = 0; // i32[maxWorkers], ascending ids
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
  decodeList = heap.alloc(w << 2);
  prefillList = heap.alloc(w << 2);
}

export function workerSpan(): i32 { return highWater; }
export function decodeWorkers(): i32 { return decodeCount; }
export function prefillWorkers(): i32 { return prefillCount; }
export function roleOf(worker: i32): u8 { return load<u8>(roles + <usize>worker); }
export function prefillLoadOf(worker: i32): f64 { return load<f64>(prefillLoad + (<usize>worker << 3)); }

export function setRole(worker: i32, role: i32): i32 {
  if (!workerInRange(worker)) return fail(E_UNKNOWN_WORKER, worker);
  if (<u32>role > <u32>ROLE_BOTH) return fail(E_BAD_ROLE, role);
  store<u8>(roles + <usize>worker, <u8>role);
  if (role != ROLE_NONE && worker >= highWater) highWater = worker + 1;
  decodeCount = 0;
  prefillCount = 0;
  for (let w = 0; w < highWater; w++) {
    const r = load<u8>(roles + <usize>w);
    if (r & ROLE_DECODE) {
      store<i32>(decodeList + (<usize>decodeCount << 2), w);
      decodeCount++;
    }
    if (r & ROLE_PREFILL) {
      store<i32>(prefillList + (<usize>prefillCount << 2), w);
      prefillCount++;
    }
  }
  return OK;
}

export function setLoad(worker: i32, activePrefillTokens: f64, activeDecodeTokens: f64): i32 {
  if (!workerInRange(worker)) return fail(E_UNKNOWN_WORKER, worker);
  // `!(x >= 0)` also rejects NaN; the upper bound keeps costs finite
  if (!(activePrefillTokens >= 0) || activePrefillTokens > 1e15) return fail(E_BAD_LOAD, activePrefillTokens);
  if (!(activeDecodeTokens >= 0) || activeDecodeTokens > 1e15) return fail(E_BAD_LOAD, activeDecodeTokens);
  store<f64>(prefillLoad + (<usize>worker << 3), activePrefillTokens);
  store<f64>(decodeLoad + (<usize>worker << 3), activeDecodeTokens);
  setFloor(worker);
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
  return OK;
}

// @ts-ignore: decorator
@inline function cost(w: i32, isl: f64, matched: usize, tokensPerBlock: f64): f64 {
  const cached = <f64>load<u32>(matched + (<usize>w << 2)) * tokensPerBlock;
  const uncached = isl > cached ? isl - cached : 0.0;
  return loadScale * (load<f64>(prefillLoad + (<usize>w << 3)) + uncached) + load<f64>(decodeLoad + (<usize>w << 3));
}

/**
 * The worker of `list` (`count` ids) with the lowest cost other than `exclude` (−1 for none), or −1; its cost in
 * lastCost. One pass, ties to the first listed (the lowest id). A worker whose cost floor (setFloor) is not below
 * the best cost so far is not scored: at 1,024 workers scoring was the route's largest cost after matching.
 */
function cheapest(list: usize, count: i32, exclude: i32, isl: f64, matched: usize, tokensPerBlock: f64): i32 {
  const scale = loadScale;
  const prefill = prefillLoad;
  const decode = decodeLoad;
  const floor = costFloor;
  let best = -1;
  let bestCost = Infinity;
  for (let i = 0; i < count; i++) {
    const w = load<i32>(list + (<usize>i << 2)); // bounded by count ≤ maxWorkers
    // its cost ≥ its floor ≥ the best so far: it cannot win (a tie goes to the one listed first)
    if (load<f64>(floor + (<usize>w << 3)) >= bestCost) continue;
    const cached = <f64>load<u32>(matched + (<usize>w << 2)) * tokensPerBlock;
    const uncached = isl > cached ? isl - cached : 0.0;
    const c = scale * (load<f64>(prefill + (<usize>w << 3)) + uncached) + load<f64>(decode + (<usize>w << 3));
    if (c < bestCost && w != exclude) {
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
