// Per-worker prefix index: which block hashes each worker holds, with a capacity in blocks and LRU eviction.
//
// Two open-addressing tables with linear probing, at load ≤ 4/5 when the pool is full (sized by multiply-shift
// range reduction, so no power-of-two rounding doubles them), in one allocation: 37.5 bytes per pool block in all.
//  - holders, 16-byte slots: (hash, group) → which workers of a group of `groupSize` hold the block. The slot is
//    the full hash and one word: the mask in its low `groupSize` bits and the group above them, so a slot is exact
//    and a run packs four slots to a cache line. groupSize is 64 minus the bits the group id needs (64 up to 64
//    workers, 59 at 1,024). A slot's home depends on the hash alone, so the entries of every group holding a block
//    sit in one run: `match` reads them with one scan (one cache miss, then sequential lines). A slot whose mask
//    empties is deleted by backward shift (Knuth 6.4, algorithm R), since absent hashes must meet an empty slot.
//    Above 64 workers a block some groups hold whole has a summary slot first in its run (the bitmap of those
//    groups), so `match` reads only the partial groups' slots (see the summaries' section).
//  - members, 14-byte slots: (hash, worker) → the node itself, stored in its slot (no separate pool): the holders
//    slot + 1 it belongs to (which gives the hash once, instead of a copy per worker), the worker, and its links in
//    the worker's doubly linked LRU list (head = most recent). Whether a worker holds a hash is read from the
//    holders mask, so members is only searched for nodes that exist: a deleted node leaves a DELETED mark that
//    searches pass and inserts reuse, and nodes never move. When a holders slot moves, its nodes (one per mask bit)
//    are re-pointed to it.
// `match` walks the prompt's blocks once and ANDs group masks, so a 1,250-block prompt against 16 workers costs
// 1,250 probes, not 20,000, and against 1,024 workers nested as in bench core, about 2,500 slot reads. Memory is
// fixed at init: the sum of the workers' capacities may not exceed the pool, and each table has room for a pool
// of distinct entries.

import { E_INDEX_FULL, E_UNKNOWN_WORKER, OK } from "./generated/abi";
import { fail } from "./errors";

// @ts-ignore: decorator
@inline const GOLDEN: u64 = 0x9e3779b97f4a7c15;
// @ts-ignore: decorator
@inline const MEMBER_SALT: u64 = 0xd6e8feb86659fd93;
// @ts-ignore: decorator
@inline const GROUP_SALT: u64 = 0xa0761d6478bd642f;
// @ts-ignore: decorator
@inline const HOLDERS_SLOT_BYTES: usize = 16; // hash u64 @0, mask | group << groupSize u64 @8 (0 = empty)
// @ts-ignore: decorator
@inline const MEMBER_SLOT_BYTES: usize = 14; // holders slot + 1 u32 @0 (0 = empty, DELETED), prev u32 @4, next u32 @8, worker u16 @12
// @ts-ignore: decorator
@inline const DELETED: u32 = 0xffffffff;
// @ts-ignore: decorator
@inline const MIN_SLOTS: u32 = 16;
// @ts-ignore: decorator
@inline const NO_SUMMARIES: u32 = 0xffffffff; // summaryGroup when the index has one group or too many for a bitmap
// @ts-ignore: decorator
@inline const MAX_SUMMARY_BITS: u32 = 5; // 31 groups, a bitmap that fits the 59-bit mask field
// @ts-ignore: decorator
@inline const ONE_ALLOCATION_BYTES: usize = 1 << 29; // well below the stub runtime's largest block (1 GiB)
// WebAssembly has no prefetch: match touches the home slot of a block PREFETCH_AHEAD blocks ahead with a plain
// load whose value lands in `touched` (so the load is kept), and that cache miss overlaps the current block's work;
// the home's address waits in a ring (`homes`) for its block, so each home is computed once
// @ts-ignore: decorator
@inline const PREFETCH_AHEAD: i32 = 8; // a power of two (the ring's index is a mask)

let maxWorkers: i32 = 0;
let poolBlocks: u32 = 0;
let capacitySum: u64 = 0;

