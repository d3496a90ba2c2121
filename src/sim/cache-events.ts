// What an instance's KV cache reports, and to whom: every store and eviction, as a vLLM worker publishes BlockStored /
// BlockRemoved KV events (KvEventSink), and the filter that may hold stores back (KvEventFilter: the simulator's, in
// remaining.ts, send the router only what can change a match).

export interface KvEventSink {
  stored(pairs: Uint32Array): void;
  removed(pairs: Uint32Array): void;
}

/**
 * Which stored blocks are reported when stored. Without a filter every store and eviction is reported (a live
 * worker's events); with one, a block it declines is held back (publishFrom may report it later), and a block's
 * eviction is reported only if its store was (the reader never heard of it otherwise). The simulator's filters,
 * which leave out only what cannot change a routing decision, are in remaining.ts.
 */
export interface KvEventFilter {
  /** A block was just stored here: report it now? */
  wanted(id: number): boolean;
  /** A block it declined is no longer held back here: reported late (publishFrom) or evicted unreported. */
  heldBackEnds?(id: number): void;
}
