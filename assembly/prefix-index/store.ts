// What each worker holds: its capacity in blocks (shrinking evicts the least recently used), storing blocks as
// the most recent (evicting when full), removing them, clearing the worker, and whether it holds a hash. A block
// stored or dropped updates the holders table, the worker's node and LRU list, and which workers hold anything.
// A node holds its block in one tier or both (the device, a lower tier: its flags, tiers.ts); the holders mask
// says "in some tier", so matching sees every tier, and the capacity counts blocks whatever their tiers.

import { E_INDEX_FULL, E_UNKNOWN_WORKER, OK } from "../generated/abi";
import { fail } from "../errors";
import { growMembers, holdersAddAt, holdersFind, holdersRemove, holdersSeek } from "./holders";
import {
  capacitySum, DELETED, groupSize, holdersAt, holdersMoves, holdingMask, maxWorkers, node, nodeFlags, nodeHolders,
  poolBlocks, setNodeFlags, setU32, setU64, u32At, u64At, workerCapacity, workerCount, workerHead, workerLower,
  workerTail,
} from "./layout";
import { memberFind, memberInsert, pushFront, unlink } from "./members";

function setHolding(worker: u32, holds: bool): void {
  const g = worker / groupSize;
  const bit: u64 = <u64>1 << (worker % groupSize);
  const m = u64At(holdingMask, g);
  setU64(holdingMask, g, holds ? m | bit : m & ~bit);
}

// a node's tier flags (layout.ts: above the worker's bits): held in a lower tier; not held on the device
// @ts-ignore: decorator
@inline export const IN_LOWER: u32 = 0x8000;
// @ts-ignore: decorator
@inline export const NOT_ON_DEVICE: u32 = 0x4000;

/** Adds `delta` to the worker's count of blocks held in a lower tier only. */
// @ts-ignore: decorator
@inline function countLower(worker: u32, delta: i32): void {
  setU32(workerLower, worker, u32At(workerLower, worker) + <u32>delta);
}

/** Sets node n's tier flags, keeping the worker's lower-tier-only count. */
export function setTiers(n: u32, worker: u32, flags: u32): void {
  const was = nodeFlags(n) & NOT_ON_DEVICE;
  const now = flags & NOT_ON_DEVICE;
  if (was != now) countLower(worker, now != 0 ? 1 : -1);
  setNodeFlags(n, flags);
}

/** Drops node n held by `worker`: its list, its slot, its bit in the holders table. */
function dropNode(n: u32, worker: u32): void {
  if ((nodeFlags(n) & NOT_ON_DEVICE) != 0) countLower(worker, -1);
  const ref = nodeHolders(n);
  unlink(n, worker);
  store<u32>(node(n), DELETED);
  holdersRemove(ref - 1, <u64>1 << (worker % groupSize));
  const count = u32At(workerCount, worker) - 1;
  setU32(workerCount, worker, count);
  if (count == 0) setHolding(worker, false);
}

// ---- public operations ---------------------------------------------------------------------------------

export function workerInRange(worker: i32): bool {
  return <u32>worker < <u32>maxWorkers;
}

/** Sets the most blocks `worker` may hold; shrinking evicts least recently used blocks. */
export function setCapacity(worker: i32, blocks: u32): i32 {
  if (!workerInRange(worker)) return fail(E_UNKNOWN_WORKER, worker);
  const w = <u32>worker;
  const old = u32At(workerCapacity, w);
  const sum = capacitySum - old + blocks;
  if (sum > <u64>poolBlocks) return fail(E_INDEX_FULL, <f64>(<u64>poolBlocks - (capacitySum - old)));
  capacitySum = sum;
  setU32(workerCapacity, w, blocks);
  if (blocks > 0) growMembers(w + 1);
  while (u32At(workerCount, w) > blocks) dropNode(u32At(workerTail, w), w);
  return OK;
}

export function capacityOf(worker: i32): u32 { return u32At(workerCapacity, <u32>worker); }
export function countOf(worker: i32): u32 { return u32At(workerCount, <u32>worker); }
export function freeCapacity(): f64 { return <f64>(<u64>poolBlocks - capacitySum); }

