// One simulated vLLM instance: continuous batching with chunked prefill over a prefix-cached KV store.
//
// Each step (vLLM v1's scheduler, simplified): running decodes take one token each; running prefills take chunks
// from what is left of the token budget (max_num_batched_tokens); waiting requests are then admitted in arrival
// order while budget, sequence slots and KV blocks allow (head-of-line blocking, as vLLM: a request that does not
// fit waits and so does everyone behind it). Step time comes from the calibrated model (step-time.ts). A local prefill
// on a decode instance is simply a mixed step: its decodes wait for the longer step (the interference).
//
// Simplifications, stated: a request reserves KV for its prompt and its whole output at admission (so there are no
// preemptions); KV is committed to the prefix cache chunk by chunk as the prefill computes it. When nothing but
// decodes run, whole runs of steps are advanced at once (closed form), up to the next completion, and cut short
// at the next step boundary when new work arrives.

import { attnPairs, decodeRunMs, decodeStepsWithin, stepTimeMs } from "./step-time.js";
import type { ModelPreset } from "./model-presets.js";
import { EventQueue, Priority, type SimEvent } from "./events.js";
import { KvCache } from "./kv-cache.js";
import type { BlockHashes } from "./block-ids.js";
import type { KvEventFilter, KvEventSink } from "./cache-events.js";
import { SIM_BLOCK_TOKENS, type SimRequest } from "./types.js";

export type InstanceRole = "prefill" | "decode" | "replica";

/** What a job does on this instance. */
export type JobKind =
  /** prefill and decode here (the local path, or any request on a replica in an aggregated layout) */
  | "local"
  /** prefill only; then the KV ships to a decode instance (the remote path, prefill side) */
  | "prefill"
  /** decode only, after the KV arrives from a prefill instance (the remote path, decode side) */
  | "decode";

export interface Job {
  req: SimRequest;
  /** the prompt's block ids (BlockIds, or ChainedBlockIds in a simulation) */
  ids: Int32Array;
  /** the pinned prompt blocks' slots in this instance's cache (KvCache.prefixHit, commit), so release finds them */
  slots: Int32Array;
  kind: JobKind;
  /** full prompt blocks (the hashed ones) */
  promptBlocks: number;
  /** leading prompt blocks found in this instance's prefix cache at admission */
  hitBlocks: number;
  /** blocks [0, pinned) of the prompt are pinned on this instance */
  pinned: number;
  /** private blocks still reserved on this instance */
  reserved: number;
  /** prompt tokens whose KV exists here (cached or computed) */
  computedTokens: number;
  /** output tokens produced so far (decode side) */
  generated: number;
  /** time of the first output token (decode side) */
  firstTokenMs: number;
  /** instance step counter at which a decoding job will have produced its last token */
  doneAtStep: number;
  /** the client went away (Instance.abort): the job is dropped at the next step boundary */
  aborted: boolean;
  /** where the job is */
  state: "waiting" | "prefilling" | "transferring" | "ready" | "decoding" | "prefilled" | "done";
}

export interface InstanceHost {
  readonly queue: EventQueue;
  /** A prefill-only job finished its prefill: its KV must now ship to its decode instance. */
  prefillDone(inst: Instance, job: Job): void;
  /** A decode job was admitted (KV reserved): the transfer can start. */
  decodeAdmitted(inst: Instance, job: Job): void;
  /** The first output token of a job exists. */
  firstToken(inst: Instance, job: Job, timeMs: number): void;
  /** A job produced its last token. */
  finished(inst: Instance, job: Job, timeMs: number): void;
  /** A job can never fit this instance's KV cache. */
  rejected(inst: Instance, job: Job): void;
  /** The instance's load changed (for the router's worker choice). */
  loadChanged(inst: Instance): void;
  /**
   * Optional: after every (run of) step(s), the decoding jobs, each of which produced `steps` tokens (a remote job's
   * first token included; firstToken fires for it too). The token a completed local prefill samples is reported
   * by firstToken only. Called before the step's finishes.
   */
  decoded?(inst: Instance, jobs: readonly Job[], steps: number, timeMs: number): void;
}

const blocksOf = (tokens: number): number => Math.ceil(tokens / SIM_BLOCK_TOKENS);

/** a job's slots before its admission (it pins nothing yet) */
const NO_SLOTS = new Int32Array(0);

export class Instance {
  readonly index: number;
  readonly name: string;
  readonly role: InstanceRole;
  readonly preset: ModelPreset;
  readonly cache: KvCache;
  private readonly host: InstanceHost;

  private waiting: Job[] = [];
  private waitingHead = 0;
  /** admitted jobs still prefilling, in admission order */
  private prefilling: Job[] = [];
  /** jobs producing output tokens */
  private decoding: Job[] = [];
  /** decode jobs whose KV is here, joining at the next step */
  private ready: Job[] = [];
  /** decode jobs admitted, waiting for their KV transfer */
  transferring = 0;
  /** the last admission attempt stopped because the KV cache was full (only a release can change that) */
  private blockedOnKv = false;

