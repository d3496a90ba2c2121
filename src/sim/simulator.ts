// The discrete-event simulator of a prefill/decode-disaggregated cluster. Requests arrive, the real routing core
// (a Router, the same object that routes live traffic) decides local or remote and picks the workers, instances
// batch and step on the calibrated model, KV ships over serialized links, and every store and eviction in an
// instance's prefix cache reaches the router's index as a KV event (optionally late), as a vLLM worker's would.
// All results are simulated; the step-time model's error is stated in docs/simulator-calibration.md.

import { applyEventBatch, decodeEventBatch, encodeEventBatch, type KvEvent } from "../router/kv-events.js";
import { Router } from "../router/router.js";
import { EventQueue, Priority } from "./events.js";
import { Instance, type InstanceHost, type InstanceRole, type Job } from "./instance.js";
import type { ChainedBlockIds } from "./chained-ids.js";
import type { KvEventSink } from "./cache-events.js";
import { BlocksStillToRoute, HeldBackStores } from "./remaining.js";
import { summarize, type RequestRecord } from "./metrics.js";
import { kvCapacityBlocks } from "./model-presets.js";
import { DEFAULT_TRANSFER, kvTransferMs, LINKS, type LinkPreset, type TransferModel } from "./kv-transfer.js";
import type { SimConfig, SimResult } from "./sim-config.js";
import { arrivalOrder, internedIds, internInOrder, sharedBlockIds } from "./shared-block-ids.js";
import { SIM_BLOCK_TOKENS, type SimRequest, type Workload } from "./types.js";
import { QpsWindow } from "../router/qps-window.js";
import type { Decision, RouteRequest } from "../router/types.js";

/** Routes in the router's place and hears how each request ended (src/sim/drift-guard-run.ts: the drift guard). */
export interface RouteHook {
  route(r: SimRequest, request: RouteRequest, nowMs: number): Decision;
  /** A request finished (its record complete) or was rejected (failed), at simulated time nowMs. */
  ended(r: SimRequest, record: RequestRecord, nowMs: number): void;
}

interface Pending {
  prefill: Instance;
  prefillJob: Job | null;
  decode: Instance;
}

export class Simulation implements InstanceHost {
  readonly queue = new EventQueue();
  readonly router: Router;
  readonly instances: Instance[] = [];
  private readonly byName = new Map<string, Instance>();
  private readonly config: SimConfig;
  private readonly link: LinkPreset;
  private readonly transfer: TransferModel;
  private readonly records: RequestRecord[] = [];
  private readonly pending = new Map<number, Pending>();
  private readonly linkFreeAt: number[];
  private readonly nextTurn = new Map<number, SimRequest>();
  private readonly sessionDecode = new Map<number, string>();
  /** output tokens of each session's latest finished turn (a feature of the output-length model) */
  private readonly sessionOutput = new Map<number, number>();
  private readonly qps = new QpsWindow();
  private readonly dirty = new Set<Instance>();
  /** Approximate cache view: when the index is next cleared (simulated ms). */
  private nextIndexClearMs = NaN;
  /** chosen in `run` (sharedBlockIds: the ids the same requests had in an earlier simulation) */
  private blockIds!: ChainedBlockIds;
  /**
   * Precise cache view: which stores reach the index (remaining.ts), at most one of the two set. Without lag,
   * HeldBackStores (each arrival's prefix reported just before it is routed); with lag, the blocks a request still
   * to be routed contains.
   */
  private heldBack: HeldBackStores | null = null;
  private stillToRoute: BlocksStillToRoute | null = null;
  private readonly capacityBlocks: number;
  private readonly specs: { name: string; role: InstanceRole }[];
  /** null (the default): every request is routed by `router.route` itself. */
  routeHook: RouteHook | null = null;

