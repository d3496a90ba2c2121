// The proxy's workers: those of the config and those registered by heartbeat (POST /admin/workers), which of them
// are in rotation, and the load the proxy's own requests put on each (the router's load signals). A worker leaves
// rotation after a failure (markDown) and comes back when health.ts finds its /health answering (markUp). Outlier
// detection follows Envoy's: consecutive failures (consecutive_5xx) or a failure rate over a window with a minimum
// volume (failure_percentage), never more than a share of a role at once, with a back-off that grows per ejection.

import type { Router } from "../../router/router.js";
import type { ServeConfig } from "../config.js";
import type { WorkerConfig } from "../config-workers.js";
import type { Logger } from "./log.js";
import type { UpstreamError } from "./upstream.js";
import type { ZmqSubscriber } from "../zeromq.js";
import { rootHash, type Hash64 } from "../../hashing/hashes.js";
import { EventIngest } from "./kv-ingest.js";
import { engineGroup } from "./engine-group.js";
import { scrapedGauge } from "../prometheus.js";
import type { ProxyMetrics } from "./metrics.js";
import type { RequestContext } from "./request-context.js";

export interface WorkerState {
  spec: WorkerConfig;
  source: "config" | "registered";
  lastHeartbeatMs: number;
  healthy: boolean;
  removed: boolean;
  probing: boolean;
  activePrefillTokens: number;
  activeDecodeTokens: number;
  /** Decode calls in flight on it (the autoscaler's decode sequences, demand.ts). */
  decodeSequences: number;
  ingest: EventIngest;
  subscriber: ZmqSubscriber | null;
  lastSeq: bigint | null;
  /** While a KV-event replay runs: the live batches that came in meanwhile, applied after it (kv-feed.ts). */
  replayPending: Buffer[][] | null;
  /** Failed calls since the last success (outlier detection). */
  consecutiveFailures: number;
  /** Calls and failures over the last outlier.failure_rate_window_s. */
  outcomes: OutcomeWindow;
  /** Failed active health checks in a row. */
  failedChecks: number;
  /** Timed-out checks in a row while the proxy's own loop was saturated (health.ts: three count as one failure). */
  saturatedChecks: number;
  checking: boolean;
  /** Times ejected (the back-off multiplier), and until when the current ejection lasts. */
  ejections: number;
  ejectedUntilMs: number;
  backSinceMs: number;
  /**
   * Its compatibility group: the config's, the one its engine told (group_from_engine), or until that is read a group
   * of its own (paired with no other worker: local requests only).
   */
  group: string;
}

/** The longest wait between two tries at reading a worker's group from its engine. */
const MAX_GROUP_RETRY_MS = 30_000;

/** The longest an ejection lasts (Envoy's max_ejection_time default). */
const MAX_EJECTION_MS = 300_000;
/** A worker in rotation this long without ejection starts its back-off afresh. */
const EJECTION_MEMORY_MS = 60_000;

export type EjectionCause = "refused" | "consecutive_failures" | "failure_rate" | "health_check";

/** Buckets of a failure-rate window: the window slides in steps of window / WINDOW_BUCKETS. */
const WINDOW_BUCKETS = 10;

/** Calls that succeeded and failed over a sliding window, in a ring of buckets (old buckets are reused). */
export class OutcomeWindow {
  private readonly ok = new Uint32Array(WINDOW_BUCKETS);
  private readonly failed = new Uint32Array(WINDOW_BUCKETS);
  /** The bucket number (time / bucketMs) each slot holds. */
  private readonly epoch = new Float64Array(WINDOW_BUCKETS).fill(-Infinity);
  private readonly bucketMs: number;

  constructor(windowMs: number) {
    this.bucketMs = Math.max(1, windowMs / WINDOW_BUCKETS);
  }

  note(nowMs: number, failed: boolean): void {
    const e = Math.floor(nowMs / this.bucketMs);
    const slot = e % WINDOW_BUCKETS;
    if (this.epoch[slot] !== e) {
      this.epoch[slot] = e;
      this.ok[slot] = 0;
      this.failed[slot] = 0;
    }
    if (failed) this.failed[slot]!++;
    else this.ok[slot]!++;
  }

