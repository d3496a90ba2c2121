// The `dolphin serve` configuration: a JSON file, parsed and validated once (docs/serving.md). Every field has a
// default except `model`; every error names the field (`config: timeouts.connect_ms: expected …`), and a key this
// build does not know is rejected, so a misspelt field never goes unnoticed. Here: the config's shape, its defaults
// and the whole config's validation; one field's readers are config-values.ts, a worker entry config-workers.ts,
// reading the file and its table from disk config-files.ts.

import { existsSync } from "node:fs";
import { isAbsolute, resolve } from "node:path";
import { DRIFT_DEFAULTS } from "../router/drift-guard.js";
import { MIX_DEFAULTS } from "../router/mix-guard.js";
import { POLICY_KINDS } from "../table/table.js";
import {
  boolean,
  ConfigError,
  fail,
  number,
  numbersIn,
  object,
  oneOf,
  onlyKeys,
  section,
  string,
  tierWeights,
} from "./config-values.js";
import type { TierName } from "../router/types.js";
import { expandRanks, parseWorker, type WorkerConfig } from "./config-workers.js";
import { AUTH_DEFAULTS, parseAuth, type AuthConfig } from "./config-auth.js";

export type ServeMode = "precise" | "approximate";
export type LogLevel = "debug" | "info" | "warn" | "error" | "silent";

