// KV events from the workers into the router's index: a ZMQ subscription to each worker's kv_events_endpoint
// (precise mode, when zeromq is installed) and the batches POSTed to /admin/kv-events, each applied through the
// worker's EventIngest (kv-ingest.ts) and counted.
//
// vLLM publishes a block once, when it stores it, so a subscriber that joins late (a proxy restarted in front of
// warm engines) or misses batches would never learn those blocks. With a kv_events_replay_endpoint the feed asks
// the engine's replay socket (a ZMQ ROUTER: send [empty, start seq (8 bytes big-endian)], receive [empty, topic,
// seq, payload] per buffered batch with seq ≥ start, then [empty, empty, -1, empty]) for what it still buffers
// (vLLM keeps the last buffer_steps batches, 10,000 by default): on subscribe, after a sequence gap, after the
// engine restarted (its sequence started over: the worker's index is reset first) and when the worker comes back
// into rotation. Live batches that arrive meanwhile wait and are applied after, those the replay already gave
// skipped. Missed batches that cannot be had again (no replay socket, a replay that fails, or one whose oldest
// buffered batch is past the gap) leave the index wrong in ways nothing repairs (a missed BlockRemoved keeps a
// block the engine evicted): the worker's index is reset and starts over from the next batch, logged and counted
// (dolphin_kv_index_resets_total). So is a restarted engine's.

import { decodeEventBatch, type EventBatch } from "../../router/kv-events.js";
import type { Router } from "../../router/router.js";
import type { ServeConfig } from "../config.js";
import type { Logger } from "./log.js";
import { loadZeromq, type Zeromq } from "../zeromq.js";
import type { IngestCounts } from "./kv-ingest.js";
import type { ProxyMetrics } from "./metrics.js";
import type { WorkerState, WorkerSubscriptions } from "./registry.js";

/** How long a replay socket may take to send the next batch (or its end) before the replay is given up. */
const REPLAY_TIMEOUT_MS = 3_000;
/** Live batches kept while a replay runs; past it they are dropped (the gap they leave is replayed after). */
const MAX_PENDING_BATCHES = 20_000;
const EMPTY = Buffer.alloc(0);

export type ReplayReason = "subscribe" | "gap" | "restart" | "back";
export type IndexResetCause = "restart" | "gap_unreplayable" | "replay_partial" | "replay_failed";

/** Every worker's KV events into the index: its ZMQ subscription (precise mode), and the batches POSTed to admin. */
export class KvEventFeed implements WorkerSubscriptions {
  private closed = false;
  private zmqWarned = false;
  private zmq: Zeromq | null = null;

  constructor(
    private readonly config: ServeConfig,
    private readonly router: Router,
    private readonly metrics: ProxyMetrics,
    private readonly log: Logger,
  ) {}

  /** Subscribes to the worker's kv_events_endpoint (precise mode, zeromq installed) until unsubscribe or close. */
  async subscribe(w: WorkerState): Promise<void> {
    const endpoint = w.spec.kv_events_endpoint;
    if (this.config.mode !== "precise" || !endpoint) return;
    const { zmq } = await loadZeromq();
    if (!zmq) {
      if (!this.zmqWarned) this.log.log("warn", "zeromq is not installed: KV events only via POST /admin/kv-events");
      this.zmqWarned = true;
      return;
    }
    if (w.removed || this.closed) return;
    this.zmq = zmq;
    const sock = new zmq.Subscriber();
    sock.connect(endpoint);
    sock.subscribe();
    w.subscriber = sock;
    this.log.log("info", "subscribed to KV events", { worker: w.spec.id, endpoint });
    if (w.spec.kv_events_replay_endpoint) void this.replay(w, 0n, "subscribe");
    try {
      for await (const frames of sock as AsyncIterable<Buffer[]>) this.onZmqMessage(w, frames);
    } catch (e) {
      if (w.subscriber === sock && !this.closed)
        this.log.log("warn", "KV event subscription ended", { worker: w.spec.id, error: String(e) });
    }
  }

  unsubscribe(w: WorkerState): void {
    const s = w.subscriber;
    w.subscriber = null;
    try {
      s?.close();
    } catch {
      // already closed
    }
  }