  constructor(config: SimConfig) {
    this.config = config;
    this.link = config.link ?? LINKS["ib-ndr"];
    // one link per GPU of the instance (a NIC each), unless the configuration says otherwise
    this.transfer = config.transfer ?? { ...DEFAULT_TRANSFER, links: config.preset.tp };
    const capacity = config.capacityBlocks ?? kvCapacityBlocks(config.preset, SIM_BLOCK_TOKENS);
    const { replicas, prefill, decode } = config.split;
    const specs: { name: string; role: InstanceRole }[] = [];
    for (let i = 0; i < replicas; i++) specs.push({ name: `R${i}`, role: "replica" });
    for (let i = 0; i < prefill; i++) specs.push({ name: `P${i}`, role: "prefill" });
    for (let i = 0; i < decode; i++) specs.push({ name: `D${i}`, role: "decode" });
    const routerRole = { replica: "both", prefill: "prefill", decode: "decode" } as const;
    this.capacityBlocks = capacity;
    this.specs = specs;
    this.router = Router.create(config.table, {
      ...config.router,
      workers: specs.map((s) => ({ id: s.name, role: routerRole[s.role], capacityBlocks: capacity })),
      blockSize: SIM_BLOCK_TOKENS,
      ...(config.cacheView === "approximate" ? { recordDecisions: true } : {}),
      indexBlocks: Math.max(1, capacity * specs.length),
      maxPromptTokens: 1 << 22,
      ...(config.module ? { module: config.module, engine: "wasm" as const } : { engine: "reference" as const }),
    });
    this.linkFreeAt = specs.map(() => 0);
  }

  /** The instances, once the block ids they name their blocks by are known (`run`). */
  private createInstances(): void {
    const { preset } = this.config;
    this.specs.forEach((s, i) => {
      const inst = new Instance(
        i,
        s.name,
        s.role,
        preset,
        this.capacityBlocks,
        this,
        this.blockIds,
        this.sinkFor(s.name),
        this.heldBack ?? this.stillToRoute,
      );
      this.instances.push(inst);
      this.byName.set(s.name, inst);
    });
  }

  /** KV events of one instance, applied to the router's index now or after the configured lag. */
  private sinkFor(name: string): KvEventSink {
    if (this.config.cacheView === "approximate") return { stored: () => undefined, removed: () => undefined };
    const lag = this.config.indexLagMs ?? 0;
    const index = this.router.index;
    let deliver: (kind: "stored" | "removed", pairs: Uint32Array) => void = (kind, p) =>
      kind === "stored" ? index.store(name, p) : index.remove(name, p);
    if (this.config.kvEvents === "vllm") {
      deliver = (kind, p) => {
        // simulated prompts are hashes only, so token_ids stay empty
        const event: KvEvent =
          kind === "stored"
            ? { kind, hashes: p, parent: null, tokenIds: [], blockSize: SIM_BLOCK_TOKENS, medium: "GPU" }
            : { kind, hashes: p, medium: "GPU" };
        const payload = encodeEventBatch({ ts: this.queue.nowMs / 1000, events: [event], dataParallelRank: null });
        applyEventBatch(index, name, decodeEventBatch(payload));
      };
    }
    if (lag <= 0) return { stored: (p) => deliver("stored", p), removed: (p) => deliver("removed", p) };
    const later = (kind: "stored" | "removed", p: Uint32Array): void => {
      const copy = p.slice();
      this.queue.schedule(this.queue.nowMs + lag, Priority.kvEvent, () => deliver(kind, copy));
    };
    return { stored: (p) => later("stored", p), removed: (p) => later("removed", p) };
  }

