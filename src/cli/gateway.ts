// `dolphin gateway`: the endpoint-picker deployment on one machine (docs/gateway.md): Envoy with ext_proc to
// dolphin-epp, a decode-side sidecar on each decode worker, and emulated workers or real vLLM engines publishing KV
// events.

import { tableBytes } from "../envoy/config.js";
import { findEnvoy } from "../envoy/launch.js";
import { findEpp } from "../gateway/epp.js";
import { startGateway, type RunningGateway } from "../gateway/gateway.js";
import { startVllmGateway } from "../gateway/vllm.js";
import { SERVED_MODEL } from "../serve/vllm/engines.js";
import { vllmInstall } from "../serve/vllm/install.js";
import { parseSplit } from "../sim/split.js";
import { flag, intOption, untilSignal, UsageError, type Command } from "./args.js";

export const command: Command = {
  usage: `dolphin gateway --emulate <nPmD|nR> [--port 8000] [--admin-port 9901] [--table T] [--time-scale S]
                [--fail-open] [--prefill-retries N] [--max-inflight N]
dolphin gateway --vllm <nPmD|nR> [--model DIR] [--port 8000] [--admin-port 9901] [--table T] [--fail-open]
                [--prefill-retries N] [--max-inflight N]

Runs what a Kubernetes inference gateway runs, on this machine: Envoy (from .venv, npm run setup) whose ext_proc
filter asks dolphin-epp (build/dolphin-epp, npm run build; Go) which endpoint serves each request, as the Gateway
API Inference Extension's endpoint-picker protocol specifies, and an ORIGINAL_DST cluster sending it there; a
decode-side sidecar (dolphin serve --sidecar) on each decode worker doing vLLM's NixlConnector two-step when the
picker names a prefill endpoint; and --emulate's emulated workers (dolphin worker) behind, whose KV events the
picker subscribes to (precise mode). --vllm starts that many real vLLM engines instead (as dolphin serve --vllm:
the CPU build and tiny model npm run setup installs, or --model DIR), the picker on their KV events.
--table picks the policy (a rule kind, default dynamo-isl, or a table file);
--fail-open lets requests through to the decode endpoints when the picker is down (default: Envoy answers 500);
--prefill-retries sets the sidecars' retries of a prefill answered 502/503/504; --max-inflight sheds (429) past
that many requests per decode endpoint. Prints the URLs; Ctrl-C stops everything.`,
  options: {
    emulate: { type: "string" },
    vllm: { type: "string" },
    model: { type: "string" },
    port: { type: "string" },
    "admin-port": { type: "string" },
    table: { type: "string" },
    "time-scale": { type: "string" },
    "fail-open": { type: "boolean" },
    "prefill-retries": { type: "string" },
    "max-inflight": { type: "string" },
  },
  async run(v) {
    if (v["vllm"] !== undefined && v["emulate"] !== undefined)
      throw new UsageError("give --emulate or --vllm, not both");
    const vllm = v["vllm"] !== undefined;
    if (!vllm && v["emulate"] === undefined)
      throw new UsageError("give --emulate nPmD (for example 1P2D) or --vllm 1P1D");
    if (!vllm && v["model"] !== undefined) throw new UsageError("--model goes with --vllm (the engines' model folder)");
    const split = String(vllm ? v["vllm"] : v["emulate"]);
    flag(vllm ? "vllm" : "emulate", () => parseSplit(split));
    const timeScale = v["time-scale"] !== undefined ? Number(v["time-scale"]) : 1;
    if (!(timeScale > 0 && Number.isFinite(timeScale))) throw new UsageError("--time-scale must be a number > 0");
    if (vllm && v["time-scale"] !== undefined) throw new UsageError("--time-scale goes with --emulate");
    const table = flag("table", () => tableBytes(v["table"] !== undefined ? String(v["table"]) : "dynamo-isl"));
    findEnvoy(); // before starting anything: each says what to run when missing
    findEpp();
    const maxInflight = intOption(v["max-inflight"], "max-inflight", 0, 1_000_000, 0);
    const front = {
      port: intOption(v["port"], "port", 0, 65535, 8000),
      adminPort: intOption(v["admin-port"], "admin-port", 0, 65535, 9901),
      table,
      failOpen: Boolean(v["fail-open"]),
      prefillRetries: intOption(v["prefill-retries"], "prefill-retries", 0, 100, 0),
      ...(maxInflight ? { maxInflight } : {}),
    };
    const print = (line: string): void => void process.stderr.write(`${line}\n`);
    let model = "dolphin-emulated";
    let g: RunningGateway;
    if (vllm) {
      const install = vllmInstall(); // says to run npm run setup when vLLM is missing
      print(`dolphin gateway: starting vLLM ${install.version} engines (${split}); each takes 30–60 s to start`);
      model = SERVED_MODEL;
      // Ctrl-C while the engines start: exit, and the engines' exit hook kills their process groups (detached, a
      // terminal's Ctrl-C does not reach them)
      const early = (): void => process.exit(130);
      process.once("SIGINT", early);
      process.once("SIGTERM", early);
      g = await startVllmGateway({
        ...front,
        split,
        engines: {
          progress: (l) => print(`dolphin gateway: ${l}`),
          ...(v["model"] !== undefined ? { model: String(v["model"]) } : {}),
        },
      });
      process.off("SIGINT", early);
      process.off("SIGTERM", early);
    } else g = await startGateway({ ...front, split, timeScale });
    const lines = [
      `dolphin gateway: Envoy at ${g.url} (admin ${g.adminUrl}), ext_proc to dolphin-epp at ${g.epp.host}:${g.epp.grpcPort} (metrics ${g.epp.metricsUrl}), ${v["fail-open"] ? "fail-open" : "fail-closed"}`,
      `  endpoints file (edit it: the picker follows): ${g.dir}/endpoints.yaml`,
      ...g.workers.map(
        (w) =>
          `  ${w.id} ${w.role} ${w.worker.url}${w.sidecar ? ` behind sidecar ${w.sidecar.url}` : ""}, KV events ${w.worker.kvEventsEndpoint ?? "none"}`,
      ),
      `try:\n  curl -i ${g.url}/v1/chat/completions -H 'content-type: application/json' -d '{"model":"${model}","messages":[{"role":"user","content":"hello"}],"max_tokens":8}'`,
      `  curl -s ${g.epp.metricsUrl} | grep ^dolphin_`,
    ];
    print(lines.join("\n"));
    await untilSignal(() => g.close());
    return 0;
  },
};
