// The emulated worker's engine: one simulated instance (src/sim/instance.ts: continuous batching with chunked
// prefill, head-of-line admission, a prefix cache with capacity and LRU eviction) on an EventQueue driven by the wall
// clock: simulated ms = (wall ms since start) × timeScale. One timer is always armed for the next event; a request is
// enqueued at the current simulated time. maxRunSteps = 1, so every decode step is its own event and each token is
// written when its step ends. Token times are exact in simulated time; on the wall they are late by the timer's
// jitter only (about a millisecond; at a high timeScale many steps fall into one timer tick).
//
// Disaggregation, as vLLM's NixlConnector does it (reference-systems.md): a prefill-only job keeps its prompt's
// blocks pinned until the decode side says it pulled them (releasePin) or pinTimeoutMs of simulated time passes; a
// decode job pulls the prompt's KV it does not hold over the inbound link (kvTransferMs, one pull at a time), then
// tells the prefill worker to release (POST /internal/kv-release; a failure is counted, not fatal). A release to a
// prefill worker this one has had no handshake with yet (a refused decode request's: the first contact) makes the
// handshake and is sent at the next step, as vLLM 0.32's decode engine does (nixl/pull_worker.py start_load_kv:
// _ready_requests): an idle worker sends it when its next request arrives.

import { performance } from "node:perf_hooks";
import { EventQueue, Priority, type SimEvent } from "../../sim/events.js";
import { Instance, type InstanceHost, type InstanceRole, type Job } from "../../sim/instance.js";
import type { BlockIds } from "../../sim/block-ids.js";
import { kvTransferMs, type LinkPreset, type TransferModel } from "../../sim/kv-transfer.js";
import type { ModelPreset } from "../../sim/model-presets.js";
import { SIM_BLOCK_TOKENS, type SimRequest } from "../../sim/types.js";
import type { WorkerRole } from "../config-workers.js";
import { urlHost } from "../http-toolkit.js";
import type { Completion } from "./answers.js";
import type { NixlHandshake } from "./handshake.js";
import type { KvEventPublisher } from "./kv-events.js";
import { transferKind, type RemoteSource } from "./requests.js";

/** Remote requests remembered as released (a decode request's abort after its pull must not tell twice). */
const MAX_RELEASED_KEPT = 4096;

export interface EngineOptions {
  role: WorkerRole;
  preset: ModelPreset;
  link: LinkPreset;
  transfer: TransferModel;
  capacityBlocks: number;
  timeScale: number;
  pinTimeoutMs: number;
  /** The instance's name (the worker id when given). */
  name: string;
  log: (line: string) => void;
  observeTtft: (seconds: number) => void;
  /** The worker's NIXL handshakes (a release to an engine without one waits for the next step); none: at once. */
  handshake?: NixlHandshake;
}

/** Where a prefill's blocks can be pulled from: this worker's id and HTTP address (known once it listens). */
export interface WorkerAddress {
  workerId: string;
  host: string;
  port: number;
}

interface Pin {
  job: Job;
  timeout: SimEvent;
}

function noop(): void {}

export class WorkerEngine {
  readonly queue = new EventQueue();
  readonly inst: Instance;
  readonly counters = {
    prefixQueryTokens: 0,
    prefixHitTokens: 0,
    promptTokens: 0,
    generationTokens: 0,
    completed: 0,
    rejected: 0,
    aborted: 0,
    kvReleasesPulled: 0,
    kvReleasesTimeout: 0,
    kvReleaseFailures: 0,
  };
  readonly address: WorkerAddress = { workerId: "", host: "", port: 0 };
  private readonly byReq = new Map<SimRequest, Completion>();
  private readonly pins = new Map<string, Pin>();
  private readonly pendingReleases = new Set<Promise<void>>();
  /** The remote requests whose prefill worker was told to release (the latest MAX_RELEASED_KEPT). */
  private readonly released = new Set<string>();
  /** Releases waiting for their handshake and then the next step (see above). */
  private readonly deferredReleases: RemoteSource[] = [];
  private readonly t0 = performance.now();
  private timer: NodeJS.Timeout | null = null;
  private linkFreeAt = 0;
  private closing = false;