export interface ServeConfig {
  listen: { host: string; port: number };
  /** The served model name (the `model` clients send) and the root of the block-hash chain. */
  model: string;
  /** A table file (msgpack; a relative path is resolved against the config file's directory) or a rule kind name. */
  table: string;
  /** A table file is read again when it changes, checked this often (0: never; proxy/table-watch.ts). */
  table_reload_s: number;
  mode: ServeMode;
  /** Tokens per block: must equal the engines' --block-size in precise mode. */
  block_size: number;
  /** Index capacity per worker, in blocks (LRU beyond), whatever tier holds them. */
  capacity_blocks: number;
  /** What a block held only in a lower cache tier (CPU) counts for against a device hit, by tier (config-values.ts). */
  tiers: Record<TierName, number>;
  /** Approximate mode: every worker's index is cleared once per this period. */
  approximate_ttl_s: number;
  /** Most workers registered at once (sizes the core's index pool: capacity_blocks × max_workers). */
  max_workers: number;
  workers: WorkerConfig[];
  /** A worker without a `group` gets the one its engine tells (proxy/engine-group.ts) when it registers. */
  group_from_engine: boolean;
  /** A prefill failure before the KV handoff falls back to local prefill on the decode worker. */
  fallback_local: boolean;
  /**
   * A streamed request without stream_options.include_usage is sent to its decode worker asking for usage (the drift
   * guard's output tokens, the cache check's cached tokens), and the usage event is taken out of the client's stream.
   * Off for a backend that rejects stream_options: such streams go unjudged.
   */
  ask_stream_usage: boolean;
  /**
   * Precise mode: when an answer reports more cached prompt tokens than the index predicted for the worker that
   * prefilled, those blocks are stored in its index (events the proxy never saw: proxy/cache-evidence.ts).
   */
  cache_evidence: boolean;
  /** Bearer token of the /admin endpoints; null disables them (403). */
  admin_token: string | null;
  /** Client API keys and their limits (config-auth.ts); keys_file null: anyone may call. */
  auth: AuthConfig;
  /**
   * headers_ms: a client's request headers; body_ms: the gap between two chunks of its body (408 beyond either);
   * keep_alive_ms: how long an idle client connection is kept open.
   */
  timeouts: {
    connect_ms: number;
    request_ms: number;
    tokenize_ms: number;
    headers_ms: number;
    body_ms: number;
    keep_alive_ms: number;
  };
  heartbeat: { interval_s: number; expiry_s: number };
  /** probe_interval_s: probes of workers out of rotation; check_interval_s, check_timeout_ms, unhealthy_after: active checks of those in it. */
  health: { probe_interval_s: number; check_interval_s: number; check_timeout_ms: number; unhealthy_after: number };
  /**
   * Envoy-style outlier detection (registry.ts): consecutive failures, or a failure rate above
   * failure_rate_threshold over the last failure_rate_window_s with at least failure_rate_min_requests calls.
   */
  outlier: {
    consecutive_failures: number;
    max_ejected_share: number;
    base_ejection_s: number;
    failure_rate_threshold: number;
    failure_rate_min_requests: number;
    failure_rate_window_s: number;
  };
  /**
   * Load shedding (admission.ts): requests past max_inflight wait in a queue of max_queued, at most queue_timeout_ms.
   * Per worker (worker-admission.ts): at most max_inflight_per_worker requests bound for one worker, max_queued_per_worker
   * waiting for it.
   */
  admission: {
    max_inflight: number;
    max_queued: number;
    queue_timeout_ms: number;
    retry_after_s: number;
    backlog: number;
    max_inflight_per_worker: number;
    max_queued_per_worker: number;
    /** Smoothed event-loop lag above which new requests are shed (more the further above); 0: never. */
    max_event_loop_lag_ms: number;
    /**
     * Event-loop utilization (0–1) a share of new requests is shed to bring the loop back to, once it has been
     * saturated (no idle time) for queue_timeout_ms; 0: never.
     */
    max_event_loop_utilization: number;
    /** Client connections open at once; past it a connection's request gets 503 and it is closed. 0: from the fd limit. */
    max_connections: number;
  };
  /** A failed worker call is retried once on another worker while retries in flight stay under this budget. */
  retries: { budget_share: number; min_concurrent: number };
  sessions: { idle_s: number; max: number };
  max_body_bytes: number;
  /** osl_hat for tables that use it but carry no output-length model (the request's max_tokens when smaller). */
  default_osl_hat: number;
  /**
   * The engines' --max-model-len, or null (unknown): a request whose max_tokens exceeds it is answered 400 by the
   * proxy, as vLLM would, before any worker call; on the remote path vLLM's decode engine refuses it only after the
   * prefill engine has done the prefill (and holds its KV blocks for the handoff's lease).
   */
  max_model_len: number | null;
  /** Recent decisions kept for GET /admin/decisions. */
  decisions_kept: number;
  log_level: LogLevel;
  /** The serving drift guard of learned tables (src/router/drift-guard.ts, docs/serving.md "Drift guard"). */
  drift: {
    enabled: boolean;
    control_share: number;
    window_s: number;
    min_samples: number;
    z_revert: number;
    min_gap: number;
    revert_after_s: number;
    reenable_after_s: number;
    seed: number;
    /** The mix-shift guard (src/router/mix-guard.ts): on for tables with cluster_share. */
    mix_enabled: boolean;
    mix_window: number;
    mix_psi_alarm: number;
    mix_psi_clear: number;
  };
}

/** What a config file may leave out (every field but `model`, and any field of a section). */
export type ServeConfigInput = { model: string } & {
  [K in keyof ServeConfig]?: ServeConfig[K] extends unknown[]
    ? ServeConfig[K]
    : ServeConfig[K] extends object
      ? Partial<ServeConfig[K]>
      : ServeConfig[K];
};