  /** Calls and failures in the buckets of the last window. */
  totals(nowMs: number): { calls: number; failures: number } {
    const e = Math.floor(nowMs / this.bucketMs);
    let calls = 0;
    let failures = 0;
    for (let i = 0; i < WINDOW_BUCKETS; i++) {
      if (this.epoch[i]! <= e - WINDOW_BUCKETS) continue;
      calls += this.ok[i]! + this.failed[i]!;
      failures += this.failed[i]!;
    }
    return { calls, failures };
  }

  clear(): void {
    this.epoch.fill(-Infinity);
  }
}

/** What follows a worker's arrival and departure (kv-feed.ts: its KV-event subscription). */
export interface WorkerSubscriptions {
  subscribe(w: WorkerState): Promise<void>;
  unsubscribe(w: WorkerState): void;
  /** The worker came back into rotation with an empty index: fill it again from what its engine still buffers. */
  resync(w: WorkerState): void;
  close(): void;
}

export type LoadField = "activePrefillTokens" | "activeDecodeTokens";

export class WorkerRegistry {
  private readonly workers = new Map<string, WorkerState>();
  private readonly root: Hash64;
  /** Remote prefills under way (the router's prefill-queue signal). */
  prefillsInFlight = 0;
  /** Told when a worker leaves rotation (remote-path.ts cuts the calls still waiting for it). */
  onEject: (id: string, cause: EjectionCause) => void = () => undefined;
  private closed = false;

  constructor(
    private readonly config: ServeConfig,
    private readonly router: Router,
    private readonly kv: WorkerSubscriptions,
    private readonly metrics: ProxyMetrics,
    private readonly log: Logger,
  ) {
    this.root = rootHash(config.model);
    scrapedGauge(
      metrics.registry,
      "dolphin_worker_group",
      "Each worker's compatibility group (1)",
      ["group", "worker"],
      () => this.all().map((w) => [{ group: w.group, worker: w.spec.id }, 1] as const),
    );
  }

  get size(): number {
    return this.workers.size;
  }

  get(id: string): WorkerState | undefined {
    return this.workers.get(id);
  }

  all(): WorkerState[] {
    return [...this.workers.values()];
  }

  /**
   * The worker to tokenize a prompt on (precise mode): the healthy worker of any role with the least of the proxy's
   * work on it (the prefill and decode tokens it holds), the first of those from `turn` on at a tie. Every worker of a
   * P/D cluster serves the same model and tokenizer; a decode engine's API server is the busy one (it streams every
   * answer), so an idle prefill engine's takes /tokenize off it.
   */
  tokenizer(turn: number): WorkerState | null {
    const all = this.all();
    let best: WorkerState | null = null;
    let bestLoad = Infinity;
    for (let k = 0; k < all.length; k++) {
      const w = all[(turn + k) % all.length]!;
      if (!w.healthy) continue;
      const load = w.activePrefillTokens + w.activeDecodeTokens;
      if (load < bestLoad) [best, bestLoad] = [w, load];
    }
    return best;
  }

  healthyDecodeWorkers(): WorkerState[] {
    return this.all().filter((w) => w.healthy && w.spec.role !== "prefill");
  }

  add(spec: WorkerConfig, source: WorkerState["source"]): WorkerState {
    const w: WorkerState = {
      spec,
      source,
      lastHeartbeatMs: Date.now(),
      healthy: true,
      removed: false,
      probing: false,
      activePrefillTokens: 0,
      activeDecodeTokens: 0,
      decodeSequences: 0,
      ingest: new EventIngest(this.config.block_size, this.root, this.config.capacity_blocks * 2),
      subscriber: null,
      lastSeq: null,
      replayPending: null,
      consecutiveFailures: 0,
      outcomes: new OutcomeWindow(this.config.outlier.failure_rate_window_s * 1000),
      failedChecks: 0,
      saturatedChecks: 0,
      checking: false,
      ejections: 0,
      ejectedUntilMs: 0,
      backSinceMs: 0,
      group: "",
    };
    const fromEngine = spec.group === undefined && this.config.group_from_engine;
    w.group = spec.group ?? (fromEngine ? `(unread) ${spec.id}` : "");
    this.router.addWorker({ id: spec.id, role: spec.role, group: w.group });
    this.workers.set(spec.id, w);
    if (fromEngine) void this.readGroup(w, 0);
    void this.kv.subscribe(w);
    return w;
  }

