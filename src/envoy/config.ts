// `dolphin envoy`: the setup file (envoy-plugin.json), the filter's plugin configuration it turns into, and the
// Envoy configuration around the filter (docs/envoy.md explains each piece). The listener lives in its own file,
// read by Envoy's file-based LDS, so a new table is a rewrite of that file: Envoy swaps the listener without a
// restart and without failing a request.
//
// The filter chain is wasm → buffer → header_mutation → router. The wasm filter decides in its body callback, when
// the request headers have already passed it (a proxy-wasm filter that stops the headers never sees the body in
// Envoy), so the buffer filter holds the headers back until the body is complete, and header_mutation copies the
// filter's decision (filter state wasm.dolphin_cluster) into the x-dolphin-cluster header that the route's
// cluster_header reads.

import { readFileSync } from "node:fs";
import { dirname, isAbsolute, resolve } from "node:path";
import { loadConfigTable } from "../serve/config-files.js";
import { encodeTable } from "../table/codec.js";

export type EnvoyWorkerRole = "prefill" | "decode" | "both";

export interface EnvoyWorker {
  id: string;
  role: EnvoyWorkerRole;
  /** The worker's OpenAI server, http://host:port. */
  url: string;
  /** The Envoy cluster name (default: the id). */
  cluster?: string;
}

/** envoy-plugin.json: what `dolphin envoy --config` reads. */
export interface EnvoySetup {
  listen?: { host?: string; port?: number };
  admin?: { host?: string; port?: number };
  /** Envoy worker threads (--concurrency). Default 2. */
  concurrency?: number;
  model: string;
  salt?: string;
  /** Block-hash scheme (docs/abi.md): "xxh64-chain" (default) or "llm-d-cbor-fnv", seeded by hash_seed. */
  hash_scheme?: "xxh64-chain" | "llm-d-cbor-fnv";
  hash_seed?: string;
  /** A rule kind name or a table file (relative paths against the setup file's directory). Default "dynamo-isl". */
  table?: string;
  workers: EnvoyWorker[];
  block_size?: number;
  capacity_blocks?: number;
  max_workers?: number;
  max_body_bytes?: number;
  prefill_timeout_ms?: number;
  fallback_local?: boolean;
  default_osl_hat?: number;
  approximate_ttl_s?: number;
  /** Envoy's timeout for the decode worker's whole answer (route timeout), ms; 0 = none. Default 0. */
  request_timeout_ms?: number;
}

/** The filter's plugin configuration (bindings/envoy/config.ts reads it). */
export interface PluginConfig {
  workers: Array<{ id: string; role: EnvoyWorkerRole; cluster: string }>;
  table: string;
  model: string;
  salt?: string;
  hash_scheme?: "xxh64-chain" | "llm-d-cbor-fnv";
  hash_seed?: string;
  block_size?: number;
  capacity_blocks?: number;
  max_workers?: number;
  max_body_bytes?: number;
  prefill_timeout_ms?: number;
  fallback_local?: boolean;
  default_osl_hat?: number;
  approximate_ttl_s?: number;
}

export class EnvoySetupError extends Error {}

export const DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024;
/** Room above max_body_bytes for Envoy's own buffers: the filter's 413 must come first, and a decode body is larger
 *  than the client's by the kv_transfer_params. */
const BUFFER_HEADROOM_BYTES = 256 * 1024;

/** Reads and checks envoy-plugin.json; the table path is resolved against the file's directory. */
export function loadSetup(path: string): EnvoySetup {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, "utf8"));
  } catch (e) {
    throw new EnvoySetupError(`${path}: ${(e as Error).message}`);
  }
  const setup = checkSetup(raw);
  if (setup.table && /[./]/.test(setup.table) && !isAbsolute(setup.table))
    setup.table = resolve(dirname(path), setup.table);
  return setup;
}

