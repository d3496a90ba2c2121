// Block ids shared across simulations. The learner simulates the same arrivals hundreds of times (one run per
// candidate table, and the same requests at other loads share their block arrays: withLoad copies requests, not
// blocks), so a block array's ids are kept beside it (weakly: they go when the requests go), in the ChainedBlockIds
// they were interned in, and a simulation of requests seen before reuses that ChainedBlockIds. Which ids blocks get
// does not change a simulation: caches find blocks by id, and order them by use, never by id.

import { ChainedBlockIds } from "./chained-ids.js";
import type { SimRequest, Workload } from "./types.js";

/** Positions of `reqs` in routing order: by arrival time, ties in request order. */
export function arrivalOrder(reqs: readonly SimRequest[]): number[] {
  const order = reqs.map((_, i) => i);
  if (reqs.some((r, i) => i > 0 && r.arrivalMs < reqs[i - 1]!.arrivalMs))
    order.sort((a, b) => reqs[a]!.arrivalMs - reqs[b]!.arrivalMs || a - b);
  return order;
}

const interned = new WeakMap<Uint32Array, { owner: ChainedBlockIds; ids: Int32Array }>();

/** The ChainedBlockIds the first request's blocks were interned in before, or a fresh one. */
export function sharedBlockIds(requests: readonly SimRequest[]): ChainedBlockIds {
  const first = requests.find((r) => r.blocks.length > 0);
  return (first && interned.get(first.blocks)?.owner) ?? new ChainedBlockIds();
}

/**
 * The ids of every block of `blocks` in `owner`: interned once, then kept (a request of another family re-interns).
 * `into`: where to write them if they are new (a view of a buffer shared with other requests' ids).
 */
export function internedIds(blocks: Uint32Array, owner: ChainedBlockIds, into?: Int32Array): Int32Array {
  const known = interned.get(blocks);
  if (known && known.owner === owner) return known.ids;
  const ids = owner.intern(blocks, into);
  interned.set(blocks, { owner, ids });
  return ids;
}

/**
 * The block ids of every request, in routing order (`order`), interned in `owner` where they were not already. The
 * new ones share one buffer (views of it), not an array per request: 100,000 prompts' ids are 0.3 GB at 32P32D.
 */
export function internInOrder(
  reqs: readonly SimRequest[],
  order: readonly number[],
  owner: ChainedBlockIds,
): Int32Array[] {
  const isNew = (r: SimRequest): boolean => interned.get(r.blocks)?.owner !== owner;
  let blocks = 0;
  for (const r of reqs) if (isNew(r)) blocks += r.blocks.length >>> 1;
  owner.reserve(blocks);
  const buffer = new Int32Array(blocks);
  let at = 0;
  return order.map((i) => {
    const r = reqs[i]!;
    if (!isNew(r)) return internedIds(r.blocks, owner);
    const n = r.blocks.length >>> 1;
    at += n;
    return internedIds(r.blocks, owner, buffer.subarray(at - n, at));
  });
}

/**
 * Interns a workload's blocks ahead of its simulations, which then find them interned (as the learner's repeated
 * simulations of the same requests do): lets a benchmark time the workload's preparation and its simulation apart.
 */
export function internWorkload(workload: Workload): void {
  const reqs = workload.requests;
  internInOrder(reqs, arrivalOrder(reqs), sharedBlockIds(reqs));
}
