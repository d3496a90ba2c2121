// Whether a request lies above its cluster's load bound (table format version 3): the core's check
// (assembly/policy/decide.ts), for the hosts that judge decisions after the fact (the drift guard's arms, the
// learner's counts). A request with no prefill worker is not checked on the prefill side; a table without bounds
// holds every load.

import type { Table } from "./table.js";

/** The loads a decision was made at (the Router's Decision.load). */
export interface DecidedLoad {
  prefill: number | null;
  decode: number;
}

/** True when `load` exceeds cluster `c`'s bound in `t` on either side (strictly, as the core compares). */
export function beyondLoadBound(t: Pick<Table, "load_bound">, c: number, load: DecidedLoad | undefined): boolean {
  const lb = t.load_bound;
  if (!lb || !load) return false;
  return (load.prefill !== null && load.prefill > lb.prefill[c]!) || load.decode > lb.decode[c]!;
}
