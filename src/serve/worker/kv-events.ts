// The emulated worker's KV events, on the wire as vLLM 0.32's ZmqEventPublisher sends them
// (vllm/distributed/kv_events.py): every store and eviction of the instance's prefix cache becomes an event of one
// batch per timer tick that had events (vLLM: one per engine step), published over ZMQ PUB as the frames
// [topic, seq (8-byte big-endian, 0, 1, 2, … one per batch), payload] and/or POSTed to kvEventsUrl (content-type
// application/msgpack, header x-dolphin-worker: workerId, x-dolphin-seq: sequence), in order, one at a time.
//
// The payload is msgspec's msgpack of a KVEventBatch, byte for byte (encodeVllmEventBatch): the batch is
// array_like, `[ts (float64, wall-clock seconds), events, data_parallel_rank (0)]`; each event is a tagged struct,
// so a MAP whose first key "type" names its class, then its fields in declaration order with those still at their
// default omitted (omit_defaults): BlockStored {type, block_hashes, parent_block_hash, token_ids, block_size,
// lora_id: nil, medium: "GPU", lora_name: nil, extra_keys: [nil per block], group_idx: 0,
// kv_cache_spec_kind: "full_attention"} (the last two filled by KVCacheManager.take_events), BlockRemoved {type,
// block_hashes: [one hash], medium: "GPU", group_idx: 0} (one per evicted block), AllBlocksCleared {type}. Block
// hashes are unsigned 64-bit ints (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES, on by default: the low 64 bits of the hash),
// integers in msgpack's smallest encoding as msgspec writes them. block_size is this worker's, 16 (the engines here
// run with 32).
//
// With a replay endpoint it also binds vLLM's replay socket, a ZMQ ROUTER keeping the last bufferSteps batches sent
// on the PUB (vLLM's buffer_steps, 10,000 by default) and answering as ZmqEventPublisher._service_replay does: a
// request [identity, b"", start_seq (big-endian)] gets, for each buffered batch with seq ≥ start_seq,
// [identity, b"", topic, seq, payload], then [identity, b"", b"", -1 (8-byte signed big-endian), b""]; a request
// of any other frame count is ignored. zeromq is optional (zeromq.ts): without it only kvEventsUrl works (logged at
// startup).

import type { KvEvent } from "../../kv-events.js";
import type { BlockIds, KvEventSink } from "../../sim/kv-cache.js";
import { SIM_BLOCK_TOKENS } from "../../sim/types.js";
import { loadZeromq, type ZmqPublisher } from "../zeromq.js";