// groups: worker w is bit w % groupSize of group w / groupSize
let groupSize: u32 = 64;
let maskAll: u64 = 0; // the low groupSize bits
let groupField: u64 = 0; // the group id's bits, once shifted down by groupSize (0 when there is one group)
let groupCount: i32 = 0;
// summaries (see their section): the group id reserved for them, or NO_SUMMARIES; each group's full mask (u64 per
// group: the bits of its members, 0 while it cannot be full) and the members' span (1 + the largest worker id ever
// given a capacity: only those workers can hold blocks)
let summaryGroup: u32 = 0;
let fullMasks: usize = 0;
let memberSpan: u32 = 0;
let summaryCount: u32 = 0; // summaries in the table: with none, a slot left with one holder needs no look for one
let holdersMoves: u32 = 0; // counts holders slots moved or freed: a slot index kept across one must be sought again

// holders table; node ids are members slot + 1 (0 = none), holders references are holders slot + 1
let holderSlots: u32 = 0;
let holders: usize = 0;
let memberSlots: u32 = 0;
let members: usize = 0; // address of node 0: node n lives at members + n × MEMBER_SLOT_BYTES

// per worker: LRU list ends (node ids), blocks held, capacity
let workerHead: usize = 0;
let workerTail: usize = 0;
let workerCount: usize = 0;
let workerCapacity: usize = 0;
// per group: which workers hold at least one block
let holdingMask: usize = 0; // u64[groups]
// scratch for match: the still-matching workers per group, the block each group was last seen at, the live groups
let aliveMask: usize = 0; // u64[groups]
let seenAt: usize = 0; // u32[groups]
let liveGroups: usize = 0; // u32[groups], ascending
let homes: usize = 0; // usize[PREFETCH_AHEAD]: the walks' ring of the next blocks' home slot addresses
let touched: u64 = 0;

// @ts-ignore: decorator
@inline function u32At(base: usize, i: u32): u32 { return load<u32>(base + (<usize>i << 2)); }
// @ts-ignore: decorator
@inline function setU32(base: usize, i: u32, v: u32): void { store<u32>(base + (<usize>i << 2), v); }
// @ts-ignore: decorator
@inline function u64At(base: usize, i: u32): u64 { return load<u64>(base + (<usize>i << 3)); }
// @ts-ignore: decorator
@inline function setU64(base: usize, i: u32, v: u64): void { store<u64>(base + (<usize>i << 3), v); }

/** Lemire's multiply-shift: a 32-bit value onto [0, n) without division or a power-of-two table. */
// @ts-ignore: decorator
@inline function reduce(h32: u64, n: u32): u32 { return <u32>((h32 * <u64>n) >> 32); }
// @ts-ignore: decorator
@inline function holdersHome(hash: u64): u32 { return reduce(((hash ^ GROUP_SALT) * GOLDEN) >> 32, holderSlots); }
// @ts-ignore: decorator
@inline function memberHome(hash: u64, worker: u32): u32 {
  return reduce(((hash ^ ((<u64>worker + 1) * MEMBER_SALT)) * GOLDEN) >> 32, memberSlots);
}
// @ts-ignore: decorator
@inline function nextSlot(i: u32, slots: u32): u32 { return i + 1 == slots ? 0 : i + 1; }
/** Cyclic distance from a to b going forward. */
// @ts-ignore: decorator
@inline function ahead(a: u32, b: u32, slots: u32): u32 { return b >= a ? b - a : b + slots - a; }

// @ts-ignore: decorator
@inline function holdersAt(i: u32): usize { return holders + <usize>i * HOLDERS_SLOT_BYTES; }
// @ts-ignore: decorator
@inline function groupOf(word: u64): u32 { return <u32>((word >> (<u64>groupSize & 63)) & groupField); }
// @ts-ignore: decorator
@inline function node(n: u32): usize { return members + <usize>n * MEMBER_SLOT_BYTES; }
// @ts-ignore: decorator
@inline function nodeHolders(n: u32): u32 { return load<u32>(node(n)); }
// @ts-ignore: decorator
@inline function nodePrev(n: u32): u32 { return load<u32>(node(n), 4); }
// @ts-ignore: decorator
@inline function nodeNext(n: u32): u32 { return load<u32>(node(n), 8); }
// @ts-ignore: decorator
@inline function nodeWorker(n: u32): u32 { return <u32>load<u16>(node(n), 12); }