  /** decode steps taken so far (the clock of decode progress) */
  private stepCounter = 0;
  private decodeContext = 0;

  // the step in flight
  private stepEvent: SimEvent | null = null;
  private stepStartMs = 0;
  private runSteps = 0; // > 0: a pure-decode run of this many steps
  private chunks: { job: Job; tokens: number }[] = [];

  /** slot arrays of finished jobs, by size class (length 2^c), for the next admissions */
  private readonly slotArrays: Int32Array[][] = [];

  // accounting
  busyMs = 0;
  steps = 0;
  prefillTokensComputed = 0;
  /** prompt tokens still to compute here, queued or running: kept as a running sum */
  private pendingPrefill = 0;

  /** The most decode steps advanced in one event; 1 makes every token its own event (a real-time worker streams them). */
  maxRunSteps = Infinity;

  constructor(
    index: number,
    name: string,
    role: InstanceRole,
    preset: ModelPreset,
    capacityBlocks: number,
    host: InstanceHost,
    ids: BlockHashes,
    sink: KvEventSink | null,
    /** which blocks' stores and evictions reach the sink (default: all) */
    filter: KvEventFilter | null = null,
  ) {
    this.index = index;
    this.name = name;
    this.role = role;
    this.preset = preset;
    this.host = host;
    this.cache = new KvCache(capacityBlocks, ids, sink, filter);
  }

  /** Prompt tokens still to prefill here, queued or running (the router's view of prefill load). */
  get pendingPrefillTokens(): number {
    return this.pendingPrefill;
  }

  /** KV tokens of running decodes (the router's view of decode load). */
  get activeDecodeTokens(): number {
    return this.decodeContext;
  }

  get waitingCount(): number {
    return this.waiting.length - this.waitingHead;
  }

  get runningCount(): number {
    return this.prefilling.length + this.decoding.length + this.ready.length + this.transferring;
  }

  /** New work for this instance. */
  enqueue(req: SimRequest, ids: Int32Array, kind: JobKind): Job {
    const promptBlocks = Math.floor(req.promptTokens / SIM_BLOCK_TOKENS);
    const job: Job = {
      req,
      ids,
      slots: NO_SLOTS,
      kind,
      promptBlocks,
      hitBlocks: 0,
      pinned: 0,
      reserved: 0,
      computedTokens: 0,
      generated: 0,
      firstTokenMs: -1,
      doneAtStep: 0,
      aborted: false,
      state: "waiting",
    };
    if (this.blocksNeeded(job, 0) > this.cache.capacityBlocks) {
      job.state = "done";
      this.host.rejected(this, job);
      return job;
    }
    this.waiting.push(job);
    if (kind !== "decode") this.pendingPrefill += req.promptTokens;
    this.host.loadChanged(this);
    this.wake();
    return job;
  }

  /**
   * The client went away: vLLM aborts the request between steps. A waiting job leaves the queue now; a running one
   * is dropped at the next step boundary (the step in flight still carries it) and its KV released. Returns false
   * when there is nothing to abort here (done, or a prefill-only job whose KV awaits its pull).
   */
  abort(job: Job): boolean {
    if (job.state === "done" || job.state === "prefilled" || job.aborted) return false;
    job.aborted = true;
    if (job.state === "waiting") {
      job.state = "done";
      if (job.kind !== "decode") this.pendingPrefill -= job.req.promptTokens;
      this.host.loadChanged(this);
      this.wake();
    }
    return true;
  }

  /**
   * A job lets go of its KV here (pinned blocks and reservation) and is done, finished or aborted; its slot array
   * goes back to the pool (a prompt's array is kilobytes: at 32P32D one per admission was 0.6 GB of garbage).
   */
  private releaseKv(job: Job): void {
    this.cache.release(job.ids, job.pinned, job.reserved, job.slots);
    job.pinned = 0;
    job.reserved = 0;
    job.state = "done";
    if (job.slots !== NO_SLOTS) {
      (this.slotArrays[sizeClass(job.slots.length)] ??= []).push(job.slots);
      job.slots = NO_SLOTS;
    }
  }

  /** A slot array with room for `n` blocks: from the pool, or new (its length a power of two). */
  private slotArray(n: number): Int32Array {
    const c = sizeClass(n);
    return this.slotArrays[c]?.pop() ?? new Int32Array(2 ** c);
  }