  constructor(
    private readonly o: EngineOptions,
    readonly blockIds: BlockIds,
    private readonly kv: KvEventPublisher,
  ) {
    const instRole: InstanceRole = o.role === "both" ? "replica" : o.role;
    this.inst = new Instance(0, o.name, instRole, o.preset, o.capacityBlocks, this.host(), blockIds, kv.sink);
    this.inst.maxRunSteps = 1;
  }

  get pinnedRequests(): number {
    return this.pins.size;
  }

  /** 1 − free/capacity, cached unpinned blocks counting as free (vLLM's kv_cache_usage_perc). */
  kvUsage(): number {
    return (this.o.capacityBlocks - this.inst.cache.availableBlocks) / this.o.capacityBlocks;
  }

  /** Enqueues a request at the current simulated time; afterwards `c.rejected` says whether it can never fit. */
  submit(c: Completion, ids: Int32Array): void {
    this.byReq.set(c.simReq, c);
    this.kv.trackBlocks(c.tokens, ids);
    // a request that can never fit is rejected synchronously, before any step (so before any output)
    this.atNow(() => {
      c.simReq.arrivalMs = this.queue.nowMs;
      c.arrivalMs = this.queue.nowMs;
      c.job = this.inst.enqueue(c.simReq, ids, c.kind);
    });
    if (!c.rejected) this.counters.promptTokens += c.tokens.length;
  }

  /**
   * The client went away: as vLLM, the request is aborted and its KV released at the next step boundary. A decode
   * request aborted before its pull ended tells the prefill worker to release its blocks now (vLLM 0.32's
   * NixlConnector request_finished frees them from the decode side), not at its pin timeout.
   */
  abort(c: Completion): void {
    this.counters.aborted++;
    if (c.job) this.atNow(() => this.inst.abort(c.job!));
    if (c.remote) this.releaseRemote(c.remote);
  }

  /**
   * A decode request refused before admission (an error answer from the serving layer, e.g. an unknown model): the
   * prefill worker it would have pulled from is told to release its blocks, as vLLM 0.32's serving layer does
   * (_with_kv_transfer_rejection_cleanup → notify_kv_transfer_request_rejected).
   */
  releaseRejected(kvTransferParams: unknown): void {
    let remote: RemoteSource | null = null;
    try {
      remote = transferKind(kvTransferParams).remote;
    } catch {
      return; // params the worker cannot read name no blocks to release
    }
    if (remote) this.releaseRemote(remote);
  }

  /** Tells the prefill worker once per request that its blocks may go. */
  private releaseRemote(remote: RemoteSource): void {
    const key = `${remote.host}:${remote.port}/${remote.requestId}`;
    if (this.released.has(key)) return;
    this.released.add(key);
    if (this.released.size > MAX_RELEASED_KEPT) this.released.delete(this.released.values().next().value!);
    const handshake = this.o.handshake;
    if (!handshake || handshake.done(remote)) return this.tellReleased(remote);
    // the handshake in the background (a failed one drops the release: its engine is unreachable or incompatible)
    this.deferredReleases.push(remote);
    handshake.check(remote).catch(() => {
      const i = this.deferredReleases.indexOf(remote);
      if (i >= 0) this.deferredReleases.splice(i, 1);
    });
  }

  /** A step: the deferred releases whose handshake has completed go. */
  private sendDeferredReleases(): void {
    const waiting = this.deferredReleases.splice(0);
    for (const remote of waiting)
      if (this.o.handshake!.done(remote)) this.tellReleased(remote);
      else this.deferredReleases.push(remote);
  }

