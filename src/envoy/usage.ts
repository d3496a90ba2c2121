// `dolphin envoy`'s help text and options, apart from command.ts so that the CLI can list them without loading it.

export const ENVOY_USAGE = `dolphin envoy --emulate <nPmD|nR> [--port 8000] [--admin-port 9901] [--table T] [--concurrency 2]
              [--time-scale S]
dolphin envoy --config envoy-plugin.json [--port N] [--admin-port N] [--concurrency N] [--write DIR]

Runs Envoy (the official binary that npm run setup installs into .venv) with the dolphin proxy-wasm filter
(build/dolphin-envoy.wasm): the same routing core as dolphin serve in approximate mode, local or two-step remote
(vLLM's NixlConnector) per request. --emulate starts that many emulated workers (dolphin worker) behind it and
prints the proxy and admin URLs; --table picks the policy (default dynamo-isl); --concurrency sets Envoy's worker
threads. --config reads the workers (id, role, url) and the filter settings (docs/envoy.md); --write DIR writes
envoy.yaml and listener.yaml for them instead of running Envoy (rewrite listener.yaml to swap the table).`;

export const ENVOY_OPTIONS = {
  emulate: { type: "string" }, config: { type: "string" }, port: { type: "string" }, "admin-port": { type: "string" },
  table: { type: "string" }, concurrency: { type: "string" }, "time-scale": { type: "string" }, write: { type: "string" },
} as const;
