// `dolphin worker`: an emulated vLLM worker, timed by the simulator's calibrated step model.

import { startWorker } from "../serve/worker.js";
import { resolveCluster } from "../sim/run.js";
import { flag, intOption, untilSignal, UsageError, type Command } from "./args.js";

export const command: Command = {
  usage: `dolphin worker --role prefill|decode|both [--cluster <preset|file>] [--port N] [--host H] [--model NAME]
               [--time-scale S] [--kv-events-port N | --kv-events-endpoint EP] [--kv-events-replay-endpoint EP]
               [--kv-events-buffer-steps N] [--kv-events-topic T] [--kv-events-url URL] [--worker-id ID] [--link NAME]
               [--engine-version V] [--data-parallel-size N]

An emulated vLLM worker for trying and testing the proxy without GPUs: /v1/completions and /v1/chat/completions
(streaming or not), /tokenize (a deterministic tokenizer of our own), vLLM's kv_transfer_params protocol (the decode
role pulls KV in the modeled transfer time), continuous batching timed by the calibrated step model (--time-scale S
runs S simulated ms per wall ms), a prefix cache that publishes vLLM EventBatch KV events over ZMQ
(--kv-events-port, or --kv-events-endpoint such as tcp://127.0.0.1:5557) and/or by POST (--kv-events-url), with
vLLM's replay socket (--kv-events-replay-endpoint, e.g. tcp://127.0.0.1:5558; the last --kv-events-buffer-steps
batches, 10,000 by default), and vLLM-style /metrics. --engine-version V is what GET /version answers; a decode
worker pulls KV only from a prefill worker of the same version, as NIXL's compatibility check (the two halves of a
rolling upgrade). --data-parallel-size N emulates vLLM's data-parallel ranks: N engines behind one server, each its
own prefix cache, publishing KV events with its data_parallel_rank at the endpoints' port + rank (as vLLM), chosen
per request by the X-data-parallel-rank header (else the least busy). Port 8100 by default.`,
  options: {
    role: { type: "string" },
    cluster: { type: "string" },
    port: { type: "string" },
    host: { type: "string" },
    model: { type: "string" },
    "time-scale": { type: "string" },
    "kv-events-port": { type: "string" },
    "kv-events-endpoint": { type: "string" },
    "kv-events-replay-endpoint": { type: "string" },
    "kv-events-buffer-steps": { type: "string" },
    "kv-events-topic": { type: "string" },
    "kv-events-url": { type: "string" },
    "worker-id": { type: "string" },
    link: { type: "string" },
    "engine-version": { type: "string" },
    "data-parallel-size": { type: "string" },
  },
  async run(v) {
    const role = String(v["role"] ?? "both");
    if (!["prefill", "decode", "both"].includes(role))
      throw new UsageError(`--role must be prefill, decode or both, got ${role}`);
    const timeScale = v["time-scale"] !== undefined ? Number(v["time-scale"]) : 1;
    if (!(timeScale > 0 && Number.isFinite(timeScale)))
      throw new UsageError(`--time-scale must be a number > 0, got ${String(v["time-scale"])}`);
    if (v["kv-events-port"] !== undefined && v["kv-events-endpoint"] !== undefined)
      throw new UsageError("--kv-events-port and --kv-events-endpoint are two ways to say the same thing: give one");
    if (
      v["kv-events-replay-endpoint"] !== undefined &&
      v["kv-events-port"] === undefined &&
      v["kv-events-endpoint"] === undefined
    )
      throw new UsageError("--kv-events-replay-endpoint needs --kv-events-port or --kv-events-endpoint");
    const { preset } = flag("cluster", () =>
      resolveCluster(v["cluster"] !== undefined ? String(v["cluster"]) : "h100-8b", undefined),
    );
    const w = await startWorker({
      role: role as "both",
      preset,
      timeScale,
      port: intOption(v["port"], "port", 0, 65535, 8100),
      ...(v["host"] !== undefined ? { host: String(v["host"]) } : {}),
      ...(v["model"] !== undefined ? { model: String(v["model"]) } : {}),
      ...(v["engine-version"] !== undefined ? { engineVersion: String(v["engine-version"]) } : {}),
      ...(v["kv-events-port"] !== undefined
        ? { kvEventsPort: intOption(v["kv-events-port"], "kv-events-port", 1, 65535, 5557) }
        : {}),
      ...(v["kv-events-endpoint"] !== undefined ? { kvEventsEndpoint: String(v["kv-events-endpoint"]) } : {}),
      ...(v["kv-events-replay-endpoint"] !== undefined
        ? { kvEventsReplayEndpoint: String(v["kv-events-replay-endpoint"]) }
        : {}),
      ...(v["kv-events-buffer-steps"] !== undefined
        ? {
            kvEventsBufferSteps: intOption(
              v["kv-events-buffer-steps"],
              "kv-events-buffer-steps",
              1,
              10_000_000,
              10_000,
            ),
          }
        : {}),
      ...(v["kv-events-topic"] !== undefined ? { kvEventsTopic: String(v["kv-events-topic"]) } : {}),
      ...(v["kv-events-url"] !== undefined ? { kvEventsUrl: String(v["kv-events-url"]) } : {}),
      ...(v["worker-id"] !== undefined ? { workerId: String(v["worker-id"]) } : {}),
      ...(v["link"] !== undefined ? { link: String(v["link"]) } : {}),
      dataParallelSize: intOption(v["data-parallel-size"], "data-parallel-size", 1, 64, 1),
    });
    process.stderr.write(
      `dolphin worker: ${w.role} ${w.preset.name} serving ${w.model} at ${w.url}` +
        (w.ranks.length > 1 ? `, ${w.ranks.length} data-parallel ranks` : "") +
        (w.kvEventsEndpoint ? `, KV events on ${w.kvEventsEndpoint}` : "") +
        (w.kvEventsReplayEndpoint ? ` (replay on ${w.kvEventsReplayEndpoint})` : "") +
        ` (emulated: timing from the simulator's model)\n`,
    );
    await untilSignal(() => w.close());
    return 0;
  },
};
