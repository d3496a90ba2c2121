// Conversation sessions for PPD: turn counts and the assigned decode worker, idle expiry, bounded size.

// ---- sessions --------------------------------------------------------------------------------------------------

export interface Session {
  turns: number;
  decodeWorker: string | null;
  prevOutputTokens: number;
  lastSeenMs: number;
}

/** Conversations by key, least recently seen first (Map order); idle ones expire, the oldest go beyond `max`. */
export class Sessions {
  private readonly map = new Map<string, Session>();
  constructor(
    private readonly idleMs: number,
    private readonly max: number,
  ) {}

  get size(): number {
    return this.map.size;
  }

  touch(key: string, now: number): Session {
    let s = this.map.get(key);
    if (s) this.map.delete(key);
    if (!s || now - s.lastSeenMs > this.idleMs)
      s = { turns: 0, decodeWorker: null, prevOutputTokens: 0, lastSeenMs: now };
    s.lastSeenMs = now;
    if (this.max > 0) {
      this.map.set(key, s);
      if (this.map.size > this.max)
        for (const k of this.map.keys()) {
          if (this.map.size <= this.max) break;
          this.map.delete(k);
        }
    }
    return s;
  }

  sweep(now: number): void {
    for (const [k, s] of this.map) {
      if (now - s.lastSeenMs <= this.idleMs) break;
      this.map.delete(k);
    }
  }
}
