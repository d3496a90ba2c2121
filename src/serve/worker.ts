// `dolphin worker`: an emulated vLLM worker. It speaks vLLM's HTTP API (OpenAI completions and chat completions
// with streaming, /tokenize, /v1/models, /health, /metrics) and vLLM's disaggregated-prefill protocol
// (NixlConnector's `kv_transfer_params`, as a proxy speaks it), and answers in real time from the simulator's
// calibrated instance model instead of a GPU: the field's practice for testing routers and proxies without GPUs
// (llm-d's inference simulator, Dynamo's mocker). Every latency it shows is simulated (docs/simulator.md).
//
// This file starts one; each concern is a module of worker/: requests.ts (what a request may ask, checked as vLLM
// checks it), routes.ts (the HTTP API), engine.ts (the simulated instance on the wall clock, and the KV handoff),
// answers.ts (OpenAI answers and SSE), kv-events.ts (KV events over ZMQ or POST, and vLLM's replay socket),
// metrics.ts (vLLM's /metrics).
//
// Requests (POST /v1/completions with `prompt`: a string, token ids, or a one-element list of either; POST
// /v1/chat/completions with `messages`, rendered by tokenizer.ts's chatPrompt): the output is exactly
// max(max_tokens, min_tokens) tokens (max_tokens default 64; chat also reads max_completion_tokens), finish_reason
// "length", no EOS. Output text is deterministic words (tokenizer.ts). `usage.prompt_tokens_details.cached_tokens`
// is the prefix-cache hit at admission (whole 16-token blocks; a full hit recomputes its last block, as vLLM), except
// on a decode request: see below.
//
// Disaggregated protocol (reference-systems.md):
//   - `kv_transfer_params.do_remote_decode: true` (a prefill request; roles prefill and both): runs the prefill only
//     and answers with one token and `kv_transfer_params: {do_remote_prefill: true, do_remote_decode: false,
//     remote_block_ids, remote_engine_id: workerId, remote_request_id, remote_host, remote_port, tp_size,
//     dcp_size: 1, pp_size: 1, remote_num_tokens (the prompt), remote_blocks_expiry_time: null, transfer_mode: "pull",
//     remote_prefill_cached_tokens (its own cached_tokens)}`, as vLLM 0.32 does.
//     remote_host/remote_port are this worker's HTTP address (real NIXL uses a side-channel port);
//     remote_block_ids are the interned ids of the prompt's full blocks (informational). The prompt's blocks stay
//     pinned until released, or until kvPinTimeoutMs of simulated time passes (then released anyway, as vLLM's
//     NIXL abort timeout does).
//   - `kv_transfer_params.do_remote_prefill: true` with remote_host, remote_port, remote_request_id (a decode
//     request; roles decode and both): admitted (KV reserved for prompt and output), it "pulls" the prompt's KV
//     that is not already in its own prefix cache (as NIXL does; a local hit, as vLLM's, stops short of the prompt's
//     last token, so a full hit pulls the last block again): kvTransferMs of those tokens over the link, in
//     simulated time; pulls into one worker share its inbound link one at a time (as the simulator). Then it decodes:
//     its first token comes from its first decode step. Its usage's cached_tokens is what vLLM 0.32's decode engine
//     reports: the params' remote_prefill_cached_tokens when they carry it (the prefill engine's count), else the
//     whole prompt (its local hit plus the pulled, "external" tokens). When the pull ends it tells the prefill worker
//     to release the blocks: `POST http://{remote_host}:{remote_port}/internal/kv-release` with
//     `{"remote_request_id": …}` (200 `{"released": true}`, 404 when unknown). A failed release is counted
//     (stats().kvReleaseFailures) and does not fail the request.
//   - Without kv_transfer_params (or with both flags false) any role prefills and decodes locally (vLLM does).
//     A prefill request sent to a decode-role worker, or a decode request to a prefill-role worker, is a 400.
//
// KV events: block hashes are llm-d's chained scheme (src/hashing/hashes.ts: hashTokens(tokens, 16,
// rootHash(model))), the one the router uses in precise mode with `model` set to the served model name; the
// batches and their transport are described in worker/kv-events.ts.
//
// Simplifications, stated: a request reserves KV for its whole output at admission (no preemption); output tokens
// are not added to the prefix cache (only the prompt's blocks are); a client that disconnects aborts its request,
// which leaves the batch at the next step boundary and releases its KV (as vLLM); the block-id interning table
// grows with every distinct block seen (8–16 bytes each); `n`, `best_of`, `echo`, logprobs, stop strings and
// sampling parameters are ignored (except that `n` other than 1 is a 400).

