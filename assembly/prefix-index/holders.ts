// The holders table: (hash, group) → which workers of the group hold the block, found from the hash's home by
// linear probing and freed by backward shift; and, above 64 workers, the summaries: one more slot for a block
// that some groups hold whole, first in its run, so `match` skips those groups' slots. The two call each other
// (a slot gaining or losing a holder may place or free its hash's summary; placing one moves slots), so they are
// one file. A slot that moves takes its nodes with it (slot-moves.ts).

import {
  ahead, fullMasks, groupCount, groupOf, groupSize, holderSlots, holdersAt, holdersHome, HOLDERS_SLOT_BYTES,
  holdersMoves, maskAll, memberSpan, NO_SUMMARIES, nextSlot, setU64, summaryCount, summaryGroup, u64At,
} from "./layout";
import { moveSlot, repointNodes } from "./slot-moves";

// ---- holders table ---------------------------------------------------------------------------------------

/** The holders slot of (hash, group), or −1 − the empty slot its search ended at (where the entry would go). */
export function holdersSeek(hash: u64, group: u32): i32 {
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
export function holdersFind(hash: u64, group: u32): i32 {
  const at = holdersSeek(hash, group);
  return at >= 0 ? at : -1;
}

/**
 * Sets `bit` in the mask of (hash, group), whose holdersSeek answer is `at` (still valid: no slot moved or freed
 * since), adding the slot if needed; returns the slot.
 */
export function holdersAddAt(at: i32, hash: u64, group: u32, bit: u64): u32 {
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
export function holdersRemove(i: u32, bit: u64): void {
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
export function growMembers(span: u32): void {
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
