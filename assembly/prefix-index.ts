// Per-worker prefix index: which block hashes each worker holds, with a capacity in blocks and LRU eviction.
//
// Two open-addressing tables (linear probing, backward-shift deletion, load factor ≤ 1/2) over one node pool:
//  - members: (hash, worker) → node; a node sits in its worker's doubly linked LRU list (head = most recent);
//  - groups:  (hash, worker >> 6) → 64-bit mask of the workers of that group holding the block. A slot's home
//    depends on the hash alone, so the entries of every group holding one block sit in one run of adjacent
//    slots: `match` reads them all with one scan (one cache miss, then sequential lines) instead of one random
//    probe per group of 64 workers, which is what keeps 1,024 workers (16 groups) near the cost of 16.
// `match` walks the prompt's blocks once and ANDs group masks, so a 1,250-block prompt against 16 workers costs
// 1,250 probes, not 20,000. Memory is fixed at init: the sum of the workers' capacities may not exceed the pool.

import { E_INDEX_FULL, E_UNKNOWN_WORKER, OK } from "./generated/abi";
import { fail } from "./errors";

// @ts-ignore: decorator
@inline const EMPTY_GROUP: u32 = 0xffffffff;
// @ts-ignore: decorator
@inline const GOLDEN: u64 = 0x9e3779b97f4a7c15;
// @ts-ignore: decorator
@inline const MEMBER_SALT: u64 = 0xd6e8feb86659fd93;
// @ts-ignore: decorator
@inline const GROUP_SALT: u64 = 0xa0761d6478bd642f;
// @ts-ignore: decorator
@inline const GROUP_SLOT_BYTES: usize = 24; // hash u64 @0, mask u64 @8, group u32 @16

let maxWorkers: i32 = 0;
let poolBlocks: u32 = 0;
let capacitySum: u64 = 0;

// node pool: index 0 is the null node
let nodeHash: usize = 0; // u64[pool + 1]
let nodePrev: usize = 0; // u32[pool + 1]
let nodeNext: usize = 0; // u32[pool + 1]
let nodeWorker: usize = 0; // u32[pool + 1]
let freeHead: u32 = 0;

// tables
let slotBits: i32 = 0;
let slotMask: u32 = 0;
let memberSlots: usize = 0; // u32[slots], node id or 0
let groupSlots: usize = 0; // GROUP_SLOT_BYTES * slots

// per worker
let workerHead: usize = 0; // u32[maxWorkers]
let workerTail: usize = 0;
let workerCount: usize = 0;
let workerCapacity: usize = 0;
// per group of 64 workers: which workers hold at least one block
let holdingMask: usize = 0; // u64[groups]
let groupCount: i32 = 0;
// scratch for match: alive workers per group, and this block's holders per group
let aliveMask: usize = 0; // u64[groups]
let heldMask: usize = 0; // u64[groups]
let liveGroups: usize = 0; // u32[groups]: the groups with an alive worker, ascending
// WebAssembly has no prefetch: match touches the home slot of a block PREFETCH_AHEAD blocks ahead with a plain
// load whose value lands here (so the load is kept), and that cache miss overlaps the current block's work
let touched: u32 = 0;
// @ts-ignore: decorator
@inline const PREFETCH_AHEAD: i32 = 8;

// @ts-ignore: decorator
@inline function u32At(base: usize, i: u32): u32 { return load<u32>(base + (<usize>i << 2)); }
// @ts-ignore: decorator
@inline function setU32(base: usize, i: u32, v: u32): void { store<u32>(base + (<usize>i << 2), v); }
// @ts-ignore: decorator
@inline function u64At(base: usize, i: u32): u64 { return load<u64>(base + (<usize>i << 3)); }
// @ts-ignore: decorator
@inline function setU64(base: usize, i: u32, v: u64): void { store<u64>(base + (<usize>i << 3), v); }

// @ts-ignore: decorator
@inline function memberHome(hash: u64, worker: u32): u32 {
  return <u32>(((hash ^ ((<u64>worker + 1) * MEMBER_SALT)) * GOLDEN) >> (64 - slotBits));
}
// @ts-ignore: decorator
@inline function groupHome(hash: u64): u32 {
  return <u32>(((hash ^ GROUP_SALT) * GOLDEN) >> (64 - slotBits));
}
// @ts-ignore: decorator
@inline function groupSlot(i: u32): usize { return groupSlots + <usize>i * GROUP_SLOT_BYTES; }

