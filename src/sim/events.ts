// The simulator's clock and event queue. One place defines event order: (time, priority class, sequence number).
// At equal times, step completions and transfer completions come before arrivals, so resources they free are
// visible to the arrival; the sequence number breaks the remaining ties in the order events were scheduled.

export const Priority = {
  /** an instance finished a (macro) step */
  step: 0,
  /** a KV transfer finished */
  transfer: 1,
  /** a KV event reaches the router (index lag) */
  kvEvent: 2,
  /** a request arrives */
  arrival: 3,
} as const;

export interface SimEvent {
  timeMs: number;
  priority: number;
  seq: number;
  handle(): void;
}

/** Binary min-heap of events ordered by (timeMs, priority, seq). */
export class EventQueue {
  private readonly heap: SimEvent[] = [];
  private nextSeq = 0;
  nowMs = 0;

  get size(): number {
    return this.heap.length;
  }

  /** Events scheduled so far (after `run`, every one of them has been handled): a simulation's amount of work. */
  get scheduled(): number {
    return this.nextSeq;
  }

  schedule(timeMs: number, priority: number, handle: () => void): SimEvent {
    if (!(timeMs >= this.nowMs)) throw new Error(`sim: event scheduled in the past (${timeMs} < ${this.nowMs})`);
    const e: SimEvent = { timeMs, priority, seq: this.nextSeq++, handle };
    const h = this.heap;
    h.push(e);
    let i = h.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(e, h[parent]!)) break;
      h[i] = h[parent]!;
      i = parent;
    }
    h[i] = e;
    return e;
  }

  /** Time of the earliest event at or after priority class `minPriority`… of any class, or Infinity. */
  peekTime(): number {
    return this.heap.length > 0 ? this.heap[0]!.timeMs : Infinity;
  }

  pop(): SimEvent | undefined {
    const h = this.heap;
    const top = h[0];
    if (!top) return undefined;
    const last = h.pop()!;
    if (h.length > 0) {
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        if (l >= h.length) break;
        const r = l + 1;
        const c = r < h.length && before(h[r]!, h[l]!) ? r : l;
        if (!before(h[c]!, last)) break;
        h[i] = h[c]!;
        i = c;
      }
      h[i] = last;
    }
    this.nowMs = top.timeMs;
    return top;
  }

  /** Runs events until none is left (or `untilMs` is passed). */
  run(untilMs = Infinity): void {
    while (this.heap.length > 0 && this.heap[0]!.timeMs <= untilMs) this.pop()!.handle();
  }
}

function before(a: SimEvent, b: SimEvent): boolean {
  if (a.timeMs !== b.timeMs) return a.timeMs < b.timeMs;
  if (a.priority !== b.priority) return a.priority < b.priority;
  return a.seq < b.seq;
}