  /** Releases the blocks a prefill pinned for `requestId`; false when none are pinned. */
  releasePin(requestId: string, why: "pulled" | "timeout"): boolean {
    const pin = this.pins.get(requestId);
    if (!pin) return false;
    this.pins.delete(requestId);
    pin.timeout.handle = noop;
    this.inst.releasePrefill(pin.job);
    if (why === "pulled") this.counters.kvReleasesPulled++;
    else this.counters.kvReleasesTimeout++;
    return true;
  }

  /** Runs `fn` at the current simulated time (after everything due before it). */
  atNow<T>(fn: () => T): T {
    this.pump();
    const out = fn();
    this.pump();
    return out;
  }

  /** Runs every event due by now (simulated), publishes the KV events they made, re-arms the timer. */
  pump(): void {
    const now = this.nowSim();
    const queue = this.queue;
    if (this.deferredReleases.length && queue.size > 0) this.sendDeferredReleases(); // the engine is stepping
    while (queue.size > 0 && queue.peekTime() <= now) {
      const e = queue.pop()!;
      try {
        e.handle();
      } catch (err) {
        this.o.log(`worker ${this.address.workerId}: internal error: ${(err as Error).stack ?? String(err)}`);
      }
    }
    if (queue.nowMs < now) queue.nowMs = now; // nothing is due before now: the clock may move up to it
    this.kv.publish();
    this.arm();
  }

  /** Stops the clock and waits for the kv-release calls under way. */
  async close(): Promise<void> {
    this.closing = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await Promise.allSettled([...this.pendingReleases]);
  }

  private nowSim(): number {
    return (performance.now() - this.t0) * this.o.timeScale;
  }