/** Allocates every structure once. `pool` is the most blocks all workers together may hold. */
export function indexInit(workers: i32, pool: u32): void {
  maxWorkers = workers;
  poolBlocks = pool;
  groupCount = (workers + 63) >> 6;
  let slots: u32 = 16;
  slotBits = 4;
  while (slots < pool * 2) { slots <<= 1; slotBits++; }
  slotMask = slots - 1;
  const nodes = <usize>pool + 1;
  nodeHash = heap.alloc(nodes << 3);
  nodePrev = heap.alloc(nodes << 2);
  nodeNext = heap.alloc(nodes << 2);
  nodeWorker = heap.alloc(nodes << 2);
  memberSlots = heap.alloc(<usize>slots << 2);
  memory.fill(memberSlots, 0, <usize>slots << 2);
  groupSlots = heap.alloc(<usize>slots * GROUP_SLOT_BYTES);
  for (let i: u32 = 0; i < slots; i++) store<u32>(groupSlot(i), EMPTY_GROUP, 16);
  // free list: 1 → 2 → … → pool → 0
  for (let i: u32 = 1; i <= pool; i++) setU32(nodeNext, i, i < pool ? i + 1 : 0);
  freeHead = pool > 0 ? 1 : 0;
  const w = <usize>workers;
  workerHead = heap.alloc(w << 2);
  workerTail = heap.alloc(w << 2);
  workerCount = heap.alloc(w << 2);
  workerCapacity = heap.alloc(w << 2);
  memory.fill(workerHead, 0, w << 2);
  memory.fill(workerTail, 0, w << 2);
  memory.fill(workerCount, 0, w << 2);
  memory.fill(workerCapacity, 0, w << 2);
  holdingMask = heap.alloc(<usize>groupCount << 3);
  aliveMask = heap.alloc(<usize>groupCount << 3);
  heldMask = heap.alloc(<usize>groupCount << 3);
  liveGroups = heap.alloc(<usize>groupCount << 2);
  memory.fill(holdingMask, 0, <usize>groupCount << 3);
}

// ---- members table -------------------------------------------------------------------------------------

function memberFind(hash: u64, worker: u32): u32 {
  let i = memberHome(hash, worker);
  while (true) {
    const node = u32At(memberSlots, i);
    if (node == 0) return 0;
    if (u64At(nodeHash, node) == hash && u32At(nodeWorker, node) == worker) return node;
    i = (i + 1) & slotMask;
  }
  return 0;
}

function memberInsert(node: u32): void {
  let i = memberHome(u64At(nodeHash, node), u32At(nodeWorker, node));
  while (u32At(memberSlots, i) != 0) i = (i + 1) & slotMask;
  setU32(memberSlots, i, node);
}

function memberDelete(node: u32): void {
  let i = memberHome(u64At(nodeHash, node), u32At(nodeWorker, node));
  while (u32At(memberSlots, i) != node) i = (i + 1) & slotMask; // present by construction
  // backward-shift deletion (Knuth 6.4, algorithm R)
  let j = i;
  while (true) {
    j = (j + 1) & slotMask;
    const other = u32At(memberSlots, j);
    if (other == 0) break;
    const k = memberHome(u64At(nodeHash, other), u32At(nodeWorker, other));
    // move `other` back to i unless its home lies cyclically in (i, j]
    if (((j - k) & slotMask) >= ((j - i) & slotMask)) {
      setU32(memberSlots, i, other);
      i = j;
    }
  }
  setU32(memberSlots, i, 0);
}

// ---- groups table --------------------------------------------------------------------------------------

// @ts-ignore: decorator
@inline function groupFind(hash: u64, group: u32): usize {
  let i = groupHome(hash);
  while (true) {
    const s = groupSlot(i);
    const g = load<u32>(s, 16);
    if (g == EMPTY_GROUP) return 0;
    if (g == group && load<u64>(s) == hash) return s;
    i = (i + 1) & slotMask;
  }
  return 0;
}

function groupSet(hash: u64, worker: u32): void {
  const group = worker >> 6;
  const bit: u64 = <u64>1 << (worker & 63);
  let i = groupHome(hash);
  while (true) {
    const s = groupSlot(i);
    const g = load<u32>(s, 16);
    if (g == EMPTY_GROUP) {
      store<u64>(s, hash);
      store<u64>(s, bit, 8);
      store<u32>(s, group, 16);
      return;
    }
    if (g == group && load<u64>(s) == hash) {
      store<u64>(s, load<u64>(s, 8) | bit, 8);
      return;
    }
    i = (i + 1) & slotMask;
  }
}