  /** A decode job's KV has arrived: it joins the decodes at the next step. */
  kvArrived(job: Job): void {
    this.transferring--;
    if (job.aborted) {
      this.releaseKv(job);
      this.wake();
      return;
    }
    job.state = "ready";
    this.cache.commit(job.ids, job.pinned, job.promptBlocks, job.slots);
    job.reserved -= job.promptBlocks - job.pinned;
    job.pinned = job.promptBlocks;
    job.computedTokens = job.req.promptTokens;
    this.ready.push(job);
    this.wake();
  }

  /** The prefill side of a remote request is done with its KV (the transfer finished). */
  releasePrefill(job: Job): void {
    this.releaseKv(job);
    this.wake(); // freed blocks may admit a waiting request
  }

  /** Blocks a job reserves beyond its `hit` cached prompt blocks: the rest of the prompt, plus its output here. */
  private blocksNeeded(job: Job, hit: number): number {
    const prompt = job.req.promptTokens;
    const held = job.kind === "prefill" ? prompt : prompt + job.req.outputTokens;
    return blocksOf(held) - hit;
  }

  // ---- stepping ----------------------------------------------------------------------------------------

  /** Starts a step if idle; cuts a pure-decode run short at the next step boundary if one is in flight. */
  private wake(): void {
    const q = this.host.queue;
    if (!this.stepEvent) {
      this.startStep(q.nowMs);
      return;
    }
    if (this.runSteps > 1) {
      const now = q.nowMs;
      const done = decodeStepsWithin(
        this.preset,
        this.decoding.length,
        this.decodeContext,
        now - this.stepStartMs,
        this.runSteps,
      );
      const steps = Math.min(this.runSteps, done + 1);
      if (steps < this.runSteps) {
        this.stepEvent.handle = noop; // superseded
        this.runSteps = steps;
        const end = this.stepStartMs + decodeRunMs(this.preset, this.decoding.length, this.decodeContext, steps);
        this.stepEvent = q.schedule(Math.max(end, now), Priority.step, () => this.endStep());
      }
    }
  }

  private admit(budget: number): number {
    const maxSeqs = this.preset.maxNumSeqs;
    this.blockedOnKv = false;
    while (this.waitingHead < this.waiting.length) {
      if (this.runningCount >= maxSeqs) break;
      const job = this.waiting[this.waitingHead]!;
      if (job.state === "done") {
        this.waitingHead++; // aborted while waiting
        continue;
      }
      if (job.kind !== "decode" && budget <= 0) break;
      if (job.slots.length < job.promptBlocks) job.slots = this.slotArray(job.promptBlocks);
      const hit = this.cache.prefixHit(job.ids, job.promptBlocks, job.slots);
      // a full hit still recomputes the last token (vLLM), so a prefill never starts with all its tokens cached
      const usable = job.kind !== "decode" && hit * SIM_BLOCK_TOKENS >= job.req.promptTokens ? hit - 1 : hit;
      if (!this.cache.admit(job.ids, usable, this.blocksNeeded(job, usable), job.slots)) {
        this.blockedOnKv = true; // head-of-line blocking, as vLLM
        break;
      }
      this.waitingHead++;
      job.hitBlocks = usable;
      job.pinned = usable;
      job.reserved = this.blocksNeeded(job, usable);
      job.computedTokens = usable * SIM_BLOCK_TOKENS;
      if (job.kind === "decode") {
        job.state = "transferring";
        this.transferring++;
        this.host.decodeAdmitted(this, job);
      } else {
        job.state = "prefilling";
        this.prefilling.push(job);
        this.pendingPrefill -= job.computedTokens;
        budget -= Math.min(budget, job.req.promptTokens - job.computedTokens);
      }
    }
    if (this.waitingHead > 1024 && this.waitingHead * 2 > this.waiting.length) {
      this.waiting = this.waiting.slice(this.waitingHead);
      this.waitingHead = 0;
    }
    return budget;
  }

