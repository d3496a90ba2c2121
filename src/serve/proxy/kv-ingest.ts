// KV events into the router's index: vLLM EventBatches from ZMQ subscriptions (KvEventFeed) or POST
// /admin/kv-events (admin.ts), with engine block hashes mapped to the router's chained hashes (EventIngest).

import { decodeEventBatch, type EventBatch } from "../../kv-events.js";
import { hashTokens, type Hash64 } from "../../reference/blocks.js";
import type { Router } from "../../router.js";
import type { ServeConfig } from "../config.js";
import type { Logger } from "../log.js";
import { loadZeromq } from "../zeromq.js";
import type { ProxyMetrics } from "./metrics.js";
import type { WorkerState } from "./registry.js";

// ---- engine hashes to the router's -----------------------------------------------------------------------------

export interface IngestCounts { stored: number; removed: number; cleared: number; unmapped: number }

export const pairKey = (lo: number, hi: number): string => `${hi.toString(16)}:${lo.toString(16)}`;

/**
 * Applies one worker's vLLM KV events to the router's index. vLLM's block hashes (sha256 by default) are not the
 * router's, so a BlockStored that carries its `token_ids` is rehashed under the router's scheme, chained from the
 * rehash of its parent, and the engine → router hash pairs are remembered so a later BlockRemoved finds its blocks.
 * When a rehash equals the engine's own hashes (an engine that hashes as the router does, like the emulated worker),
 * the worker's hashes are used as they come from then on, with no map. A BlockStored without token ids is taken to
 * use the router's scheme already.
 */
export class EventIngest {
  private readonly map = new Map<string, [number, number]>();
  private sameScheme = false;
  constructor(private readonly blockSize: number, private readonly root: Hash64, private readonly maxEntries: number) {}

  reset(): void {
    this.map.clear();
    this.sameScheme = false;
  }

  apply(router: Router, worker: string, batch: EventBatch): IngestCounts {
    const n: IngestCounts = { stored: 0, removed: 0, cleared: 0, unmapped: 0 };
    for (const e of batch.events) {
      if (e.kind === "cleared") {
        router.index.clear(worker);
        this.map.clear();
        n.cleared++;
        continue;
      }
      if (e.medium !== null && e.medium.toUpperCase() !== "GPU") continue; // CPU/disk tiers are not routed on yet
      const blocks = e.hashes.length >>> 1;
      if (e.kind === "removed") {
        router.index.remove(worker, this.sameScheme ? e.hashes : this.translateRemoved(e.hashes));
        n.removed += blocks;
      } else if (this.sameScheme || e.tokenIds.length === 0) {
        router.index.store(worker, e.hashes);
        n.stored += blocks;
      } else {
        const ours = this.rehash(e.hashes, e.parent, e.tokenIds, e.blockSize);
        if (ours) {
          router.index.store(worker, ours);
          n.stored += blocks;
        } else n.unmapped += blocks;
      }
    }
    return n;
  }

  /** The router's hashes of a stored run of blocks, or null when its parent or block size does not allow them. */
  private rehash(engine: Uint32Array, parentPair: Uint32Array | null, tokenIds: number[], blockSize: number): Uint32Array | null {
    const blocks = engine.length >>> 1;
    if (blockSize !== this.blockSize || tokenIds.length !== blocks * this.blockSize) return null;
    let parent: Hash64 = this.root;
    if (parentPair) {
      const p = this.map.get(pairKey(parentPair[0]!, parentPair[1]!));
      if (!p) return null;
      parent = { lo: p[0], hi: p[1] };
    }
    const ours = hashTokens(tokenIds, this.blockSize, parent);
    if (!parentPair && ours.every((v, i) => v === engine[i])) {
      this.sameScheme = true;
      this.map.clear();
      return ours;
    }
    for (let i = 0; i < blocks; i++) this.map.set(pairKey(engine[2 * i]!, engine[2 * i + 1]!), [ours[2 * i]!, ours[2 * i + 1]!]);
    for (const k of this.map.keys()) {
      if (this.map.size <= this.maxEntries) break;
      this.map.delete(k);
    }
    return ours;
  }

  private translateRemoved(engine: Uint32Array): Uint32Array {
    const pairs = new Uint32Array(engine.length);
    for (let i = 0; i < engine.length >>> 1; i++) {
      const k = pairKey(engine[2 * i]!, engine[2 * i + 1]!);
      const ours = this.map.get(k);
      this.map.delete(k);
      pairs[2 * i] = ours ? ours[0] : engine[2 * i]!;
      pairs[2 * i + 1] = ours ? ours[1] : engine[2 * i + 1]!;
    }
    return pairs;
  }
}

// ---- the feed --------------------------------------------------------------------------------------------------

/** Every worker's KV events into the index: its ZMQ subscription (precise mode), and the batches POSTed to admin. */
export class KvEventFeed {
  private closed = false;
  private zmqWarned = false;

  constructor(private readonly config: ServeConfig, private readonly router: Router, private readonly metrics: ProxyMetrics, private readonly log: Logger) {}

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
      if (w.subscriber === sock && !this.closed) this.log.log("warn", "KV event subscription ended", { worker: w.spec.id, error: String(e) });
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