  drop(w: WorkerState, why: string): void {
    if (w.healthy) this.router.removeWorker(w.spec.id);
    w.healthy = false;
    w.removed = true;
    this.kv.unsubscribe(w);
    this.workers.delete(w.spec.id);
    this.log.log("warn", "worker removed", { worker: w.spec.id, why });
  }

  /** Out of rotation after a failure; the health probe puts it back when /health answers (after the back-off). */
  markDown(w: WorkerState, why: string, cause: EjectionCause = "consecutive_failures"): void {
    if (!w.healthy || w.removed) return;
    const now = Date.now();
    if (now - w.backSinceMs > EJECTION_MEMORY_MS) w.ejections = 0;
    w.ejections++;
    w.ejectedUntilMs = now + Math.min(MAX_EJECTION_MS, this.config.outlier.base_ejection_s * 1000 * w.ejections);
    w.healthy = false;
    w.consecutiveFailures = 0;
    w.outcomes.clear();
    w.failedChecks = 0;
    w.saturatedChecks = 0;
    w.ingest.reset();
    w.lastSeq = null;
    this.router.removeWorker(w.spec.id);
    this.metrics.workerDown.inc({ worker: w.spec.id });
    this.metrics.ejections.inc({ cause });
    this.log.log("warn", "worker out of rotation", {
      worker: w.spec.id,
      cause,
      why,
      back_off_ms: w.ejectedUntilMs - now,
    });
    this.onEject(w.spec.id, cause);
  }

  markUp(w: WorkerState): void {
    if (w.healthy || w.removed || this.closed) return;
    this.router.addWorker({ id: w.spec.id, role: w.spec.role, group: w.group });
    w.healthy = true;
    w.backSinceMs = Date.now();
    w.consecutiveFailures = 0;
    w.outcomes.clear();
    w.failedChecks = 0;
    w.saturatedChecks = 0;
    this.pushLoad(w);
    this.kv.resync(w);
    this.metrics.workerUp.inc({ worker: w.spec.id });
    this.log.log("info", "worker back in rotation", { worker: w.spec.id });
  }

  /**
   * A worker call that failed: count it, and eject the worker when its connection is refused, after
   * outlier.consecutive_failures failures in a row, or when more than outlier.failure_rate_threshold of its calls in
   * the window failed (with at least failure_rate_min_requests calls). A client's mistake (a 4xx) or a client leaving
   * is no failure.
   */
  upstreamFailed(w: WorkerState | undefined, stage: string, e: UpstreamError): void {
    if (!w || e.kind === "aborted" || e.clientMistake) return;
    this.metrics.upstreamErrors.inc({ kind: e.kind, stage, worker: w.spec.id });
    // the proxy out of descriptors: not the worker's failure
    if (!w.healthy || e.kind === "local") return;
    if (e.refused) {
      this.markDown(w, `${stage}: ${e.message}`, "refused");
      return;
    }
    // A timeout, connect or response, is what a loaded worker does: the active health checks judge those. Neither a
    // failure nor a success in the window.
    if (e.kind === "timeout" || e.kind === "connect") return;
    const o = this.config.outlier;
    const now = Date.now();
    w.consecutiveFailures++;
    w.outcomes.note(now, true);
    let cause: EjectionCause;
    let why: string;
    const { calls, failures } = w.outcomes.totals(now);
    if (w.consecutiveFailures >= o.consecutive_failures) {
      cause = "consecutive_failures";
      why = `${w.consecutiveFailures} failures in a row`;
    } else if (calls >= o.failure_rate_min_requests && failures > o.failure_rate_threshold * calls) {
      cause = "failure_rate";
      why = `${failures} of its last ${calls} calls failed (over ${o.failure_rate_window_s} s)`;
    } else return;
    if (!this.mayEject(w)) {
      this.metrics.ejectionsSkipped.inc();
      return;
    }
    this.markDown(w, `${stage}: ${why}, the last: ${e.message}`, cause);
  }

