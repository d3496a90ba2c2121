// One worker entry of the `dolphin serve` configuration: the config's `workers[i]`, or the body of a
// POST /admin/workers (the same checks either way), and an engine with data-parallel ranks as one worker per rank.

import { ConfigError, fail, httpUrl, number, object, oneOf, onlyKeys, string } from "./config-values.js";

export type WorkerRole = "prefill" | "decode" | "both";

export interface WorkerConfig {
  /** The name the router, the logs and KV events use. */
  id: string;
  /** Base URL of the worker's OpenAI server, e.g. http://10.0.0.5:8000 (no trailing slash kept). */
  url: string;
  role: WorkerRole;
  /** vLLM's ZMQ KV-event publisher, e.g. tcp://10.0.0.5:5557 (precise mode). */
  kv_events_endpoint?: string;
  /**
   * vLLM's KV-event replay socket (kv_events_config.replay_endpoint), e.g. tcp://10.0.0.5:5558: on every subscribe the
   * proxy asks it for the batches the engine still buffers, so a proxy started after the engines sees what they
   * stored before it (vLLM publishes a block once, when it is stored), and a missed batch is asked for again.
   */
  kv_events_replay_endpoint?: string;
  /**
   * Compatibility group: a remote prefill goes only to a decode worker of the same group (engines that can hand KV
   * over). Absent: "" (one group), or read from the engine with group_from_engine.
   */
  group?: string;
  /**
   * An engine started with --data-parallel-size N > 1: its N ranks each keep their own prefix cache and publish
   * their own KV events (vLLM binds each rank's publisher and replay socket at the endpoint's port + rank), and a
   * request picks one with the `X-data-parallel-rank` header. The config entry becomes one worker per rank
   * (expandRanks). Default 1.
   */
  data_parallel_size?: number;
  /**
   * One rank of a data-parallel engine as a worker of its own: the rank its requests are sent to (the
   * `X-data-parallel-rank` header). Set by expandRanks, or given (a rank registered alone, or whose endpoints are not
   * at the port + rank); not with `data_parallel_size`.
   */
  data_parallel_rank?: number;
}

/** The header vLLM's API server reads a request's data-parallel rank from. */
export const RANK_HEADER = "x-data-parallel-rank";

/** A request's headers for worker `w`: with its rank's `X-data-parallel-rank` when it is one rank of an engine. */
export function withRank(w: WorkerConfig, headers: Record<string, string>): Record<string, string> {
  return w.data_parallel_rank === undefined ? headers : { ...headers, [RANK_HEADER]: String(w.data_parallel_rank) };
}

/**
 * One worker per data-parallel rank of an engine (`data_parallel_size` > 1): `id#r`, the engine's URL, rank r, and
 * its KV-event endpoints offset as vLLM offsets them (offsetEndpointPort). An entry of size 1 stays as it is.
 */
export function expandRanks(w: WorkerConfig): WorkerConfig[] {
  const size = w.data_parallel_size ?? 1;
  if (size <= 1) return [w];
  return Array.from({ length: size }, (_, r) => {
    const { data_parallel_size: _size, ...rest } = w;
    const rank: WorkerConfig = { ...rest, id: `${w.id}#${r}`, data_parallel_rank: r };
    if (w.kv_events_endpoint) rank.kv_events_endpoint = offsetEndpointPort(w.kv_events_endpoint, r);
    if (w.kv_events_replay_endpoint)
      rank.kv_events_replay_endpoint = offsetEndpointPort(w.kv_events_replay_endpoint, r);
    return rank;
  });
}

/**
 * A data-parallel rank's endpoint, as vLLM's ZmqEventPublisher.offset_endpoint_port makes it: a tcp port + rank (port
 * 0 left as it is), an inproc name with `_dp<rank>`; rank 0 and ipc endpoints unchanged.
 */
export function offsetEndpointPort(endpoint: string, rank: number): string {
  if (rank === 0) return endpoint;
  if (endpoint.includes("inproc")) return `${endpoint}_dp${rank}`;
  const m = /^(tcp:\/\/.*):(\d+)$/.exec(endpoint);
  if (!m || Number(m[2]) === 0) return endpoint;
  return `${m[1]}:${Number(m[2]) + rank}`;
}

const ROLES: readonly WorkerRole[] = ["prefill", "decode", "both"];

/** One worker entry (the config's `workers[i]`, or a POST /admin/workers body with field prefix "body"). */
export function parseWorker(v: unknown, field: string): WorkerConfig {
  const o = object(v, field);
  onlyKeys(o, field, [
    "id",
    "url",
    "role",
    "kv_events_endpoint",
    "kv_events_replay_endpoint",
    "group",
    "data_parallel_size",
    "data_parallel_rank",
  ]);
  const w: WorkerConfig = {
    id: string(o["id"], `${field}.id`),
    url: httpUrl(o["url"], `${field}.url`),
    role:
      o["role"] === undefined
        ? fail(`${field}.role`, `one of ${ROLES.join(", ")}`, undefined)
        : oneOf(o["role"], `${field}.role`, ROLES, "decode"),
  };
  for (const key of ["kv_events_endpoint", "kv_events_replay_endpoint"] as const) {
    if (o[key] === undefined || o[key] === null) continue;
    const ep = string(o[key], `${field}.${key}`);
    if (!/^(tcp|ipc|inproc):\/\/.+/.test(ep)) fail(`${field}.${key}`, "a ZMQ endpoint such as tcp://host:5557", ep);
    w[key] = ep;
  }
  if (o["group"] !== undefined && o["group"] !== null) {
    if (typeof o["group"] !== "string") fail(`${field}.group`, "a string", o["group"]);
    w.group = o["group"];
  }
  if (o["data_parallel_size"] !== undefined) {
    const size = number(o["data_parallel_size"], `${field}.data_parallel_size`, 1, {
      min: 1,
      max: 1024,
      integer: true,
    });
    if (size > 1) w.data_parallel_size = size;
  }
  if (o["data_parallel_rank"] !== undefined) {
    if (o["data_parallel_size"] !== undefined)
      throw new ConfigError(
        `${field}.data_parallel_rank`,
        "give data_parallel_size (every rank) or one rank, not both",
      );
    const rank = number(o["data_parallel_rank"], `${field}.data_parallel_rank`, 0, {
      min: 0,
      max: 1023,
      integer: true,
    });
    w.data_parallel_rank = rank;
  }
  if (w.kv_events_replay_endpoint !== undefined && w.kv_events_endpoint === undefined)
    throw new ConfigError(
      `${field}.kv_events_replay_endpoint`,
      "needs a kv_events_endpoint (the replay fills its gaps)",
    );
  return w;
}
