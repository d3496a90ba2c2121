// The emulated worker's KV events, on the wire as vLLM 0.32's ZmqEventPublisher sends them
// (vllm/distributed/kv_events.py): every store and eviction of the instance's prefix cache becomes an event of one
// batch per timer tick that had events (vLLM: one per engine step), published over ZMQ PUB as the frames
// [topic, seq (8-byte big-endian, 0, 1, 2, … one per batch), payload] and/or POSTed to kvEventsUrl (content-type
// application/msgpack, header x-dolphin-worker: workerId, x-dolphin-seq: sequence), in order, one at a time.
//
// The payload is msgspec's msgpack of a KVEventBatch (encodeVllmEventBatch, with msgpackr): the batch is
// array_like, `[ts (float64, wall-clock seconds), events, data_parallel_rank (0)]`; each event is a tagged struct,
// so a MAP whose first key "type" names its class, then its fields in declaration order with those still at their
// default omitted (omit_defaults): BlockStored {type, block_hashes, parent_block_hash, token_ids, block_size,
// lora_id: nil, medium: "GPU", lora_name: nil, extra_keys: [nil per block], group_idx: 0,
// kv_cache_spec_kind: "full_attention"} (the last two filled by KVCacheManager.take_events), BlockRemoved {type,
// block_hashes: [one hash], medium: "GPU", group_idx: 0} (one per evicted block), AllBlocksCleared {type}. Block
// hashes are unsigned 64-bit ints (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES, on by default: the low 64 bits of the hash),
// integers in msgpack's smallest encoding as msgspec writes them, byte for byte but for one: a hash in [2^32, 2^63) is
// an int64 where msgspec writes a uint64 (msgpackr's only form for it; the same value to any decoder). block_size is
// this worker's, 16 (the engines here run with 32).
//
// With a replay endpoint it also binds vLLM's replay socket, a ZMQ ROUTER keeping the last bufferSteps batches sent
// on the PUB (vLLM's buffer_steps, 10,000 by default) and answering as ZmqEventPublisher._service_replay does: a
// request [identity, b"", start_seq (big-endian)] gets, for each buffered batch with seq ≥ start_seq,
// [identity, b"", topic, seq, payload], then [identity, b"", b"", -1 (8-byte signed big-endian), b""]; a request
// of any other frame count is ignored. zeromq is optional (zeromq.ts): without it only kvEventsUrl works (logged at
// startup).

import { Packr } from "msgpackr";
import type { KvEvent } from "../../router/kv-events.js";
import type { BlockIds } from "../../sim/block-ids.js";
import type { KvEventSink } from "../../sim/cache-events.js";
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

/**
 * msgpackr as msgspec writes these batches: plain objects as maps in insertion order with the smallest header
 * (variableMapSize), numbers below 2^32 as the smallest int, strings str8 from 32 bytes, non-integers as float64.
 */
const packr = new Packr({ useRecords: false, variableMapSize: true });

/**
 * Hash i of (lo, hi) pairs as the unsigned 64-bit integer vLLM publishes: a number below 2^32 (its smallest int form,
 * as msgspec's), else a bigint (msgpackr: uint64 from 2^63, int64 below, where msgspec writes uint64: the same value).
 */
const hashAt = (p: Uint32Array, i: number): number | bigint =>
  p[2 * i + 1] === 0 ? p[2 * i]! : (BigInt(p[2 * i + 1]!) << 32n) | BigInt(p[2 * i]!);

const hashList = (p: Uint32Array): (number | bigint)[] =>
  Array.from({ length: p.length >>> 1 }, (_, i) => hashAt(p, i));

/** A KvEvent as vLLM's tagged struct: "type" first, then its fields in declaration order. */
function vllmEvent(e: KvEvent): Record<string, unknown> {
  switch (e.kind) {
    case "stored":
      return {
        type: "BlockStored",
        block_hashes: hashList(e.hashes),
        parent_block_hash: e.parent ? hashAt(e.parent, 0) : null,
        token_ids: e.tokenIds,
        block_size: e.blockSize,
        lora_id: null,
        medium: e.medium,
        lora_name: null,
        // one entry per block: no LoRA, multimodal input, cache salt or prompt embeds (to_event_extra_keys)
        extra_keys: Array.from({ length: e.hashes.length >>> 1 }, () => null),
        group_idx: 0,
        kv_cache_spec_kind: SPEC_KIND,
      };
    case "removed":
      return { type: "BlockRemoved", block_hashes: hashList(e.hashes), medium: e.medium, group_idx: 0 };
    case "cleared":
      return { type: "AllBlocksCleared" };
  }
}

/**
 * A KVEventBatch as vLLM 0.32 encodes it (msgspec.msgpack.Encoder on KVEventBatch, kv_events.py): the batch an
 * array `[ts, events, data_parallel_rank]`, each event a map keyed by field name after its "type" tag.
 */
export function encodeVllmEventBatch(ts: number, events: readonly KvEvent[], dataParallelRank = 0): Buffer {
  // msgspec writes a Python float as float64 always, msgpackr an integer-valued number (or -0) as an int: ts goes in
  // as a non-integer, so as float64 right after the one-byte array header, and is then written over.
  const out = packr.pack([0.5, events.map(vllmEvent), dataParallelRank]);
  out.writeDoubleBE(ts, 2);
  return out;
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
  /** The data-parallel rank every batch names (vLLM's EventBatch.data_parallel_rank). Default 0. */
  dataParallelRank?: number;
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

/** How long a bind waits for an address a closed socket of this process may still hold. */
const BIND_RETRY_MS = 2000;

/**
 * Binds, retrying while the address is in use for up to BIND_RETRY_MS: ZMQ closes a socket in its I/O thread after
 * close() returns, so a worker restarted on its predecessor's addresses (as an engine restart keeps its endpoints)
 * can find them still held for a moment. Any other error, or an address still in use after that, is thrown.
 */
async function bindFreed(sock: { bind(endpoint: string): Promise<void> }, endpoint: string): Promise<void> {
  const until = Date.now() + BIND_RETRY_MS;
  for (;;) {
    try {
      return await sock.bind(endpoint);
    } catch (e) {
      if (!/address already in use/i.test((e as Error).message) || Date.now() >= until) throw e;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
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
      await bindFreed(sock, endpoint);
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
        await bindFreed(router, replayEndpoint);
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
    const payload = encodeVllmEventBatch(Date.now() / 1000, events, this.o.dataParallelRank ?? 0);
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