  run(workload: Workload): SimResult {
    if (this.instances.length > 0) throw new Error("sim: a Simulation runs one workload (make another for the next)");
    const reqs = workload.requests;
    this.blockIds = sharedBlockIds(reqs);
    const order = arrivalOrder(reqs);
    // every prompt interned up front, in routing order (with index lag: which blocks a later request still contains)
    const idsInOrder = internInOrder(reqs, order, this.blockIds);
    if (this.config.cacheView !== "approximate" && this.config.indexEvents !== "all") {
      if ((this.config.indexLagMs ?? 0) > 0)
        this.stillToRoute = new BlocksStillToRoute(idsInOrder, this.blockIds.count);
      else this.heldBack = new HeldBackStores(this.blockIds.count);
    }
    this.createInstances();
    // later turns of a conversation extend earlier ones: a finished turn leaves its output's blocks cached
    const lastOfSession = new Map<number, SimRequest>();
    for (const r of reqs) {
      if (r.session === undefined) continue;
      const prev = lastOfSession.get(r.session);
      if (prev) this.nextTurn.set(prev.id, r);
      lastOfSession.set(r.session, r);
    }
    this.scheduleArrivals(reqs, order);
    const first = reqs.length > 0 ? reqs[0]!.arrivalMs : 0;
    this.queue.run();
    // anything that never finished (should not happen unless a request can never fit)
    const done = new Set(this.records.map((r) => r.id));
    for (const r of reqs) if (!done.has(r.id)) this.records.push(this.failedRecord(r));
    this.records.sort((a, b) => a.id - b.id);
    return {
      records: this.records,
      summary: summarize(this.records, this.config.slo),
      instances: this.instances.map((i) => ({
        name: i.name,
        role: i.role,
        busyMs: i.busyMs,
        steps: i.steps,
        evictions: i.cache.evictions,
      })),
      simulatedMs: this.queue.nowMs - first,
    };
  }

  /**
   * Arrivals enter the queue one at a time, each when the one before it is handled, so the heap holds the events in
   * flight rather than every future arrival (100,000 at scale). The order is the same as scheduling them all first:
   * arrivals are the only events of their priority class, so among themselves they go by (time, request order),
   * and against other events by (time, priority), neither of which depends on when they were scheduled.
   */
  private scheduleArrivals(reqs: readonly SimRequest[], order: readonly number[]): void {
    let next = 0;
    const arriveNext = (): void => {
      const r = reqs[order[next++]!]!;
      if (next < order.length) this.queue.schedule(reqs[order[next]!]!.arrivalMs, Priority.arrival, arriveNext);
      this.arrive(r);
    };
    if (order.length > 0) this.queue.schedule(reqs[order[0]!]!.arrivalMs, Priority.arrival, arriveNext);
  }

  // ---- routing -------------------------------------------------------------------------------------------

  /** osl_hat for the router, or undefined to let the table's model predict it in the core. */
  private oslHat(r: SimRequest): number | undefined {
    const table = this.router.table;
    const p = this.config.osl ?? (table.osl_model ? "model" : "oracle");
    if (p === "model") return undefined;
    if (p !== "oracle") return p(r);
    const classes = table.osl_classes;
    return classes ? classes.representative[classOf(r.outputTokens, classes.thresholds)]! : r.outputTokens;
  }

  /** Approximate mode's forgetting: the index is cleared once per period (it only matters at arrivals). */
  private forgetPeriodically(now: number): void {
    const ttl = this.config.approximateTtlMs ?? 300_000;
    if (Number.isNaN(this.nextIndexClearMs)) this.nextIndexClearMs = now + ttl;
    if (now < this.nextIndexClearMs) return;
    this.router.index.clear();
    while (this.nextIndexClearMs <= now) this.nextIndexClearMs += ttl;
  }

  private refreshSignals(now: number): void {
    for (const inst of this.dirty) {
      this.router.setLoad(inst.name, {
        activePrefillTokens: inst.pendingPrefillTokens,
        activeDecodeTokens: inst.activeDecodeTokens,
      });
    }
    this.dirty.clear();
    const qps = this.qps.arrive(now);
    let queued = 0;
    for (const inst of this.instances) if (inst.role === "prefill") queued += inst.waitingCount;
    this.router.setSignals({ prefillQueue: queued, qps });
  }

