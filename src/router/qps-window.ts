// Arrivals per second over a sliding window: the QPS signal the router's PPD policy reads (setSignals).

/** The default window: the last 10 s. */
export const QPS_WINDOW_MS = 10_000;

/** Counts arrivals in the last `windowMs`; old arrivals are skipped by an index and dropped in batches. */
export class QpsWindow {
  private readonly arrivals: number[] = [];
  private head = 0;

  constructor(private readonly windowMs = QPS_WINDOW_MS) {}

  /** Records an arrival at `nowMs` (non-decreasing) and returns the arrivals per second in the window ending there. */
  arrive(nowMs: number): number {
    this.arrivals.push(nowMs);
    while (this.head < this.arrivals.length && this.arrivals[this.head]! < nowMs - this.windowMs) this.head++;
    if (this.head > 4096) {
      this.arrivals.splice(0, this.head);
      this.head = 0;
    }
    return (this.arrivals.length - this.head) / (this.windowMs / 1000);
  }
}