/**
 * Records that `worker` holds the `n` hashes at `ptr` (most recent last) on the device (`lower` false) or in a lower
 * tier; evicts LRU blocks when full.
 */
export function storeBlocks(worker: u32, ptr: usize, n: i32, lower: bool = false): void {
  const capacity = u32At(workerCapacity, worker);
  if (capacity == 0) return;
  const group = worker / groupSize;
  const bit: u64 = <u64>1 << (worker % groupSize);
  for (let i = 0; i < n; i++) {
    const hash = load<u64>(ptr + (<usize>i << 3));
    let at = holdersSeek(hash, group);
    if (at >= 0 && (load<u64>(holdersAt(<u32>at), 8) & bit) != 0) {
      // held already: now the most recent
      const node = memberFind(hash, worker, <u32>at + 1);
      unlink(node, worker);
      pushFront(node, worker);
      const flags = nodeFlags(node);
      if (flags != 0 || lower) setTiers(node, worker, lower ? flags | IN_LOWER : flags & ~NOT_ON_DEVICE);
      continue;
    }
    if (u32At(workerCount, worker) >= capacity) {
      // evicting first; when that moved or freed a holders slot, the one sought above is sought again
      const moves = holdersMoves;
      dropNode(u32At(workerTail, worker), worker);
      if (holdersMoves != moves) at = holdersSeek(hash, group);
    }
    const node = memberInsert(hash, worker, holdersAddAt(at, hash, group, bit) + 1); // room: capacities ≤ pool < slots
    if (lower) setTiers(node, worker, IN_LOWER | NOT_ON_DEVICE);
    const count = u32At(workerCount, worker) + 1;
    setU32(workerCount, worker, count);
    if (count == 1) setHolding(worker, true);
  }
}

/**
 * Forgets the `n` hashes at `ptr` for `worker` on the device (`lower` false) or in the lower tier; a block no tier
 * holds any more is dropped; hashes it does not hold there are ignored.
 */
export function removeBlocks(worker: u32, ptr: usize, n: i32, lower: bool = false): void {
  const group = worker / groupSize;
  const bit: u64 = <u64>1 << (worker % groupSize);
  for (let i = 0; i < n; i++) {
    const hash = load<u64>(ptr + (<usize>i << 3));
    const slot = holdersFind(hash, group);
    if (slot < 0 || (load<u64>(holdersAt(<u32>slot), 8) & bit) == 0) continue;
    const node = memberFind(hash, worker, <u32>slot + 1);
    const flags = nodeFlags(node);
    // the tier removed from is the only one left (a device-only node has no flags; a lower-only one NOT_ON_DEVICE)
    if (lower ? (flags & IN_LOWER) == 0 : (flags & NOT_ON_DEVICE) != 0) continue;
    if (lower ? (flags & NOT_ON_DEVICE) != 0 : flags == 0) dropNode(node, worker);
    else setTiers(node, worker, lower ? flags & ~IN_LOWER : flags | NOT_ON_DEVICE);
  }
}

/** Forgets everything `worker` holds. */
export function clearWorker(worker: u32): void {
  while (u32At(workerHead, worker) != 0) dropNode(u32At(workerHead, worker), worker);
}

/** True if `worker` holds `hash` (for tests and explain). */
export function holds(worker: u32, hash: u64): bool {
  const slot = holdersFind(hash, worker / groupSize);
  return slot >= 0 && (load<u64>(holdersAt(<u32>slot), 8) & (<u64>1 << (worker % groupSize))) != 0;
}

/** The tiers in which `worker` holds `hash`, as bits 1 << tier (device 1, lower 2); 0 when it does not. */
export function tiersOf(worker: u32, hash: u64): i32 {
  const slot = holdersFind(hash, worker / groupSize);
  if (slot < 0 || (load<u64>(holdersAt(<u32>slot), 8) & (<u64>1 << (worker % groupSize))) == 0) return 0;
  const flags = nodeFlags(memberFind(hash, worker, <u32>slot + 1));
  return ((flags & NOT_ON_DEVICE) != 0 ? 0 : 1) | ((flags & IN_LOWER) != 0 ? 2 : 0);
}

/** Blocks `worker` holds in a lower tier only. */
export function lowerCountOf(worker: u32): u32 { return u32At(workerLower, worker); }
