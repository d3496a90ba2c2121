// A holders slot that moves (the backward shift that frees a slot, or making room for a summary first in its run)
// takes its nodes with it: each node names its holders slot, so the moved slot's nodes, one per mask bit, are found
// in the members table and re-pointed. The one place the holders table reaches into the members table.

import { groupOf, groupSize, holdersAt, HOLDERS_SLOT_BYTES, holdersMoves, maskAll, node, summaryGroup } from "./layout";
import { memberFind } from "./members";

/** The holders entry now at slot `to` moved from `from`: its nodes (one per mask bit) must name the new slot. */
export function repointNodes(from: u32, to: u32): void {
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

/** Moves holders slot `from` to the empty slot `to`, its nodes with it. */
export function moveSlot(from: u32, to: u32): void {
  holdersMoves++;
  memory.copy(holdersAt(to), holdersAt(from), HOLDERS_SLOT_BYTES);
  repointNodes(from, to);
}