  private arrive(r: SimRequest): void {
    this.refreshSignals(this.queue.nowMs);
    if (this.config.cacheView === "approximate") this.forgetPeriodically(this.queue.nowMs);
    const ppd = this.router.table.kind === "ppd";
    const pinned = ppd && r.session !== undefined && r.turn > 1 ? this.sessionDecode.get(r.session) : undefined;
    const oslHat = this.oslHat(r);
    const prevOutput = r.session !== undefined ? this.sessionOutput.get(r.session) : undefined;
    if (this.heldBack) {
      const ids = this.ids(r);
      const from = this.heldBack.firstHeldBack(ids);
      if (from >= 0) for (const inst of this.instances) inst.cache.publishFrom(ids, from);
    }
    const request: RouteRequest = {
      blockHashes: r.blocks,
      promptTokens: r.promptTokens,
      ...(oslHat !== undefined ? { oslHat } : {}),
      ...(prevOutput !== undefined ? { prevOutputTokens: prevOutput } : {}),
      turn: r.turn,
      ...(r.contextTokens !== undefined ? { contextTokens: r.contextTokens } : {}),
      ...(pinned !== undefined ? { decodeWorker: pinned } : {}),
    };
    const d = this.routeHook ? this.routeHook.route(r, request, this.queue.nowMs) : this.router.route(request);
    if (this.stillToRoute) this.stillToRoute.routed++;
    if (ppd && r.session !== undefined && r.turn <= 1) this.sessionDecode.set(r.session, d.decodeWorker);
    const record = this.newRecord(r, d.path, d.decodeWorker, d.prefillWorker, d.cluster ?? -1, d.features);
    record.oslClass = d.oslClass ?? -1;
    record.prefixReuse = d.reuse;
    this.records.push(record);
    const decode = this.byName.get(d.decodeWorker)!;
    record.load = { ...d.load }; // the loads the core decided it at (the learner's load bounds: src/learn/)
    if (d.path === "local") {
      decode.enqueue(r, this.ids(r), "local");
    } else {
      const prefill = this.byName.get(d.prefillWorker!)!;
      this.pending.set(r.id, { prefill, prefillJob: null, decode });
      prefill.enqueue(r, this.ids(r), "prefill");
    }
  }

  // ---- InstanceHost --------------------------------------------------------------------------------------

  prefillDone(inst: Instance, job: Job): void {
    const p = this.pending.get(job.req.id)!;
    p.prefillJob = job;
    this.recordOf(job.req).prefixHitTokens = job.hitBlocks * SIM_BLOCK_TOKENS;
    p.decode.enqueue(job.req, job.ids, "decode");
  }

  decodeAdmitted(inst: Instance, job: Job): void {
    const p = this.pending.get(job.req.id)!;
    const rec = this.recordOf(job.req);
    rec.decodeHitTokens = job.hitBlocks * SIM_BLOCK_TOKENS;
    const tokens = this.config.dedupeTransfer
      ? Math.max(0, job.req.promptTokens - rec.decodeHitTokens)
      : job.req.promptTokens;
    const now = this.queue.nowMs;
    // transfers into one decode instance share its inbound link, one at a time
    const start = Math.max(now, this.linkFreeAt[inst.index]!);
    const end = start + kvTransferMs(tokens, this.config.preset, this.link, this.transfer);
    this.linkFreeAt[inst.index] = end;
    rec.kvBytes = tokens * this.config.preset.kvBytesPerToken;
    this.queue.schedule(end, Priority.transfer, () => {
      this.pending.delete(job.req.id);
      p.prefill.releasePrefill(p.prefillJob!);
      inst.kvArrived(job);
    });
  }

  firstToken(inst: Instance, job: Job, timeMs: number): void {
    const rec = this.recordOf(job.req);
    rec.ttftMs = timeMs - job.req.arrivalMs;
    if (job.kind === "local") {
      rec.prefixHitTokens = job.hitBlocks * SIM_BLOCK_TOKENS;
      rec.decodeHitTokens = rec.prefixHitTokens;
    }
  }