/** Allocates every structure once. `pool` is the most blocks all workers together may hold. */
export function indexInit(workers: i32, pool: u32): void {
  maxWorkers = workers;
  poolBlocks = pool;
  // one 64-bit group up to 64 workers; above, the fewest group-id bits b with (64 − b) × (2^b − 1) ≥ workers, so
  // the all-ones id is never a group's and names the summary slots
  let bits: u32 = 0;
  if (workers > 64) {
    bits = 1;
    while (<u64>(64 - bits) * ((<u64>1 << <u64>bits) - 1) < <u64>workers) bits++;
  }
  groupSize = 64 - bits;
  maskAll = bits == 0 ? <u64>-1 : (<u64>1 << groupSize) - 1;
  groupField = (<u64>1 << bits) - 1;
  groupCount = <i32>((<u32>workers + groupSize - 1) / groupSize);
  summaryGroup = bits >= 1 && bits <= MAX_SUMMARY_BITS ? <u32>groupField : NO_SUMMARIES;
  summaryCount = 0;
  memberSpan = 0;
  // load ≤ 4/5 when every pool block is a distinct entry (the worst case both tables must hold)
  const slots = max(MIN_SLOTS, <u32>min(<u64>pool + (<u64>pool >> 2) + 1, <u64>0xfffffffe));
  holderSlots = slots;
  memberSlots = slots;
  const w = <usize>workers << 2;
  workerHead = heap.alloc(w << 2); // head, tail, count, capacity: u32[workers] each
  workerTail = workerHead + w;
  workerCount = workerTail + w;
  workerCapacity = workerCount + w;
  memory.fill(workerHead, 0, w << 2);
  const g = <usize>groupCount;
  fullMasks = heap.alloc(g << 3);
  memory.fill(fullMasks, 0, g << 3); // no members yet: no group can be full
  holdingMask = heap.alloc(g << 3);
  aliveMask = heap.alloc(g << 3);
  seenAt = heap.alloc(g << 2);
  liveGroups = heap.alloc(g << 2);
  homes = heap.alloc(<usize>PREFETCH_AHEAD << 2);
  memory.fill(holdingMask, 0, g << 3);
  memory.fill(aliveMask, 0, g << 3);
  // the tables last, in one allocation (two when one would pass the stub runtime's 1 GiB block): that runtime at
  // least doubles memory on each growth, so one large request grows it once by what it needs, where a small one
  // after it would double the whole (index.ts calls indexInit after the other allocations for the same reason)
  const holderBytes = <usize>slots * HOLDERS_SLOT_BYTES;
  const memberBytes = <usize>slots * MEMBER_SLOT_BYTES;
  if (holderBytes + memberBytes <= ONE_ALLOCATION_BYTES) {
    holders = heap.alloc(holderBytes + memberBytes);
    members = holders + holderBytes;
  } else {
    holders = heap.alloc(holderBytes);
    members = heap.alloc(memberBytes);
  }
  memory.fill(holders, 0, holderBytes);
  memory.fill(members, 0, memberBytes);
  members -= MEMBER_SLOT_BYTES; // node n (1 … slots) lives at members + n × 14; node 0 is never read
}

// ---- holders table ---------------------------------------------------------------------------------------

/** The holders slot of (hash, group), or −1 − the empty slot its search ended at (where the entry would go). */
function holdersSeek(hash: u64, group: u32): i32 {
  let i = holdersHome(hash);
  while (true) {
    const s = holdersAt(i);
    const word = load<u64>(s, 8);
    if (word == 0) return -1 - <i32>i; // slots < 2^31: the pool is at most LIMIT_MAX_INDEX_BLOCKS
    if (load<u64>(s) == hash && groupOf(word) == group) return <i32>i;
    i = nextSlot(i, holderSlots);
  }
  return -1;
}

/** The holders slot of (hash, group), or −1. */
function holdersFind(hash: u64, group: u32): i32 {
  const at = holdersSeek(hash, group);
  return at >= 0 ? at : -1;
}