  /** No subscription starts after this (the caller unsubscribes the workers). */
  close(): void {
    this.closed = true;
  }

  /**
   * The worker is back in rotation with an empty index (it was cleared when it left, and the events it sent meanwhile
   * were not applied): what its engine still buffers is replayed into it.
   */
  resync(w: WorkerState): void {
    if (!w.subscriber || !w.spec.kv_events_replay_endpoint || w.replayPending) return;
    w.lastSeq = null;
    void this.replay(w, 0n, "back");
  }

  /** vLLM frames: (topic, 8-byte big-endian sequence, payload). */
  private onZmqMessage(w: WorkerState, frames: Buffer[]): void {
    if (w.replayPending) {
      if (w.replayPending.length < MAX_PENDING_BATCHES) w.replayPending.push(frames);
      return;
    }
    const seq = sequenceOf(frames);
    if (seq !== null && w.lastSeq !== null) {
      const worker = w.spec.id;
      const replays = w.spec.kv_events_replay_endpoint !== undefined;
      if (seq <= w.lastSeq) {
        // the engine's sequence started over: it restarted, and its cache with it
        this.metrics.kvEngineRestarts.inc({ worker });
        this.resetIndex(w, "restart", "KV event sequence started over (engine restarted): index reset", {
          last: String(w.lastSeq),
          now: String(seq),
        });
        if (replays && seq > 0n) {
          // batches the restarted engine sent before this one were missed: all it buffers, then this one
          w.replayPending = [frames];
          void this.replay(w, 0n, "restart");
          return;
        }
      } else if (seq > w.lastSeq + 1n) {
        this.metrics.kvSequenceGaps.inc({ worker }, Number(seq - w.lastSeq - 1n));
        this.log.log("warn", "KV event batches missed", {
          worker,
          from: String(w.lastSeq + 1n),
          to: String(seq - 1n),
          ...(replays ? { replay: true } : {}),
        });
        if (replays) {
          w.replayPending = [frames];
          void this.replay(w, w.lastSeq + 1n, "gap");
          return;
        }
        this.resetIndex(w, "gap_unreplayable", "KV event batches missed and no replay socket: index reset", {
          from: String(w.lastSeq + 1n),
          to: String(seq - 1n),
        });
      }
    }
    this.applyFrames(w, frames, seq);
  }

  /** One batch's frames into the index (its sequence number noted). */
  private applyFrames(w: WorkerState, frames: Buffer[], seq: bigint | null): void {
    const payload = frames[frames.length - 1];
    if (!payload) return;
    const worker = w.spec.id;
    if (seq !== null) w.lastSeq = seq;
    try {
      this.apply(w, decodeEventBatch(payload), "zmq");
    } catch (e) {
      this.metrics.kvEventErrors.inc({ worker });
      this.log.log("debug", "KV event batch rejected", { worker, error: (e as Error).message });
    }
  }

