// The proxy's metrics (docs/serving.md lists them). Counters and the duration histogram are updated as requests
// pass; the gauges are read from the proxy's state when /metrics is scraped.
//
// Label objects are written with their keys in alphabetical order everywhere: prom-client prints a series' labels in
// the order of the first object it saw, and the proxy's output has always had them sorted.

import type { DriftClusterStatus } from "../../router/drift-guard.js";
import type { MixStatus } from "../../router/mix-guard.js";
import { Counter, HotCounter, LeLastHistogram, Registry, scrapedGauge } from "../prometheus.js";

export const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

/** What the gauges read at scrape time. */
export interface ProxyGauges {
  inflight: number;
  queued: number;
  sessions: number;
  workers: Array<{ id: string; role: string; healthy: boolean; indexBlocks: number; inflight: number; queued: number }>;
  table: { kind: string; checksum: string };
}

export class ProxyMetrics {
  readonly registry = new Registry();
  private readonly counter = (name: string, help: string, labelNames: string[] = []): Counter =>
    new Counter({ name, help, labelNames, registers: [this.registry] });
  /** The counters every inference request bumps (prometheus.ts: HotCounter). */
  private readonly hot = (name: string, help: string, labelNames: string[]): HotCounter =>
    new HotCounter(this.registry, name, help, labelNames);

  readonly requests = this.hot(
    "dolphin_requests_total",
    "Requests answered, by endpoint, status code and route (local, remote, fallback, none)",
    ["endpoint", "route", "status"],
  );
  readonly requestDuration = new LeLastHistogram({
    name: "dolphin_request_duration_seconds",
    help: "Time from request to the last byte of the answer, inference endpoints",
    labelNames: ["endpoint"],
    buckets: DURATION_BUCKETS,
    registers: [this.registry],
  });
  readonly decisions = this.hot("dolphin_decisions_total", "Routing decisions by path and reason", ["path", "reason"]);
  readonly prefillFailures = this.counter(
    "dolphin_prefill_failures_total",
    "Remote prefills that failed before the KV handoff, by kind",
    ["kind"],
  );
  readonly fallbacks = this.counter(
    "dolphin_fallbacks_total",
    "Remote prefills replaced by local prefill on the decode worker",
  );
  readonly upstreamErrors = this.counter(
    "dolphin_upstream_errors_total",
    "Failed worker calls, by worker, stage and kind",
    ["kind", "stage", "worker"],
  );
  readonly streamErrors = this.counter(
    "dolphin_stream_errors_total",
    "Streams cut mid-way by the decode worker (the client got an SSE error event)",
    ["kind"],
  );
  readonly workerDown = this.counter("dolphin_worker_down_total", "Workers taken out of rotation after a failure", [
    "worker",
  ]);
  readonly workerUp = this.counter("dolphin_worker_up_total", "Workers put back after their /health answered", [
    "worker",
  ]);
  readonly workerExpired = this.counter(
    "dolphin_worker_expired_total",
    "Registered workers removed after missing heartbeats",
  );
  readonly tokenizeFailures = this.counter(
    "dolphin_tokenize_failures_total",
    "Precise mode: /tokenize failures (the request was routed on its text)",
    ["worker"],
  );
  readonly kvEvents = this.counter(
    "dolphin_kv_events_total",
    "KV events applied to the index, by worker, source and kind (stored_blocks of which stored_lower_tier_blocks in a lower tier such as CPU; untiered_blocks: a medium with no tier, not indexed)",
    ["kind", "source", "worker"],
  );
  readonly kvEventErrors = this.counter("dolphin_kv_event_errors_total", "KV event batches that did not decode", [
    "worker",
  ]);
  readonly kvBlocksUnmapped = this.counter(
    "dolphin_kv_blocks_unmapped_total",
    "Stored blocks skipped: parent unknown to the index, a different block size, or a lower-tier block without token ids whose engine hash the router never saw",
    ["worker"],
  );
  readonly kvSequenceGaps = this.counter(
    "dolphin_kv_sequence_gaps_total",
    "ZMQ event batches missed (sequence gaps), by worker",
    ["worker"],
  );
  readonly kvReplays = this.counter(
    "dolphin_kv_replays_total",
    "Replays asked of a worker's KV-event replay socket, by reason (subscribe, gap, restart, back) and outcome (ok, partial: the oldest batches asked for were no longer buffered, failed)",
    ["worker", "reason", "outcome"],
  );
  readonly kvReplayedBatches = this.counter(
    "dolphin_kv_replayed_batches_total",
    "KV event batches received by replay, by worker",
    ["worker"],
  );
  readonly cacheEvidenceBlocks = this.counter(
    "dolphin_cache_evidence_blocks_total",
    "Precise mode: blocks stored in a worker's index because its answer reported more cached tokens than the index predicted (events it never saw)",
    ["worker"],
  );
  readonly kvIndexResets = this.counter(
    "dolphin_kv_index_resets_total",
    "Workers' indexes reset because KV events were lost for good, by cause (restart: the engine's sequence started over; gap_unreplayable: batches missed without a replay socket; replay_partial: the oldest missed batches no longer buffered; replay_failed)",
    ["cause", "worker"],
  );
  readonly kvEngineRestarts = this.counter(
    "dolphin_kv_engine_restarts_total",
    "Workers whose event sequence started over (an engine restart): their index was reset",
    ["worker"],
  );
  readonly shed = this.counter(
    "dolphin_shed_total",
    "Inference requests answered 503 by admission control: queue_full (at once) or queue_timeout (after waiting); worker_queue_full, worker_queue_timeout: the same for one worker's places; file_descriptors: a worker call the proxy had no descriptor for",
    ["reason"],
  );
  readonly workerFull = this.counter(
    "dolphin_worker_full_total",
    "Requests whose chosen worker was at admission.max_inflight_per_worker, by stage and outcome (spilled to another worker, local prefill, queued, shed)",
    ["outcome", "stage"],
  );
  readonly retries = this.counter(
    "dolphin_retries_total",
    "Worker calls retried on another worker, by stage (decode, prefill)",
    ["stage"],
  );
  readonly retriesSkipped = this.counter(
    "dolphin_retries_skipped_total",
    "Retries not made: the retry budget was spent or no other worker was in rotation",
    ["reason", "stage"],
  );
  readonly ejections = this.counter(
    "dolphin_ejections_total",
    "Workers taken out of rotation, by cause (refused, consecutive_failures, failure_rate, health_check)",
    ["cause"],
  );
  readonly ejectionsSkipped = this.counter(
    "dolphin_ejections_skipped_total",
    "Ejections not made because outlier.max_ejected_share of the role was out already",
  );
  readonly tableSwaps = this.counter(
    "dolphin_table_swaps_total",
    "Routing tables swapped in via PUT /admin/table or a read of the changed table file (table_reload_s)",
  );
  readonly indexClears = this.counter(
    "dolphin_index_clears_total",
    "Approximate mode: periodic clears of the whole index",
  );
  readonly promptTokens = this.hot("dolphin_prompt_tokens_total", "Prompt tokens routed (isl), by path", ["path"]);
  readonly cachePredictedTokens = this.hot(
    "dolphin_cache_predicted_tokens_total",
    "Predicted cached prompt tokens on the worker that prefills (matched blocks × block tokens), by path",
    ["path"],
  );
  readonly cacheComparedRequests = this.hot(
    "dolphin_cache_compared_requests_total",
    "Requests whose worker reported usage.prompt_tokens_details.cached_tokens, by path",
    ["path"],
  );
  readonly cacheComparedPredictedTokens = this.hot(
    "dolphin_cache_compared_predicted_tokens_total",
    "Predicted cached tokens of the requests in dolphin_cache_compared_requests_total",
    ["path"],
  );
  readonly cacheReportedTokens = this.hot(
    "dolphin_cache_reported_tokens_total",
    "Cached tokens the workers reported for the same requests",
    ["path"],
  );