/**
 * Sets `bit` in the mask of (hash, group), whose holdersSeek answer is `at` (still valid: no slot moved or freed
 * since), adding the slot if needed; returns the slot.
 */
function holdersAddAt(at: i32, hash: u64, group: u32, bit: u64): u32 {
  if (at < 0) {
    const i = <u32>(-1 - at);
    store<u64>(holdersAt(i), hash);
    store<u64>(holdersAt(i), bit | (<u64>group << (<u64>groupSize & 63)), 8);
    return i; // one bit: never full (a full group has two or more)
  }
  let i = <u32>at;
  const word = load<u64>(holdersAt(i), 8);
  // the summary first, while the slot's nodes are those of its mask (the new bit's node comes after): it may move
  // this slot
  if (((word | bit) & maskAll) == fullMaskOf(group)) i = summarySet(hash, group, i);
  store<u64>(holdersAt(i), word | bit, 8);
  return i;
}

/** Clears `bit` of holders slot `i`; an empty mask frees the slot. */
function holdersRemove(i: u32, bit: u64): void {
  const s = holdersAt(i);
  const old = load<u64>(s, 8);
  const word = old & ~bit;
  const mask = word & maskAll;
  if (mask == 0) {
    holdersDelete(i); // it had one holder: the summary's reasons to stay are unchanged
    return;
  }
  store<u64>(s, word, 8);
  // a full group had two or more bits, so only this branch can leave fullness or the last slot of two holders
  const group = groupOf(old);
  const wasFull = (old & maskAll) == fullMaskOf(group);
  if (wasFull || (summaryCount != 0 && (mask & (mask - 1)) == 0)) summaryLeave(load<u64>(s), group, wasFull);
}

/** Frees holders slot `i` by backward shift (Knuth 6.4, algorithm R): absent hashes must meet an empty slot. */
function holdersDelete(i: u32): void {
  holdersMoves++;
  let j = i;
  while (true) {
    j = nextSlot(j, holderSlots);
    const sj = holdersAt(j);
    if (load<u64>(sj, 8) == 0) break;
    const k = holdersHome(load<u64>(sj));
    // move j back to i unless its home lies cyclically in (i, j]
    if (ahead(k, j, holderSlots) >= ahead(i, j, holderSlots)) {
      memory.copy(holdersAt(i), sj, HOLDERS_SLOT_BYTES);
      repointNodes(j, i);
      i = j;
    }
  }
  store<u64>(holdersAt(i), 0, 8);
}

/** The holders entry now at slot `to` moved from `from`: its nodes (one per mask bit) must name the new slot. */
function repointNodes(from: u32, to: u32): void {
  const s = holdersAt(to);
  const hash = load<u64>(s);
  const word = load<u64>(s, 8);
  const group = groupOf(word);
  if (group == summaryGroup) return; // a summary has no nodes
  const first = group * groupSize;
  let mask = word & maskAll;
  while (mask != 0) {
    const n = memberFind(hash, first + <u32>ctz<u64>(mask), from + 1);
    store<u32>(node(n), to + 1);
    mask &= mask - 1;
  }
}

// ---- summaries -------------------------------------------------------------------------------------------
// When more than one group holds a block, a block held by every member of some groups (see growMembers: a shared
// system prompt, the first blocks of a popular document) gets one more holders slot: (hash, summaryGroup) whose
// mask is the bitmap of its full groups. `match` needs no full group's slot (a worker still matching in it matches
// this block too), and the summary is the first of its hash's slots, so the walk of a block ends once it has read
// the summary and the partial groups' slots. The group whose fullness created the summary moves behind the others
// (in a deep match the groups fill one after another, each behind the partial one).
// Memory: none. A summary stays only while some group slot of its hash has two or more holders (a full group has
// two or more), so a hash's slots (groups + summary) never outnumber its nodes and the holders table keeps room
// for a pool of distinct entries. It outlives its last full group until then, so a group that flips between full
// and one short (a worker evicting and storing the block again) flips a bit, not the slots.
// Order: the summary is placed first; inserts go after a hash's slots and backward shift keeps a run's order, so
// it stays first. Its slot has no nodes, so it moves at no cost; placing it moves two slots (their nodes follow).

