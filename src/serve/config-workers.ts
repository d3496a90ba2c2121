// One worker entry of the `dolphin serve` configuration: the config's `workers[i]`, or the body of a
// POST /admin/workers (the same checks either way).

import { ConfigError, fail, httpUrl, object, oneOf, onlyKeys, string } from "./config-values.js";

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
}

const ROLES: readonly WorkerRole[] = ["prefill", "decode", "both"];

/** One worker entry (the config's `workers[i]`, or a POST /admin/workers body with field prefix "body"). */
export function parseWorker(v: unknown, field: string): WorkerConfig {
  const o = object(v, field);
  onlyKeys(o, field, ["id", "url", "role", "kv_events_endpoint", "kv_events_replay_endpoint", "group"]);
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
  if (w.kv_events_replay_endpoint !== undefined && w.kv_events_endpoint === undefined)
    throw new ConfigError(
      `${field}.kv_events_replay_endpoint`,
      "needs a kv_events_endpoint (the replay fills its gaps)",
    );
  return w;
}