export const DEFAULTS = {
  listen: { host: "127.0.0.1", port: 8000 },
  table: "dynamo-isl",
  table_reload_s: 0,
  mode: "approximate" as ServeMode,
  block_size: 16,
  capacity_blocks: 31_250,
  approximate_ttl_s: 300,
  max_workers: 32,
  group_from_engine: false,
  fallback_local: true,
  ask_stream_usage: false,
  cache_evidence: true,
  admin_token: null,
  auth: AUTH_DEFAULTS,
  timeouts: {
    connect_ms: 5_000,
    request_ms: 600_000,
    tokenize_ms: 10_000,
    headers_ms: 10_000,
    body_ms: 30_000,
    // longer than clients keep an idle pooled connection (Node's agent 5 s, httpx 5 s, Go 90 s is the exception), so
    // the client closes it first and never sends a request on a connection the proxy is closing (a reset)
    keep_alive_ms: 65_000,
  },
  heartbeat: { interval_s: 10, expiry_s: 30 },
  health: { probe_interval_s: 5, check_interval_s: 1, check_timeout_ms: 1_000, unhealthy_after: 2 },
  outlier: {
    consecutive_failures: 5,
    max_ejected_share: 0.5,
    base_ejection_s: 1,
    failure_rate_threshold: 0.5,
    failure_rate_min_requests: 20,
    failure_rate_window_s: 10,
  },
  admission: {
    max_inflight: 1_024,
    max_queued: 2_048,
    queue_timeout_ms: 5_000,
    retry_after_s: 1,
    backlog: 4_096,
    // twice vLLM's default max_num_seqs (256): a full batch running and as many waiting in the engine
    max_inflight_per_worker: 512,
    max_queued_per_worker: 512,
    max_event_loop_lag_ms: 500,
    // a loop busy 90 % of the time still reads what arrives within a window; past it, the kernel's queues grow unseen
    max_event_loop_utilization: 0.9,
    max_connections: 0,
  },
  retries: { budget_share: 0.2, min_concurrent: 10 },
  sessions: { idle_s: 3_600, max: 100_000 },
  max_body_bytes: 8 << 20,
  default_osl_hat: 256,
  max_model_len: null,
  decisions_kept: 1_000,
  log_level: "info" as LogLevel,
  drift: {
    enabled: true,
    control_share: DRIFT_DEFAULTS.controlShare,
    window_s: DRIFT_DEFAULTS.windowS,
    min_samples: DRIFT_DEFAULTS.minSamples,
    z_revert: DRIFT_DEFAULTS.zRevert,
    min_gap: DRIFT_DEFAULTS.minGap,
    revert_after_s: DRIFT_DEFAULTS.revertAfterS,
    reenable_after_s: DRIFT_DEFAULTS.reenableAfterS,
    seed: DRIFT_DEFAULTS.seed,
    mix_enabled: true,
    mix_window: MIX_DEFAULTS.window,
    mix_psi_alarm: MIX_DEFAULTS.psiAlarm,
    mix_psi_clear: MIX_DEFAULTS.psiClear,
  },
};

const TOP_KEYS = [
  "listen",
  "model",
  "table",
  "table_reload_s",
  "mode",
  "block_size",
  "capacity_blocks",
  "tiers",
  "approximate_ttl_s",
  "max_workers",
  "workers",
  "group_from_engine",
  "fallback_local",
  "ask_stream_usage",
  "cache_evidence",
  "admin_token",
  "auth",
  "timeouts",
  "heartbeat",
  "health",
  "outlier",
  "admission",
  "retries",
  "sessions",
  "max_body_bytes",
  "default_osl_hat",
  "max_model_len",
  "decisions_kept",
  "log_level",
  "drift",
];
const LOG_LEVELS: readonly LogLevel[] = ["debug", "info", "warn", "error", "silent"];
const MAX_INDEX_BLOCKS = 1 << 26;

/**
 * Validates a parsed config object and fills defaults. `baseDir` resolves a relative table path (the config
 * file's directory; default the working directory). Idempotent: a parsed config parses to itself.
 */
