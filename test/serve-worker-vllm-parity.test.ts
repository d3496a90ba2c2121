// The emulated worker against what vLLM 0.32 itself does (read from its source, vllm/distributed/kv_events.py,
// v1/core/block_pool.py, v1/core/kv_cache_manager.py, v1/core/sched/scheduler.py, v1/engine/output_processor.py):
// the KV-event wire format (msgspec's bytes, but for int64 where it writes a uint64 below 2^63; events as maps), the
// sequence frames, the replay socket (ZmqEventPublisher._service_replay) answering a zeromq Dealer, and the decode
// side's cached_tokens and BlockStored.
import { Unpackr } from "msgpackr";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { decodeEventBatch } from "../src/router/kv-events.js";
import { hashTokens, rootHash } from "../src/hashing/hashes.js";
import { startWorker, type WorkerHandle } from "../src/serve/worker.js";
import { encodeVllmEventBatch, END_SEQ } from "../src/serve/worker/kv-events.js";

const SCALE = 50;
const MODEL = "dolphin-emulated";
const EMPTY = Buffer.alloc(0);
const raw = new Unpackr({ useRecords: false, mapsAsObjects: true, int64AsType: "bigint" });

const tokensOf = (seed: number, n: number): number[] =>
  Array.from({ length: n }, (_, i) => 1000 + ((seed * 7919 + i * 104729) % 150000));

