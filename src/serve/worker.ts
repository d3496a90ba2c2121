// `dolphin worker`: an emulated vLLM worker. It speaks vLLM's HTTP API (OpenAI completions and chat completions
// with streaming, /tokenize, /v1/models, /health, /metrics) and vLLM's disaggregated-prefill protocol
// (NixlConnector's `kv_transfer_params`, as a proxy speaks it), and answers in real time from the simulator's
// calibrated instance model instead of a GPU: the field's practice for testing routers and proxies without GPUs
// (llm-d's inference simulator, Dynamo's mocker). Every latency it shows is simulated (docs/simulator.md).
//
// Timing. One simulated instance (src/sim/instance.ts: continuous batching with chunked prefill, head-of-line
// admission, a prefix cache with capacity and LRU eviction) runs on an EventQueue driven by the wall clock:
// simulated ms = (wall ms since start) × timeScale. One timer is always armed for the next event; a new request is
// enqueued at the current simulated time. maxRunSteps = 1, so every decode step is its own event and each token is
// written when its step ends. Token times are exact in simulated time; on the wall they are late by the timer's
// jitter only (about a millisecond; at a high timeScale many steps fall into one timer tick).
//
// Requests (POST /v1/completions with `prompt`: a string, token ids, or a one-element list of either; POST
// /v1/chat/completions with `messages`, rendered by tokenizer.ts's chatPrompt): the output is exactly
// max(max_tokens, min_tokens) tokens (max_tokens default 64; chat also reads max_completion_tokens), finish_reason
// "length", no EOS. Output text is deterministic words (tokenizer.ts). `usage.prompt_tokens_details.cached_tokens`
// is the prefix-cache hit at admission (whole 16-token blocks; a full hit recomputes its last block, as vLLM).
//
// Disaggregated protocol (reference-systems.md):
//   - `kv_transfer_params.do_remote_decode: true` (a prefill request; roles prefill and both): runs the prefill only
//     and answers with one token and `kv_transfer_params: {do_remote_prefill: true, do_remote_decode: false,
//     remote_block_ids, remote_engine_id: workerId, remote_request_id, remote_host, remote_port, tp_size}`.
//     remote_host/remote_port are this worker's HTTP address (real NIXL uses a side-channel port);
//     remote_block_ids are the interned ids of the prompt's full blocks (informational). The prompt's blocks stay
//     pinned until released, or until kvPinTimeoutMs of simulated time passes (then released anyway, as vLLM's
//     NIXL abort timeout does).
//   - `kv_transfer_params.do_remote_prefill: true` with remote_host, remote_port, remote_request_id (a decode
//     request; roles decode and both): admitted (KV reserved for prompt and output), it "pulls" the prompt's KV
//     that is not already in its own prefix cache (as NIXL does): kvTransferMs of those tokens over the link, in
//     simulated time; pulls into one worker share its inbound link one at a time (as the simulator). Then it decodes:
//     its first token comes from its first decode step. When the pull ends it tells the prefill worker to release
//     the blocks: `POST http://{remote_host}:{remote_port}/internal/kv-release` with `{"remote_request_id": …}`
//     (200 `{"released": true}`, 404 when unknown). Real NIXL notifies over its own channel; this endpoint stands in
//     for it. A failed release is counted (stats().kvReleaseFailures) and does not fail the request.
//   - Without kv_transfer_params (or with both flags false) any role prefills and decodes locally (vLLM does).
//     A prefill request sent to a decode-role worker, or a decode request to a prefill-role worker, is a 400.
//
// KV events: every store and eviction of the instance's prefix cache becomes a vLLM EventBatch (src/kv-events.ts
// encodeEventBatch; BlockStored with block_hashes, parent_block_hash, token_ids, block_size 16, medium "GPU";
// BlockRemoved), one batch per timer tick that had events, ts = wall-clock seconds. Block hashes are llm-d's chained
// scheme (src/hashes.ts: hashTokens(tokens, 16, rootHash(model))), the one the router uses in precise mode
// with `model` set to the served model name. Published over ZMQ PUB (frames: topic, 8-byte big-endian sequence
// number from 0, payload, as vLLM; no replay socket) and/or POSTed to kvEventsUrl (content-type
// application/msgpack, header x-dolphin-worker: workerId, x-dolphin-seq: sequence), in order, one at a time.
// zeromq is an optional dependency, loaded on demand: without it only kvEventsUrl works (logged at startup).
//
// Simplifications, stated: a request reserves KV for its whole output at admission (no preemption); output tokens
// are not added to the prefix cache (only the prompt's blocks are); a client that disconnects aborts its request,
// which leaves the batch at the next step boundary and releases its KV (as vLLM); the block-id interning table grows with every distinct block seen (8–16 bytes each); `n`, `best_of`,
// `echo`, logprobs, stop strings and sampling parameters are ignored (except that `n` other than 1 is a 400).

import { describeValue, isPlainObject } from "../values.js";
import http from "node:http";
import { randomUUID } from "node:crypto";
import { performance } from "node:perf_hooks";
import { encodeEventBatch, type KvEvent } from "../kv-events.js";
import { hashTokens, rootHash } from "../hashes.js";
import { EventQueue, Priority, type SimEvent } from "../sim/events.js";
import { Instance, type InstanceHost, type InstanceRole, type Job, type JobKind } from "../sim/instance.js";
import { BlockIds, type KvEventSink } from "../sim/kv-cache.js";
import {
  DEFAULT_TRANSFER, kvCapacityBlocks, kvTransferMs, resolveLink, resolvePreset, type LinkPreset, type ModelPreset,
  type TransferModel,
} from "../sim/perf.js";
import { SIM_BLOCK_TOKENS, type SimRequest } from "../sim/types.js";
import {
  VOCAB_SIZE, chatPrompt, decode, decodeToken, encode, outputToken, promptSeed, type ChatMessage,
} from "./tokenizer.js";