/** The mask of `group` when full: every member it has; 0 (no slot's) while it cannot be full. */
// @ts-ignore: decorator
@inline function fullMaskOf(group: u32): u64 { return u64At(fullMasks, group); }

/**
 * Worker ids below `span` may hold blocks (they were given a capacity): each group's full mask becomes the bits of
 * its members. A group is full when every member holds the block, not every id it could have, so a group the
 * cluster only partly fills (256 workers in a core of 1,024: the fifth group of 59 has 20) gets summaries too.
 * Only with members in two or more groups (with one, the walk reads one slot a block anyway, and a summary would
 * only add one), and never for a group of one member (a summary must cost no more slots than it saves). A group
 * that gains members is no longer full for the blocks its summaries name: its bit leaves every summary (one pass
 * over the table, only when the members' span grows past a group that had summaries: rare, as ids are reused).
 */
function growMembers(span: u32): void {
  if (span <= memberSpan) return;
  memberSpan = span;
  if (summaryGroup == NO_SUMMARIES) return;
  let stale: u64 = 0; // groups whose full mask changed after summaries may have named them
  for (let g: u32 = 0; g < <u32>groupCount; g++) {
    const first = g * groupSize;
    const members = span > first ? min(span - first, groupSize) : 0;
    const full = span > groupSize && members >= 2 ? (members == 64 ? <u64>-1 : (<u64>1 << <u64>members) - 1) : 0;
    const old = u64At(fullMasks, g);
    if (old != full && old != 0) stale |= <u64>1 << <u64>g;
    setU64(fullMasks, g, full);
  }
  if (stale == 0 || summaryCount == 0) return;
  for (let i: u32 = 0; i < holderSlots; i++) {
    const s = holdersAt(i);
    const word = load<u64>(s, 8);
    // the summary stays (with fewer bits, or none): the slot of a group it named has two or more holders
    if (word != 0 && groupOf(word) == summaryGroup) store<u64>(s, word & ~stale, 8);
  }
}

/** The first slot of `hash`'s run, which has one: its summary when it has one. */
function firstSlotOf(hash: u64): u32 {
  let i = holdersHome(hash);
  while (true) {
    const s = holdersAt(i);
    if (load<u64>(s) == hash && load<u64>(s, 8) != 0) return i;
    i = nextSlot(i, holderSlots);
  }
  return 0;
}

/** Moves holders slot `from` to the empty slot `to`, its nodes with it. */
function moveSlot(from: u32, to: u32): void {
  holdersMoves++;
  memory.copy(holdersAt(to), holdersAt(from), HOLDERS_SLOT_BYTES);
  repointNodes(from, to);
}

/**
 * Marks `group` full for `hash`, adding the summary if the hash has none: at the run's first slot, whose entry
 * takes the place of `group`'s slot `at`, which goes to the end of the run. Returns where `at` is now.
 */
function summarySet(hash: u64, group: u32, at: u32): u32 {
  const first = firstSlotOf(hash); // the hash has a slot: `at`
  const s = holdersAt(first);
  const bit: u64 = <u64>1 << <u64>group;
  if (groupOf(load<u64>(s, 8)) == summaryGroup) {
    store<u64>(s, load<u64>(s, 8) | bit, 8);
    return at;
  }
  // the first empty slot: there is one, since the sum of capacities ≤ pool < slots
  let end = nextSlot(at, holderSlots);
  while (load<u64>(holdersAt(end), 8) != 0) end = nextSlot(end, holderSlots);
  moveSlot(at, end);
  if (first != at) moveSlot(first, at);
  store<u64>(s, bit | (<u64>summaryGroup << (<u64>groupSize & 63)), 8);
  summaryCount++;
  return end;
}

/**
 * A slot of `hash` lost a holder: `group` is no longer full (when `wasFull`) or the slot is left with one. Clears
 * the group's bit in the summary, and frees a summary with no full group left once no slot of the hash has two
 * holders.
 */