  finished(inst: Instance, job: Job, timeMs: number): void {
    const rec = this.recordOf(job.req);
    rec.finishMs = timeMs;
    rec.e2eMs = timeMs - job.req.arrivalMs;
    rec.tpotMs = job.req.outputTokens > 1 ? (timeMs - job.firstTokenMs) / (job.req.outputTokens - 1) : 0;
    rec.failed = false;
    if (job.req.session !== undefined) this.sessionOutput.set(job.req.session, job.req.outputTokens);
    const next = this.nextTurn.get(job.req.id);
    if (next) {
      // the conversation's next turn extends this one: its blocks up to here are this turn's prompt and output
      const upTo = Math.min(
        next.blocks.length >>> 1,
        Math.floor((job.req.promptTokens + job.req.outputTokens) / SIM_BLOCK_TOKENS),
      );
      if (upTo > job.promptBlocks && sharesPrefix(next.blocks, job.req.blocks, job.promptBlocks)) {
        inst.cache.cacheUnpinned(this.ids(next), job.promptBlocks, upTo);
      }
    }
    this.routeHook?.ended(job.req, rec, timeMs);
  }

  rejected(inst: Instance, job: Job): void {
    this.recordOf(job.req).failed = true;
    this.pending.delete(job.req.id);
    this.routeHook?.ended(job.req, this.recordOf(job.req), this.queue.nowMs);
  }

  loadChanged(inst: Instance): void {
    this.dirty.add(inst);
  }

  /** A request's block ids in this simulation's ChainedBlockIds (interned in `run`: internInOrder). */
  private ids(r: SimRequest): Int32Array {
    return internedIds(r.blocks, this.blockIds);
  }

  // ---- records -------------------------------------------------------------------------------------------

  private readonly recordById = new Map<number, RequestRecord>();

  private recordOf(r: SimRequest): RequestRecord {
    return this.recordById.get(r.id)!;
  }

  private newRecord(
    r: SimRequest,
    path: "local" | "remote",
    decode: string,
    prefill: string | null,
    cluster: number,
    features: RequestRecord["features"],
  ): RequestRecord {
    const rec: RequestRecord = {
      id: r.id,
      arrivalMs: r.arrivalMs,
      promptTokens: r.promptTokens,
      outputTokens: r.outputTokens,
      turn: r.turn,
      ...(r.type !== undefined ? { type: r.type } : {}),
      path,
      decodeWorker: decode,
      prefillWorker: prefill,
      cluster,
      features: { ...features },
      oslClass: -1,
      prefixReuse: 0,
      prefixHitTokens: 0,
      decodeHitTokens: 0,
      ttftMs: NaN,
      tpotMs: NaN,
      e2eMs: NaN,
      finishMs: NaN,
      kvBytes: 0,
      failed: true, // until it finishes
    };
    this.recordById.set(r.id, rec);
    return rec;
  }

  private failedRecord(r: SimRequest): RequestRecord {
    return this.newRecord(r, "local", "", null, -1, {
      isl: r.promptTokens,
      effP: r.promptTokens,
      effD: r.promptTokens,
      oslHat: 0,
    });
  }
}

/** Output-length class of `tokens`: class i covers (thresholds[i−1], thresholds[i]]. */
export function classOf(tokens: number, thresholds: readonly number[]): number {
  let c = 0;
  while (c < thresholds.length && tokens > thresholds[c]!) c++;
  return c;
}

function sharesPrefix(a: Uint32Array, b: Uint32Array, blocks: number): boolean {
  if (blocks === 0) return true;
  const i = 2 * (blocks - 1);
  return a[i] === b[i] && a[i + 1] === b[i + 1];
}

/** Runs one workload through a fresh simulated cluster. */
export function simulate(workload: Workload, config: SimConfig): SimResult {
  return new Simulation(config).run(workload);
}