function groupClear(hash: u64, worker: u32): void {
  const group = worker >> 6;
  const s0 = groupFind(hash, group);
  if (s0 == 0) return;
  const mask = load<u64>(s0, 8) & ~(<u64>1 << (worker & 63));
  if (mask != 0) {
    store<u64>(s0, mask, 8);
    return;
  }
  let i = <u32>((s0 - groupSlots) / GROUP_SLOT_BYTES);
  let j = i;
  while (true) {
    j = (j + 1) & slotMask;
    const sj = groupSlot(j);
    const g = load<u32>(sj, 16);
    if (g == EMPTY_GROUP) break;
    const k = groupHome(load<u64>(sj));
    if (((j - k) & slotMask) >= ((j - i) & slotMask)) {
      memory.copy(groupSlot(i), sj, GROUP_SLOT_BYTES);
      i = j;
    }
  }
  store<u32>(groupSlot(i), EMPTY_GROUP, 16);
}

// ---- per-worker LRU lists ------------------------------------------------------------------------------

function unlink(node: u32, worker: u32): void {
  const prev = u32At(nodePrev, node);
  const next = u32At(nodeNext, node);
  if (prev != 0) setU32(nodeNext, prev, next); else setU32(workerHead, worker, next);
  if (next != 0) setU32(nodePrev, next, prev); else setU32(workerTail, worker, prev);
}

function pushFront(node: u32, worker: u32): void {
  const head = u32At(workerHead, worker);
  setU32(nodePrev, node, 0);
  setU32(nodeNext, node, head);
  if (head != 0) setU32(nodePrev, head, node); else setU32(workerTail, worker, node);
  setU32(workerHead, worker, node);
}

function setHolding(worker: u32, holds: bool): void {
  const g = worker >> 6;
  const bit: u64 = <u64>1 << (worker & 63);
  const m = u64At(holdingMask, g);
  setU64(holdingMask, g, holds ? m | bit : m & ~bit);
}

/** Drops one node held by `worker`: both tables, its list, the pool. */
function dropNode(node: u32, worker: u32): void {
  unlink(node, worker);
  memberDelete(node);
  groupClear(u64At(nodeHash, node), worker);
  setU32(nodeNext, node, freeHead);
  freeHead = node;
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
  for (let i = 0; i < n; i++) {
    const hash = load<u64>(ptr + (<usize>i << 3));
    let node = memberFind(hash, worker);
    if (node != 0) {
      unlink(node, worker);
      pushFront(node, worker);
      continue;
    }
    if (u32At(workerCount, worker) >= capacity) dropNode(u32At(workerTail, worker), worker);
    node = freeHead; // non-zero: the sum of capacities never exceeds the pool
    freeHead = u32At(nodeNext, node);
    setU64(nodeHash, node, hash);
    setU32(nodeWorker, node, worker);
    pushFront(node, worker);
    memberInsert(node);
    groupSet(hash, worker);
    const count = u32At(workerCount, worker) + 1;
    setU32(workerCount, worker, count);
    if (count == 1) setHolding(worker, true);
  }
}

/** Forgets the `n` hashes at `ptr` for `worker`; hashes it does not hold are ignored. */
export function removeBlocks(worker: u32, ptr: usize, n: i32): void {
  for (let i = 0; i < n; i++) {
    const node = memberFind(load<u64>(ptr + (<usize>i << 3)), worker);
    if (node != 0) dropNode(node, worker);
  }
}

/** Forgets everything `worker` holds. */
export function clearWorker(worker: u32): void {
  while (u32At(workerHead, worker) != 0) dropNode(u32At(workerHead, worker), worker);
}

/** True if `worker` holds `hash` (for tests and explain). */
export function holds(worker: u32, hash: u64): bool {
  return memberFind(hash, worker) != 0;
}

/**
 * matchPrefix's walk when every worker is in group 0 (up to 64 workers, the common case): one slot per block, no
 * per-group bookkeeping. The same result as the general walk: writes each worker's length when it stops matching,
 * leaves the survivors in aliveMask[0], and returns where the walk stopped.
 */