/** vLLM's ZmqEventPublisher defaults (KVEventsConfig): replay buffer batches, PUB high-water mark. */
export const VLLM_BUFFER_STEPS = 10_000;
export const VLLM_PUB_HWM = 100_000;
/** The replay's end marker: -1 as an 8-byte signed big-endian integer (ZmqEventPublisher.END_SEQ). */
export const END_SEQ = Buffer.from([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
const EMPTY = Buffer.alloc(0);

/** The kv_cache_spec_kind of a full-attention model's one KV cache group (vLLM's KVCacheSpecKind.FULL_ATTENTION). */
const SPEC_KIND = "full_attention";

// ---- msgspec-compatible msgpack ---------------------------------------------------------------------------------

/** A msgpack writer producing msgspec's encodings: smallest int forms, float64 floats, str8 for 32..255 bytes. */
class Writer {
  private buf = Buffer.allocUnsafe(1024);
  private n = 0;

  private room(k: number): void {
    if (this.n + k <= this.buf.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.n + k));
    this.buf.copy(next, 0, 0, this.n);
    this.buf = next;
  }

  byte(b: number): void {
    this.room(1);
    this.buf[this.n++] = b;
  }

  nil(): void {
    this.byte(0xc0);
  }

  /** A non-negative integer (a number up to 2^53 − 1 or a bigint below 2^64). */
  uint(v: number | bigint): void {
    if (typeof v === "bigint" && v <= BigInt(Number.MAX_SAFE_INTEGER)) v = Number(v);
    if (typeof v === "bigint") {
      this.room(9);
      this.buf[this.n] = 0xcf;
      this.buf.writeBigUInt64BE(v, this.n + 1);
      this.n += 9;
    } else if (v < 0x80) this.byte(v);
    else if (v <= 0xff) {
      this.room(2);
      this.buf[this.n] = 0xcc;
      this.buf[this.n + 1] = v;
      this.n += 2;
    } else if (v <= 0xffff) {
      this.room(3);
      this.buf[this.n] = 0xcd;
      this.buf.writeUInt16BE(v, this.n + 1);
      this.n += 3;
    } else if (v <= 0xffffffff) {
      this.room(5);
      this.buf[this.n] = 0xce;
      this.buf.writeUInt32BE(v, this.n + 1);
      this.n += 5;
    } else {
      this.room(9);
      this.buf[this.n] = 0xcf;
      this.buf.writeBigUInt64BE(BigInt(v), this.n + 1);
      this.n += 9;
    }
  }

  float64(v: number): void {
    this.room(9);
    this.buf[this.n] = 0xcb;
    this.buf.writeDoubleBE(v, this.n + 1);
    this.n += 9;
  }

  str(s: string): void {
    const len = Buffer.byteLength(s, "utf8");
    this.room(5 + len);
    if (len < 32) this.buf[this.n++] = 0xa0 | len;
    else if (len <= 0xff) {
      this.buf[this.n++] = 0xd9;
      this.buf[this.n++] = len;
    } else if (len <= 0xffff) {
      this.buf[this.n++] = 0xda;
      this.buf.writeUInt16BE(len, this.n);
      this.n += 2;
    } else {
      this.buf[this.n++] = 0xdb;
      this.buf.writeUInt32BE(len, this.n);
      this.n += 4;
    }
    this.n += this.buf.write(s, this.n, "utf8");
  }

  private header(len: number, fix: number, b16: number, b32: number): void {
    this.room(5);
    if (len < 16) this.buf[this.n++] = fix | len;
    else if (len <= 0xffff) {
      this.buf[this.n++] = b16;
      this.buf.writeUInt16BE(len, this.n);
      this.n += 2;
    } else {
      this.buf[this.n++] = b32;
      this.buf.writeUInt32BE(len, this.n);
      this.n += 4;
    }
  }

  array(len: number): void {
    this.header(len, 0x90, 0xdc, 0xdd);
  }

  map(len: number): void {
    this.header(len, 0x80, 0xde, 0xdf);
  }

  done(): Buffer {
    return this.buf.subarray(0, this.n);
  }
}

/** Pair i of (lo, hi) pairs as the unsigned 64-bit hash vLLM publishes. */
const pairU64 = (p: Uint32Array, i: number): bigint => (BigInt(p[2 * i + 1]!) << 32n) | BigInt(p[2 * i]!);

/** Hash i of (lo, hi) pairs as the unsigned 64-bit integer vLLM publishes (below 2^53 from a number, no bigint). */
function writeHash(w: Writer, pairs: Uint32Array, i: number): void {
  const hi = pairs[2 * i + 1]!;
  if (hi < 0x200000) w.uint(hi * 0x100000000 + pairs[2 * i]!);
  else w.uint(pairU64(pairs, i));
}

function writeHashes(w: Writer, pairs: Uint32Array): void {
  const n = pairs.length >>> 1;
  w.array(n);
  for (let i = 0; i < n; i++) writeHash(w, pairs, i);
}

/**
 * A KVEventBatch as vLLM 0.32 encodes it (msgspec.msgpack.Encoder on KVEventBatch, kv_events.py): the batch an
 * array `[ts, events, data_parallel_rank]`, each event a map keyed by field name after its "type" tag.
 */
export function encodeVllmEventBatch(ts: number, events: readonly KvEvent[], dataParallelRank = 0): Buffer {
  const w = new Writer();
  w.array(3);
  w.float64(ts);
  w.array(events.length);
  for (const e of events) {
    switch (e.kind) {
      case "stored": {
        const blocks = e.hashes.length >>> 1;
        w.map(11);
        w.str("type");
        w.str("BlockStored");
        w.str("block_hashes");
        writeHashes(w, e.hashes);
        w.str("parent_block_hash");
        if (e.parent) writeHash(w, e.parent, 0);
        else w.nil();
        w.str("token_ids");
        w.array(e.tokenIds.length);
        for (const t of e.tokenIds) w.uint(t);
        w.str("block_size");
        w.uint(e.blockSize);
        w.str("lora_id");
        w.nil();
        w.str("medium");
        if (e.medium === null) w.nil();
        else w.str(e.medium);
        w.str("lora_name");
        w.nil();
        // one entry per block: no LoRA, multimodal input, cache salt or prompt embeds (to_event_extra_keys)
        w.str("extra_keys");
        w.array(blocks);
        for (let i = 0; i < blocks; i++) w.nil();
        w.str("group_idx");
        w.uint(0);
        w.str("kv_cache_spec_kind");
        w.str(SPEC_KIND);
        break;
      }
      case "removed":
        w.map(4);
        w.str("type");
        w.str("BlockRemoved");
        w.str("block_hashes");
        writeHashes(w, e.hashes);
        w.str("medium");
        if (e.medium === null) w.nil();
        else w.str(e.medium);
        w.str("group_idx");
        w.uint(0);
        break;
      case "cleared":
        w.map(1);
        w.str("type");
        w.str("AllBlocksCleared");
        break;
    }
  }
  w.uint(dataParallelRank);
  return w.done();
}

// ---- the publisher ----------------------------------------------------------------------------------------------

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
  /** Batches the replay socket keeps (vLLM's buffer_steps). */
  bufferSteps: number;
  log: (line: string) => void;
}

