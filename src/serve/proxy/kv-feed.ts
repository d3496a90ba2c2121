// KV events from the workers into the router's index: a ZMQ subscription to each worker's kv_events_endpoint
// (precise mode, when zeromq is installed) and the batches POSTed to /admin/kv-events, each applied through the
// worker's EventIngest (kv-ingest.ts) and counted.

import { decodeEventBatch, type EventBatch } from "../../kv-events.js";
import type { Router } from "../../router.js";
import type { ServeConfig } from "../config.js";
import type { Logger } from "./log.js";
import { loadZeromq } from "../zeromq.js";
import type { IngestCounts } from "./kv-ingest.js";
import type { ProxyMetrics } from "./metrics.js";
import type { WorkerState, WorkerSubscriptions } from "./registry.js";

/** Every worker's KV events into the index: its ZMQ subscription (precise mode), and the batches POSTed to admin. */
export class KvEventFeed implements WorkerSubscriptions {
  private closed = false;
  private zmqWarned = false;

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
    const sock = new zmq.Subscriber();
    sock.connect(endpoint);
    sock.subscribe();
    w.subscriber = sock;
    this.log.log("info", "subscribed to KV events", { worker: w.spec.id, endpoint });
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

  /** vLLM frames: (topic, 8-byte big-endian sequence, payload). */
  private onZmqMessage(w: WorkerState, frames: Buffer[]): void {
    const payload = frames[frames.length - 1];
    const seqFrame = frames.length >= 2 ? frames[frames.length - 2] : undefined;
    if (!payload) return;
    const worker = w.spec.id;
    if (seqFrame?.length === 8) {
      const seq = seqFrame.readBigUInt64BE(0);
      if (w.lastSeq !== null && seq > w.lastSeq + 1n) {
        this.metrics.kvSequenceGaps.inc({ worker }, Number(seq - w.lastSeq - 1n));
        this.log.log("warn", "KV event batches missed", { worker, from: String(w.lastSeq + 1n), to: String(seq - 1n) });
      }
      w.lastSeq = seq;
    }
    try {
      this.apply(w, decodeEventBatch(payload), "zmq");
    } catch (e) {
      this.metrics.kvEventErrors.inc({ worker });
      this.log.log("debug", "KV event batch rejected", { worker, error: (e as Error).message });
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
