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
//    groups), so `match` reads only the partial groups' slots (see holders.ts, the summaries' section).
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
//
// This file is the index's memory: the slot layouts, the state kept per worker and per group, the accessors of
// slots and nodes, and indexInit, which allocates it all once. The operations: holders.ts (the holders table and
// its summaries), slot-moves.ts (a moved holders slot's nodes follow it), members.ts (the nodes and each worker's
// LRU list), store.ts (capacities; storing, removing and clearing a worker's blocks) and match.ts (matchPrefix).

// @ts-ignore: decorator
@inline export const GOLDEN: u64 = 0x9e3779b97f4a7c15;
// @ts-ignore: decorator
@inline const MEMBER_SALT: u64 = 0xd6e8feb86659fd93;
// @ts-ignore: decorator
@inline export const GROUP_SALT: u64 = 0xa0761d6478bd642f;
// @ts-ignore: decorator
@inline export const HOLDERS_SLOT_BYTES: usize = 16; // hash u64 @0, mask | group << groupSize u64 @8 (0 = empty)
// @ts-ignore: decorator
@inline const MEMBER_SLOT_BYTES: usize = 14; // holders slot + 1 u32 @0 (0 = empty, DELETED), prev u32 @4, next u32 @8, worker | tier flags u16 @12
// a node's u16 @12: the worker in the low 14 bits (limits.max_workers is 2^14), its tier flags above (store.ts)
// @ts-ignore: decorator
@inline export const NODE_WORKER_BITS: u32 = 0x3fff;
// @ts-ignore: decorator
@inline export const DELETED: u32 = 0xffffffff;
// @ts-ignore: decorator
@inline const MIN_SLOTS: u32 = 16;
// summaryGroup when the index has one group or too many for a bitmap
// @ts-ignore: decorator
@inline export const NO_SUMMARIES: u32 = 0xffffffff;
// @ts-ignore: decorator
@inline const MAX_SUMMARY_BITS: u32 = 5; // 31 groups, a bitmap that fits the 59-bit mask field
// @ts-ignore: decorator
@inline const ONE_ALLOCATION_BYTES: usize = 1 << 29; // well below the stub runtime's largest block (1 GiB)
// WebAssembly has no prefetch: match touches the home slot of a block PREFETCH_AHEAD blocks ahead with a plain
// load whose value lands in `touched` (so the load is kept), and that cache miss overlaps the current block's work;
// the home's address waits in a ring (`homes`) for its block, so each home is computed once
// @ts-ignore: decorator
@inline export const PREFETCH_AHEAD: i32 = 8; // a power of two (the ring's index is a mask)

export let maxWorkers: i32 = 0;
export let poolBlocks: u32 = 0;
export let capacitySum: u64 = 0;

// groups: worker w is bit w % groupSize of group w / groupSize
export let groupSize: u32 = 64;
export let maskAll: u64 = 0; // the low groupSize bits
export let groupField: u64 = 0; // the group id's bits, once shifted down by groupSize (0 when there is one group)
export let groupCount: i32 = 0;
// summaries (see holders.ts): the group id reserved for them, or NO_SUMMARIES; each group's full mask (u64 per
// group: the bits of its members, 0 while it cannot be full) and the members' span (1 + the largest worker id ever
// given a capacity: only those workers can hold blocks)
export let summaryGroup: u32 = 0;
export let fullMasks: usize = 0;
export let memberSpan: u32 = 0;
// summaries in the table: with none, a slot left with one holder needs no look for one
export let summaryCount: u32 = 0;
// counts holders slots moved or freed: a slot index kept across one must be sought again
export let holdersMoves: u32 = 0;

// holders table; node ids are members slot + 1 (0 = none), holders references are holders slot + 1
export let holderSlots: u32 = 0;
export let holders: usize = 0;
export let memberSlots: u32 = 0;
export let members: usize = 0; // address of node 0: node n lives at members + n × MEMBER_SLOT_BYTES

