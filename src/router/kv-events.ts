// vLLM's KV cache events, as a worker publishes them (reference-systems.md): a msgpack EventBatch
// `[ts, events, data_parallel_rank?]` (msgspec array_like structs; newer versions may send maps), each event tagged
// by its class name: `["BlockStored", block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium]`,
// `["BlockRemoved", block_hashes, medium]`, `["AllBlocksCleared"]`. Block hashes are 64-bit ints (signed or
// unsigned; the low 64 bits of the engine's hash) or, in newer versions, bytes (whose low 64 bits, the last 8 bytes
// big-endian, are used). Decoding never throws anything but KvEventError, whatever the bytes.

import { Packr, Unpackr } from "msgpackr";
import { describeValue, MSGPACK_WORDS } from "../contract/values.js";
import { Tier } from "../generated/abi.js";
import type { TierName } from "./types.js";

export type KvEvent =
  | {
      kind: "stored";
      hashes: Uint32Array;
      parent: Uint32Array | null;
      tokenIds: number[];
      blockSize: number;
      medium: string | null;
    }
  | { kind: "removed"; hashes: Uint32Array; medium: string | null }
  | { kind: "cleared" };

export interface EventBatch {
  ts: number;
  events: KvEvent[];
  dataParallelRank: number | null;
}

export class KvEventError extends Error {
  constructor(where: string, problem: string) {
    super(`kv event: ${where}: ${problem}`);
    this.name = "KvEventError";
  }
}

const unpackr = new Unpackr({ useRecords: false, mapsAsObjects: true, int64AsType: "bigint" });
const packr = new Packr({ useRecords: false, variableMapSize: true });

const MIN_INT64 = -(1n << 63n);
const TWO_64 = 1n << 64n;
/** A 64-bit hash's halves through one typed-array write instead of four BigInt operations (wraps int64 to uint64). */
const scratch = new DataView(new ArrayBuffer(8));

/** One hash as a (lo, hi) pair into `out` at pair index i; an error names it `where[i]` (or `where`, if not `listed`). */
function putHash(v: unknown, out: Uint32Array, i: number, where: string, listed = true): void {
  const at = (): string => (listed ? `${where}[${i}]` : where);
  if (typeof v === "number" && Number.isSafeInteger(v) && v >= 0) {
    out[2 * i] = v % 2 ** 32;
    out[2 * i + 1] = Math.floor(v / 2 ** 32);
    return;
  }
  let b: bigint;
  if (typeof v === "bigint") b = v;
  else if (typeof v === "number" && Number.isSafeInteger(v)) b = BigInt(v);
  else if (v instanceof Uint8Array) {
    if (v.length === 0) throw new KvEventError(at(), "empty bytes hash");
    b = 0n;
    for (const x of v.subarray(Math.max(0, v.length - 8))) b = (b << 8n) | BigInt(x);
  } else throw new KvEventError(at(), `expected an integer or bytes block hash, got ${describe(v)}`);
  if (b < MIN_INT64 || b >= TWO_64) throw new KvEventError(at(), `${b} does not fit in 64 bits`);
  scratch.setBigUint64(0, BigInt.asUintN(64, b), true);
  out[2 * i] = scratch.getUint32(0, true);
  out[2 * i + 1] = scratch.getUint32(4, true);
}

function hashes(v: unknown, where: string): Uint32Array {
  if (!Array.isArray(v)) throw new KvEventError(where, `expected an array of block hashes, got ${describe(v)}`);
  const out = new Uint32Array(2 * v.length);
  for (let i = 0; i < v.length; i++) putHash(v[i], out, i, where);
  return out;
}

function optionalString(v: unknown, where: string): string | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== "string") throw new KvEventError(where, `expected a string or nil, got ${describe(v)}`);
  return v;
}

const describe = (v: unknown): string => describeValue(v, MSGPACK_WORDS);

/** Fields of an event given as a tagged array or as a map with a "type" (or "tag") key. */
function fields(e: unknown, names: string[], where: string): { tag: string; get: (name: string) => unknown } {
  if (Array.isArray(e)) {
    const tag = e[0];
    if (typeof tag !== "string") throw new KvEventError(where, "expected the event's type name first");
    return { tag, get: (name) => e[1 + names.indexOf(name)] };
  }
  if (e !== null && typeof e === "object" && !(e instanceof Uint8Array)) {
    const m = e as Record<string, unknown>;
    const tag = m["type"] ?? m["tag"];
    if (typeof tag !== "string") throw new KvEventError(where, 'expected a "type" key naming the event');
    return { tag, get: (name) => m[name] };
  }
  throw new KvEventError(where, `expected an event (array or map), got ${describe(e)}`);
}

const STORED = ["block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium"];
const REMOVED = ["block_hashes", "medium"];