  /** A worker call that succeeded: its run of failures is over, and the window counts a success. */
  upstreamSucceeded(w: WorkerState | undefined): void {
    if (!w) return;
    w.consecutiveFailures = 0;
    w.outcomes.note(Date.now(), false);
  }

  /** Outlier ejection keeps at least 1 − max_ejected_share of a role in rotation (but may always eject one). */
  private mayEject(w: WorkerState): boolean {
    const role = this.all().filter((o) => o.spec.role === w.spec.role);
    const out = role.filter((o) => !o.healthy).length;
    return out === 0 || out + 1 <= this.config.outlier.max_ejected_share * role.length;
  }

  /**
   * Healthy decode workers other than `except`, least loaded first (a retry's destination: it prefills locally, any
   * group will do); with `sameGroup`, only those of its compatibility group (a spill before the KV handoff).
   */
  otherDecodeWorkers(except: string, sameGroup = false): WorkerState[] {
    const group = this.workers.get(except)?.group;
    return this.healthyDecodeWorkers()
      .filter((w) => w.spec.id !== except && (!sameGroup || w.group === group))
      .sort((a, b) => a.activePrefillTokens + a.activeDecodeTokens - (b.activePrefillTokens + b.activeDecodeTokens));
  }

  /** Healthy prefill workers other than `except` in its compatibility group, least loaded first. */
  otherPrefillWorkers(except: string): WorkerState[] {
    const group = this.workers.get(except)?.group;
    return this.all()
      .filter((w) => w.healthy && w.spec.role !== "decode" && w.spec.id !== except && w.group === group)
      .sort((a, b) => a.activePrefillTokens - b.activePrefillTokens);
  }

  /**
   * Adds tokens to a worker's load until the returned function is called (once), at the latest when the request's
   * response closes. Nothing is held for a request already over. A prefill hold ends the request's wait for its
   * prefill (demand.ts); a decode hold counts a decode sequence.
   */
  hold(
    ctx: Pick<RequestContext, "releases" | "closed" | "prefillStarted">,
    id: string,
    field: LoadField,
    tokens: number,
  ): () => void {
    if (field === "activePrefillTokens") ctx.prefillStarted?.();
    const w = this.workers.get(id);
    if (!w || tokens <= 0 || ctx.closed) return () => undefined;
    const sequences = field === "activeDecodeTokens" ? 1 : 0;
    w[field] += tokens;
    w.decodeSequences += sequences;
    this.pushLoad(w);
    let held = true;
    const release = (): void => {
      if (!held) return;
      held = false;
      w[field] = Math.max(0, w[field] - tokens);
      w.decodeSequences -= sequences;
      this.pushLoad(w);
    };
    ctx.releases.push(release);
    return release;
  }

  private pushLoad(w: WorkerState): void {
    if (w.healthy)
      this.router.setLoad(w.spec.id, {
        activePrefillTokens: w.activePrefillTokens,
        activeDecodeTokens: w.activeDecodeTokens,
      });
  }

  /**
   * group_from_engine: the worker's group as its engine tells it, tried again with a growing wait while the engine
   * does not answer (until then it is paired with no other worker).
   */
  private async readGroup(w: WorkerState, attempt: number): Promise<void> {
    const key = this.config.auth.worker_api_key;
    try {
      const group = await engineGroup(w.spec.url, this.config.timeouts.connect_ms, key ? `Bearer ${key}` : null);
      if (w.removed || this.closed) return;
      w.group = group;
      if (w.healthy) this.router.setWorkerGroup(w.spec.id, group);
      this.log.log("info", "worker group read from its engine", { worker: w.spec.id, group });
    } catch (e) {
      if (w.removed || this.closed) return;
      const waitMs = Math.min(MAX_GROUP_RETRY_MS, 1000 * 2 ** attempt);
      this.log.log("warn", "cannot read the worker's group from its engine, trying again", {
        worker: w.spec.id,
        error: (e as Error).message,
        retry_ms: waitMs,
      });
      setTimeout(() => void this.readGroup(w, attempt + 1), waitMs).unref();
    }
  }

  /** No worker comes back into rotation after this; every subscription ends. */
  close(): void {
    this.closed = true;
    this.kv.close();
    for (const w of this.workers.values()) this.kv.unsubscribe(w);
  }
}