import http from "node:http";
import { rootHash } from "../hashing/hashes.js";
import type { Instance } from "../sim/instance.js";
import { BlockIds } from "../sim/block-ids.js";
import { DEFAULT_TRANSFER, resolveLink, type LinkPreset, type TransferModel } from "../sim/kv-transfer.js";
import { kvCapacityBlocks, resolvePreset, type ModelPreset } from "../sim/model-presets.js";
import { SIM_BLOCK_TOKENS } from "../sim/types.js";
import { offsetEndpointPort, RANK_HEADER, type WorkerRole } from "./config-workers.js";
import { closeServer, listen, urlHost } from "./http-toolkit.js";
import { WorkerEngine } from "./worker/engine.js";
import { KvEventPublisher, VLLM_BUFFER_STEPS } from "./worker/kv-events.js";
import { WorkerMetrics } from "./worker/metrics.js";
import { answer, workerRoutes } from "./worker/routes.js";
import { EMULATED_ENGINE_VERSION, NixlHandshake } from "./worker/handshake.js";

export type { WorkerRole };

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
  /**
   * vLLM's KV-event replay socket (kv_events_config.replay_endpoint): a ZMQ ROUTER to bind, e.g. "tcp://127.0.0.1:*"
   * (an ephemeral port), answering replay requests from the last kvEventsBufferSteps batches as vLLM's does
   * (worker/kv-events.ts). Needs kvEventsEndpoint or kvEventsPort. Default: none.
   */
  kvEventsReplayEndpoint?: string;
  /** Batches the replay socket keeps (vLLM's kv_events_config.buffer_steps). Default 10,000. */
  kvEventsBufferSteps?: number;
  /** ZMQ topic frame (default "kv-events", what src/serve/vllm starts real engines with; vLLM's own default is ""). */
  kvEventsTopic?: string;
  /** POST every EventBatch (msgpack) here. */
  kvEventsUrl?: string;
  /**
   * The engine's version (GET /version; default EMULATED_ENGINE_VERSION): a decode worker pulls KV only from a prefill
   * worker of the same version, as NIXL's compatibility check (worker/handshake.ts). A rolling upgrade's two halves.
   */
  engineVersion?: string;
  /** This worker's name in KV events and kv_transfer_params (default `${host}:${port}`). */
  workerId?: string;
  /**
   * vLLM's --data-parallel-size: this many ranks, each its own engine (prefix cache, queue, KV events published with
   * its data_parallel_rank at the endpoints' port + rank, as vLLM offsets them); a request picks one with the
   * `X-data-parallel-rank` header, else the least busy rank takes it (vLLM's DP load balancing). Default 1.
   */
  dataParallelSize?: number;
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
  /** The ZMQ endpoint of the KV-event replay socket (null when off). */
  kvEventsReplayEndpoint: string | null;
  /** The simulated instance (read-only use); rank 0's with data-parallel ranks. */
  instance: Instance;
  /** Rank 0's stats (the only rank without data parallelism). */
  stats(): WorkerStats;
  /** Each data-parallel rank's stats, and its KV-event endpoint, in rank order. */
  ranks: { stats(): WorkerStats; kvEventsEndpoint: string | null }[];
  close(): Promise<void>;
}