export function checkSetup(raw: unknown): EnvoySetup {
  const bad = (field: string, msg: string): never => {
    throw new EnvoySetupError(`envoy setup: ${field}: ${msg}`);
  };
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) bad("(root)", "expected a JSON object");
  const s = raw as Record<string, unknown>;
  if (typeof s["model"] !== "string" || s["model"] === "") bad("model", "expected a non-empty string");
  if (!Array.isArray(s["workers"]) || s["workers"].length === 0)
    bad("workers", "expected a non-empty array of {id, role, url}");
  (s["workers"] as unknown[]).forEach((w, i) => {
    const o = w as Record<string, unknown>;
    if (typeof o !== "object" || o === null) bad(`workers[${i}]`, "expected an object {id, role, url}");
    if (typeof o["id"] !== "string" || o["id"] === "") bad(`workers[${i}].id`, "expected a non-empty string");
    if (!["prefill", "decode", "both"].includes(o["role"] as string))
      bad(`workers[${i}].role`, `expected "prefill", "decode" or "both", got ${JSON.stringify(o["role"])}`);
    if (typeof o["url"] !== "string" || !/^http:\/\/[^/]+(:\d+)?\/?$/.test(o["url"]))
      bad(`workers[${i}].url`, `expected http://host:port, got ${JSON.stringify(o["url"])}`);
  });
  return s as unknown as EnvoySetup;
}

/** The table file's bytes: a rule kind's table, or the file as it is (checked here for an early, clear error). */
export function tableBytes(table: string): Uint8Array {
  const t = loadConfigTable({ table });
  return t.kind === table ? encodeTable(t) : new Uint8Array(readFileSync(table));
}

export function pluginConfig(setup: EnvoySetup): PluginConfig {
  const out: PluginConfig = {
    workers: setup.workers.map((w) => ({ id: w.id, role: w.role, cluster: w.cluster ?? w.id })),
    table: Buffer.from(tableBytes(setup.table ?? "dynamo-isl")).toString("base64"),
    model: setup.model,
  };
  for (const k of [
    "salt",
    "hash_scheme",
    "hash_seed",
    "block_size",
    "capacity_blocks",
    "max_workers",
    "max_body_bytes",
    "prefill_timeout_ms",
    "fallback_local",
    "default_osl_hat",
    "approximate_ttl_s",
  ] as const) {
    if (setup[k] !== undefined) (out as unknown as Record<string, unknown>)[k] = setup[k];
  }
  return out;
}

function hostPort(url: string): { host: string; port: number } {
  const u = new URL(url);
  return { host: u.hostname, port: Number(u.port || 80) };
}

/** The bootstrap (envoy.yaml): admin, the worker clusters, and the listener from `ldsPath`. */
export function bootstrap(setup: EnvoySetup, ldsPath: string): object {
  const clusters = setup.workers.map((w) => {
    const { host, port } = hostPort(w.url);
    return {
      name: w.cluster ?? w.id,
      type: /^[\d.]+$/.test(host) ? "STATIC" : "STRICT_DNS",
      connect_timeout: "5s",
      // LLM requests are long-lived: Envoy's default 1,024 concurrent requests per cluster would queue them
      circuit_breakers: {
        thresholds: [{ max_connections: 100000, max_pending_requests: 100000, max_requests: 100000 }],
      },
      load_assignment: {
        cluster_name: w.cluster ?? w.id,
        endpoints: [
          { lb_endpoints: [{ endpoint: { address: { socket_address: { address: host, port_value: port } } } }] },
        ],
      },
    };
  });
  return {
    node: { id: "dolphin", cluster: "dolphin" },
    // histograms (dolphin_route_time_us) reach /stats at each flush: every second instead of every 5 s
    stats_flush_interval: "1s",
    admin: {
      address: { socket_address: { address: setup.admin?.host ?? "127.0.0.1", port_value: setup.admin?.port ?? 9901 } },
    },
    static_resources: { clusters },
    dynamic_resources: { lds_config: { resource_api_version: "V3", path_config_source: { path: ldsPath } } },
  };
}

/**
 * The listener (LDS file): the filter chain and the routes; `wasmPath` is the filter module. Without a plugin
 * (null), Envoy alone: only the router, every request to the first decode worker (the benchmark's baseline).
 */