/** zeromq's ROUTER, as the replay socket uses it (zeromq.ts types only the sockets the proxy uses). */
interface ZmqRouter {
  bind(endpoint: string): Promise<void>;
  send(frames: (string | Buffer | Uint8Array)[]): Promise<void>;
  receive(): Promise<Buffer[]>;
  close(): void;
  readonly lastEndpoint: string | null;
  linger: number;
}

/** The last `cap` (seq, payload) pairs, oldest first: a ring (vLLM's deque(maxlen=buffer_steps)). */
class ReplayBuffer {
  private readonly seqs: bigint[] = [];
  private readonly payloads: Buffer[] = [];
  private start = 0;

  constructor(private readonly cap: number) {}

  push(seq: bigint, payload: Buffer): void {
    if (this.seqs.length < this.cap) {
      this.seqs.push(seq);
      this.payloads.push(payload);
      return;
    }
    this.seqs[this.start] = seq;
    this.payloads[this.start] = payload;
    this.start = (this.start + 1) % this.cap;
  }

  /** The buffered batches with seq ≥ from, oldest first (a snapshot). */
  from(from: bigint): [bigint, Buffer][] {
    const out: [bigint, Buffer][] = [];
    const n = this.seqs.length;
    for (let k = 0; k < n; k++) {
      const i = (this.start + k) % n;
      if (this.seqs[i]! >= from) out.push([this.seqs[i]!, this.payloads[i]!]);
    }
    return out;
  }
}

const seqFrame = (seq: bigint): Buffer => {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(seq);
  return b;
};

export class KvEventPublisher {
  /** Batches published (the next sequence number). */
  seq = 0n;
  /** Sends that failed (ZMQ or POST). */
  failures = 0;
  /** The ZMQ endpoint bound (null when off). */
  endpoint: string | null = null;
  /** The replay socket's endpoint (null when off). */
  replayEndpoint: string | null = null;
  /** Replay requests answered. */
  replays = 0;
  /** This worker's name in the POST header (known once it listens). */
  workerId = "";
  private pending: KvEvent[] = [];
  private readonly meta = new Map<number, BlockMeta>();
  private socket: ZmqPublisher | null = null;
  private router: ZmqRouter | null = null;
  private replayLoop: Promise<void> | null = null;
  private readonly buffer: ReplayBuffer;
  private readonly topicBytes: Buffer;
  private sendChain: Promise<void> = Promise.resolve();
  private closed = false;

  constructor(
    private readonly blockIds: BlockIds,
    private readonly o: KvPublisherOptions,
  ) {
    if (!Number.isSafeInteger(o.bufferSteps) || o.bufferSteps < 1)
      throw new Error(`worker: kvEventsBufferSteps must be an integer ≥ 1, got ${String(o.bufferSteps)}`);
    this.buffer = new ReplayBuffer(o.bufferSteps);
    this.topicBytes = Buffer.from(o.topic, "utf8");
  }