  private startStep(now: number): void {
    this.stepEvent = null;
    this.runSteps = 0;
    this.chunks = [];
    for (const j of this.ready) {
      if (j.aborted) {
        this.releaseKv(j);
        continue;
      }
      j.state = "decoding";
      j.doneAtStep = this.stepCounter + j.req.outputTokens; // its first token comes from its first step here
      this.decoding.push(j);
      this.decodeContext += j.req.promptTokens;
    }
    this.ready = [];
    let budget = this.preset.maxNumBatchedTokens - this.decoding.length;
    // running prefills continue first, then new admissions (which also take chunks)
    const before = this.prefilling.length;
    for (let i = 0; i < before && budget > 0; i++) {
      const job = this.prefilling[i]!;
      const n = Math.min(budget, job.req.promptTokens - job.computedTokens);
      this.chunks.push({ job, tokens: n });
      budget -= n;
    }
    this.admit(budget > 0 ? budget : 0);
    let remaining = budget;
    for (let i = before; i < this.prefilling.length && remaining > 0; i++) {
      const job = this.prefilling[i]!;
      const n = Math.min(remaining, job.req.promptTokens - job.computedTokens);
      this.chunks.push({ job, tokens: n });
      remaining -= n;
    }
    const seqs = this.decoding.length;
    if (seqs === 0 && this.chunks.length === 0) {
      this.host.loadChanged(this);
      return; // idle until new work arrives
    }
    let duration: number;
    if (this.chunks.length === 0 && this.canRun()) {
      // a pure-decode run up to the next completion
      let steps = Infinity;
      for (const j of this.decoding) steps = Math.min(steps, j.doneAtStep - this.stepCounter);
      this.runSteps = Math.max(1, Math.min(steps, this.maxRunSteps));
      duration = decodeRunMs(this.preset, seqs, this.decodeContext, this.runSteps);
    } else {
      let tokens = 0;
      let pairs = 0;
      for (const c of this.chunks) {
        tokens += c.tokens;
        pairs += attnPairs(c.tokens, c.job.computedTokens);
      }
      this.runSteps = 0;
      duration = stepTimeMs(this.preset, seqs, this.decodeContext, tokens, pairs);
    }
    this.stepStartMs = now;
    this.host.loadChanged(this);
    this.stepEvent = this.host.queue.schedule(now + duration, Priority.step, () => this.endStep());
  }

  /**
   * A run of several steps is only taken when every decode already has its first token and nothing waiting could
   * be admitted before the run ends (new work, a finished transfer or freed KV all cut the run short).
   */
  private canRun(): boolean {
    for (const j of this.decoding) if (j.generated === 0) return false;
    return this.waitingHead >= this.waiting.length || this.blockedOnKv || this.runningCount >= this.preset.maxNumSeqs;
  }

  private endStep(): void {
    const now = this.host.queue.nowMs;
    const steps = this.runSteps > 0 ? this.runSteps : 1;
    this.steps += steps;
    this.busyMs += now - this.stepStartMs;
    // decodes
    const seqs = this.decoding.length;
    this.stepCounter += steps;
    this.decodeContext += seqs * steps;
    if (seqs > 0) {
      if (this.decoding.some((j) => j.aborted)) {
        this.decoding = this.decoding.filter((j) => {
          if (!j.aborted) return true;
          this.decodeContext -= j.req.promptTokens + j.generated + steps;
          this.releaseKv(j);
          return false;
        });
      }
      this.host.decoded?.(this, this.decoding, steps, now);
      const still: Job[] = [];
      for (const j of this.decoding) {
        const first = j.generated === 0;
        j.generated += steps;
        if (first) {
          j.firstTokenMs = now; // a first token only ever comes from a single step
          this.host.firstToken(this, j, now);
        }
        if (this.stepCounter >= j.doneAtStep) {
          this.decodeContext -= j.req.promptTokens + j.generated;
          this.releaseKv(j);
          this.host.finished(this, j, now);
        } else still.push(j);
      }
      this.decoding = still;
    }
    // prefill chunks
    if (this.chunks.length > 0) {
      const remaining: Job[] = [];
      const finished = new Set<Job>();
      for (const c of this.chunks) {
        const job = c.job;
        job.computedTokens += c.tokens;
        this.prefillTokensComputed += c.tokens;
        this.pendingPrefill -= c.tokens;
        const full = Math.min(job.promptBlocks, Math.floor(job.computedTokens / SIM_BLOCK_TOKENS));
        if (full > job.pinned) {
          this.cache.commit(job.ids, job.pinned, full, job.slots);
          job.reserved -= full - job.pinned;
          job.pinned = full;
        }
        if (job.computedTokens >= job.req.promptTokens) finished.add(job);
      }
      for (const job of this.prefilling) {
        if (job.aborted) {
          this.pendingPrefill -= job.req.promptTokens - Math.min(job.computedTokens, job.req.promptTokens);
          this.releaseKv(job);
          continue;
        }
        if (!finished.has(job)) {
          remaining.push(job);
          continue;
        }
        if (job.kind === "prefill") {
          job.state = "prefilled";
          this.host.prefillDone(this, job);
        } else {
          // the step that completes a prefill samples the first token (local path)
          job.generated = 1;
          job.firstTokenMs = now;
          this.host.firstToken(this, job, now);
          if (job.req.outputTokens <= 1) {
            this.releaseKv(job);
            this.host.finished(this, job, now);
          } else {
            job.state = "decoding";
            job.doneAtStep = this.stepCounter + job.req.outputTokens - 1;
            this.decoding.push(job);
            this.decodeContext += job.req.promptTokens + 1;
          }
        }
      }
      this.prefilling = remaining;
    }
    this.startStep(now);
  }
}

function noop(): void {}

/** The size class of a slot array for `n` blocks: the c with 2^c ≥ n. */
function sizeClass(n: number): number {
  return n <= 1 ? 0 : 32 - Math.clz32(n - 1);
}
