// Cache tiers: a worker's blocks on its device (vLLM's medium "GPU") or in a lower tier only (its offloading
// connector's or LMCache's "CPU"). A lower-tier hit saves less than a device hit (the blocks are copied back) and
// more than recomputation, so it counts at the tier's weight (llm-d's KV-block scorer: GPU 1.0, CPU 0.8) in the
// cached tokens of the features and of the worker cost:
//   cachedBlocks(w) = (m − k) + k × weight,  m the matched prefix, k its blocks held in a lower tier only.
// k is counted per route and worker, only for workers that hold a lower-only block at all (store.ts keeps that
// count): an index fed device events only pays one load per scored worker, and gives the same costs and features
// as before tiers (k = 0 gives m exactly).

import { E_BAD_TIER, E_BAD_TIER_WEIGHT, LIMIT_MAX_TIERS, OK, TIER_GPU, TIER_WEIGHT_CPU } from "../generated/abi";
import { fail } from "../errors";
import { holdersFind } from "./holders";
import { groupSize, nodeFlags, u32At, workerLower } from "./layout";
import { memberFind } from "./members";
import { NOT_ON_DEVICE } from "./store";

let lowerWeight: f64 = TIER_WEIGHT_CPU;
// the route being costed: its block hashes, how many of them the features may count (vLLM's cap), and a stamp
// that marks each worker's counts as this route's
let routeHashes: usize = 0;
let routeCapBlocks: u32 = 0;
let routeStamp: u32 = 0;
let stampBytes: usize = 0;
let stamps: usize = 0; // u32[workers]
let lowerAll: usize = 0; // u32[workers]: k over the whole matched prefix (the cost)
let lowerCapped: usize = 0; // u32[workers]: k over its first routeCapBlocks blocks (the features)

export function tiersInit(workers: i32): void {
  const w = <usize>workers << 2;
  stampBytes = w;
  stamps = heap.alloc(w * 3);
  lowerAll = stamps + w;
  lowerCapped = lowerAll + w;
  memory.fill(stamps, 0, w * 3);
}

/** Validates and sets a tier's weight; the device tier's is 1. */
export function setTierWeight(tier: i32, weight: f64): i32 {
  if (<u32>tier >= <u32>LIMIT_MAX_TIERS) return fail(E_BAD_TIER, tier);
  if (!(weight >= 0 && weight <= 1) || (tier == TIER_GPU && weight != 1)) return fail(E_BAD_TIER_WEIGHT, weight);
  if (tier != TIER_GPU) lowerWeight = weight;
  return OK;
}

/** A new route: its `blocks` hashes at `ptr`, of which the features count at most `capBlocks`. */
export function tiersBegin(ptr: usize, capBlocks: u32): void {
  routeHashes = ptr;
  routeCapBlocks = capBlocks;
  routeStamp++;
  if (routeStamp == 0) { // wrapped: no stale stamp may pass for this route's
    memory.fill(stamps, 0, stampBytes);
    routeStamp = 1;
  }
}

/** Counts, once per route, worker w's blocks held in a lower tier only among its first m matched blocks. */
function countLower(w: i32, m: u32): void {
  const at = <usize>w << 2;
  if (load<u32>(stamps + at) == routeStamp) return;
  const held = u32At(workerLower, <u32>w);
  const group = <u32>w / groupSize;
  let all: u32 = 0;
  let capped: u32 = 0;
  for (let i: u32 = 0; i < m && all < held; i++) { // bounded by m ≤ the route's blocks
    const hash = load<u64>(routeHashes + (<usize>i << 3));
    const node = memberFind(hash, <u32>w, <u32>holdersFind(hash, group) + 1); // matched: w holds it
    if ((nodeFlags(node) & NOT_ON_DEVICE) != 0) {
      all++;
      if (i < routeCapBlocks) capped++;
    }
  }
  store<u32>(stamps + at, routeStamp);
  store<u32>(lowerAll + at, all);
  store<u32>(lowerCapped + at, capped);
}

/** Whether worker w holds any block in a lower tier only (then its cached blocks may weigh less than m). */
// @ts-ignore: decorator
@inline export function holdsLower(w: i32): bool { return u32At(workerLower, <u32>w) != 0; }

/** Worker w's cached blocks for the cost, its m matched blocks each at its tier's weight. */
export function weightedBlocks(w: i32, m: u32): f64 {
  if (u32At(workerLower, <u32>w) == 0) return <f64>m;
  countLower(w, m);
  const k = load<u32>(lowerAll + (<usize>w << 2));
  return <f64>(m - k) + <f64>k * lowerWeight;
}

/** Worker w's cached blocks for the features: its first min(m, capBlocks) matched blocks at their weights. */
export function weightedCappedBlocks(w: i32, m: u32): f64 {
  const mc = min(m, routeCapBlocks);
  if (u32At(workerLower, <u32>w) == 0) return <f64>mc;
  countLower(w, m);
  const k = load<u32>(lowerCapped + (<usize>w << 2));
  return <f64>(mc - k) + <f64>k * lowerWeight;
}

/** Whether the tier is one the core knows, for the index exports. */
export function tierInRange(tier: i32): bool {
  return <u32>tier < <u32>LIMIT_MAX_TIERS;
}
