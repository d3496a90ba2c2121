// matchPrefix, the hot path: the longest cached prefix of a prompt's blocks for every worker, in one walk of the
// blocks that ANDs each group's holders mask. Three walks give the same result: one group (up to 64 workers, the
// common case), group ids that fit a 64-bit bitmap (the summaries let it skip full groups), and any number of
// groups. WebAssembly has no prefetch: each walk touches the home slot of a block PREFETCH_AHEAD blocks ahead.

import {
  aliveMask, GOLDEN, GROUP_SALT, groupField, groupOf, groupSize, holderSlots, holders, holdersAt, holdersHome,
  HOLDERS_SLOT_BYTES, holdingMask, homes, liveGroups, maskAll, nextSlot, PREFETCH_AHEAD, reduce, seenAt, setU32,
  setU64, summaryGroup, touched, u32At, u64At,
} from "./layout";

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