export type WorkerRole = "prefill" | "decode" | "both";

export interface WorkerOptions {
  /** prefill: prefill requests and local requests; decode: decode requests and local ones; both: everything. */
  role?: WorkerRole;
  /** Model preset (or its name): the step-time model and the KV capacity. Default "h100-8b". */
  preset?: ModelPreset | string;
  /** HTTP port; 0 (default) picks a free one. */
  port?: number;
  /** Interface to bind, default 127.0.0.1. */
  host?: string;
  /** Served model name (requests naming another model get a 404). Default "dolphin-emulated". */
  model?: string;
  /** Simulated ms per wall ms: 1 (default) is real time; tests use 50 or more. */
  timeScale?: number;
  /** KV-cache capacity in 16-token blocks (default: the preset's, kvCapacityBlocks). */
  capacityBlocks?: number;
  /** Longest prompt + output accepted (400 beyond it, as vLLM). Default 131,072. */
  maxModelLen?: number;
  /** ZMQ PUB port for KV events, bound on `host`; 0 or undefined: off. */
  kvEventsPort?: number;
  /** ZMQ endpoint to bind instead of kvEventsPort, e.g. "tcp://127.0.0.1:*" (an ephemeral port). */
  kvEventsEndpoint?: string;
  /** ZMQ topic frame (default "kv-events"). */
  kvEventsTopic?: string;
  /** POST every EventBatch (msgpack) here. */
  kvEventsUrl?: string;
  /** This worker's name in KV events and kv_transfer_params (default `${host}:${port}`). */
  workerId?: string;
  /** Link the decode side pulls KV over (name or preset); default "ib-ndr". */
  link?: LinkPreset | string;
  /** Transfer model; default DEFAULT_TRANSFER with one link per GPU of the instance (as the simulator). */
  transfer?: TransferModel;
  /** Simulated ms a prefill worker keeps blocks pinned for a pull that never comes. Default 30,000. */
  kvPinTimeoutMs?: number;
  /** max_tokens when the request gives none. Default 64. */
  defaultMaxTokens?: number;
  /** Startup and problem messages (default: stderr). */
  log?: (line: string) => void;
}

export interface WorkerStats {
  role: WorkerRole;
  simNowMs: number;
  running: number;
  waiting: number;
  /** prefill requests whose blocks are pinned, waiting to be pulled */
  pendingPulls: number;
  usedBlocks: number;
  capacityBlocks: number;
  /** 1 − free/capacity, cached unpinned blocks counting as free (vLLM's kv_cache_usage_perc) */
  kvUsage: number;
  evictions: number;
  prefixQueryTokens: number;
  prefixHitTokens: number;
  promptTokens: number;
  generationTokens: number;
  completed: number;
  rejected: number;
  aborted: number;
  kvEventBatches: number;
  kvReleases: { pulled: number; timeout: number };
  kvReleaseFailures: number;
  kvEventFailures: number;
}

export interface WorkerHandle {
  url: string;
  host: string;
  port: number;
  workerId: string;
  role: WorkerRole;
  model: string;
  preset: ModelPreset;
  /** The ZMQ endpoint KV events are published on (null when off). */
  kvEventsEndpoint: string | null;
  /** The simulated instance (read-only use). */
  instance: Instance;
  stats(): WorkerStats;
  close(): Promise<void>;
}

const MAX_BODY_BYTES = 8 * 1024 * 1024;
const DRAIN_LIMIT_BYTES = 64 * 1024 * 1024;
/** vLLM's TTFT histogram buckets (seconds). */
const TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0];

class HttpError extends Error {
  constructor(readonly status: number, readonly type: string, message: string, readonly param: string | null = null) {
    super(message);
  }
}

const bad = (message: string, param: string | null = null): HttpError => new HttpError(400, "BadRequestError", message, param);

const describe = (v: unknown): string => describeValue(v);
const isObject = isPlainObject;

function optInt(body: Record<string, unknown>, key: string, min: number): number | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < min) throw bad(`${key} must be an integer ≥ ${min}, got ${describe(v)}`, key);
  return v;
}

function optBool(body: Record<string, unknown>, key: string): boolean | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "boolean") throw bad(`${key} must be a boolean, got ${describe(v)}`, key);
  return v;
}

function tokenIds(v: unknown[], param: string): number[] {
  v.forEach((t, i) => {
    if (typeof t !== "number" || !Number.isInteger(t) || t < 0 || t >= VOCAB_SIZE) {
      throw bad(`${param}[${i}] must be a token id in 0..${VOCAB_SIZE - 1}, got ${describe(t)}`, param);
    }
  });
  return v as number[];
}

/** The prompt of a completions request as token ids. */
function promptTokens(v: unknown): number[] {
  if (typeof v === "string") return encode(v);
  if (Array.isArray(v)) {
    if (v.length === 0) throw bad("prompt must not be empty", "prompt");
    if (v.every((x) => typeof x === "number")) return tokenIds(v, "prompt");
    if (v.length === 1) {
      const only = v[0];
      if (typeof only === "string") return encode(only);
      if (Array.isArray(only)) return tokenIds(only, "prompt[0]");
    }
    throw bad("prompt must be a string, a list of token ids, or a one-element list of either (batched prompts are not supported)", "prompt");
  }
  throw bad(`prompt must be a string or a list of token ids, got ${describe(v)}`, "prompt");
}