function summaryLeave(hash: u64, group: u32, wasFull: bool): void {
  const first = firstSlotOf(hash);
  let word = load<u64>(holdersAt(first), 8);
  if (groupOf(word) != summaryGroup) return; // no summary
  if (wasFull) {
    word &= ~(<u64>1 << <u64>group);
    store<u64>(holdersAt(first), word, 8);
  }
  if ((word & maskAll) != 0) return;
  let i = nextSlot(first, holderSlots);
  while (true) {
    const s = holdersAt(i);
    const w = load<u64>(s, 8);
    if (w == 0) break;
    const mask = w & maskAll;
    if (load<u64>(s) == hash && (mask & (mask - 1)) != 0) return; // two or more holders: it may stay
    i = nextSlot(i, holderSlots);
  }
  holdersDelete(first);
  summaryCount--;
}

// ---- members table (the nodes) ---------------------------------------------------------------------------

/**
 * The node of (hash, worker) whose holders reference is `ref`. Only asked for nodes that exist (their mask bit is
 * set), so it ends at them: a node is never beyond an empty slot, since it took the first free one of its run.
 */
function memberFind(hash: u64, worker: u32, ref: u32): u32 {
  let i = memberHome(hash, worker);
  while (true) {
    const n = i + 1;
    const h = nodeHolders(n);
    if (h == 0) return 0;
    if (h == ref && nodeWorker(n) == worker) return n;
    i = nextSlot(i, memberSlots);
  }
  return 0;
}

/** A new node for (hash, worker) in holders slot + 1 `ref`, at the front of the worker's list. */
function memberInsert(hash: u64, worker: u32, ref: u32): void {
  let i = memberHome(hash, worker);
  while (true) {
    const h = nodeHolders(i + 1);
    if (h == 0 || h == DELETED) break;
    i = nextSlot(i, memberSlots);
  }
  const n = i + 1;
  store<u32>(node(n), ref);
  store<u16>(node(n), <u16>worker, 12);
  pushFront(n, worker);
}

// ---- per-worker LRU lists ------------------------------------------------------------------------------

function unlink(n: u32, worker: u32): void {
  const prev = nodePrev(n);
  const next = nodeNext(n);
  if (prev != 0) store<u32>(node(prev), next, 8); else setU32(workerHead, worker, next);
  if (next != 0) store<u32>(node(next), prev, 4); else setU32(workerTail, worker, prev);
}

function pushFront(n: u32, worker: u32): void {
  const head = u32At(workerHead, worker);
  store<u32>(node(n), 0, 4);
  store<u32>(node(n), head, 8);
  if (head != 0) store<u32>(node(head), n, 4); else setU32(workerTail, worker, n);
  setU32(workerHead, worker, n);
}

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

// @ts-ignore: decorator
@inline function dropAll(out: usize, group: u32, dropped: u64, at: i32): void {
  const first = group * groupSize;
  while (dropped != 0) {
    store<u32>(out + (<usize>(first + <u32>ctz<u64>(dropped)) << 2), at);
    dropped &= dropped - 1;
  }
}

/** The address of the home slot of `hash`. */
// @ts-ignore: decorator
@inline function homeAddress(hash: u64): usize { return holdersAt(holdersHome(hash)); }

/** Fills the ring of home addresses with the first blocks' and touches them; returns the touched bits. */
function startHomes(ptr: usize, n: i32): u64 {
  let t: u64 = 0;
  for (let j = 0; j < min(n, PREFETCH_AHEAD); j++) {
    const at = homeAddress(load<u64>(ptr + (<usize>j << 3)));
    store<usize>(homes + (<usize>j << 2), at);
    t ^= load<u64>(at);
  }
  return t;
}

/**
 * matchPrefix's walk when there is one group (up to groupSize workers, the common case): one slot per block, no
 * per-group bookkeeping. The same result as the general walk: writes each worker's length when it stops matching,
 * leaves the survivors in aliveMask[0], and returns where the walk stopped.
 */