/** The options with their defaults, checked (errors name the option). */
function resolveOptions(opts: WorkerOptions) {
  const role: WorkerRole = opts.role ?? "both";
  if (role !== "prefill" && role !== "decode" && role !== "both")
    throw new Error(`worker: role must be prefill, decode or both, got ${String(role)}`);
  const preset = typeof opts.preset === "object" ? opts.preset : resolvePreset(opts.preset ?? "h100-8b");
  const link = typeof opts.link === "object" ? opts.link : resolveLink(opts.link ?? "ib-ndr");
  const timeScale = opts.timeScale ?? 1;
  if (!(timeScale > 0) || !Number.isFinite(timeScale))
    throw new Error(`worker: timeScale must be a finite number > 0, got ${String(timeScale)}`);
  const capacityBlocks = opts.capacityBlocks ?? kvCapacityBlocks(preset, SIM_BLOCK_TOKENS);
  if (!Number.isSafeInteger(capacityBlocks) || capacityBlocks < 1)
    throw new Error(`worker: capacityBlocks must be an integer ≥ 1, got ${String(capacityBlocks)}`);
  return {
    role,
    preset,
    link,
    timeScale,
    capacityBlocks,
    transfer: opts.transfer ?? { ...DEFAULT_TRANSFER, links: preset.tp },
    host: opts.host ?? "127.0.0.1",
    model: opts.model ?? "dolphin-emulated",
    maxModelLen: opts.maxModelLen ?? 131_072,
    log: opts.log ?? ((line: string) => process.stderr.write(`${line}\n`)),
  };
}

/** One data-parallel rank: its engine, KV-event publisher, metrics and routes. */
interface Rank {
  engine: WorkerEngine;
  kv: KvEventPublisher;
  routes: ReturnType<typeof workerRoutes>;
  stats(): WorkerStats;
}

/** Starts an emulated worker: listening, its clock running, KV events published when asked for. */
export async function startWorker(opts: WorkerOptions = {}): Promise<WorkerHandle> {
  const resolved = resolveOptions(opts);
  const { role, host, log } = resolved;
  const size = opts.dataParallelSize ?? 1;
  if (!Number.isSafeInteger(size) || size < 1 || size > 64)
    throw new Error(`worker: dataParallelSize must be an integer 1–64, got ${String(size)}`);

  // ZMQ publisher and replay socket, when asked for (bound once the HTTP server listens)
  const endpoint =
    opts.kvEventsEndpoint ?? (opts.kvEventsPort ? `tcp://${urlHost(host)}:${opts.kvEventsPort}` : undefined);
  const replayEndpoint = opts.kvEventsReplayEndpoint ?? null;
  if (replayEndpoint !== null && !endpoint)
    throw new Error(
      "worker: kvEventsReplayEndpoint needs kvEventsEndpoint or kvEventsPort (it replays what they publish)",
    );

  // the handshake is the engine's (one version); each rank has its own engine, cache and publisher
  const handshake = new NixlHandshake(opts.engineVersion ?? EMULATED_ENGINE_VERSION);
  const ranks = Array.from({ length: size }, (_, r) => makeRank(opts, resolved, handshake, r));
  /** The rank a request names (X-data-parallel-rank), else the least busy one, as vLLM's DP load balancer. */
  const rankFor = (req: http.IncomingMessage): Rank => {
    const named = req.headers[RANK_HEADER];
    if (typeof named === "string" && /^\d+$/.test(named)) return ranks[Number(named)] ?? ranks[0]!;
    let best = ranks[0]!;
    for (const k of ranks) {
      const busy = (x: Rank): number => x.engine.inst.runningCount + x.engine.inst.waitingCount;
      if (busy(k) < busy(best)) best = k;
    }
    return best;
  };

  const server = http.createServer((req, res) => {
    const rank = rankFor(req);
    answer(rank.routes, { req, res }, (e) =>
      log(`worker ${rank.engine.address.workerId}: internal error: ${(e as Error).stack ?? String(e)}`),
    );
  });
  const port = await listen(server, opts.port ?? 0, host);
  const workerId = opts.workerId || `${host}:${port}`;
  for (const [r, k] of ranks.entries()) {
    // a rank's name in kv_transfer_params and request ids: the engine's, with its rank when there are several
    const rankId = size > 1 ? `${workerId}#${r}` : workerId;
    Object.assign(k.engine.address, { workerId: rankId, host, port });
    k.kv.workerId = rankId;
  }

  if (endpoint) {
    for (const [r, k] of ranks.entries()) {
      let unavailable: string | null;
      try {
        const replay = replayEndpoint === null ? null : offsetEndpointPort(replayEndpoint, r);
        unavailable = await k.kv.bind(offsetEndpointPort(endpoint, r), replay);
      } catch (e) {
        await closeServer(server);
        for (const o of ranks) await o.kv.close();
        throw e;
      }
      if (unavailable !== null && r === 0) {
        log(
          `worker ${workerId}: zeromq is not available (${unavailable}): KV events over ZMQ are off${opts.kvEventsUrl ? "; they are still POSTed to " + opts.kvEventsUrl : ""}`,
        );
      }
    }
  }

  let closing = false;
  const first = ranks[0]!;
  return {
    url: `http://${urlHost(host)}:${port}`,
    host,
    port,
    workerId,
    role,
    model: resolved.model,
    preset: resolved.preset,
    kvEventsEndpoint: first.kv.endpoint,
    kvEventsReplayEndpoint: first.kv.replayEndpoint,
    instance: first.engine.inst,
    stats: () => first.stats(),
    ranks: ranks.map((k) => ({ stats: () => k.stats(), kvEventsEndpoint: k.kv.endpoint })),
    async close() {
      if (closing) return;
      closing = true;
      const stopped = ranks.map((k) => k.engine.close());
      await closeServer(server);
      await Promise.all(stopped);
      for (const k of ranks) await k.kv.close();
    },
  };
}