function chatMessages(v: unknown): ChatMessage[] {
  if (!Array.isArray(v) || v.length === 0) throw bad(`messages must be a non-empty list, got ${describe(v)}`, "messages");
  return v.map((m, i) => {
    if (!isObject(m)) throw bad(`messages[${i}] must be an object, got ${describe(m)}`, "messages");
    if (typeof m["role"] !== "string" || m["role"] === "") throw bad(`messages[${i}].role must be a non-empty string, got ${describe(m["role"])}`, "messages");
    const c = m["content"];
    if (c !== undefined && c !== null && typeof c !== "string") {
      if (!Array.isArray(c) || !c.every((p) => isObject(p) && (p["text"] === undefined || typeof p["text"] === "string"))) {
        throw bad(`messages[${i}].content must be a string, a list of content parts, or null, got ${describe(c)}`, "messages");
      }
    }
    return m as unknown as ChatMessage;
  });
}

interface RemoteSource { host: string; port: number; requestId: string }

/** What kv_transfer_params asks for. */
function transferKind(v: unknown): { kind: JobKind; remote: RemoteSource | null } {
  if (v === undefined || v === null) return { kind: "local", remote: null };
  if (!isObject(v)) throw bad(`kv_transfer_params must be an object, got ${describe(v)}`, "kv_transfer_params");
  const decodeRemote = v["do_remote_decode"] === true;
  const prefillRemote = v["do_remote_prefill"] === true;
  for (const k of ["do_remote_decode", "do_remote_prefill"]) {
    if (v[k] !== undefined && v[k] !== null && typeof v[k] !== "boolean") throw bad(`kv_transfer_params.${k} must be a boolean, got ${describe(v[k])}`, "kv_transfer_params");
  }
  if (decodeRemote && prefillRemote) throw bad("kv_transfer_params: do_remote_decode and do_remote_prefill cannot both be true", "kv_transfer_params");
  if (decodeRemote) return { kind: "prefill", remote: null };
  if (!prefillRemote) return { kind: "local", remote: null };
  const host = v["remote_host"];
  const port = v["remote_port"];
  const requestId = v["remote_request_id"];
  if (typeof host !== "string" || host === "") throw bad(`kv_transfer_params.remote_host must be a host name, got ${describe(host)}`, "kv_transfer_params");
  if (typeof port !== "number" || !Number.isInteger(port) || port < 1 || port > 65535) throw bad(`kv_transfer_params.remote_port must be a port number, got ${describe(port)}`, "kv_transfer_params");
  if (typeof requestId !== "string" || requestId === "") throw bad(`kv_transfer_params.remote_request_id must be a string, got ${describe(requestId)}`, "kv_transfer_params");
  const ids = v["remote_block_ids"];
  if (ids !== undefined && ids !== null && !Array.isArray(ids)) throw bad(`kv_transfer_params.remote_block_ids must be a list, got ${describe(ids)}`, "kv_transfer_params");
  return { kind: "decode", remote: { host, port, requestId } };
}

/** One request in flight: how to answer it. */
interface Ctx {
  id: string;
  /** the instance's job, once enqueued (to abort it when the client goes away) */
  job?: Job;
  /** unique within this worker: the remote_request_id of a prefill */
  requestId: string;
  kind: JobKind;
  chat: boolean;
  stream: boolean;
  includeUsage: boolean;
  res: http.ServerResponse;
  closed: boolean;
  rejected: boolean;
  tokens: number[];
  seed: number;
  outputTokens: number;
  emitted: number;
  text: string;
  created: number;
  arrivalMs: number;
  cachedTokens: number;
  remote: RemoteSource | null;
  kvParams: Record<string, unknown> | null;
  simReq: SimRequest;
}

/** Per block id: its tokens and parent, while some job that may store it is live (for BlockStored events). */
interface BlockMeta { tokens: number[]; off: number; parent: number; refs: number }

interface Pin { job: Job; timeout: SimEvent }

function noop(): void {}

function escapeLabel(s: string): string {
  return s.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
}