  readonly driftReverts = this.counter(
    "dolphin_drift_reverts_total",
    "Drift guard: learned clusters reverted to the table's fallback rule (their learned arm lost to the control)",
    ["cluster"],
  );
  readonly driftReenables = this.counter(
    "dolphin_drift_reenables_total",
    "Drift guard: reverted clusters given back their learned value after a clean probation",
    ["cluster"],
  );
  readonly driftHandovers = this.counter(
    "dolphin_drift_handovers_total",
    "Drift guard: learned clusters handed over to the fallback rule by a mix-shift alarm",
    ["cluster"],
  );
  readonly driftHandbacks = this.counter(
    "dolphin_drift_handbacks_total",
    "Drift guard: handed-over clusters given back their learned value (its probe did at least as well as the rule)",
    ["cluster"],
  );
  readonly mixShiftAlarms = this.counter(
    "dolphin_mix_shift_alarms_total",
    "Mix-shift guard: alarms raised (the recent clusters' shares departed from the training shares)",
  );
  readonly driftUnjudged = this.counter(
    "dolphin_drift_unjudged_total",
    "Drift guard: armed requests left out of the test (output length unknown: a stream without usage)",
  );

  constructor(read: () => ProxyGauges) {
    const r = this.registry;
    scrapedGauge(r, "dolphin_inflight_requests", "Inference requests in flight", [], () => [[{}, read().inflight]]);
    scrapedGauge(r, "dolphin_queued_requests", "Inference requests waiting for admission", [], () => [
      [{}, read().queued],
    ]);
    scrapedGauge(r, "dolphin_workers", "Workers by role and state", ["role", "state"], () => {
      const workers = read().workers;
      return ["prefill", "decode", "both"].flatMap((role) =>
        ["healthy", "down"].map(
          (state) =>
            [
              { role, state },
              workers.filter((w) => w.role === role && w.healthy === (state === "healthy")).length,
            ] as const,
        ),
      );
    });
    scrapedGauge(r, "dolphin_index_blocks", "Blocks in the router's index, by worker", ["worker"], () =>
      read()
        .workers.filter((w) => w.healthy)
        .map((w) => [{ worker: w.id }, w.indexBlocks] as const),
    );
    scrapedGauge(r, "dolphin_worker_inflight_requests", "Requests holding a place on each worker", ["worker"], () =>
      read().workers.map((w) => [{ worker: w.id }, w.inflight] as const),
    );
    scrapedGauge(r, "dolphin_worker_queued_requests", "Requests waiting for a place on each worker", ["worker"], () =>
      read().workers.map((w) => [{ worker: w.id }, w.queued] as const),
    );
    scrapedGauge(r, "dolphin_sessions", "Conversations tracked", [], () => [[{}, read().sessions]]);
    scrapedGauge(r, "dolphin_table_info", "The routing table in use", ["checksum", "kind"], () => {
      const { checksum, kind } = read().table;
      return [[{ checksum, kind }, 1]];
    });
  }