  /**
   * Asks the worker's replay socket for every batch it buffers from `from` on, applies them in order, then the live
   * batches that came in meanwhile (those the replay gave already skipped). Never throws: a failed replay is logged
   * and counted, and the live feed goes on.
   */
  private async replay(w: WorkerState, from: bigint, reason: ReplayReason): Promise<void> {
    const endpoint = w.spec.kv_events_replay_endpoint!;
    const worker = w.spec.id;
    w.replayPending ??= [];
    const dealer = new this.zmq!.Dealer();
    dealer.receiveTimeout = REPLAY_TIMEOUT_MS;
    dealer.linger = 0;
    let outcome: "ok" | "partial" | "failed" = "ok";
    let first: bigint | null = null;
    let batches = 0;
    try {
      dealer.connect(endpoint);
      const start = Buffer.alloc(8);
      start.writeBigUInt64BE(from);
      await dealer.send([EMPTY, start]);
      for (;;) {
        const frames = await dealer.receive();
        if (this.closed || w.removed) return;
        const seqFrame = frames[frames.length - 2];
        if (!seqFrame || seqFrame.length !== 8) throw new Error(`unexpected replay frames (${frames.length})`);
        if (seqFrame.readBigInt64BE(0) === -1n) break; // the end marker
        const seq = seqFrame.readBigUInt64BE(0);
        if (first === null && reason === "gap" && seq > from)
          // the engine no longer buffers the first missed batches: what they said is lost
          this.resetIndex(w, "replay_partial", "KV event batches missed beyond the replay buffer: index reset", {
            from: String(from),
            oldest_buffered: String(seq),
          });
        first ??= seq;
        batches++;
        this.applyFrames(w, frames, seq);
      }
      if (first !== null && first > from) outcome = "partial";
    } catch (e) {
      outcome = "failed";
      this.log.log("warn", "KV event replay failed", { worker, endpoint, reason, error: (e as Error).message });
      if (reason === "gap" && !this.closed && !w.removed)
        this.resetIndex(w, "replay_failed", "KV event batches missed and their replay failed: index reset", {
          from: String(from),
        });
    } finally {
      dealer.close();
      this.metrics.kvReplays.inc({ worker, reason, outcome });
      if (batches) this.metrics.kvReplayedBatches.inc({ worker }, batches);
      if (outcome !== "failed")
        this.log.log(outcome === "partial" && reason === "gap" ? "warn" : "info", "KV events replayed", {
          worker,
          reason,
          batches,
          from: String(from),
          ...(outcome === "partial" ? { oldest_buffered: String(first) } : {}),
        });
      const pending = w.replayPending ?? [];
      w.replayPending = null;
      for (const frames of pending) {
        const seq = sequenceOf(frames);
        if (seq !== null && w.lastSeq !== null && seq <= w.lastSeq) continue; // the replay gave it
        this.onZmqMessage(w, frames);
      }
    }
  }

  /**
   * Forgets what the index holds for the worker (its next batch starts it over, without a gap), counted by cause in
   * dolphin_kv_index_resets_total and logged.
   */
  private resetIndex(w: WorkerState, cause: IndexResetCause, msg: string, fields: Record<string, unknown>): void {
    const worker = w.spec.id;
    if (w.healthy) this.router.index.clear(worker);
    w.ingest.reset();
    w.lastSeq = null;
    this.metrics.kvIndexResets.inc({ cause, worker });
    this.log.log("warn", msg, { worker, ...fields });
  }

  /** Applies one batch from `source` (zmq or http) to the index, counted; nothing for a worker out of rotation. */
  apply(w: WorkerState, batch: EventBatch, source: string): IngestCounts {
    const none = { stored: 0, removed: 0, cleared: 0, unmapped: 0, lower: 0, untiered: 0 };
    if (!w.healthy) return none;
    const rank = w.spec.data_parallel_rank;
    if (rank !== undefined && batch.dataParallelRank !== null && batch.dataParallelRank !== rank) {
      // another rank's cache: applied here it would credit this rank with blocks it does not hold
      this.metrics.kvEventErrors.inc({ worker: w.spec.id });
      this.log.log("warn", "KV event batch of another data-parallel rank dropped", {
        worker: w.spec.id,
        rank,
        batch_rank: batch.dataParallelRank,
      });
      return none;
    }
    const n = w.ingest.apply(this.router, w.spec.id, batch);
    const worker = w.spec.id;
    if (n.stored) this.metrics.kvEvents.inc({ kind: "stored_blocks", source, worker }, n.stored);
    if (n.removed) this.metrics.kvEvents.inc({ kind: "removed_blocks", source, worker }, n.removed);
    if (n.cleared) this.metrics.kvEvents.inc({ kind: "cleared", source, worker }, n.cleared);
    if (n.unmapped) this.metrics.kvBlocksUnmapped.inc({ worker }, n.unmapped);
    if (n.lower) this.metrics.kvEvents.inc({ kind: "stored_lower_tier_blocks", source, worker }, n.lower);
    if (n.untiered) this.metrics.kvEvents.inc({ kind: "untiered_blocks", source, worker }, n.untiered);
    return n;
  }
}

/** A vLLM frame set's sequence number (the 8-byte big-endian frame before the payload), or null. */
function sequenceOf(frames: Buffer[]): bigint | null {
  const f = frames.length >= 2 ? frames[frames.length - 2] : undefined;
  return f?.length === 8 ? f.readBigUInt64BE(0) : null;
}