function matchOneGroup(ptr: usize, n: i32, out: usize): i32 {
  const otherGroups = ~maskAll; // a group-0 slot has none of these bits set, so its word is its mask
  const tableEnd = holdersAt(holderSlots);
  let alive = load<u64>(aliveMask);
  let ahead = startHomes(ptr, n);
  let i = 0;
  while (i < n) {
    const hash = load<u64>(ptr + (<usize>i << 3));
    const ring = homes + (<usize>(i & (PREFETCH_AHEAD - 1)) << 2);
    let s = load<usize>(ring);
    if (i + PREFETCH_AHEAD < n) {
      const at = homeAddress(load<u64>(ptr + (<usize>(i + PREFETCH_AHEAD) << 3)));
      store<usize>(ring, at);
      ahead ^= load<u64>(at);
    }
    let held: u64 = 0;
    while (true) {
      const word = load<u64>(s, 8);
      if (word == 0) break;
      if (load<u64>(s) == hash && (word & otherGroups) == 0) {
        held = word;
        break;
      }
      s += HOLDERS_SLOT_BYTES;
      if (s == tableEnd) s = holders;
    }
    if ((alive & ~held) != 0) dropAll(out, 0, alive & ~held, i);
    alive &= held;
    if (alive == 0) break; // a block nobody holds ends every match here
    i++;
  }
  store<u64>(aliveMask, alive);
  touched ^= ahead;
  return i;
}

/**
 * matchPrefix's walk when group ids fit a 64-bit bitmap (up to 3,654 workers): the live groups, those whose slot
 * for a block is still to be read and those read are bitmaps. A block's walk ends as soon as every live group not
 * full for it (see the summaries) is read: the summary, then about one slot per partially holding group. The
 * same result as the other walks.
 */
function matchFewGroups(ptr: usize, n: i32, out: usize, groups: i32): i32 {
  // the globals the walk reads, read once
  const table = holders;
  const tableEnd = holders + <usize>holderSlots * HOLDERS_SLOT_BYTES;
  const slots = holderSlots;
  const shift = <u64>groupSize;
  const width = groupSize;
  const field = groupField;
  const summary = <u64>summaryGroup; // NO_SUMMARIES is no group id (ids have at most 6 bits here)
  const alives = aliveMask;
  let ahead = startHomes(ptr, n);
  let live: u64 = 0;
  for (let g = 0; g < groups; g++) if (load<u64>(alives + (<usize>g << 3)) != 0) live |= <u64>1 << <u64>g;
  let i = 0;
  while (live != 0 && i < n) {
    const hash = load<u64>(ptr + (<usize>i << 3));
    const ring = homes + (<usize>(i & (PREFETCH_AHEAD - 1)) << 2);
    let s = load<usize>(ring);
    if (i + PREFETCH_AHEAD < n) {
      // a block ahead: its run's first cache line. Touching the second too (the run's slots past the first four)
      // made the walk 7–9% slower at 256 and 1,024 workers: a touch is a load that must complete before it
      // retires, and the walk of a block mostly ends in the first line (the summary, then a partial group)
      const next = load<u64>(ptr + (<usize>(i + PREFETCH_AHEAD) << 3));
      const at = table + (<usize>reduce(((next ^ GROUP_SALT) * GOLDEN) >> 32, slots) << 4);
      store<usize>(ring, at);
      ahead ^= load<u64>(at);
    }
    let need = live; // the live groups whose slot for this block is still to be read
    let found: u64 = 0;
    while (true) {
      const word = load<u64>(s, 8);
      if (word == 0) break;
      if (load<u64>(s) == hash) {
        const g = (word >> shift) & field;
        const bit = <u64>1 << g;
        if ((need & bit) != 0) {
          const cell = alives + (<usize>g << 3);
          const alive = load<u64>(cell);
          const still = alive & word; // alive has no bits in the group field
          if (still != alive) {
            let dropped = alive ^ still;
            const first = <u32>g * width;
            do {
              store<u32>(out + (<usize>(first + <u32>ctz<u64>(dropped)) << 2), i);
              dropped &= dropped - 1;
            } while (dropped != 0);
            store<u64>(cell, still);
            if (still == 0) live &= ~bit;
          }
          found |= bit;
        } else if (g == summary) {
          need &= ~word; // the full groups (the summary comes before any group's slot): their survivors match
        }
        if (found == need) break;
      }
      s += HOLDERS_SLOT_BYTES;
      if (s == tableEnd) s = table;
    }
    // a live group without a slot for this block stops matching here
    let missing = need & ~found;
    while (missing != 0) {
      const g = <u32>ctz<u64>(missing);
      dropAll(out, g, u64At(alives, g), i);
      setU64(alives, g, 0);
      live &= ~(<u64>1 << <u64>g);
      missing &= missing - 1;
    }
    // a block nobody holds ends every match here; otherwise the survivors matched it too
    if (live != 0) i++;
  }
  touched ^= ahead;
  return i;
}