function decodeEvent(e: unknown, where: string): KvEvent {
  const probe = fields(e, [], where);
  switch (probe.tag) {
    case "BlockStored": {
      const f = fields(e, STORED, where);
      const parentRaw = f.get("parent_block_hash");
      let parent: Uint32Array | null = null;
      if (parentRaw !== null && parentRaw !== undefined) {
        parent = new Uint32Array(2);
        putHash(parentRaw, parent, 0, `${where}.parent_block_hash`, false);
      }
      const tokens = f.get("token_ids") ?? [];
      if (!Array.isArray(tokens) || !tokens.every((t) => typeof t === "number" && Number.isInteger(t) && t >= 0)) {
        throw new KvEventError(`${where}.token_ids`, "expected an array of token ids");
      }
      const blockSize = f.get("block_size");
      if (typeof blockSize !== "number" || !Number.isInteger(blockSize) || blockSize < 1) {
        throw new KvEventError(`${where}.block_size`, `expected a positive integer, got ${describe(blockSize)}`);
      }
      return {
        kind: "stored",
        hashes: hashes(f.get("block_hashes"), `${where}.block_hashes`),
        parent,
        tokenIds: tokens as number[],
        blockSize,
        medium: optionalString(f.get("medium"), `${where}.medium`),
      };
    }
    case "BlockRemoved": {
      const f = fields(e, REMOVED, where);
      return {
        kind: "removed",
        hashes: hashes(f.get("block_hashes"), `${where}.block_hashes`),
        medium: optionalString(f.get("medium"), `${where}.medium`),
      };
    }
    case "AllBlocksCleared":
      return { kind: "cleared" };
    default:
      throw new KvEventError(where, `unknown event type ${JSON.stringify(probe.tag)}`);
  }
}

/** Decodes one EventBatch payload (the third ZMQ frame). */
export function decodeEventBatch(payload: Uint8Array): EventBatch {
  let raw: unknown;
  try {
    raw = unpackr.unpack(payload);
  } catch (e) {
    throw new KvEventError("(payload)", `not msgpack: ${(e as Error).message}`);
  }
  let ts: unknown;
  let events: unknown;
  let rank: unknown;
  if (Array.isArray(raw)) [ts, events, rank] = raw;
  else if (raw !== null && typeof raw === "object" && !(raw instanceof Uint8Array)) {
    const m = raw as Record<string, unknown>;
    [ts, events, rank] = [m["ts"], m["events"], m["data_parallel_rank"]];
  } else throw new KvEventError("(payload)", `expected an EventBatch (array or map), got ${describe(raw)}`);
  if (typeof ts !== "number" && typeof ts !== "bigint")
    throw new KvEventError("ts", `expected a number, got ${describe(ts)}`);
  if (!Array.isArray(events)) throw new KvEventError("events", `expected an array, got ${describe(events)}`);
  if (rank !== undefined && rank !== null && typeof rank !== "number")
    throw new KvEventError("data_parallel_rank", `expected an integer or nil, got ${describe(rank)}`);
  return {
    ts: Number(ts),
    events: events.map((e, i) => decodeEvent(e, `events[${i}]`)),
    dataParallelRank: (rank as number | undefined) ?? null,
  };
}

const pairBigInt = (p: Uint32Array, i: number): bigint =>
  BigInt.asIntN(64, (BigInt(p[2 * i + 1]!) << 32n) | BigInt(p[2 * i]!));

/** Encodes a batch the way vLLM does (array-like structs, hashes as signed 64-bit ints). */
export function encodeEventBatch(batch: EventBatch): Uint8Array {
  const ints = (p: Uint32Array): bigint[] => Array.from({ length: p.length >>> 1 }, (_, i) => pairBigInt(p, i));
  const events = batch.events.map((e) => {
    switch (e.kind) {
      case "stored":
        return [
          "BlockStored",
          ints(e.hashes),
          e.parent ? pairBigInt(e.parent, 0) : null,
          e.tokenIds,
          e.blockSize,
          null,
          e.medium,
        ];
      case "removed":
        return ["BlockRemoved", ints(e.hashes), e.medium];
      case "cleared":
        return ["AllBlocksCleared"];
    }
  });
  return packr.pack([batch.ts, events, batch.dataParallelRank]);
}

/**
 * The cache tier an event's `medium` names (spec/abi.json tiers, case-insensitive): no medium is the device (vLLM
 * before tiers, and its own cache today), "GPU" the device, "CPU" the lower tier its offloading connector and
 * LMCache publish; null for a medium the core has no tier for (e.g. "DISK"): such events are not indexed.
 */
export function tierOfMedium(medium: string | null): TierName | null {
  if (medium === null) return "GPU";
  const name = medium.toUpperCase();
  return Object.hasOwn(Tier, name) ? (name as TierName) : null;
}

/** What a router's index does with a batch from one worker. */
export interface KvIndex {
  store(worker: string, pairs: Uint32Array, tier?: TierName): void;
  remove(worker: string, pairs: Uint32Array, tier?: TierName): void;
  clear(worker?: string): void;
}

/** Applies a decoded batch to a worker's entries of the index, each event in its medium's tier (tierOfMedium). */
export function applyEventBatch(index: KvIndex, worker: string, batch: EventBatch): void {
  for (const e of batch.events) {
    if (e.kind === "cleared") {
      index.clear(worker);
      continue;
    }
    const tier = tierOfMedium(e.medium);
    if (tier === null) continue; // a tier the core has none for
    if (e.kind === "stored") index.store(worker, e.hashes, tier);
    else index.remove(worker, e.hashes, tier);
  }
}
