// `dolphin serve`: the routing proxy in front of vLLM-style workers, or of emulated ones (--emulate nPmD).

import { loadCoreModule } from "../../bindings/node/index.js";
import { loadConfig } from "../serve/config-files.js";
import { startEmulated } from "../serve/emulate.js";
import { startProxy } from "../serve/proxy.js";
import { startSidecar } from "../serve/sidecar.js";
import { resolveCluster } from "../sim/run.js";
import { parseSplit } from "../sim/split.js";
import { flag, intOption, untilSignal, UsageError, type Command } from "./args.js";
import { startVllmServe } from "../serve/vllm/cluster.js";
import { vllmInstall } from "../serve/vllm/install.js";
import type { ServeMode } from "../serve/config.js";

/** SIGTERM/SIGINT: requests in flight get this long to finish before the proxy exits. */
const DRAIN_MS = 30_000;

export const command: Command = {
  usage: `dolphin serve --config serve.json [--port N] [--admin-token T]
dolphin serve --emulate <nPmD|nR> [--port N] [--cluster <preset>] [--time-scale S] [--table T] [--admin-token T]
dolphin serve --vllm <nPmD|nR> [--port N] [--table T] [--mode precise|approximate] [--model DIR] [--admin-token T]
dolphin serve --sidecar --decode URL [--port N] [--prefill-retries N] [--no-fallback]

An OpenAI-compatible proxy (POST /v1/chat/completions, /v1/completions with SSE streaming, GET /v1/models, /health,
/metrics) that routes every request through the core: local prefill on the decode worker, or vLLM's NixlConnector
two-step remote path. The config format is in docs/serving.md. --emulate starts that many emulated workers
(dolphin worker) behind the proxy in one command, for a first try without GPUs; --port defaults to 8000.
--vllm starts that many real vLLM engines on this machine (the CPU build and tiny model npm run setup installs, or
--model DIR; at most 3; prefill and decode engines pinned to different cores) with prefix caching, KV events and
NixlConnector, and the proxy in precise mode in front (docs/serving.md "In front of real vLLM"); Ctrl-C stops them.
--admin-token T opens the admin API (/admin/*, needed by dolphin tune --live) to "Authorization: Bearer T"
(with --config it replaces the config's admin_token).
--sidecar runs the decode-side sidecar for an endpoint picker (dolphin-epp, llm-d's scheduler) in front of the decode
engine at --decode: a request carrying x-prefiller-host-port takes vLLM's NixlConnector two-step through that
prefill endpoint (502/503/504 retried --prefill-retries times, default 0; then local prefill unless --no-fallback);
others go to the engine unchanged (docs/gateway.md).`,
  options: {
    config: { type: "string" },
    emulate: { type: "string" },
    port: { type: "string" },
    cluster: { type: "string" },
    "time-scale": { type: "string" },
    table: { type: "string" },
    "admin-token": { type: "string" },
    vllm: { type: "string" },
    mode: { type: "string" },
    model: { type: "string" },
    sidecar: { type: "boolean" },
    decode: { type: "string" },
    "prefill-retries": { type: "string" },
    "no-fallback": { type: "boolean" },
  },
  async run(v) {
    let close: () => Promise<void>;
    const adminToken = v["admin-token"] !== undefined ? String(v["admin-token"]) : undefined;
    if (adminToken === "") throw new UsageError("--admin-token must not be empty");
    if (v["sidecar"]) {
      if (v["decode"] === undefined) throw new UsageError("--sidecar needs --decode URL (the decode engine it fronts)");
      const decodeUrl = flag("decode", () => new URL(String(v["decode"])).href);
      const s = await startSidecar({
        decodeUrl,
        port: intOption(v["port"], "port", 0, 65535, 8000),
        prefillRetries: intOption(v["prefill-retries"], "prefill-retries", 0, 100, 0),
        fallbackLocal: !v["no-fallback"],
        log: (line) => void process.stderr.write(`dolphin serve --sidecar: ${line}\n`),
      });
      process.stderr.write(`dolphin serve: sidecar at ${s.url} in front of the decode engine ${decodeUrl}\n`);
      close = () => s.close();
    } else if (v["vllm"] !== undefined) {
      const split = String(v["vllm"]);
      flag("vllm", () => parseSplit(split));
      const mode = v["mode"] !== undefined ? String(v["mode"]) : "precise";
      if (mode !== "precise" && mode !== "approximate") throw new UsageError("--mode must be precise or approximate");
      const install = vllmInstall(); // before anything starts: says to run npm run setup
      const say = (line: string): void => void process.stderr.write(`dolphin serve: ${line}\n`);
      say(`starting vLLM ${install.version} engines (${split}); each takes 30–60 s to start and 3–4.5 GB of memory`);
      const e = await startVllmServe({
        split,
        port: intOption(v["port"], "port", 0, 65535, 8000),
        mode: mode as ServeMode,
        module: loadCoreModule(),
        engines: { progress: say, ...(v["model"] !== undefined ? { model: String(v["model"]) } : {}) },
        ...(v["table"] !== undefined ? { table: String(v["table"]) } : {}),
        ...(adminToken !== undefined ? { adminToken } : {}),
      });
      say(
        `proxy at ${e.proxy.url} (${mode} mode) in front of ${e.engines.length} vLLM engines ` +
          `(${e.engines.map((w) => `${w.id} ${w.role} ${w.url}`).join(", ")}); engine logs: ` +
          `${e.engines.map((w) => w.logFile).join(", ")}; try:\n  curl ${e.proxy.url}/v1/chat/completions ` +
          `-H 'content-type: application/json' -d '{"model":"tiny-llama","messages":[{"role":"user","content":"hello"}],"max_tokens":8}'`,
      );
      close = () => e.close({ drainMs: DRAIN_MS });
    } else if (v["emulate"] !== undefined) {
      const { preset } = flag("cluster", () =>
        resolveCluster(v["cluster"] !== undefined ? String(v["cluster"]) : "h100-8b", undefined),
      );
      const timeScale = v["time-scale"] !== undefined ? Number(v["time-scale"]) : 1;
      if (!(timeScale > 0 && Number.isFinite(timeScale))) throw new UsageError(`--time-scale must be a number > 0`);
      const split = String(v["emulate"]);
      flag("emulate", () => parseSplit(split));
      const e = await startEmulated({
        split,
        port: intOption(v["port"], "port", 0, 65535, 8000),
        preset,
        timeScale,
        module: loadCoreModule(),
        ...(v["table"] !== undefined ? { table: String(v["table"]) } : {}),
        ...(adminToken !== undefined ? { adminToken } : {}),
      });
      process.stderr.write(
        `dolphin serve: proxy at ${e.proxy.url} in front of ${e.workers.length} emulated workers ` +
          `(${e.workers.map((w) => `${w.workerId} ${w.role} ${w.url}`).join(", ")}); try:\n  curl ${e.proxy.url}/v1/chat/completions ` +
          `-H 'content-type: application/json' -d '{"model":"dolphin-emulated","messages":[{"role":"user","content":"hello"}],"max_tokens":8}'\n` +
          (adminToken !== undefined
            ? `  dolphin tune --live ${e.proxy.url} --admin-token <the token> --workload hybrid --rate 4\n`
            : ""),
      );
      close = () => e.close({ drainMs: DRAIN_MS });
    } else {
      if (!v["config"]) throw new UsageError("give --config serve.json, --emulate nPmD or --vllm nPmD");
      const config = loadConfig(String(v["config"]));
      if (v["port"] !== undefined) config.listen.port = intOption(v["port"], "port", 0, 65535, 8000);
      if (adminToken !== undefined) config.admin_token = adminToken;
      const p = await startProxy(config, { module: loadCoreModule() });
      process.stderr.write(
        `dolphin serve: proxy at ${p.url}, ${config.workers.length} configured workers, mode ${config.mode}, table ${config.table}\n`,
      );
      close = () => p.close({ drainMs: DRAIN_MS });
    }
    await untilSignal(close);
    return 0;
  },
};
