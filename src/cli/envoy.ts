// `dolphin envoy`: Envoy with the dolphin proxy-wasm filter, in front of emulated workers (--emulate nPmD) or real
// ones (--config envoy-plugin.json), or the configuration written for real workers (--config … --write DIR).

import { mkdirSync } from "node:fs";
import { resolve } from "node:path";
import { loadSetup } from "../envoy/config.js";
import { startEmulatedEnvoy } from "../envoy/emulate.js";
import { findEnvoy, startEnvoy, writeEnvoyConfig } from "../envoy/launch.js";
import { flag, intOption, untilSignal, UsageError, type Command } from "./args.js";
import { parseSplit } from "../sim/split.js";
import { startVllmEnvoy } from "../envoy/vllm.js";
import { vllmInstall } from "../serve/vllm/install.js";

export const command: Command = {
  usage: `dolphin envoy --emulate <nPmD|nR> [--port 8000] [--admin-port 9901] [--table T] [--concurrency 2]
              [--time-scale S]
dolphin envoy --vllm <nPmD|nR> [--port 8000] [--admin-port 9901] [--table T] [--concurrency 2] [--model DIR]
dolphin envoy --config envoy-plugin.json [--port N] [--admin-port N] [--concurrency N] [--write DIR]

Runs Envoy (the official binary that npm run setup installs into .venv) with the dolphin proxy-wasm filter
(build/dolphin-envoy.wasm): the same routing core as dolphin serve in approximate mode, local or two-step remote
(vLLM's NixlConnector) per request. --emulate starts that many emulated workers (dolphin worker) behind it and
prints the proxy and admin URLs; --table picks the policy (default dynamo-isl); --concurrency sets Envoy's worker
threads. --vllm starts that many real vLLM engines instead (as dolphin serve --vllm; the filter routes in
approximate mode). --config reads the workers (id, role, url) and the filter settings (docs/envoy.md); --write DIR writes
envoy.yaml and listener.yaml for them instead of running Envoy (rewrite listener.yaml to swap the table).`,
  options: {
    emulate: { type: "string" },
    config: { type: "string" },
    port: { type: "string" },
    "admin-port": { type: "string" },
    table: { type: "string" },
    concurrency: { type: "string" },
    "time-scale": { type: "string" },
    write: { type: "string" },
    vllm: { type: "string" },
    model: { type: "string" },
  },
  async run(v) {
    const port = intOption(v["port"], "port", 0, 65535, 8000);
    const adminPort = intOption(v["admin-port"], "admin-port", 0, 65535, 9901);
    const concurrency = intOption(v["concurrency"], "concurrency", 1, 256, 2);
    const print = (line: string): void => void process.stderr.write(`${line}\n`);
    let close: () => Promise<void>;
    if (v["vllm"] !== undefined) {
      const split = String(v["vllm"]);
      flag("vllm", () => parseSplit(split));
      findEnvoy(); // before starting engines: says to run npm run setup
      const install = vllmInstall();
      print(`dolphin envoy: starting vLLM ${install.version} engines (${split}); each takes 30–60 s to start`);
      const e = await startVllmEnvoy({
        split,
        port,
        adminPort,
        concurrency,
        engines: {
          progress: (l) => print(`dolphin envoy: ${l}`),
          ...(v["model"] !== undefined ? { model: String(v["model"]) } : {}),
        },
        ...(v["table"] !== undefined ? { table: String(v["table"]) } : {}),
      });
      print(
        `dolphin envoy: Envoy + dolphin filter at ${e.envoy.url} (admin ${e.envoy.adminUrl}) in front of ` +
          `${e.engines.length} vLLM engines (${e.engines.map((w) => `${w.id} ${w.role} ${w.url}`).join(", ")}); try:\n  curl ${e.envoy.url}/v1/chat/completions ` +
          `-H 'content-type: application/json' -d '{"model":"tiny-llama","messages":[{"role":"user","content":"hello"}],"max_tokens":8}'`,
      );
      close = () => e.close();
    } else if (v["emulate"] !== undefined) {
      findEnvoy(); // before starting workers: says to run npm run setup
      const timeScale = v["time-scale"] !== undefined ? Number(v["time-scale"]) : 1;
      if (!(timeScale > 0 && Number.isFinite(timeScale))) throw new UsageError("--time-scale must be a number > 0");
      const e = await startEmulatedEnvoy({
        split: String(v["emulate"]),
        port,
        adminPort,
        concurrency,
        timeScale,
        ...(v["table"] !== undefined ? { table: String(v["table"]) } : {}),
      });
      print(
        `dolphin envoy: Envoy + dolphin filter at ${e.envoy.url} (admin ${e.envoy.adminUrl}, ${concurrency} worker threads) in front of ` +
          `${e.workers.length} emulated workers (${e.workers.map((w) => `${w.workerId} ${w.role} ${w.url}`).join(", ")}); try:\n  curl ${e.envoy.url}/v1/chat/completions ` +
          `-H 'content-type: application/json' -d '{"model":"dolphin-emulated","messages":[{"role":"user","content":"hello"}],"max_tokens":8}'\n` +
          `  curl -s ${e.envoy.adminUrl}/stats/prometheus | grep ^dolphin_`,
      );
      close = () => e.close();
    } else {
      if (v["config"] === undefined)
        throw new UsageError("give --config envoy-plugin.json, --emulate nPmD or --vllm nPmD");
      const setup = flag("config", () => loadSetup(String(v["config"])));
      if (v["port"] !== undefined) setup.listen = { ...setup.listen, port };
      if (v["admin-port"] !== undefined) setup.admin = { ...setup.admin, port: adminPort };
      if (v["concurrency"] !== undefined) setup.concurrency = concurrency;
      if (v["table"] !== undefined) setup.table = String(v["table"]);
      if (v["write"] !== undefined) {
        const dir = resolve(String(v["write"]));
        mkdirSync(dir, { recursive: true });
        const paths = writeEnvoyConfig(setup, dir);
        let binary = "envoy";
        try {
          binary = findEnvoy();
        } catch {
          // writing the files needs no Envoy here; the command line then names the binary on PATH
        }
        print(
          `dolphin envoy: wrote ${paths.bootstrap} and ${paths.listener}; run: ${binary} -c ${paths.bootstrap} --concurrency ${setup.concurrency ?? 2}`,
        );
        return 0;
      }
      const envoy = await startEnvoy(setup);
      print(
        `dolphin envoy: Envoy + dolphin filter at ${envoy.url} (admin ${envoy.adminUrl}) in front of ${setup.workers.length} workers; configuration in ${envoy.dir}`,
      );
      close = () => envoy.close();
    }
    await untilSignal(close);
    return 0;
  },
};