/** Rank r of an emulated engine: its own prefix cache, clock, queue, metrics and KV events (naming rank r). */
function makeRank(
  opts: WorkerOptions,
  resolved: ReturnType<typeof resolveOptions>,
  handshake: NixlHandshake,
  r: number,
): Rank {
  const { role, preset, link, timeScale, capacityBlocks, transfer, model, maxModelLen, log } = resolved;
  const blockIds = new BlockIds();
  const kv = new KvEventPublisher(blockIds, {
    topic: opts.kvEventsTopic ?? "kv-events",
    url: opts.kvEventsUrl ?? null,
    bufferSteps: opts.kvEventsBufferSteps ?? VLLM_BUFFER_STEPS,
    log,
    dataParallelRank: r,
  });
  // the metrics read the engine when scraped; the engine reports each TTFT to the metrics
  const metrics: WorkerMetrics = new WorkerMetrics(
    model,
    () => ({
      running: engine.inst.runningCount,
      waiting: engine.inst.waitingCount,
      kvUsage: engine.kvUsage(),
      prefixQueryTokens: counters.prefixQueryTokens,
      prefixHitTokens: counters.prefixHitTokens,
      promptTokens: counters.promptTokens,
      generationTokens: counters.generationTokens,
      completed: counters.completed,
      pinnedRequests: engine.pinnedRequests,
      evictions: engine.inst.cache.evictions,
      failedTransfers: handshake.failedTransfers,
    }),
    { block_size: String(SIM_BLOCK_TOKENS), cache_dtype: "auto", enable_prefix_caching: "True" },
  );
  const engine = new WorkerEngine(
    {
      role,
      preset,
      link,
      transfer,
      capacityBlocks,
      timeScale,
      pinTimeoutMs: opts.kvPinTimeoutMs ?? 30_000,
      name: opts.workerId ?? "worker",
      log,
      observeTtft: (s) => metrics.observeTtft(s),
      handshake,
    },
    blockIds,
    kv,
  );
  const { inst, counters } = engine;
  const routes = workerRoutes({
    engine,
    metrics,
    role,
    model,
    maxModelLen,
    defaultMaxTokens: opts.defaultMaxTokens ?? 64,
    root: rootHash(model),
    created: Math.floor(Date.now() / 1000),
    handshake,
  });
  const stats = (): WorkerStats => {
    engine.pump();
    return {
      role,
      simNowMs: engine.queue.nowMs,
      running: inst.runningCount,
      waiting: inst.waitingCount,
      pendingPulls: engine.pinnedRequests,
      usedBlocks: inst.cache.usedBlocks,
      capacityBlocks,
      kvUsage: engine.kvUsage(),
      evictions: inst.cache.evictions,
      prefixQueryTokens: counters.prefixQueryTokens,
      prefixHitTokens: counters.prefixHitTokens,
      promptTokens: counters.promptTokens,
      generationTokens: counters.generationTokens,
      completed: counters.completed,
      rejected: counters.rejected,
      aborted: counters.aborted,
      kvEventBatches: Number(kv.seq),
      kvReleases: { pulled: counters.kvReleasesPulled, timeout: counters.kvReleasesTimeout },
      kvReleaseFailures: counters.kvReleaseFailures,
      kvEventFailures: kv.failures,
    };
  };
  return { engine, kv, routes, stats };
}
