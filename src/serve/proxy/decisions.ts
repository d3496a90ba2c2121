// The proxy's routing decisions as GET /admin/decisions shows them: one record per inference request, its outcome
// filled in when the answer is over, the last `decisions_kept` kept.

import type { Decision } from "../../router/types.js";

export interface DecisionRecord {
  id: string;
  ts: string;
  endpoint: string;
  table: { kind: string; checksum: string };
  turn: number;
  path: "local" | "remote";
  route: "local" | "remote" | "fallback";
  reason: string;
  decode_worker: string;
  prefill_worker: string | null;
  cluster: number | null;
  features: Decision["features"];
  matched_blocks: Decision["matchedBlocks"];
  predicted_cached_tokens: number;
  reported_cached_tokens: number | null;
  status: number | null;
  latency_ms: number | null;
  error?: string;
}

export class DecisionLog {
  /** The kept records, a ring once full: slot `next` holds the oldest, the one before it the newest. */
  private readonly ring: DecisionRecord[] = [];
  /** Each record's time (Date.now()), written into its `ts` only when it is read: an ISO date per request was a
   *  measurable part of the proxy's CPU per request, for records mostly never read. */
  private readonly times: number[] = [];
  private next = 0;
  constructor(private readonly kept: number) {}

  /**
   * A record for a new request, kept as the newest, its fields for the caller to write. Once `kept` records exist,
   * the oldest's object is taken when its request is over (its status written) and had no error (an error key
   * would stay): a record lives as long as the log keeps it, so a new object per request (and its features, which
   * the caller copies in) was copied by two scavenges and then left for a mark-compact, the largest part of what a
   * request left on the heap after its session. A record whose request is still going keeps its object, which
   * leaves the log; the slot gets a new one.
   */
  newRecord(atMs: number): DecisionRecord {
    if (this.kept === 0) return blankRecord();
    if (this.ring.length < this.kept) {
      const fresh = blankRecord();
      this.ring.push(fresh);
      this.times.push(atMs);
      return fresh;
    }
    const i = this.next;
    let r = this.ring[i]!;
    if (r.status === null || r.error !== undefined) this.ring[i] = r = blankRecord();
    else r.ts = ""; // a time written when it was read belongs to the request before
    this.times[i] = atMs;
    this.next = (i + 1) % this.kept;
    return r;
  }

  /** The last n records (at most `kept`), oldest first. */
  recent(n: number): DecisionRecord[] {
    const len = this.ring.length;
    const count = Math.max(0, Math.min(n, len));
    const oldest = len < this.kept ? 0 : this.next;
    const out: DecisionRecord[] = [];
    for (let k = len - count; k < len; k++) {
      const i = (oldest + k) % len;
      const r = this.ring[i]!;
      if (r.ts === "") r.ts = new Date(this.times[i]!).toISOString();
      out.push(r);
    }
    return out;
  }
}

/** A record in the shape every record has (its keys in the order /admin/decisions shows them), to be written. */
function blankRecord(): DecisionRecord {
  return {
    id: "",
    ts: "",
    endpoint: "",
    table: NO_TABLE,
    turn: 0,
    path: "local",
    route: "local",
    reason: "",
    decode_worker: "",
    prefill_worker: null,
    cluster: null,
    features: { isl: 0, effP: 0, effD: 0, oslHat: 0 },
    matched_blocks: { decode: 0, prefill: 0 },
    predicted_cached_tokens: 0,
    reported_cached_tokens: null,
    status: null,
    latency_ms: null,
  };
}

const NO_TABLE = { kind: "", checksum: "" };