export async function startWorker(opts: WorkerOptions = {}): Promise<WorkerHandle> {
  const role: WorkerRole = opts.role ?? "both";
  if (role !== "prefill" && role !== "decode" && role !== "both") throw new Error(`worker: role must be prefill, decode or both, got ${String(role)}`);
  const preset = typeof opts.preset === "object" ? opts.preset : resolvePreset(opts.preset ?? "h100-8b");
  const link = typeof opts.link === "object" ? opts.link : resolveLink(opts.link ?? "ib-ndr");
  const transfer = opts.transfer ?? { ...DEFAULT_TRANSFER, links: preset.tp };
  const host = opts.host ?? "127.0.0.1";
  const model = opts.model ?? "dolphin-emulated";
  const timeScale = opts.timeScale ?? 1;
  if (!(timeScale > 0) || !Number.isFinite(timeScale)) throw new Error(`worker: timeScale must be a finite number > 0, got ${String(timeScale)}`);
  const capacityBlocks = opts.capacityBlocks ?? kvCapacityBlocks(preset, SIM_BLOCK_TOKENS);
  if (!Number.isSafeInteger(capacityBlocks) || capacityBlocks < 1) throw new Error(`worker: capacityBlocks must be an integer ≥ 1, got ${String(capacityBlocks)}`);
  const maxModelLen = opts.maxModelLen ?? 131_072;
  const pinTimeoutMs = opts.kvPinTimeoutMs ?? 30_000;
  const defaultMaxTokens = opts.defaultMaxTokens ?? 64;
  const log = opts.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const topic = opts.kvEventsTopic ?? "kv-events";
  const root = rootHash(model);
  const created = Math.floor(Date.now() / 1000);

  // ---- the model, on the wall clock --------------------------------------------------------------------
  const queue = new EventQueue();
  const t0 = performance.now();
  const nowSim = (): number => (performance.now() - t0) * timeScale;
  let timer: NodeJS.Timeout | null = null;
  let closing = false;

  const blockIds = new BlockIds();
  const meta = new Map<number, BlockMeta>();
  const byReq = new Map<SimRequest, Ctx>();
  const pins = new Map<string, Pin>();
  let linkFreeAt = 0;
  let nextReq = 0;

  const counters = {
    prefixQueryTokens: 0, prefixHitTokens: 0, promptTokens: 0, generationTokens: 0, completed: 0, rejected: 0,
    aborted: 0, kvReleasesPulled: 0, kvReleasesTimeout: 0, kvReleaseFailures: 0, kvEventFailures: 0,
  };
  const ttftCounts = new Array<number>(TTFT_BUCKETS.length).fill(0);
  let ttftSum = 0;
  let ttftCount = 0;
  const observeTtft = (seconds: number): void => {
    ttftSum += seconds;
    ttftCount++;
    for (let i = 0; i < TTFT_BUCKETS.length; i++) if (seconds <= TTFT_BUCKETS[i]!) ttftCounts[i]!++;
  };

  // ---- KV events -----------------------------------------------------------------------------------------
  let pendingEvents: KvEvent[] = [];
  let seq = 0n;
  let sendChain: Promise<void> = Promise.resolve();
  type Pub = { send(msg: (string | Buffer | Uint8Array)[]): Promise<void>; close(): void; lastEndpoint: string | null };
  let pub: Pub | null = null;
  let kvEventsEndpoint: string | null = null;
  let workerId = opts.workerId ?? "";

  const sink: KvEventSink = {
    stored(pairs) {
      let hashes: number[] = [];
      let tokens: number[] = [];
      let parent: Uint32Array | null = null;
      let last = -2;
      const flush = (): void => {
        if (hashes.length > 0) {
          pendingEvents.push({ kind: "stored", hashes: Uint32Array.from(hashes), parent, tokenIds: tokens, blockSize: SIM_BLOCK_TOKENS, medium: "GPU" });
        }
        hashes = [];
        tokens = [];
      };
      for (let i = 0; i < pairs.length >>> 1; i++) {
        const lo = pairs[2 * i]!;
        const hi = pairs[2 * i + 1]!;
        const id = blockIds.id(lo, hi);
        const m = meta.get(id);
        const parentId = m ? m.parent : -1;
        if (hashes.length === 0 || parentId !== last) {
          flush();
          parent = parentId >= 0 ? blockIds.pairs([parentId]) : null;
        }
        hashes.push(lo, hi);
        if (m) for (let k = 0; k < SIM_BLOCK_TOKENS; k++) tokens.push(m.tokens[m.off + k]!);
        last = id;
      }
      flush();
    },
    removed(pairs) {
      pendingEvents.push({ kind: "removed", hashes: pairs.slice(), medium: "GPU" });
    },
  };

  const publishEvents = (): void => {
    if (pendingEvents.length === 0) return;
    const events = pendingEvents;
    pendingEvents = [];
    if (!pub && !opts.kvEventsUrl) return;
    const payload = encodeEventBatch({ ts: Date.now() / 1000, events, dataParallelRank: null });
    const n = seq++;
    const seqFrame = Buffer.alloc(8);
    seqFrame.writeBigUInt64BE(n);
    const socket = pub;
    const url = opts.kvEventsUrl;
    sendChain = sendChain.then(async () => {
      if (socket) {
        try {
          await socket.send([topic, seqFrame, payload]);
        } catch (e) {
          counters.kvEventFailures++;
          if (counters.kvEventFailures === 1) log(`worker ${workerId}: KV events over ZMQ failed: ${(e as Error).message}`);
        }
      }
      if (url) {
        try {
          const r = await fetch(url, {
            method: "POST", body: new Uint8Array(payload), signal: AbortSignal.timeout(5000),
            headers: { "content-type": "application/msgpack", "x-dolphin-worker": workerId, "x-dolphin-seq": String(n) },
          });
          await r.arrayBuffer().catch(noop);
          if (!r.ok) throw new Error(`HTTP ${r.status}`);
        } catch (e) {
          counters.kvEventFailures++;
          if (counters.kvEventFailures === 1) log(`worker ${workerId}: POST of KV events to ${url} failed: ${(e as Error).message}`);
        }
      }
    });
  };

  const metaAdd = (tokens: number[], ids: Int32Array): void => {
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i]!;
      const m = meta.get(id);
      if (m) m.refs++;
      else meta.set(id, { tokens, off: i * SIM_BLOCK_TOKENS, parent: i > 0 ? ids[i - 1]! : -1, refs: 1 });
    }
  };
  /** The job's blocks are all committed (or never will be): their token metadata may go. */
  const metaDone = (ids: Int32Array): void => {
    for (let i = 0; i < ids.length; i++) {
      const m = meta.get(ids[i]!);
      if (m && --m.refs <= 0) meta.delete(ids[i]!);
    }
  };

  // ---- answers ---------------------------------------------------------------------------------------------
  const usageOf = (ctx: Ctx): Record<string, unknown> => ({
    prompt_tokens: ctx.tokens.length,
    total_tokens: ctx.tokens.length + ctx.emitted,
    completion_tokens: ctx.emitted,
    prompt_tokens_details: { cached_tokens: ctx.cachedTokens },
  });

  const live = (ctx: Ctx): boolean => !ctx.closed && !ctx.res.writableEnded && !ctx.res.destroyed;

  const startStream = (res: http.ServerResponse): void => {
    if (res.headersSent) return;
    res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache", connection: "keep-alive" });
    res.flushHeaders();
  };

  const writeChunk = (ctx: Ctx, chunk: unknown): void => {
    if (!live(ctx)) return;
    startStream(ctx.res);
    ctx.res.write(`data: ${JSON.stringify(chunk)}\n\n`);
  };

  const chunkOf = (ctx: Ctx, text: string, finish: string | null, extra?: Record<string, unknown>): Record<string, unknown> => ctx.chat
    ? {
      id: ctx.id, object: "chat.completion.chunk", created: ctx.created, model,
      choices: [{ index: 0, delta: { content: text }, logprobs: null, finish_reason: finish }], ...extra,
    }
    : {
      id: ctx.id, object: "text_completion", created: ctx.created, model,
      choices: [{ index: 0, text, logprobs: null, finish_reason: finish, stop_reason: null }], ...extra,
    };

  const emit = (ctx: Ctx, n: number): void => {
    for (let i = 0; i < n && ctx.emitted < ctx.outputTokens; i++) {
      const text = decodeToken(outputToken(ctx.seed, ctx.emitted));
      ctx.emitted++;
      counters.generationTokens++;
      if (!ctx.stream) {
        ctx.text += text;
        continue;
      }
      if (ctx.chat && ctx.emitted === 1) {
        writeChunk(ctx, {
          id: ctx.id, object: "chat.completion.chunk", created: ctx.created, model,
          choices: [{ index: 0, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null }],
        });
      }
      const last = ctx.emitted === ctx.outputTokens;
      writeChunk(ctx, chunkOf(ctx, text, last ? "length" : null, last && ctx.kvParams ? { kv_transfer_params: ctx.kvParams } : undefined));
    }
  };

  const finish = (ctx: Ctx): void => {
    byReq.delete(ctx.simReq);
    counters.completed++;
    if (!live(ctx)) return;
    if (ctx.stream) {
      startStream(ctx.res);
      if (ctx.includeUsage) {
        writeChunk(ctx, { id: ctx.id, object: ctx.chat ? "chat.completion.chunk" : "text_completion", created: ctx.created, model, choices: [], usage: usageOf(ctx) });
      }
      ctx.res.end("data: [DONE]\n\n");
      return;
    }
    const choice = ctx.chat
      ? { index: 0, message: { role: "assistant", content: ctx.text }, logprobs: null, finish_reason: "length", stop_reason: null }
      : { index: 0, text: ctx.text, logprobs: null, finish_reason: "length", stop_reason: null, prompt_logprobs: null };
    sendJson(ctx.res, 200, {
      id: ctx.id, object: ctx.chat ? "chat.completion" : "text_completion", created: ctx.created, model,
      choices: [choice], usage: usageOf(ctx), kv_transfer_params: ctx.kvParams,
    });
  };

  const notePrefixHit = (ctx: Ctx, job: Job): void => {
    ctx.cachedTokens = job.hitBlocks * SIM_BLOCK_TOKENS;
    counters.prefixQueryTokens += ctx.tokens.length;
    counters.prefixHitTokens += ctx.cachedTokens;
  };

  const releasePin = (requestId: string, why: "pulled" | "timeout"): boolean => {
    const pin = pins.get(requestId);
    if (!pin) return false;
    pins.delete(requestId);
    pin.timeout.handle = noop;
    inst.releasePrefill(pin.job);
    if (why === "pulled") counters.kvReleasesPulled++;
    else counters.kvReleasesTimeout++;
    return true;
  };

  const pending = new Set<Promise<void>>();
  const track = (p: Promise<void>): void => {
    pending.add(p);
    void p.finally(() => pending.delete(p));
  };

  const tellReleased = (remote: RemoteSource): void => {
    const h = remote.host.includes(":") && !remote.host.startsWith("[") ? `[${remote.host}]` : remote.host;
    track((async () => {
      try {
        const r = await fetch(`http://${h}:${remote.port}/internal/kv-release`, {
          method: "POST", headers: { "content-type": "application/json" },
          body: JSON.stringify({ remote_request_id: remote.requestId }), signal: AbortSignal.timeout(5000),
        });
        await r.arrayBuffer().catch(noop);
        if (!r.ok) throw new Error(`HTTP ${r.status}`);
      } catch (e) {
        counters.kvReleaseFailures++;
        if (!closing) log(`worker ${workerId}: kv-release of ${remote.requestId} at ${h}:${remote.port} failed: ${(e as Error).message}`);
      }
    })());
  };

  const host_: InstanceHost = {
    queue,
    prefillDone(_inst, job) {
      const ctx = byReq.get(job.req);
      if (!ctx) return;
      metaDone(job.ids);
      notePrefixHit(ctx, job);
      observeTtft((queue.nowMs - ctx.arrivalMs) / 1000);
      const requestId = ctx.requestId;
      pins.set(requestId, { job, timeout: queue.schedule(queue.nowMs + pinTimeoutMs, Priority.transfer, () => { releasePin(requestId, "timeout"); }) });
      ctx.kvParams = {
        do_remote_prefill: true, do_remote_decode: false, remote_block_ids: Array.from(job.ids), remote_engine_id: workerId,
        remote_request_id: requestId, remote_host: host, remote_port: port, tp_size: preset.tp,
      };
      emit(ctx, 1);
      finish(ctx);
    },
    decodeAdmitted(inst_, job) {
      const ctx = byReq.get(job.req);
      if (ctx) notePrefixHit(ctx, job);
      const tokens = Math.max(0, job.req.promptTokens - job.hitBlocks * SIM_BLOCK_TOKENS);
      const start = Math.max(queue.nowMs, linkFreeAt);
      const end = start + kvTransferMs(tokens, preset, link, transfer);
      linkFreeAt = end;
      queue.schedule(end, Priority.transfer, () => {
        inst_.kvArrived(job);
        metaDone(job.ids);
        if (ctx?.remote) tellReleased(ctx.remote);
      });
    },
    firstToken(_inst, job, timeMs) {
      const ctx = byReq.get(job.req);
      if (!ctx) return;
      observeTtft((timeMs - ctx.arrivalMs) / 1000);
      if (job.kind === "local") {
        metaDone(job.ids);
        notePrefixHit(ctx, job);
        emit(ctx, 1); // the token the completed prefill samples (decode jobs' first tokens come through decoded)
      }
    },
    decoded(_inst, jobs, steps) {
      for (const job of jobs) {
        const ctx = byReq.get(job.req);
        if (ctx) emit(ctx, steps);
      }
    },
    finished(_inst, job) {
      const ctx = byReq.get(job.req);
      if (ctx) finish(ctx);
    },
    rejected(_inst, job) {
      const ctx = byReq.get(job.req);
      metaDone(job.ids);
      byReq.delete(job.req);
      if (ctx) ctx.rejected = true;
      counters.rejected++;
    },
    loadChanged: noop,
  };

  const instRole: InstanceRole = role === "both" ? "replica" : role;
  const inst = new Instance(0, opts.workerId ?? "worker", instRole, preset, capacityBlocks, host_, blockIds, sink);
  inst.maxRunSteps = 1;

  const arm = (): void => {
    if (timer) clearTimeout(timer);
    timer = null;
    if (closing || queue.size === 0) return;
    const delay = Math.min(2 ** 31 - 1, Math.max(0, (queue.peekTime() - nowSim()) / timeScale)); // setTimeout's limit
    timer = setTimeout(() => {
      timer = null;
      pump();
    }, delay);
  };

  /** Runs every event due by now (simulated), publishes the KV events they made, re-arms the timer. */
  function pump(): void {
    const now = nowSim();
    while (queue.size > 0 && queue.peekTime() <= now) {
      const e = queue.pop()!;
      try {
        e.handle();
      } catch (err) {
        log(`worker ${workerId}: internal error: ${(err as Error).stack ?? String(err)}`);
      }
    }
    if (queue.nowMs < now) queue.nowMs = now; // nothing is due before now: the clock may move up to it
    publishEvents();
    arm();
  }

  /** Runs `fn` at the current simulated time (after everything due before it). */
  const atNow = <T>(fn: () => T): T => {
    pump();
    const out = fn();
    pump();
    return out;
  };

  // ---- HTTP ------------------------------------------------------------------------------------------------
  function sendJson(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
    if (res.headersSent || res.destroyed) return;
    const text = JSON.stringify(body);
    res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text), ...headers });
    res.end(text);
  }

  function sendError(res: http.ServerResponse, e: HttpError, headers: Record<string, string> = {}): void {
    sendJson(res, e.status, { error: { message: e.message, type: e.type, param: e.param, code: e.status } }, headers);
  }

  async function readBody(req: http.IncomingMessage): Promise<Buffer> {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of req) {
      size += (chunk as Buffer).length;
      if (size > DRAIN_LIMIT_BYTES) {
        req.destroy();
        throw new HttpError(413, "RequestEntityTooLarge", `request body over ${MAX_BODY_BYTES} bytes`);
      }
      if (size <= MAX_BODY_BYTES) chunks.push(chunk as Buffer);
    }
    if (size > MAX_BODY_BYTES) throw new HttpError(413, "RequestEntityTooLarge", `request body of ${size} bytes is over the limit of ${MAX_BODY_BYTES}`);
    return Buffer.concat(chunks);
  }

  async function jsonBody(req: http.IncomingMessage): Promise<Record<string, unknown>> {
    const buf = await readBody(req);
    let body: unknown;
    try {
      body = JSON.parse(buf.toString("utf8"));
    } catch (e) {
      throw bad(`invalid JSON body: ${(e as Error).message}`);
    }
    if (!isObject(body)) throw bad(`the body must be a JSON object, got ${describe(body)}`);
    return body;
  }

  function checkModel(body: Record<string, unknown>): void {
    const m = body["model"];
    if (m === undefined || m === null) return;
    if (typeof m !== "string") throw bad(`model must be a string, got ${describe(m)}`, "model");
    if (m !== model) throw new HttpError(404, "NotFoundError", `The model \`${m}\` does not exist.`, "model");
  }

  async function completions(req: http.IncomingMessage, res: http.ServerResponse, chat: boolean): Promise<void> {
    const body = await jsonBody(req);
    checkModel(body);
    const tokens = chat ? encode(chatPrompt(chatMessages(body["messages"]))) : promptTokens(body["prompt"]);
    if (tokens.length === 0) throw bad("the prompt must not be empty", "prompt");
    const stream = optBool(body, "stream") ?? false;
    const so = body["stream_options"];
    if (so !== undefined && so !== null && !isObject(so)) throw bad(`stream_options must be an object, got ${describe(so)}`, "stream_options");
    const includeUsage = stream && isObject(so) && so["include_usage"] === true;
    const n = optInt(body, "n", 1);
    if (n !== undefined && n !== 1) throw bad("only n = 1 is supported", "n");
    const maxTokens = (chat ? optInt(body, "max_completion_tokens", 1) : undefined) ?? optInt(body, "max_tokens", 1) ?? defaultMaxTokens;
    const minTokens = optInt(body, "min_tokens", 0) ?? 0;
    const { kind, remote } = transferKind(body["kv_transfer_params"]);
    if (kind === "prefill" && role === "decode") throw bad("this worker's role is decode: it does not run prefill-only requests (kv_transfer_params.do_remote_decode)", "kv_transfer_params");
    if (kind === "decode" && role === "prefill") throw bad("this worker's role is prefill: it does not run remote-prefilled requests (kv_transfer_params.do_remote_prefill)", "kv_transfer_params");
    const outputTokens = kind === "prefill" ? 1 : Math.max(maxTokens, minTokens);
    if (tokens.length + outputTokens > maxModelLen) {
      throw bad(`This model's maximum context length is ${maxModelLen} tokens. However, you requested ${tokens.length + outputTokens} tokens (${tokens.length} in the ${chat ? "messages" : "prompt"}, ${outputTokens} in the completion). Please reduce the length of the ${chat ? "messages" : "prompt"} or completion.`, chat ? "messages" : "prompt");
    }

    const reqNo = nextReq++;
    const header = req.headers["x-request-id"];
    const base = typeof header === "string" && header !== "" ? header : randomUUID().replace(/-/g, "");
    const blocks = hashTokens(tokens, SIM_BLOCK_TOKENS, root);
    const simReq: SimRequest = { id: reqNo, arrivalMs: 0, promptTokens: tokens.length, outputTokens, blocks, turn: 1 };
    const ids = blockIds.intern(blocks);
    const ctx: Ctx = {
      id: `${chat ? "chatcmpl" : "cmpl"}-${base}`, requestId: `${workerId}/${reqNo}`, kind, chat, stream, includeUsage, res,
      closed: false, rejected: false, tokens, seed: promptSeed(tokens), outputTokens, emitted: 0, text: "",
      created: Math.floor(Date.now() / 1000), arrivalMs: 0, cachedTokens: 0, remote, kvParams: null, simReq,
    };
    byReq.set(simReq, ctx);
    metaAdd(tokens, ids);
    res.on("close", () => {
      if (!res.writableFinished && !ctx.closed) {
        ctx.closed = true;
        counters.aborted++;
        // as vLLM: the request is aborted, its KV released at the next step boundary
        if (ctx.job) atNow(() => inst.abort(ctx.job!));
      }
    });
    // a request that can never fit is rejected synchronously, before any step (so before any output)
    atNow(() => {
      simReq.arrivalMs = queue.nowMs;
      ctx.arrivalMs = queue.nowMs;
      ctx.job = inst.enqueue(simReq, ids, kind);
    });
    if (ctx.rejected) {
      const need = Math.ceil((tokens.length + (kind === "prefill" ? 0 : outputTokens)) / SIM_BLOCK_TOKENS);
      throw new HttpError(503, "ServiceUnavailableError", `the request needs ${need} KV blocks of ${SIM_BLOCK_TOKENS} tokens (prompt ${tokens.length}, output ${outputTokens}); this worker holds ${capacityBlocks}`);
    }
    counters.promptTokens += tokens.length;
    if (stream) startStream(res);
  }

  async function tokenize(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const body = await jsonBody(req);
    checkModel(body);
    let tokens: number[];
    if (body["messages"] !== undefined) tokens = encode(chatPrompt(chatMessages(body["messages"])));
    else if (typeof body["prompt"] === "string") tokens = encode(body["prompt"]);
    else throw bad(`give prompt (a string) or messages, got prompt ${describe(body["prompt"])}`, "prompt");
    sendJson(res, 200, { count: tokens.length, max_model_len: maxModelLen, tokens, token_strs: null });
  }

  async function detokenize(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const body = await jsonBody(req);
    checkModel(body);
    const t = body["tokens"];
    if (!Array.isArray(t)) throw bad(`tokens must be a list of token ids, got ${describe(t)}`, "tokens");
    sendJson(res, 200, { prompt: decode(tokenIds(t, "tokens")) });
  }

  async function kvRelease(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const body = await jsonBody(req);
    const id = body["remote_request_id"];
    if (typeof id !== "string" || id === "") throw bad(`remote_request_id must be a string, got ${describe(id)}`, "remote_request_id");
    const ok = atNow(() => releasePin(id, "pulled"));
    if (!ok) throw new HttpError(404, "NotFoundError", `no blocks pinned for remote_request_id ${JSON.stringify(id)}`, "remote_request_id");
    sendJson(res, 200, { released: true });
  }

  const kvUsage = (): number => (capacityBlocks - inst.cache.availableBlocks) / capacityBlocks;

  function metrics(): string {
    const l = `model_name="${escapeLabel(model)}"`;
    const lines: string[] = [];
    const metric = (name: string, type: string, help: string, value: number, extra = ""): void => {
      lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
      lines.push(`${type === "counter" ? `${name}_total` : name}{${l}${extra}} ${value}`);
    };
    pump();
    metric("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.", inst.runningCount);
    metric("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.", inst.waitingCount);
    metric("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.", kvUsage());
    metric("vllm:gpu_cache_usage_perc", "gauge", "GPU KV-cache usage. 1 means 100 percent usage (deprecated name).", kvUsage());
    metric("vllm:prefix_cache_queries", "counter", "Prefix cache queries, in terms of number of queried tokens.", counters.prefixQueryTokens);
    metric("vllm:prefix_cache_hits", "counter", "Prefix cache hits, in terms of number of cached tokens.", counters.prefixHitTokens);
    metric("vllm:prompt_tokens", "counter", "Number of prefill tokens processed.", counters.promptTokens);
    metric("vllm:generation_tokens", "counter", "Number of generation tokens processed.", counters.generationTokens);
    metric("vllm:request_success", "counter", "Count of successfully processed requests.", counters.completed, ',finished_reason="length"');
    metric("vllm:num_preemptions", "counter", "Cumulative number of preemptions (none: KV is reserved at admission).", 0);
    lines.push("# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds (simulated).");
    lines.push("# TYPE vllm:time_to_first_token_seconds histogram");
    TTFT_BUCKETS.forEach((b, i) => lines.push(`vllm:time_to_first_token_seconds_bucket{${l},le="${b}"} ${ttftCounts[i]}`));
    lines.push(`vllm:time_to_first_token_seconds_bucket{${l},le="+Inf"} ${ttftCount}`);
    lines.push(`vllm:time_to_first_token_seconds_sum{${l}} ${ttftSum}`);
    lines.push(`vllm:time_to_first_token_seconds_count{${l}} ${ttftCount}`);
    metric("dolphin:kv_pinned_requests", "gauge", "Prefill requests whose KV is pinned, waiting to be pulled.", pins.size);
    metric("dolphin:kv_cache_evictions", "counter", "KV blocks evicted from the prefix cache.", inst.cache.evictions);
    return lines.join("\n") + "\n";
  }

  const ROUTES: Record<string, Record<string, (req: http.IncomingMessage, res: http.ServerResponse) => Promise<void> | void>> = {
    "/v1/completions": { POST: (q, s) => completions(q, s, false) },
    "/v1/chat/completions": { POST: (q, s) => completions(q, s, true) },
    "/tokenize": { POST: tokenize },
    "/detokenize": { POST: detokenize },
    "/internal/kv-release": { POST: kvRelease },
    "/health": { GET: (_q, s) => { s.writeHead(200, { "content-length": 0 }); s.end(); } },
    "/v1/models": {
      GET: (_q, s) => sendJson(s, 200, {
        object: "list",
        data: [{ id: model, object: "model", created, owned_by: "vllm", root: model, parent: null, max_model_len: maxModelLen }],
      }),
    },
    "/metrics": {
      GET: (_q, s) => {
        const text = metrics();
        s.writeHead(200, { "content-type": "text/plain; version=0.0.4; charset=utf-8", "content-length": Buffer.byteLength(text) });
        s.end(text);
      },
    },
  };

  const server = http.createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0]!;
    const route = Object.hasOwn(ROUTES, path) ? ROUTES[path] : undefined;
    const handler = route && Object.hasOwn(route, req.method ?? "") ? route[req.method!] : undefined;
    const fail = (e: unknown): void => {
      if (e instanceof HttpError) sendError(res, e, e.status === 413 ? { connection: "close" } : {});
      else {
        log(`worker ${workerId}: internal error: ${(e as Error).stack ?? String(e)}`);
        sendError(res, new HttpError(500, "InternalServerError", (e as Error).message ?? "internal error"));
      }
    };
    if (!handler) {
      req.resume();
      if (route) fail(new HttpError(405, "MethodNotAllowed", `${req.method} is not allowed on ${path} (use ${Object.keys(route).join(", ")})`));
      else fail(new HttpError(404, "NotFoundError", `no route ${req.method} ${path}`));
      return;
    }
    try {
      const r = handler(req, res);
      if (r) r.catch(fail);
    } catch (e) {
      fail(e);
    }
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(opts.port ?? 0, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const addr = server.address();
  const port = typeof addr === "object" && addr ? addr.port : (opts.port ?? 0);
  if (workerId === "") workerId = `${host}:${port}`;
  const urlHost = host.includes(":") ? `[${host}]` : host;

  // ZMQ publisher, when asked for
  const endpoint = opts.kvEventsEndpoint ?? (opts.kvEventsPort ? `tcp://${urlHost}:${opts.kvEventsPort}` : undefined);
  if (endpoint) {
    try {
      const zmq = await import("zeromq");
      const sock = new zmq.Publisher();
      try {
        await sock.bind(endpoint);
      } catch (e) {
        sock.close();
        server.closeAllConnections();
        await new Promise<void>((r) => server.close(() => r()));
        throw new Error(`worker: cannot bind KV events endpoint ${endpoint}: ${(e as Error).message}`);
      }
      pub = sock as unknown as Pub;
      kvEventsEndpoint = sock.lastEndpoint ?? endpoint;
    } catch (e) {
      if ((e as Error).message.startsWith("worker: cannot bind")) throw e;
      log(`worker ${workerId}: zeromq is not available (${(e as Error).message}): KV events over ZMQ are off${opts.kvEventsUrl ? "; they are still POSTed to " + opts.kvEventsUrl : ""}`);
    }
  }

  return {
    url: `http://${urlHost}:${port}`,
    host,
    port,
    workerId,
    role,
    model,
    preset,
    kvEventsEndpoint,
    instance: inst,
    stats: () => {
      pump();
      return {
        role, simNowMs: queue.nowMs, running: inst.runningCount, waiting: inst.waitingCount, pendingPulls: pins.size,
        usedBlocks: inst.cache.usedBlocks, capacityBlocks, kvUsage: kvUsage(), evictions: inst.cache.evictions,
        prefixQueryTokens: counters.prefixQueryTokens, prefixHitTokens: counters.prefixHitTokens,
        promptTokens: counters.promptTokens, generationTokens: counters.generationTokens, completed: counters.completed,
        rejected: counters.rejected, aborted: counters.aborted, kvEventBatches: Number(seq),
        kvReleases: { pulled: counters.kvReleasesPulled, timeout: counters.kvReleasesTimeout },
        kvReleaseFailures: counters.kvReleaseFailures, kvEventFailures: counters.kvEventFailures,
      };
    },
    async close() {
      if (closing) return;
      closing = true;
      if (timer) clearTimeout(timer);
      timer = null;
      const closed = new Promise<void>((r) => server.close(() => r()));
      server.closeAllConnections();
      await closed;
      await Promise.allSettled([...pending]);
      await sendChain;
      if (pub) pub.close();
    },
  };
}
