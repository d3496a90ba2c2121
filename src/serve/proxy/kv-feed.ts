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
// skipped.

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
        this.log.log("warn", "KV event sequence started over (engine restarted): index reset", {
          worker,
          last: String(w.lastSeq),
          now: String(seq),
        });
        this.router.index.clear(worker);
        w.ingest.reset();
        w.lastSeq = null;
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
        first ??= seq;
        batches++;
        this.applyFrames(w, frames, seq);
      }
      if (first !== null && first > from) outcome = "partial";
    } catch (e) {
      outcome = "failed";
      this.log.log("warn", "KV event replay failed", { worker, endpoint, reason, error: (e as Error).message });
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

  /** Applies one batch from `source` (zmq or http) to the index, counted; nothing for a worker out of rotation. */
  apply(w: WorkerState, batch: EventBatch, source: string): IngestCounts {
    if (!w.healthy) return { stored: 0, removed: 0, cleared: 0, unmapped: 0 };
    const n = w.ingest.apply(this.router, w.spec.id, batch);
    const worker = w.spec.id;
    if (n.stored) this.metrics.kvEvents.inc({ kind: "stored_blocks", source, worker }, n.stored);
    if (n.removed) this.metrics.kvEvents.inc({ kind: "removed_blocks", source, worker }, n.removed);
    if (n.cleared) this.metrics.kvEvents.inc({ kind: "cleared", source, worker }, n.cleared);
    if (n.unmapped) this.metrics.kvBlocksUnmapped.inc({ worker }, n.unmapped);
    return n;
  }
}

/** A vLLM frame set's sequence number (the 8-byte big-endian frame before the payload), or null. */
function sequenceOf(frames: Buffer[]): bigint | null {
  const f = frames.length >= 2 ? frames[frames.length - 2] : undefined;
  return f?.length === 8 ? f.readBigUInt64BE(0) : null;
}