export function parseConfig(raw: unknown, baseDir = process.cwd()): ServeConfig {
  const o = object(raw, "(top level)");
  onlyKeys(o, "", TOP_KEYS);
  const listen = section(o["listen"], "listen", ["host", "port"]);
  const timeouts = section(o["timeouts"], "timeouts", [
    "connect_ms",
    "request_ms",
    "tokenize_ms",
    "headers_ms",
    "body_ms",
    "keep_alive_ms",
  ]);
  const heartbeat = section(o["heartbeat"], "heartbeat", ["interval_s", "expiry_s"]);
  const health = section(o["health"], "health", [
    "probe_interval_s",
    "check_interval_s",
    "check_timeout_ms",
    "unhealthy_after",
  ]);
  const outlier = section(o["outlier"], "outlier", [
    "consecutive_failures",
    "max_ejected_share",
    "base_ejection_s",
    "failure_rate_threshold",
    "failure_rate_min_requests",
    "failure_rate_window_s",
  ]);
  const admission = section(o["admission"], "admission", [
    "max_inflight",
    "max_queued",
    "queue_timeout_ms",
    "retry_after_s",
    "backlog",
    "max_inflight_per_worker",
    "max_queued_per_worker",
    "max_event_loop_lag_ms",
    "max_event_loop_utilization",
    "max_connections",
  ]);
  const retries = section(o["retries"], "retries", ["budget_share", "min_concurrent"]);
  const sessions = section(o["sessions"], "sessions", ["idle_s", "max"]);
  const drift = section(o["drift"], "drift", Object.keys(DEFAULTS.drift));
  const D = DEFAULTS;
  const listenNumber = numbersIn(listen, "listen", D.listen);
  const timeoutsNumber = numbersIn(timeouts, "timeouts", D.timeouts);
  const heartbeatNumber = numbersIn(heartbeat, "heartbeat", D.heartbeat);
  const healthNumber = numbersIn(health, "health", D.health);
  const outlierNumber = numbersIn(outlier, "outlier", D.outlier);
  const admissionNumber = numbersIn(admission, "admission", D.admission);
  const retriesNumber = numbersIn(retries, "retries", D.retries);
  const sessionsNumber = numbersIn(sessions, "sessions", D.sessions);
  const driftNumber = numbersIn(drift, "drift", D.drift);

  const config: ServeConfig = {
    listen: {
      host: string(listen["host"], "listen.host", D.listen.host),
      port: listenNumber("port", { min: 0, max: 65535, integer: true }),
    },
    model: string(o["model"], "model"),
    table: tableSpec(o["table"], baseDir),
    table_reload_s: number(o["table_reload_s"], "table_reload_s", D.table_reload_s, { min: 0, max: 3600 }),
    mode: oneOf(o["mode"], "mode", ["precise", "approximate"] as const, D.mode),
    block_size: number(o["block_size"], "block_size", D.block_size, { min: 1, max: 4096, integer: true }),
    capacity_blocks: number(o["capacity_blocks"], "capacity_blocks", D.capacity_blocks, { min: 1, integer: true }),
    tiers: tierWeights(o["tiers"], "tiers"),
    approximate_ttl_s: number(o["approximate_ttl_s"], "approximate_ttl_s", D.approximate_ttl_s, {
      min: 0,
      exclusiveMin: true,
    }),
    max_workers: number(o["max_workers"], "max_workers", D.max_workers, { min: 1, max: 16384, integer: true }),
    workers: [],
    group_from_engine: boolean(o["group_from_engine"], "group_from_engine", D.group_from_engine),
    fallback_local: boolean(o["fallback_local"], "fallback_local", D.fallback_local),
    ask_stream_usage: boolean(o["ask_stream_usage"], "ask_stream_usage", D.ask_stream_usage),
    cache_evidence: boolean(o["cache_evidence"], "cache_evidence", D.cache_evidence),
    admin_token:
      o["admin_token"] === undefined || o["admin_token"] === null ? null : string(o["admin_token"], "admin_token"),
    auth: parseAuth(o["auth"], baseDir),
    timeouts: {
      connect_ms: timeoutsNumber("connect_ms", { min: 1, integer: true }),
      request_ms: timeoutsNumber("request_ms", { min: 1, integer: true }),
      tokenize_ms: timeoutsNumber("tokenize_ms", { min: 1, integer: true }),
      headers_ms: timeoutsNumber("headers_ms", { min: 1, integer: true }),
      body_ms: timeoutsNumber("body_ms", { min: 1, integer: true }),
      keep_alive_ms: timeoutsNumber("keep_alive_ms", { min: 1, integer: true }),
    },
    heartbeat: {
      interval_s: heartbeatNumber("interval_s", { min: 0, exclusiveMin: true }),
      expiry_s: heartbeatNumber("expiry_s", { min: 0, exclusiveMin: true }),
    },
    health: {
      probe_interval_s: healthNumber("probe_interval_s", { min: 0, exclusiveMin: true }),
      check_interval_s: healthNumber("check_interval_s", { min: 0, exclusiveMin: true }),
      check_timeout_ms: healthNumber("check_timeout_ms", { min: 1, integer: true }),
      unhealthy_after: healthNumber("unhealthy_after", { min: 1, max: 1000, integer: true }),
    },
    outlier: {
      consecutive_failures: outlierNumber("consecutive_failures", { min: 1, max: 1000, integer: true }),
      max_ejected_share: outlierNumber("max_ejected_share", { min: 0, max: 1 }),
      base_ejection_s: outlierNumber("base_ejection_s", { min: 0 }),
      // 1 turns failure-rate ejection off (a rate never exceeds it)
      failure_rate_threshold: outlierNumber("failure_rate_threshold", { min: 0, max: 1 }),
      failure_rate_min_requests: outlierNumber("failure_rate_min_requests", { min: 1, max: 1_000_000, integer: true }),
      failure_rate_window_s: outlierNumber("failure_rate_window_s", { min: 0, exclusiveMin: true }),
    },
    admission: {
      max_inflight: admissionNumber("max_inflight", { min: 1, max: 1_000_000, integer: true }),
      max_queued: admissionNumber("max_queued", { min: 0, max: 1_000_000, integer: true }),
      queue_timeout_ms: admissionNumber("queue_timeout_ms", { min: 1, integer: true }),
      retry_after_s: admissionNumber("retry_after_s", { min: 1, max: 3600, integer: true }),
      backlog: admissionNumber("backlog", { min: 1, max: 65535, integer: true }),
      max_inflight_per_worker: admissionNumber("max_inflight_per_worker", { min: 1, max: 1_000_000, integer: true }),
      max_queued_per_worker: admissionNumber("max_queued_per_worker", { min: 0, max: 1_000_000, integer: true }),
      max_event_loop_lag_ms: admissionNumber("max_event_loop_lag_ms", { min: 0, max: 60_000, integer: true }),
      // below 1: a loop is never busy more than all of the time, so 1 would never shed (0 says that)
      max_event_loop_utilization: admissionNumber("max_event_loop_utilization", { min: 0, max: 0.99 }),
      max_connections: admissionNumber("max_connections", { min: 0, max: 10_000_000, integer: true }),
    },
    retries: {
      budget_share: retriesNumber("budget_share", { min: 0, max: 1 }),
      min_concurrent: retriesNumber("min_concurrent", { min: 0, integer: true }),
    },
    sessions: {
      idle_s: sessionsNumber("idle_s", { min: 0, exclusiveMin: true }),
      max: sessionsNumber("max", { min: 0, integer: true }),
    },
    max_body_bytes: number(o["max_body_bytes"], "max_body_bytes", D.max_body_bytes, {
      min: 1024,
      max: 1 << 30,
      integer: true,
    }),
    default_osl_hat: number(o["default_osl_hat"], "default_osl_hat", D.default_osl_hat, { min: 0 }),
    max_model_len:
      o["max_model_len"] === undefined || o["max_model_len"] === null
        ? null
        : number(o["max_model_len"], "max_model_len", 0, { min: 1, max: 1 << 24, integer: true }),
    decisions_kept: number(o["decisions_kept"], "decisions_kept", D.decisions_kept, {
      min: 0,
      max: 1_000_000,
      integer: true,
    }),
    log_level: oneOf(o["log_level"], "log_level", LOG_LEVELS, D.log_level),
    drift: {
      enabled: boolean(drift["enabled"], "drift.enabled", D.drift.enabled),
      control_share: driftNumber("control_share", { min: 0, max: 0.5 }),
      window_s: driftNumber("window_s", { min: 0, exclusiveMin: true }),
      min_samples: driftNumber("min_samples", { min: 1, integer: true }),
      z_revert: driftNumber("z_revert", { min: 0, exclusiveMin: true }),
      min_gap: driftNumber("min_gap", { min: 0, max: 1 }),
      revert_after_s: driftNumber("revert_after_s", { min: 0 }),
      reenable_after_s: driftNumber("reenable_after_s", { min: 0 }),
      seed: driftNumber("seed", { min: 0, integer: true }),
      mix_enabled: boolean(drift["mix_enabled"], "drift.mix_enabled", D.drift.mix_enabled),
      mix_window: driftNumber("mix_window", { min: 20, integer: true }),
      mix_psi_alarm: driftNumber("mix_psi_alarm", { min: 0, exclusiveMin: true }),
      // by default half the alarm level, whatever the alarm level is
      mix_psi_clear:
        drift["mix_psi_clear"] === undefined
          ? driftNumber("mix_psi_alarm", { min: 0, exclusiveMin: true }) / 2
          : driftNumber("mix_psi_clear", { min: 0, exclusiveMin: true }),
    },
  };
  if (config.drift.mix_psi_clear > config.drift.mix_psi_alarm)
    throw new ConfigError(
      "drift.mix_psi_clear",
      `must not exceed drift.mix_psi_alarm (${config.drift.mix_psi_alarm}), got ${config.drift.mix_psi_clear}`,
    );

  if (config.table_reload_s > 0 && (POLICY_KINDS as readonly string[]).includes(config.table))
    throw new ConfigError("table_reload_s", `needs a table file, not the rule "${config.table}"`);
  if (config.heartbeat.expiry_s <= config.heartbeat.interval_s) {
    throw new ConfigError(
      "heartbeat.expiry_s",
      `must exceed heartbeat.interval_s (${config.heartbeat.interval_s}), got ${config.heartbeat.expiry_s}`,
    );
  }
  if (config.capacity_blocks * config.max_workers > MAX_INDEX_BLOCKS) {
    throw new ConfigError(
      "capacity_blocks",
      `capacity_blocks × max_workers must be ≤ ${MAX_INDEX_BLOCKS}, got ${config.capacity_blocks} × ${config.max_workers}`,
    );
  }
  const workers = o["workers"] ?? [];
  if (!Array.isArray(workers)) fail("workers", "an array of {id, url, role, kv_events_endpoint?}", workers);
  const seen = new Set<string>();
  workers.forEach((w, i) => {
    for (const parsed of expandRanks(parseWorker(w, `workers[${i}]`))) {
      if (seen.has(parsed.id))
        throw new ConfigError(`workers[${i}].id`, `duplicate worker id ${JSON.stringify(parsed.id)}`);
      seen.add(parsed.id);
      config.workers.push(parsed);
    }
  });
  if (config.workers.length > config.max_workers) {
    throw new ConfigError("workers", `${config.workers.length} workers exceed max_workers (${config.max_workers})`);
  }
  return config;
}

/** A rule kind name stays as is; anything else is a table file path, made absolute. */
function tableSpec(v: unknown, baseDir: string): string {
  const s = string(v, "table", DEFAULTS.table);
  if ((POLICY_KINDS as readonly string[]).includes(s) && !existsSync(resolve(baseDir, s))) return s;
  return isAbsolute(s) ? s : resolve(baseDir, s);
}