  /** What the instance's prefix cache reports, turned into pending events. */
  readonly sink: KvEventSink = {
    stored: (pairs) => this.stored(pairs),
    // one BlockRemoved per evicted block, as vLLM's BlockPool._emit_block_removed_events
    removed: (pairs) => {
      for (let i = 0; i < pairs.length; i += 2)
        this.pending.push({ kind: "removed", hashes: pairs.slice(i, i + 2), medium: "GPU" });
    },
  };

  /**
   * Binds the ZMQ publisher (PUB, high-water mark 100,000 as vLLM's) and, when asked for, the replay ROUTER. Resolves
   * with why ZMQ is off when zeromq is not installed; throws when an endpoint cannot be bound (nothing left open).
   */
  async bind(endpoint: string, replayEndpoint: string | null): Promise<string | null> {
    const { zmq, unavailable } = await loadZeromq();
    if (!zmq) return unavailable;
    const sock = new zmq.Publisher();
    (sock as unknown as { sendHighWaterMark: number }).sendHighWaterMark = VLLM_PUB_HWM;
    try {
      await sock.bind(endpoint);
    } catch (e) {
      sock.close();
      throw new Error(`worker: cannot bind KV events endpoint ${endpoint}: ${(e as Error).message}`);
    }
    let router: ZmqRouter | null = null;
    if (replayEndpoint !== null) {
      const Router = (zmq as unknown as { Router?: new () => ZmqRouter }).Router;
      if (!Router) {
        sock.close();
        throw new Error("worker: the zeromq module has no Router export: no KV events replay socket");
      }
      router = new Router();
      router.linger = 0;
      try {
        await router.bind(replayEndpoint);
      } catch (e) {
        router.close();
        sock.close();
        throw new Error(`worker: cannot bind KV events replay endpoint ${replayEndpoint}: ${(e as Error).message}`);
      }
    }
    this.socket = sock;
    this.endpoint = sock.lastEndpoint ?? endpoint;
    if (router) {
      this.router = router;
      this.replayEndpoint = router.lastEndpoint ?? replayEndpoint;
      this.replayLoop = this.serveReplays(router);
    }
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
    const payload = encodeVllmEventBatch(Date.now() / 1000, events);
    const n = this.seq++;
    const seqBytes = seqFrame(n);
    const socket = this.socket;
    const url = this.o.url;
    this.sendChain = this.sendChain.then(async () => {
      if (socket) {
        try {
          await socket.send([this.topicBytes, seqBytes, payload]);
          this.buffer.push(n, payload); // as vLLM: buffered for replay once published
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

  /** Waits for the sends under way, then closes the sockets. */
  async close(): Promise<void> {
    await this.sendChain;
    this.closed = true;
    this.socket?.close();
    this.router?.close();
    await this.replayLoop;
  }

  /** Counted; only the first failure is logged. */
  private failed(message: string): void {
    this.failures++;
    if (this.failures === 1) this.o.log(`worker ${this.workerId}: ${message}`);
  }

  /** vLLM's _service_replay, one request at a time (its publisher thread serves them between batches). */
  private async serveReplays(router: ZmqRouter): Promise<void> {
    for (;;) {
      let frames: Buffer[];
      try {
        frames = await router.receive();
      } catch (e) {
        if (!this.closed)
          this.o.log(`worker ${this.workerId}: KV events replay socket failed: ${(e as Error).message}`);
        return;
      }
      if (frames.length !== 3) {
        this.o.log(`worker ${this.workerId}: invalid KV events replay request (${frames.length} frames)`);
        continue;
      }
      const [client, , startBytes] = frames as [Buffer, Buffer, Buffer];
      let start = 0n; // int.from_bytes(start_seq_bytes, "big"): unsigned, any length
      for (const b of startBytes) start = (start << 8n) | BigInt(b);
      this.replays++;
      try {
        for (const [seq, payload] of this.buffer.from(start))
          await router.send([client, EMPTY, this.topicBytes, seqFrame(seq), payload]);
        await router.send([client, EMPTY, EMPTY, END_SEQ, EMPTY]);
      } catch (e) {
        if (this.closed) return;
        this.o.log(`worker ${this.workerId}: KV events replay failed: ${(e as Error).message}`);
      }
    }
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
