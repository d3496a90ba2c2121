// What each worker holds: its capacity in blocks (shrinking evicts the least recently used), storing blocks as
// the most recent (evicting when full), removing them, clearing the worker, and whether it holds a hash. A block
// stored or dropped updates the holders table, the worker's node and LRU list, and which workers hold anything.

import { E_INDEX_FULL, E_UNKNOWN_WORKER, OK } from "../generated/abi";
import { fail } from "../errors";
import { growMembers, holdersAddAt, holdersFind, holdersRemove, holdersSeek } from "./holders";
import {
  capacitySum, DELETED, groupSize, holdersAt, holdersMoves, holdingMask, maxWorkers, node, nodeHolders, poolBlocks,
  setU32, setU64, u32At, u64At, workerCapacity, workerCount, workerHead, workerTail,
} from "./layout";
import { memberFind, memberInsert, pushFront, unlink } from "./members";

function setHolding(worker: u32, holds: bool): void {
  const g = worker / groupSize;
  const bit: u64 = <u64>1 << (worker % groupSize);
  const m = u64At(holdingMask, g);
  setU64(holdingMask, g, holds ? m | bit : m & ~bit);
}

/** Drops node n held by `worker`: its list, its slot, its bit in the holders table. */
function dropNode(n: u32, worker: u32): void {
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

/** Records that `worker` holds the `n` hashes at `ptr` (most recent last); evicts LRU blocks when full. */
export function storeBlocks(worker: u32, ptr: usize, n: i32): void {
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
      continue;
    }
    if (u32At(workerCount, worker) >= capacity) {
      // evicting first; when that moved or freed a holders slot, the one sought above is sought again
      const moves = holdersMoves;
      dropNode(u32At(workerTail, worker), worker);
      if (holdersMoves != moves) at = holdersSeek(hash, group);
    }
    memberInsert(hash, worker, holdersAddAt(at, hash, group, bit) + 1); // room: the sum of capacities ≤ pool < slots
    const count = u32At(workerCount, worker) + 1;
    setU32(workerCount, worker, count);
    if (count == 1) setHolding(worker, true);
  }
}

/** Forgets the `n` hashes at `ptr` for `worker`; hashes it does not hold are ignored. */
export function removeBlocks(worker: u32, ptr: usize, n: i32): void {
  const group = worker / groupSize;
  const bit: u64 = <u64>1 << (worker % groupSize);
  for (let i = 0; i < n; i++) {
    const hash = load<u64>(ptr + (<usize>i << 3));
    const slot = holdersFind(hash, group);
    if (slot < 0 || (load<u64>(holdersAt(<u32>slot), 8) & bit) == 0) continue;
    dropNode(memberFind(hash, worker, <u32>slot + 1), worker);
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
