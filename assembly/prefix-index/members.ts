// The members table, whose slots are the nodes: (hash, worker) → the holders slot + 1 the node belongs to, and its
// links in the worker's doubly linked LRU list (head = most recent). Searched only for nodes that exist; a deleted
// node leaves a DELETED mark that searches pass and inserts reuse, so nodes never move.

import {
  DELETED, memberHome, memberSlots, nextSlot, node, nodeHolders, nodeNext, nodePrev, nodeWorker, setU32, u32At,
  workerHead, workerTail,
} from "./layout";

// ---- members table (the nodes) ---------------------------------------------------------------------------

/**
 * The node of (hash, worker) whose holders reference is `ref`. Only asked for nodes that exist (their mask bit is
 * set), so it ends at them: a node is never beyond an empty slot, since it took the first free one of its run.
 */
export function memberFind(hash: u64, worker: u32, ref: u32): u32 {
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

/** A new node for (hash, worker) in holders slot + 1 `ref`, at the front of the worker's list; returns its id. */
export function memberInsert(hash: u64, worker: u32, ref: u32): u32 {
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
  return n;
}

// ---- per-worker LRU lists ------------------------------------------------------------------------------

export function unlink(n: u32, worker: u32): void {
  const prev = nodePrev(n);
  const next = nodeNext(n);
  if (prev != 0) store<u32>(node(prev), next, 8); else setU32(workerHead, worker, next);
  if (next != 0) store<u32>(node(next), prev, 4); else setU32(workerTail, worker, prev);
}

export function pushFront(n: u32, worker: u32): void {
  const head = u32At(workerHead, worker);
  store<u32>(node(n), 0, 4);
  store<u32>(node(n), head, 8);
  if (head != 0) store<u32>(node(head), n, 4); else setU32(workerTail, worker, n);
  setU32(workerHead, worker, n);
}