  private arm(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.closing || this.queue.size === 0) return;
    const delay = Math.min(2 ** 31 - 1, Math.max(0, (this.queue.peekTime() - this.nowSim()) / this.o.timeScale)); // setTimeout's limit
    this.timer = setTimeout(() => {
      this.timer = null;
      this.pump();
    }, delay);
  }

  private emit(c: Completion, n: number): void {
    this.counters.generationTokens += c.emit(n);
  }

  private finish(c: Completion): void {
    this.byReq.delete(c.simReq);
    this.counters.completed++;
    c.finish();
  }

  /**
   * A job's local prefix-cache hit in tokens, as vLLM counts it: whole blocks, at most the prompt less one token
   * (KVCacheManager.get_computed_blocks' max_cache_hit_length; the instance already caps prefills so, not decodes).
   */
  private localHitTokens(job: Job): number {
    const n = job.req.promptTokens;
    return Math.min(job.hitBlocks, Math.floor((n - 1) / SIM_BLOCK_TOKENS)) * SIM_BLOCK_TOKENS;
  }

  /**
   * The prefix-cache metrics count the local hit (vllm:prefix_cache_queries/hits); the answer's cached_tokens is
   * `reported` (by default the local hit too).
   */
  private notePrefixHit(c: Completion, local: number, reported = local): void {
    c.cachedTokens = reported;
    this.counters.prefixQueryTokens += c.tokens.length;
    this.counters.prefixHitTokens += local;
  }

  /** Tells the prefill worker its blocks were pulled (NIXL's notification, over HTTP here). */
  private tellReleased(remote: RemoteSource): void {
    const h = urlHost(remote.host);
    const call = (async () => {
      try {
        // a data-parallel prefill engine's request ids name its rank (`id#rank/n`): the release goes to that rank,
        // as NIXL's notification reaches the rank's own side channel
        const rank = /#(\d+)\/\d+$/.exec(remote.requestId)?.[1];
        const r = await fetch(`http://${h}:${remote.port}/internal/kv-release`, {
          method: "POST",
          headers: { "content-type": "application/json", ...(rank ? { "x-data-parallel-rank": rank } : {}) },
          body: JSON.stringify({ remote_request_id: remote.requestId }),
          signal: AbortSignal.timeout(5000),
        });
        await r.arrayBuffer().catch(noop);
        if (!r.ok) throw new Error(`HTTP ${r.status}`);
      } catch (e) {
        this.counters.kvReleaseFailures++;
        if (!this.closing)
          this.o.log(
            `worker ${this.address.workerId}: kv-release of ${remote.requestId} at ${h}:${remote.port} failed: ${(e as Error).message}`,
          );
      }
    })();
    this.pendingReleases.add(call);
    void call.finally(() => this.pendingReleases.delete(call));
  }

  /** The instance's callbacks: each turns a simulated event into the answer's next bytes. */
  private host(): InstanceHost {
    const { queue, byReq, kv } = this;
    return {
      queue,
      prefillDone: (_inst, job) => {
        const c = byReq.get(job.req);
        if (!c) return;
        kv.blocksDone(job.ids);
        this.notePrefixHit(c, this.localHitTokens(job));
        this.o.observeTtft((queue.nowMs - c.arrivalMs) / 1000);
        const requestId = c.requestId;
        this.pins.set(requestId, {
          job,
          timeout: queue.schedule(queue.nowMs + this.o.pinTimeoutMs, Priority.transfer, () => {
            this.releasePin(requestId, "timeout");
          }),
        });
        const { workerId, host, port } = this.address;
        // NixlConnector's request_finished (nixl/pull_scheduler.py), then the scheduler adds the prefill's cached
        // tokens for the decode engine to report (Scheduler.update_from_output: remote_prefill_cached_tokens)
        c.kvParams = {
          do_remote_prefill: true,
          do_remote_decode: false,
          remote_block_ids: Array.from(job.ids),
          remote_engine_id: workerId,
          remote_request_id: requestId,
          remote_host: host,
          remote_port: port,
          tp_size: this.o.preset.tp,
          dcp_size: 1,
          pp_size: 1,
          remote_num_tokens: job.req.promptTokens,
          remote_blocks_expiry_time: null,
          transfer_mode: "pull",
          remote_prefill_cached_tokens: c.cachedTokens,
        };
        this.emit(c, 1);
        this.finish(c);
      },
      decodeAdmitted: (inst, job) => {
        const c = byReq.get(job.req);
        // NixlConnector pulls the whole prompt beyond the local hit (get_num_new_matched_tokens), so the local and
        // external hits make the prompt: vLLM's decode engine reports that as cached_tokens (PrefillStats), unless
        // the params carry the prefill engine's count (remote_prefill_cached_tokens), which it reports instead
        const prompt = job.req.promptTokens;
        const local = this.localHitTokens(job);
        if (c) this.notePrefixHit(c, local, c.remote?.prefillCachedTokens ?? prompt);
        const tokens = prompt - local;
        const start = Math.max(queue.nowMs, this.linkFreeAt);
        const end = start + kvTransferMs(tokens, this.o.preset, this.o.link, this.o.transfer);
        this.linkFreeAt = end;
        queue.schedule(end, Priority.transfer, () => {
          inst.kvArrived(job);
          kv.blocksDone(job.ids);
          if (c?.remote) this.releaseRemote(c.remote);
        });
      },
      firstToken: (_inst, job, timeMs) => {
        const c = byReq.get(job.req);
        if (!c) return;
        this.o.observeTtft((timeMs - c.arrivalMs) / 1000);
        if (job.kind === "local") {
          kv.blocksDone(job.ids);
          this.notePrefixHit(c, this.localHitTokens(job));
          this.emit(c, 1); // the token the completed prefill samples (decode jobs' first tokens come through decoded)
        }
      },
      decoded: (_inst, jobs, steps) => {
        for (const job of jobs) {
          const c = byReq.get(job.req);
          if (c) this.emit(c, steps);
        }
      },
      finished: (_inst, job) => {
        const c = byReq.get(job.req);
        if (c) this.finish(c);
      },
      rejected: (_inst, job) => {
        const c = byReq.get(job.req);
        kv.blocksDone(job.ids);
        byReq.delete(job.req);
        if (c) c.rejected = true;
        this.counters.rejected++;
      },
      loadChanged: noop,
    };
  }
}
