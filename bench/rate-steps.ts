// The search for the highest rate a proxy sustains, shared by bench proxy and bench overload: open-loop steps up in
// rate; a bad step is run once more (one hiccup of a shared machine does not end the search); the answer is the last
// good step before the first step bad twice. What a step sends and what makes it good is each bench's own.

/** A step's p99 may be at most this (bench overload raises it for emulated workers, whose latency is model time). */
export const P99_LIMIT_MS = 50;

/**
 * Runs `step(rate)` for each rate in turn, twice at most; `step` says why the attempt was bad, or null when it was
 * good. After each attempt, 300 ms for a backlog (GC, sockets) to clear. Returns the highest good rate (0 when the
 * first step was bad twice) and why the last attempt was bad (null when every step passed).
 */
export async function searchRate<Why>(
  rates: readonly number[],
  step: (rate: number) => Promise<Why | null>,
): Promise<{ best: number; limitedBy: Why | null }> {
  let best = 0;
  let limitedBy: Why | null = null;
  const settle = (): Promise<void> => new Promise((r) => setTimeout(r, 300)); // let a backlog (GC, sockets) clear
  search: for (const rate of rates) {
    for (let attempt = 0; attempt < 2; attempt++) {
      const why = await step(rate);
      await settle();
      if (why === null) {
        best = rate;
        limitedBy = null;
        continue search;
      }
      limitedBy = why;
    }
    break;
  }
  return { best, limitedBy };
}
