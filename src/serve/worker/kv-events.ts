// The emulated worker's KV events: every store and eviction of the instance's prefix cache becomes a vLLM EventBatch
// (src/kv-events.ts encodeEventBatch; BlockStored with block_hashes, parent_block_hash, token_ids, block_size 16,
// medium "GPU"; BlockRemoved), one batch per timer tick that had events, ts = wall-clock seconds. Published over ZMQ
// PUB (frames: topic, 8-byte big-endian sequence number from 0, payload, as vLLM; no replay socket) and/or POSTed
// to kvEventsUrl (content-type application/msgpack, header x-dolphin-worker: workerId, x-dolphin-seq: sequence), in
// order, one at a time. zeromq is optional (zeromq.ts): without it only kvEventsUrl works (logged at startup).

import { encodeEventBatch, type KvEvent } from "../../kv-events.js";
import type { BlockIds, KvEventSink } from "../../sim/kv-cache.js";
import { SIM_BLOCK_TOKENS } from "../../sim/types.js";
import { loadZeromq, type ZmqPublisher } from "../zeromq.js";

/** Per block id: its tokens and parent, while some job that may store it is live (for BlockStored's token_ids). */
interface BlockMeta {
  tokens: number[];
  off: number;
  parent: number;
  refs: number;
}

export interface KvPublisherOptions {
  topic: string;
  /** POST every batch here (null: not). */
  url: string | null;
  log: (line: string) => void;
}

export class KvEventPublisher {
  /** Batches published (the next sequence number). */
  seq = 0n;
  /** Sends that failed (ZMQ or POST). */
  failures = 0;
  /** The ZMQ endpoint bound (null when off). */
  endpoint: string | null = null;
  /** This worker's name in the POST header (known once it listens). */
  workerId = "";
  private pending: KvEvent[] = [];
  private readonly meta = new Map<number, BlockMeta>();
  private socket: ZmqPublisher | null = null;
  private sendChain: Promise<void> = Promise.resolve();

  constructor(
    private readonly blockIds: BlockIds,
    private readonly o: KvPublisherOptions,
  ) {}

  /** What the instance's prefix cache reports, turned into pending events. */
  readonly sink: KvEventSink = {
    stored: (pairs) => this.stored(pairs),
    removed: (pairs) => {
      this.pending.push({ kind: "removed", hashes: pairs.slice(), medium: "GPU" });
    },
  };

  /**
   * Binds the ZMQ publisher. Resolves with why ZMQ is off when zeromq is not installed; throws when the endpoint
   * cannot be bound.
   */
  async bind(endpoint: string): Promise<string | null> {
    const { zmq, unavailable } = await loadZeromq();
    if (!zmq) return unavailable;
    const sock = new zmq.Publisher();
    try {
      await sock.bind(endpoint);
    } catch (e) {
      sock.close();
      throw new Error(`worker: cannot bind KV events endpoint ${endpoint}: ${(e as Error).message}`);
    }
    this.socket = sock;
    this.endpoint = sock.lastEndpoint ?? endpoint;
    return null;
  }

  /** A job's prompt blocks may be stored: keep their tokens until it is done with them. */
  trackBlocks(tokens: number[], ids: Int32Array): void {
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i]!;
      const m = this.meta.get(id);
      if (m) m.refs++;
      else this.meta.set(id, { tokens, off: i * SIM_BLOCK_TOKENS, parent: i > 0 ? ids[i - 1]! : -1, refs: 1 });
    }
  }

  /** The job's blocks are all committed (or never will be): their token metadata may go. */
  blocksDone(ids: Int32Array): void {
    for (let i = 0; i < ids.length; i++) {
      const m = this.meta.get(ids[i]!);
      if (m && --m.refs <= 0) this.meta.delete(ids[i]!);
    }
  }

  /** Sends the pending events as one batch (after the batches before it). */
  publish(): void {
    if (this.pending.length === 0) return;
    const events = this.pending;
    this.pending = [];
    if (!this.socket && !this.o.url) return;
    const payload = encodeEventBatch({ ts: Date.now() / 1000, events, dataParallelRank: null });
    const n = this.seq++;
    const seqFrame = Buffer.alloc(8);
    seqFrame.writeBigUInt64BE(n);
    const socket = this.socket;
    const url = this.o.url;
    this.sendChain = this.sendChain.then(async () => {
      if (socket) {
        try {
          await socket.send([this.o.topic, seqFrame, payload]);
        } catch (e) {
          this.failed(`KV events over ZMQ failed: ${(e as Error).message}`);
        }
      }
      if (url) {
        try {
          const r = await fetch(url, {
            method: "POST",
            body: new Uint8Array(payload),
            signal: AbortSignal.timeout(5000),
            headers: {
              "content-type": "application/msgpack",
              "x-dolphin-worker": this.workerId,
              "x-dolphin-seq": String(n),
            },
          });
          await r.arrayBuffer().catch(() => undefined);
          if (!r.ok) throw new Error(`HTTP ${r.status}`);
        } catch (e) {
          this.failed(`POST of KV events to ${url} failed: ${(e as Error).message}`);
        }
      }
    });
  }

  /** Waits for the sends under way, then closes the socket. */
  async close(): Promise<void> {
    await this.sendChain;
    this.socket?.close();
  }

  /** Counted; only the first failure is logged. */
  private failed(message: string): void {
    this.failures++;
    if (this.failures === 1) this.o.log(`worker ${this.workerId}: ${message}`);
  }

  /** BlockStored events, one per run of blocks that chain parent to child. */
  private stored(pairs: Uint32Array): void {
    let hashes: number[] = [];
    let tokens: number[] = [];
    let parent: Uint32Array | null = null;
    let last = -2;
    const flush = (): void => {
      if (hashes.length > 0) {
        this.pending.push({
          kind: "stored",
          hashes: Uint32Array.from(hashes),
          parent,
          tokenIds: tokens,
          blockSize: SIM_BLOCK_TOKENS,
          medium: "GPU",
        });
      }
      hashes = [];
      tokens = [];
    };
    for (let i = 0; i < pairs.length >>> 1; i++) {
      const lo = pairs[2 * i]!;
      const hi = pairs[2 * i + 1]!;
      const id = this.blockIds.id(lo, hi);
      const m = this.meta.get(id);
      const parentId = m ? m.parent : -1;
      if (hashes.length === 0 || parentId !== last) {
        flush();
        parent = parentId >= 0 ? this.blockIds.pairs([parentId]) : null;
      }
      hashes.push(lo, hi);
      if (m) for (let k = 0; k < SIM_BLOCK_TOKENS; k++) tokens.push(m.tokens[m.off + k]!);
      last = id;
    }
    flush();
  }
}