  /** The drift guard's gauges, read from its per-cluster status when scraped (learned tables only). */
  watchDrift(status: () => DriftClusterStatus[], mix: () => MixStatus | null): void {
    const r = this.registry;
    scrapedGauge(
      r,
      "dolphin_mix_shift",
      "Mix-shift guard: PSI of the recent window's cluster shares against the table's training shares (NaN: no full window, or no guard)",
      [],
      () => [[{}, mix()?.psi ?? NaN] as const],
    );
    scrapedGauge(r, "dolphin_mix_shift_alarm", "Mix-shift guard: 1 while its alarm is raised", [], () => [
      [{}, mix()?.alarm ? 1 : 0] as const,
    ]);
    scrapedGauge(
      r,
      "dolphin_drift_handed_over",
      "Drift guard: 1 while a learned cluster is handed over to the fallback rule after a mix-shift alarm",
      ["cluster"],
      () =>
        status()
          .filter((c) => c.value !== "rule")
          .map((c) => [{ cluster: String(c.cluster) }, c.handedOver ? 1 : 0] as const),
    );
    const learnedClusters = (): DriftClusterStatus[] => status().filter((c) => c.value !== "rule");
    scrapedGauge(
      r,
      "dolphin_drift_attainment",
      "Drift guard: SLO attainment in the window, per learned cluster and arm (learned value, control = fallback rule)",
      ["arm", "cluster"],
      () =>
        learnedClusters().flatMap((c) =>
          (["learned", "control"] as const).flatMap((a) =>
            c[a].attainment === null ? [] : [[{ arm: a, cluster: String(c.cluster) }, c[a].attainment!] as const],
          ),
        ),
    );
    scrapedGauge(
      r,
      "dolphin_drift_judged_requests",
      "Drift guard: requests judged against the SLO in the window, per learned cluster and arm",
      ["arm", "cluster"],
      () =>
        learnedClusters().flatMap((c) =>
          (["learned", "control"] as const).map(
            (a) => [{ arm: a, cluster: String(c.cluster) }, c[a].requests] as const,
          ),
        ),
    );
    scrapedGauge(
      r,
      "dolphin_drift_control_lead_z",
      "Drift guard: the control's attainment lead over the learned arm as a pooled two-proportion z, per cluster",
      ["cluster"],
      () => learnedClusters().map((c) => [{ cluster: String(c.cluster) }, c.z] as const),
    );
    scrapedGauge(
      r,
      "dolphin_drift_reverted",
      "Drift guard: 1 while a learned cluster is routed by the fallback rule after a revert",
      ["cluster"],
      () => learnedClusters().map((c) => [{ cluster: String(c.cluster) }, c.reverted ? 1 : 0] as const),
    );
    scrapedGauge(
      r,
      "dolphin_drift_rule_routed_requests",
      "Drift guard: requests of a learned cluster it routed by the fallback rule since the table was loaded, by cause",
      ["cause", "cluster"],
      () =>
        learnedClusters().flatMap((c) => [
          [{ cause: "control", cluster: String(c.cluster) }, c.controlRouted] as const,
          [{ cause: "reverted", cluster: String(c.cluster) }, c.revertedRouted] as const,
          [{ cause: "handed-over", cluster: String(c.cluster) }, c.handedOverRouted] as const,
        ]),
    );
    scrapedGauge(
      r,
      "dolphin_drift_ood_share",
      "Drift guard: share of the cluster's requests in the window beyond its out-of-distribution bound",
      ["cluster"],
      () => status().map((c) => [{ cluster: String(c.cluster) }, c.oodShare] as const),
    );
  }
}