/**
 * Longest cached prefix, in blocks, of the `n` hashes at `ptr` for every worker: written to `out` (u32 per
 * worker, `workers` entries). Stops as soon as no worker can match further. Returns the longest match.
 */
export function matchPrefix(ptr: usize, n: i32, out: usize, workers: i32): i32 {
  memory.fill(out, 0, <usize>workers << 2);
  const groups = <i32>((<u32>workers + groupSize - 1) / groupSize);
  let live = 0; // groups still alive, listed in liveGroups: the per-block work shrinks as groups stop matching
  for (let g = 0; g < groups; g++) {
    const m = u64At(holdingMask, g);
    setU64(aliveMask, g, m);
    setU32(seenAt, g, 0);
    if (m != 0) { setU32(liveGroups, live, g); live++; }
  }
  let i = 0;
  if (groups == 1 && live == 1) i = matchOneGroup(ptr, n, out);
  else if (groupField < 64) i = matchFewGroups(ptr, n, out, groups); // group ids fit a bitmap
  else while (live > 0 && i < n) {
    const hash = load<u64>(ptr + (<usize>i << 3));
    if (i + PREFETCH_AHEAD < n) {
      // the run of a block ahead holds about one slot per live group: touch each of its cache lines, not only the
      // first (at 1,024 workers a run spans several lines, and each line left untouched is a miss in the scan)
      const home = holdersHome(load<u64>(ptr + (<usize>(i + PREFETCH_AHEAD) << 3)));
      const last = min(home + <u32>live, holderSlots) - 1;
      for (let at = holdersAt(home); at < holdersAt(last); at += 64) touched ^= load<u64>(at);
      touched ^= load<u64>(holdersAt(last));
    }
    // one scan of the hash's run: each live group's slot narrows its survivors; `seenAt` marks the groups found
    const stamp = <u32>i + 1;
    let found = 0;
    let emptied = false;
    let slot = holdersHome(hash);
    while (true) {
      const s = holdersAt(slot);
      const word = load<u64>(s, 8);
      if (word == 0) break;
      if (load<u64>(s) == hash) {
        const g = groupOf(word);
        const alive = u64At(aliveMask, g); // 0 for groups outside the span: see the last loop
        if (alive != 0) {
          const still = alive & word; // alive has no bits in the group field
          setU64(aliveMask, g, still);
          setU32(seenAt, g, stamp);
          if (still != alive) {
            dropAll(out, g, alive ^ still, i);
            emptied |= still == 0;
          }
          if (++found == live) break;
        }
      }
      slot = nextSlot(slot, holderSlots);
    }
    if (found < live || emptied) {
      // a live group without a slot for this block stops matching here; emptied groups leave the list
      let kept = 0;
      for (let l = 0; l < live; l++) {
        const g = u32At(liveGroups, l);
        if (u32At(seenAt, g) != stamp) {
          dropAll(out, g, u64At(aliveMask, g), i);
          setU64(aliveMask, g, 0);
        } else if (u64At(aliveMask, g) != 0) {
          setU32(liveGroups, kept, g);
          kept++;
        }
      }
      live = kept;
    }
    // a block nobody holds ends every match here; otherwise the survivors matched it too
    if (live > 0) i++;
  }
  // workers still alive matched every block; aliveMask is left all 0, so the walk needs no range check on a group
  for (let g = 0; g < groups; g++) {
    dropAll(out, <u32>g, u64At(aliveMask, g), i);
    setU64(aliveMask, g, 0);
  }
  // the walk stopped at block i either past the last block, with survivors, or because the last workers alive did
  // not hold block i (and matched i blocks): either way i is the longest match
  return i;
}