export function listener(setup: EnvoySetup, plugin: PluginConfig | null, wasmPath: string): object {
  const maxBody = plugin?.max_body_bytes ?? DEFAULT_MAX_BODY_BYTES;
  const firstDecode = setup.workers.find((w) => w.role !== "prefill")!;
  const timeout = `${(setup.request_timeout_ms ?? 0) / 1000}s`;
  const routed = (path: string): object => ({
    match: { path },
    route: plugin
      ? { cluster_header: "x-dolphin-cluster", timeout }
      : { cluster: firstDecode.cluster ?? firstDecode.id, timeout },
  });
  const router = {
    name: "envoy.filters.http.router",
    typed_config: { "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router" },
  };
  return {
    resources: [
      {
        "@type": "type.googleapis.com/envoy.config.listener.v3.Listener",
        name: "dolphin",
        address: {
          socket_address: { address: setup.listen?.host ?? "127.0.0.1", port_value: setup.listen?.port ?? 8000 },
        },
        per_connection_buffer_limit_bytes: maxBody + BUFFER_HEADROOM_BYTES,
        filter_chains: [
          {
            filters: [
              {
                name: "envoy.filters.network.http_connection_manager",
                typed_config: {
                  "@type":
                    "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                  stat_prefix: "dolphin",
                  // streams (SSE) may run long: no idle cut by Envoy while tokens keep coming
                  stream_idle_timeout: "600s",
                  route_config: {
                    name: "dolphin",
                    virtual_hosts: [
                      {
                        name: "openai",
                        domains: ["*"],
                        routes: [
                          routed("/v1/chat/completions"),
                          routed("/v1/completions"),
                          {
                            match: { prefix: "/" },
                            route: { cluster: firstDecode.cluster ?? firstDecode.id, timeout },
                          },
                        ],
                      },
                    ],
                  },
                  http_filters:
                    plugin === null
                      ? [router]
                      : [
                          {
                            name: "envoy.filters.http.wasm",
                            typed_config: {
                              "@type": "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm",
                              config: {
                                name: "dolphin",
                                root_id: "dolphin",
                                configuration: {
                                  "@type": "type.googleapis.com/google.protobuf.StringValue",
                                  value: JSON.stringify(plugin),
                                },
                                // a trapped VM is rebuilt (~1 s of 503s on that thread) instead of failing closed forever; the
                                // shared decision log and loads survive, so the new VM catches up (docs/envoy.md)
                                failure_policy: "FAIL_RELOAD",
                                vm_config: {
                                  vm_id: "dolphin_vm",
                                  runtime: "envoy.wasm.runtime.v8",
                                  code: { local: { filename: wasmPath } },
                                },
                              },
                            },
                          },
                          {
                            name: "envoy.filters.http.buffer",
                            typed_config: {
                              "@type": "type.googleapis.com/envoy.extensions.filters.http.buffer.v3.Buffer",
                              max_request_bytes: maxBody + BUFFER_HEADROOM_BYTES,
                            },
                          },
                          {
                            name: "envoy.filters.http.header_mutation",
                            typed_config: {
                              "@type":
                                "type.googleapis.com/envoy.extensions.filters.http.header_mutation.v3.HeaderMutation",
                              mutations: {
                                request_mutations: [
                                  {
                                    append: {
                                      header: {
                                        key: "x-dolphin-cluster",
                                        value: "%FILTER_STATE(wasm.dolphin_cluster:PLAIN)%",
                                      },
                                      append_action: "OVERWRITE_IF_EXISTS_OR_ADD",
                                    },
                                  },
                                ],
                              },
                            },
                          },
                          router,
                        ],
                },
              },
            ],
          },
        ],
      },
    ],
  };
}

/** YAML for plain JSON data (block style; strings quoted when YAML would read them as something else). */
export function toYaml(value: unknown, indent = ""): string {
  if (Array.isArray(value)) {
    if (value.length === 0) return "[]";
    return value
      .map((v) => {
        const inner = toYaml(v, `${indent}  `);
        return `\n${indent}- ${isBlock(v) ? inner.trimStart() : inner}`;
      })
      .join("");
  }
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value);
    if (entries.length === 0) return "{}";
    return entries
      .map(([k, v]) => `\n${indent}${scalar(k)}:${isBlock(v) ? "" : " "}${toYaml(v, `${indent}  `)}`)
      .join("");
  }
  return scalar(value);
}

function isBlock(v: unknown): boolean {
  return v !== null && typeof v === "object" && (Array.isArray(v) ? v.length > 0 : Object.keys(v).length > 0);
}

function scalar(v: unknown): string {
  if (typeof v === "number" || typeof v === "boolean" || v === null) return JSON.stringify(v);
  const s = String(v);
  return /^[A-Za-z_][\w./-]*$/.test(s) && !/^(true|false|null|yes|no|on|off|y|n)$/i.test(s) ? s : JSON.stringify(s);
}