async function post(base: string, body: unknown): Promise<any> {
  const r = await fetch(`${base}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  expect(r.status).toBe(200);
  return r.json();
}

async function until(cond: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error("timed out waiting");
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** (lo, hi) pairs as the unsigned 64-bit integers vLLM publishes. */
const u64s = (pairs: Uint32Array): bigint[] =>
  Array.from({ length: pairs.length >>> 1 }, (_, i) => (BigInt(pairs[2 * i + 1]!) << 32n) | BigInt(pairs[2 * i]!));
const pairsOf = (values: bigint[]): Uint32Array =>
  Uint32Array.from(values.flatMap((v) => [Number(v & 0xffffffffn), Number(v >> 32n)]));
/** A decoded value's structure: every map's keys in order, every leaf's JS type (number, bigint, string, …). */
const shape = (v: unknown): unknown =>
  Array.isArray(v)
    ? v.map(shape)
    : v !== null && typeof v === "object"
      ? Object.entries(v).map(([k, x]) => [k, shape(x)])
      : v === null
        ? "null"
        : typeof v;
/** A msgpack integer as decoded (number when small, bigint when 64-bit) as a bigint. */
const big = (v: unknown): bigint => BigInt(v as number | bigint);

interface Frames {
  topic: string;
  seq: bigint;
  payload: Buffer;
}

/** A SUB socket on a worker's KV events, collecting every frame set. */
async function subscribe(w: WorkerHandle): Promise<{ got: Frames[]; close: () => void }> {
  const zmq = await import("zeromq");
  const sub = new zmq.Subscriber();
  sub.connect(w.kvEventsEndpoint!);
  sub.subscribe();
  const got: Frames[] = [];
  void (async () => {
    for await (const frames of sub) {
      expect(frames).toHaveLength(3);
      const [topic, seq, payload] = frames as [Buffer, Buffer, Buffer];
      expect(seq.length).toBe(8);
      got.push({ topic: topic.toString(), seq: seq.readBigUInt64BE(0), payload });
    }
  })().catch(() => {});
  await new Promise((r) => setTimeout(r, 300)); // ZMQ's slow joiner
  return { got, close: () => sub.close() };
}

/** vLLM's replay protocol from a Dealer: [b"", start] out, frame sets in until the end marker. */
async function replay(endpoint: string, start: Buffer, timeoutMs = 3000): Promise<Buffer[][]> {
  const zmq = await import("zeromq");
  const dealer = new zmq.Dealer();
  dealer.receiveTimeout = timeoutMs;
  dealer.linger = 0;
  try {
    dealer.connect(endpoint);
    await dealer.send([EMPTY, start]);
    const out: Buffer[][] = [];
    for (;;) {
      const frames = await dealer.receive();
      out.push(frames);
      if (frames.length === 4 && frames[2]!.equals(END_SEQ)) return out;
    }
  } finally {
    dealer.close();
  }
}

const be8 = (n: bigint): Buffer => {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(n);
  return b;
};

/** A BlockStored's keys, in the order vLLM 0.32's msgspec writes them. */
const STORED_KEYS = [
  "type",
  "block_hashes",
  "parent_block_hash",
  "token_ids",
  "block_size",
  "lora_id",
  "medium",
  "lora_name",
  "extra_keys",
  "group_idx",
  "kv_cache_spec_kind",
];

describe("KV-event payloads as vLLM 0.32 encodes them", () => {
  it("matches msgspec's encoding of the same KVEventBatch", () => {
    // Made with vLLM 0.32.0's own classes (vllm.distributed.kv_events, no engine started):
    //   b = KVEventBatch(ts=1733000000.125, events=[
    //     BlockStored(block_hashes=[1, 2**63 + 5, 2**64 - 1, 300, 2**40], parent_block_hash=None,
    //                 token_ids=[1, 200, 70000, 5], block_size=16, lora_id=None, medium="GPU", lora_name=None,
    //                 extra_keys=[None] * 5, group_idx=0, kv_cache_spec_kind="full_attention"),
    //     BlockStored(block_hashes=[7], parent_block_hash=2**63, token_ids=list(range(16)), block_size=16,
    //                 lora_id=None, medium="GPU", lora_name=None, extra_keys=[None], group_idx=0,
    //                 kv_cache_spec_kind="full_attention"),
    //     BlockRemoved(block_hashes=[2**64 - 2], medium="GPU", group_idx=0), AllBlocksCleared()])
    //   b.data_parallel_rank = 0   # ZmqEventPublisher.publish sets it
    //   msgspec.msgpack.Encoder().encode(b).hex()
    const golden = [
      "93cb41d9d2ded0080000948ba474797065ab426c6f636b53746f726564ac626c6f636b5f6861736865739501cf80000000000000",
      "05cfffffffffffffffffcd012ccf0000010000000000b1706172656e745f626c6f636b5f68617368c0a9746f6b656e5f69647394",
      "01ccc8ce0001117005aa626c6f636b5f73697a6510a76c6f72615f6964c0a66d656469756da3475055a96c6f72615f6e616d65c0",
      "aa65787472615f6b65797395c0c0c0c0c0a967726f75705f69647800b26b765f63616368655f737065635f6b696e64ae66756c6c",
      "5f617474656e74696f6e8ba474797065ab426c6f636b53746f726564ac626c6f636b5f6861736865739107b1706172656e745f62",
      "6c6f636b5f68617368cf8000000000000000a9746f6b656e5f696473dc0010000102030405060708090a0b0c0d0e0faa626c6f63",
      "6b5f73697a6510a76c6f72615f6964c0a66d656469756da3475055a96c6f72615f6e616d65c0aa65787472615f6b65797391c0a9",
      "67726f75705f69647800b26b765f63616368655f737065635f6b696e64ae66756c6c5f617474656e74696f6e84a474797065ac42",
      "6c6f636b52656d6f766564ac626c6f636b5f68617368657391cffffffffffffffffea66d656469756da3475055a967726f75705f",
      "6964780081a474797065b0416c6c426c6f636b73436c656172656400",
    ].join("");
    const bytes = encodeVllmEventBatch(1733000000.125, [
      {
        kind: "stored",
        hashes: pairsOf([1n, 2n ** 63n + 5n, 2n ** 64n - 1n, 300n, 2n ** 40n]),
        parent: null,
        tokenIds: [1, 200, 70000, 5],
        blockSize: 16,
        medium: "GPU",
      },
      {
        kind: "stored",
        hashes: pairsOf([7n]),
        parent: pairsOf([2n ** 63n]),
        tokenIds: Array.from({ length: 16 }, (_, i) => i),
        blockSize: 16,
        medium: "GPU",
      },
      { kind: "removed", hashes: pairsOf([2n ** 64n - 2n]), medium: "GPU" },
      { kind: "cleared" },
    ]);
    // msgpackr writes a non-negative bigint below 2^63 as int64 (d3) where msgspec writes uint64 (cf): the one byte
    // that differs (hash 2^40 here), the same integer to any decoder. Every other byte is msgspec's.
    expect(bytes.toString("hex")).toBe(golden.replace("cf0000010000000000", "d30000010000000000"));
    // decoded, the same batch: fields, their order, each value and its JS type (bigint for a 64-bit int, number
    // below 2^32; a hash from 2^63 written as int64 would decode negative), ts a float64
    const ours = raw.unpack(bytes);
    const theirs = raw.unpack(Buffer.from(golden, "hex"));
    expect(ours).toStrictEqual(theirs);
    expect(shape(ours)).toEqual(shape(theirs));
    expect(ours[1].map((e: object) => Object.keys(e))).toEqual([
      STORED_KEYS,
      STORED_KEYS,
      ["type", "block_hashes", "medium", "group_idx"],
      ["type"],
    ]);
    expect(ours[1][0].block_hashes).toStrictEqual([1, 2n ** 63n + 5n, 2n ** 64n - 1n, 300, 2n ** 40n]);
    expect(ours[1][1].parent_block_hash).toBe(2n ** 63n);
    expect(ours[1][2].block_hashes).toStrictEqual([2n ** 64n - 2n]);
    expect([bytes[1], bytes.readDoubleBE(2)]).toEqual([0xcb, 1733000000.125]);
    // a whole-second ts is still a float64, as msgspec writes a Python float
    expect(encodeVllmEventBatch(1733000000, []).toString("hex")).toBe("93cb41d9d2ded00000009000");
    // and the proxy's decoder reads it
    const batch = decodeEventBatch(bytes);
    expect(batch.dataParallelRank).toBe(0);
    expect(batch.events.map((e) => e.kind)).toEqual(["stored", "stored", "removed", "cleared"]);
  });
});

describe("the emulated worker's KV-event publisher and replay socket", () => {
  let w: WorkerHandle;
  let sub: { got: Frames[]; close: () => void };
  const a = tokensOf(1, 40); // 2 full blocks
  const b = tokensOf(2, 70); // 4 full blocks
  const c = tokensOf(3, 20); // 1 full block

  beforeAll(async () => {
    w = await startWorker({
      timeScale: SCALE,
      kvEventsEndpoint: "tcp://127.0.0.1:*",
      kvEventsReplayEndpoint: "tcp://127.0.0.1:*",
      log: () => {},
    });
    sub = await subscribe(w);
    for (const prompt of [a, b, c]) {
      await post(w.url, { model: MODEL, prompt, max_tokens: 2 });
      await until(() => w.stats().kvEventBatches > 0 && sub.got.length === w.stats().kvEventBatches);
    }
  });
  afterAll(async () => {
    sub?.close();
    await w?.close();
  });

  it("binds both endpoints and exposes them", () => {
    expect(w.kvEventsEndpoint).toMatch(/^tcp:\/\/127\.0\.0\.1:\d+$/);
    expect(w.kvEventsReplayEndpoint).toMatch(/^tcp:\/\/127\.0\.0\.1:\d+$/);
    expect(w.kvEventsReplayEndpoint).not.toBe(w.kvEventsEndpoint);
  });

  it("sends frames [topic, seq from 0 (+1 a batch), payload]; batches [ts, events, 0]; events as maps", () => {
    const got = sub.got;
    expect(got.length).toBeGreaterThanOrEqual(3);
    expect(got.map((f) => f.seq)).toEqual(got.map((_, i) => BigInt(i)));
    expect(got.every((f) => f.topic === "kv-events")).toBe(true);
    const root = rootHash(MODEL);
    const stored: Record<string, unknown>[] = [];
    for (const f of got) {
      const batch = raw.unpack(f.payload);
      expect(Array.isArray(batch)).toBe(true);
      expect(batch).toHaveLength(3);
      const [ts, events, rank] = batch;
      expect(f.payload[1]).toBe(0xcb); // ts a float64
      expect(Math.abs(ts - Date.now() / 1000)).toBeLessThan(60);
      expect(rank).toBe(0);
      for (const e of events) {
        expect(e).toBeTypeOf("object");
        expect(Array.isArray(e)).toBe(false);
        if (e.type === "BlockStored") stored.push(e);
      }
    }
    const expected = [a, b, c].map((p) => {
      const full = Math.floor(p.length / 16) * 16;
      return {
        type: "BlockStored",
        block_hashes: u64s(hashTokens(p, 16, root)),
        parent_block_hash: null,
        token_ids: p.slice(0, full),
        block_size: 16,
        lora_id: null,
        medium: "GPU",
        lora_name: null,
        extra_keys: Array.from({ length: full / 16 }, () => null),
        group_idx: 0,
        kv_cache_spec_kind: "full_attention",
      };
    });
    expect(stored).toHaveLength(3);
    stored.forEach((e, i) => {
      expect(Object.keys(e)).toEqual(Object.keys(expected[i]!)); // msgspec's field order, "type" first
      expect({ ...e, block_hashes: (e["block_hashes"] as unknown[]).map(big) }).toEqual(expected[i]);
    });
    // the proxy's decoder reads the same frames
    const decoded = got.flatMap((f) => decodeEventBatch(f.payload).events).filter((e) => e.kind === "stored");
    expect(decoded.map((e) => e.kind === "stored" && Array.from(e.hashes))).toEqual(
      [a, b, c].map((p) => Array.from(hashTokens(p, 16, root))),
    );
  });

  it("publishes BlockRemoved as {type, block_hashes, medium, group_idx}", async () => {
    const small = await startWorker({
      timeScale: SCALE,
      capacityBlocks: 4,
      kvEventsEndpoint: "tcp://127.0.0.1:*",
      log: () => {},
    });
    const s = await subscribe(small);
    try {
      await post(small.url, { prompt: tokensOf(4, 48), max_tokens: 2 }); // 3 blocks cached
      await post(small.url, { prompt: tokensOf(5, 48), max_tokens: 2 }); // evicts them
      const removedOf = (): any[] =>
        s.got.flatMap((f) => (raw.unpack(f.payload)[1] as any[]).filter((e) => e.type === "BlockRemoved"));
      await until(() => removedOf().length >= 3);
      const removed = removedOf();
      const gone = u64s(hashTokens(tokensOf(4, 48), 16, rootHash(MODEL)));
      for (const e of removed) {
        expect(Object.keys(e)).toEqual(["type", "block_hashes", "medium", "group_idx"]);
        expect(e.medium).toBe("GPU");
        expect(e.group_idx).toBe(0);
        expect(e.block_hashes).toHaveLength(1); // vLLM: one event per evicted block hash
        expect(gone).toContain(big(e.block_hashes[0]));
      }
      expect(new Set(removed.map((e) => big(e.block_hashes[0])))).toEqual(new Set(gone));
    } finally {
      s.close();
      await small.close();
    }
  });

  it("replays to a Dealer: every buffered batch with seq ≥ start, the same frames, then the end marker", async () => {
    const live = sub.got;
    const n = live.length;
    for (const start of [0n, 1n, BigInt(n - 1)]) {
      const got = await replay(w.kvEventsReplayEndpoint!, be8(start));
      const end = got.at(-1)!;
      // [b"", b"", END_SEQ (-1, 8-byte signed big-endian), b""]
      expect(end.map((f) => f.toString("hex"))).toEqual(["", "", "ffffffffffffffff", ""]);
      expect(end[2]!.readBigInt64BE(0)).toBe(-1n);
      const batches = got.slice(0, -1);
      expect(batches.map((f) => f.length)).toEqual(batches.map(() => 4));
      expect(batches.map((f) => f[0]!.length)).toEqual(batches.map(() => 0));
      expect(batches.map((f) => f[1]!.toString())).toEqual(batches.map(() => "kv-events"));
      expect(batches.map((f) => f[2]!.readBigUInt64BE(0))).toEqual(live.slice(Number(start)).map((f) => f.seq));
      // the payloads published, byte for byte
      expect(batches.map((f) => f[3]!.toString("hex"))).toEqual(
        live.slice(Number(start)).map((f) => f.payload.toString("hex")),
      );
    }
    // past the last batch: just the end marker
    expect(await replay(w.kvEventsReplayEndpoint!, be8(BigInt(n) + 5n))).toHaveLength(1);
    // start_seq is int.from_bytes(frame, "big"): any length, an empty frame is 0
    const one = await replay(w.kvEventsReplayEndpoint!, Buffer.from([1]));
    expect(one.slice(0, -1).map((f) => f[2]!.readBigUInt64BE(0))).toEqual(live.slice(1).map((f) => f.seq));
    const none = await replay(w.kvEventsReplayEndpoint!, EMPTY);
    expect(none.slice(0, -1).map((f) => f[2]!.readBigUInt64BE(0))).toEqual(live.map((f) => f.seq));
  });

  it("ignores a request of any other frame count, as vLLM does", async () => {
    const zmq = await import("zeromq");
    const dealer = new zmq.Dealer();
    dealer.receiveTimeout = 300;
    dealer.linger = 0;
    try {
      dealer.connect(w.kvEventsReplayEndpoint!);
      await dealer.send([EMPTY, EMPTY, be8(0n)]); // 4 frames at the ROUTER
      await expect(dealer.receive()).rejects.toThrow();
    } finally {
      dealer.close();
    }
    // and still answers a good one
    expect((await replay(w.kvEventsReplayEndpoint!, be8(0n))).length).toBeGreaterThan(1);
  });

  it("keeps only the last kvEventsBufferSteps batches", async () => {
    const q = await startWorker({
      timeScale: SCALE,
      kvEventsEndpoint: "tcp://127.0.0.1:*",
      kvEventsReplayEndpoint: "tcp://127.0.0.1:*",
      kvEventsBufferSteps: 2,
      log: () => {},
    });
    try {
      for (let i = 0; i < 4; i++) {
        await post(q.url, { prompt: tokensOf(10 + i, 32), max_tokens: 1 });
        await until(() => q.stats().kvEventBatches === i + 1);
      }
      await new Promise((r) => setTimeout(r, 50)); // the last send
      const got = await replay(q.kvEventsReplayEndpoint!, be8(0n));
      expect(got.slice(0, -1).map((f) => f[2]!.readBigUInt64BE(0))).toEqual([2n, 3n]);
    } finally {
      await q.close();
    }
  });

  it("refuses a replay endpoint without a publisher, and closes the replay socket with the worker", async () => {
    await expect(startWorker({ kvEventsReplayEndpoint: "tcp://127.0.0.1:*", log: () => {} })).rejects.toThrow(
      /needs kvEventsEndpoint/,
    );
    const q = await startWorker({
      timeScale: SCALE,
      kvEventsEndpoint: "tcp://127.0.0.1:*",
      kvEventsReplayEndpoint: "tcp://127.0.0.1:*",
      log: () => {},
    });
    const ep = q.kvEventsReplayEndpoint!;
    await q.close();
    // the port is free again: a new ROUTER binds it
    const zmq = await import("zeromq");
    const again = new zmq.Router();
    try {
      const end = Date.now() + 3000;
      for (;;) {
        try {
          await again.bind(ep);
          break;
        } catch (e) {
          // ZMQ's I/O thread lets the port go a moment after close()
          if (Date.now() > end) throw e;
          await new Promise((r) => setTimeout(r, 20));
        }
      }
    } finally {
      again.close();
    }
  });
});

describe("the decode side of a NIXL handoff, as vLLM 0.32 reports it", () => {
  let p: WorkerHandle;
  let d: WorkerHandle;
  let pSub: { got: Frames[]; close: () => void };
  let dSub: { got: Frames[]; close: () => void };
  beforeAll(async () => {
    p = await startWorker({ role: "prefill", timeScale: SCALE, kvEventsEndpoint: "tcp://127.0.0.1:*", log: () => {} });
    d = await startWorker({ role: "decode", timeScale: SCALE, kvEventsEndpoint: "tcp://127.0.0.1:*", log: () => {} });
    [pSub, dSub] = await Promise.all([subscribe(p), subscribe(d)]);
  });
  afterAll(async () => {
    pSub?.close();
    dSub?.close();
    await Promise.all([p?.close(), d?.close()]);
  });

  const storedHashes = (got: Frames[]): bigint[] =>
    got.flatMap((f) =>
      (raw.unpack(f.payload)[1] as any[])
        .filter((e) => e.type === "BlockStored")
        .flatMap((e) => e.block_hashes.map(big)),
    );

  async function prefill(prompt: number[]): Promise<any> {
    const pre = await post(p.url, { prompt, max_tokens: 1, kv_transfer_params: { do_remote_decode: true } });
    return pre;
  }

  it("prefill answers carry remote_prefill_cached_tokens; decode reports it as cached_tokens", async () => {
    const prompt = tokensOf(30, 1000);
    const pre = await prefill(prompt);
    const kv = pre.kv_transfer_params;
    expect(Object.keys(kv)).toEqual([
      "do_remote_prefill",
      "do_remote_decode",
      "remote_block_ids",
      "remote_engine_id",
      "remote_request_id",
      "remote_host",
      "remote_port",
      "tp_size",
      "dcp_size",
      "pp_size",
      "remote_num_tokens",
      "remote_blocks_expiry_time",
      "transfer_mode",
      "remote_prefill_cached_tokens",
    ]);
    expect(kv).toMatchObject({ remote_num_tokens: 1000, transfer_mode: "pull", remote_prefill_cached_tokens: 0 });
    expect(pre.usage.prompt_tokens_details.cached_tokens).toBe(0);
    const first = await post(d.url, { prompt, max_tokens: 2, kv_transfer_params: kv });
    expect(first.usage.prompt_tokens_details.cached_tokens).toBe(0); // the prefill engine's count

    // the decode engine published the pulled blocks, with the prefill engine's hashes
    const root = rootHash(MODEL);
    const hashes = u64s(hashTokens(prompt, 16, root));
    await until(() => storedHashes(dSub.got).length >= hashes.length);
    await until(() => storedHashes(pSub.got).length >= hashes.length);
    expect(storedHashes(dSub.got)).toEqual(hashes);
    expect(storedHashes(pSub.got)).toEqual(hashes);

    // again: the prefill worker now hits 992 tokens, and the decode worker reports that (its own hit is 992 too)
    const pre2 = await prefill(prompt);
    expect(pre2.usage.prompt_tokens_details.cached_tokens).toBe(992);
    expect(pre2.kv_transfer_params.remote_prefill_cached_tokens).toBe(992);
    const second = await post(d.url, { prompt, max_tokens: 2, kv_transfer_params: pre2.kv_transfer_params });
    expect(second.usage.prompt_tokens_details.cached_tokens).toBe(992);
  });

  it("without remote_prefill_cached_tokens the decode side reports local + external hits: the prompt", async () => {
    const prompt = tokensOf(31, 500);
    const pre = await prefill(prompt);
    const { remote_prefill_cached_tokens: _, ...kv } = pre.kv_transfer_params;
    const before = d.stats();
    const r = await post(d.url, { prompt, max_tokens: 2, kv_transfer_params: kv });
    expect(r.usage.prompt_tokens_details.cached_tokens).toBe(500);
    // the prefix-cache metrics count only the local hit (record_prefix_cache_stats), none here
    const after = d.stats();
    expect(after.prefixQueryTokens - before.prefixQueryTokens).toBe(500);
    expect(after.prefixHitTokens - before.prefixHitTokens).toBe(0);
  });
});
