// The proxy's routing decisions as GET /admin/decisions shows them: one record per inference request, its outcome
// filled in when the answer is over, the last `decisions_kept` kept.

import type { Decision } from "../../router.js";

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
  private readonly records: DecisionRecord[] = [];
  /** Each record's time (Date.now()), written into its `ts` only when it is read: an ISO date per request was a
   *  measurable part of the proxy's CPU per request, for records mostly never read. */
  private readonly times: number[] = [];
  constructor(private readonly kept: number) {}

  /** Keeps `record`, made at `atMs`; its `ts` ("" until then) is filled in when it is read. */
  remember(record: DecisionRecord, atMs: number): void {
    if (this.kept === 0) return;
    this.records.push(record);
    this.times.push(atMs);
    // trimmed in batches: one splice per `kept` records, not one per request
    if (this.records.length >= 2 * this.kept) {
      this.records.splice(0, this.records.length - this.kept);
      this.times.splice(0, this.times.length - this.kept);
    }
  }

  /** The last n records (at most `kept`), oldest first. */
  recent(n: number): DecisionRecord[] {
    const count = Math.max(0, Math.min(n, this.records.length, this.kept));
    if (count === 0) return [];
    const from = this.records.length - count;
    for (let i = from; i < this.records.length; i++) {
      const r = this.records[i]!;
      if (r.ts === "") r.ts = new Date(this.times[i]!).toISOString();
    }
    return this.records.slice(from);
  }
}