// per worker: LRU list ends (node ids), blocks held, capacity, blocks held in a lower tier only (tiers.ts)
export let workerHead: usize = 0;
export let workerTail: usize = 0;
export let workerCount: usize = 0;
export let workerCapacity: usize = 0;
export let workerLower: usize = 0;
// per group: which workers hold at least one block
export let holdingMask: usize = 0; // u64[groups]
// scratch for match: the still-matching workers per group, the block each group was last seen at, the live groups
export let aliveMask: usize = 0; // u64[groups]
export let seenAt: usize = 0; // u32[groups]
export let liveGroups: usize = 0; // u32[groups], ascending
export let homes: usize = 0; // usize[PREFETCH_AHEAD]: the walks' ring of the next blocks' home slot addresses
export let touched: u64 = 0;

// @ts-ignore: decorator
@inline export function u32At(base: usize, i: u32): u32 { return load<u32>(base + (<usize>i << 2)); }
// @ts-ignore: decorator
@inline export function setU32(base: usize, i: u32, v: u32): void { store<u32>(base + (<usize>i << 2), v); }
// @ts-ignore: decorator
@inline export function u64At(base: usize, i: u32): u64 { return load<u64>(base + (<usize>i << 3)); }
// @ts-ignore: decorator
@inline export function setU64(base: usize, i: u32, v: u64): void { store<u64>(base + (<usize>i << 3), v); }

/** Lemire's multiply-shift: a 32-bit value onto [0, n) without division or a power-of-two table. */
// @ts-ignore: decorator
@inline export function reduce(h32: u64, n: u32): u32 { return <u32>((h32 * <u64>n) >> 32); }
// @ts-ignore: decorator
@inline export function holdersHome(hash: u64): u32 {
  return reduce(((hash ^ GROUP_SALT) * GOLDEN) >> 32, holderSlots);
}
// @ts-ignore: decorator
@inline export function memberHome(hash: u64, worker: u32): u32 {
  return reduce(((hash ^ ((<u64>worker + 1) * MEMBER_SALT)) * GOLDEN) >> 32, memberSlots);
}
// @ts-ignore: decorator
@inline export function nextSlot(i: u32, slots: u32): u32 { return i + 1 == slots ? 0 : i + 1; }
/** Cyclic distance from a to b going forward. */
// @ts-ignore: decorator
@inline export function ahead(a: u32, b: u32, slots: u32): u32 { return b >= a ? b - a : b + slots - a; }

// @ts-ignore: decorator
@inline export function holdersAt(i: u32): usize { return holders + <usize>i * HOLDERS_SLOT_BYTES; }
// @ts-ignore: decorator
@inline export function groupOf(word: u64): u32 { return <u32>((word >> (<u64>groupSize & 63)) & groupField); }
// @ts-ignore: decorator
@inline export function node(n: u32): usize { return members + <usize>n * MEMBER_SLOT_BYTES; }
// @ts-ignore: decorator
@inline export function nodeHolders(n: u32): u32 { return load<u32>(node(n)); }
// @ts-ignore: decorator
@inline export function nodePrev(n: u32): u32 { return load<u32>(node(n), 4); }
// @ts-ignore: decorator
@inline export function nodeNext(n: u32): u32 { return load<u32>(node(n), 8); }
// @ts-ignore: decorator
@inline export function nodeWorker(n: u32): u32 { return <u32>load<u16>(node(n), 12) & NODE_WORKER_BITS; }
// @ts-ignore: decorator
@inline export function nodeFlags(n: u32): u32 { return <u32>load<u16>(node(n), 12) & ~NODE_WORKER_BITS; }
// @ts-ignore: decorator
@inline export function setNodeFlags(n: u32, flags: u32): void {
  store<u16>(node(n), <u16>(nodeWorker(n) | flags), 12);
}

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
  workerHead = heap.alloc(w * 5); // head, tail, count, capacity, lower-tier count: u32[workers] each
  workerTail = workerHead + w;
  workerCount = workerTail + w;
  workerCapacity = workerCount + w;
  workerLower = workerCapacity + w;
  memory.fill(workerHead, 0, w * 5);
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