function matchOneGroup(ptr: usize, n: i32, out: usize): i32 {
  let alive = load<u64>(aliveMask);
  let i = 0;
  while (i < n) {
    const hash = load<u64>(ptr + (<usize>i << 3));
    if (i + PREFETCH_AHEAD < n) touched ^= load<u32>(groupSlot(groupHome(load<u64>(ptr + (<usize>(i + PREFETCH_AHEAD) << 3)))), 16);
    let held: u64 = 0;
    let slot = groupHome(hash);
    while (true) {
      const s = groupSlot(slot);
      const g = load<u32>(s, 16);
      if (g == EMPTY_GROUP) break;
      if (g == 0 && load<u64>(s) == hash) {
        held = load<u64>(s, 8);
        break;
      }
      slot = (slot + 1) & slotMask;
    }
    let dropped = alive & ~held;
    while (dropped != 0) {
      store<u32>(out + (<usize>ctz<u64>(dropped) << 2), i);
      dropped &= dropped - 1;
    }
    alive &= held;
    if (alive == 0) break; // a block nobody holds ends every match here
    i++;
  }
  store<u64>(aliveMask, alive);
  return i;
}

/**
 * Longest cached prefix, in blocks, of the `n` hashes at `ptr` for every worker: written to `out` (u32 per
 * worker, `workers` entries). Stops as soon as no worker can match further. Returns the longest match.
 */
export function matchPrefix(ptr: usize, n: i32, out: usize, workers: i32): i32 {
  memory.fill(out, 0, <usize>workers << 2);
  const groups = (workers + 63) >> 6;
  let live = 0; // groups still alive, listed in liveGroups: the per-block work shrinks as groups stop matching
  for (let g = 0; g < groups; g++) {
    const m = u64At(holdingMask, g);
    setU64(aliveMask, g, m);
    if (m != 0) { setU32(liveGroups, live, g); live++; }
  }
  let i = 0;
  if (groups == 1 && live == 1) i = matchOneGroup(ptr, n, out);
  else while (live > 0 && i < n) {
    const hash = load<u64>(ptr + (<usize>i << 3));
    if (i + PREFETCH_AHEAD < n) {
      // the run of a block ahead holds about one slot per live group: touch each of its cache lines, not only the
      // first (at 1,024 workers a run spans several lines, and each line left untouched is a miss in the scan)
      const home = groupSlot(groupHome(load<u64>(ptr + (<usize>(i + PREFETCH_AHEAD) << 3))));
      const runEnd = min(home + <usize>live * GROUP_SLOT_BYTES, groupSlot(slotMask) + GROUP_SLOT_BYTES);
      for (let at = home; at < runEnd; at += 64) touched ^= load<u32>(at);
      touched ^= load<u32>(runEnd - 4);
    }
    // every live group's holders of this block, from one scan of the hash's run
    for (let l = 0; l < live; l++) setU64(heldMask, u32At(liveGroups, l), 0);
    let wanted = live;
    let slot = groupHome(hash);
    while (true) {
      const s = groupSlot(slot);
      const g = load<u32>(s, 16);
      if (g == EMPTY_GROUP) break;
      if (load<u64>(s) == hash && <i32>g < groups && u64At(aliveMask, g) != 0) {
        setU64(heldMask, g, load<u64>(s, 8));
        if (--wanted == 0) break;
      }
      slot = (slot + 1) & slotMask;
    }
    let kept = 0;
    for (let l = 0; l < live; l++) {
      const g = u32At(liveGroups, l);
      const alive = u64At(aliveMask, g);
      const held = u64At(heldMask, g);
      let dropped = alive & ~held;
      while (dropped != 0) {
        const w = (<i32>g << 6) + <i32>ctz<u64>(dropped);
        store<u32>(out + (<usize>w << 2), i);
        dropped &= dropped - 1;
      }
      const still = alive & held;
      setU64(aliveMask, g, still);
      if (still != 0) { setU32(liveGroups, kept, g); kept++; }
    }
    // a block nobody holds ends every match here; otherwise the survivors matched it too
    if (kept > 0) i++;
    live = kept;
  }
  // workers still alive matched every block
  let longest = 0;
  for (let g = 0; g < groups; g++) {
    let alive = u64At(aliveMask, g);
    if (alive != 0) longest = i;
    while (alive != 0) {
      const w = (g << 6) + <i32>ctz<u64>(alive);
      store<u32>(out + (<usize>w << 2), i);
      alive &= alive - 1;
    }
  }
  if (longest == 0) {
    for (let w = 0; w < workers; w++) longest = max(longest, <i32>load<u32>(out + (<usize>w << 2)));
  }
  return longest;
}
