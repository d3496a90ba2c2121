// `dolphin calibrate`: measure live vLLM engines (given, or started as `dolphin serve --vllm` starts them, pinned),
// fit the simulator's step-time model and KV transfer to what they report, and write a cluster file for --cluster.

import { mkdirSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { calibrate, clusterFileOf, GRIDS, modelFacts } from "../serve/vllm/calibrate.js";
import { engineSpecs } from "../serve/vllm/cluster.js";
import { SERVED_MODEL, startEngines, stopEngines, type VllmEngine } from "../serve/vllm/engines.js";
import { vllmInstall } from "../serve/vllm/install.js";
import { clusterFromFile } from "../sim/cluster-file.js";
import { intOption, UsageError, type Command } from "./args.js";

/** vLLM's defaults on CPU for the OpenAI server (vllm/engine/arg_utils.py): 2,048 batched tokens, 128 sequences. */
const CPU_DEFAULTS = { maxNumBatchedTokens: 2048, maxNumSeqs: 128 };

export const command: Command = {
  usage: `dolphin calibrate (--vllm 1P1D|1R | --workers URL[,URL]) [--out FILE] [--grid small|full] [--repeats N]
                 [--name NAME] [--model DIR] [--served-model NAME] [--max-num-batched-tokens N] [--max-num-seqs N]

Measures live vLLM engines and writes a cluster file (default calibrated.json) that dolphin simulate, train and eval
take as --cluster FILE (with --link <name>-nixl for the measured KV transfer). Measured, from the engine's own
Prometheus histograms (the delta of _sum and _count around each probe): prefill steps by chunk and cached prefix
(vllm:request_prefill_time_seconds), decode steps by batch and context (vllm:inter_token_latency_seconds), mixed
steps (decodes running and one prefill), the KV cache (vllm:cache_config_info) and, with a prefill and a decode
engine, the NIXL transfer by tokens (vllm:nixl_xfer_time_seconds) with the decode engine's TTFT, remote against local.
The step-time model (docs/simulator-calibration.md) is fitted by least squares on relative error, coefficients ≥ 0;
the error at every measured point is printed and stored in the file's provenance.
--vllm starts the engines as dolphin serve --vllm does (1P1D: P0 on core 0, D0 on core 1; steps measured on D0)
and stops them at the end. --workers: one URL (steps only), or a prefill then a decode engine (steps on the
decode engine, transfers from the first). --model is the model's folder (config.json: KV bytes per token;
safetensors: weights), default the tiny model npm run setup made. The batch budget and sequence limit default to
vLLM's on CPU (2048, 128): give the engine's if it was started otherwise.`,
  options: {
    vllm: { type: "string" },
    workers: { type: "string" },
    out: { type: "string" },
    grid: { type: "string" },
    repeats: { type: "string" },
    name: { type: "string" },
    model: { type: "string" },
    "served-model": { type: "string" },
    "max-num-batched-tokens": { type: "string" },
    "max-num-seqs": { type: "string" },
  },
  async run(v) {
    if ((v["vllm"] === undefined) === (v["workers"] === undefined)) throw new UsageError("give --vllm or --workers");
    const gridName = String(v["grid"] ?? "full");
    if (gridName !== "small" && gridName !== "full") throw new UsageError("--grid must be small or full");
    const grid = { ...GRIDS[gridName] };
    grid.repeats = intOption(v["repeats"], "repeats", 1, 20, grid.repeats);
    const out = String(v["out"] ?? "calibrated.json");
    const name = String(v["name"] ?? "calibrated");
    const say = (line: string): void => void process.stderr.write(`dolphin calibrate: ${line}\n`);
    const modelDir = v["model"] !== undefined ? String(v["model"]) : vllmInstall().model;
    const facts = modelFacts(modelDir);
    const limits = {
      maxNumBatchedTokens: intOption(
        v["max-num-batched-tokens"],
        "max-num-batched-tokens",
        1,
        1 << 20,
        CPU_DEFAULTS.maxNumBatchedTokens,
      ),
      maxNumSeqs: intOption(v["max-num-seqs"], "max-num-seqs", 1, 1 << 16, CPU_DEFAULTS.maxNumSeqs),
    };
    let engines: VllmEngine[] = [];
    let urls: string[];
    let engineText: string;
    const stop = () => void stopEngines(engines);
    process.once("SIGINT", stop);
    try {
      if (v["vllm"] !== undefined) {
        const split = String(v["vllm"]);
        if (split !== "1P1D" && split !== "1R") throw new UsageError("--vllm must be 1P1D or 1R");
        const install = vllmInstall();
        say(`starting vLLM ${install.version} engines (${split}); each takes 30–60 s to start`);
        engines = await startEngines(engineSpecs(split), { progress: say, model: modelDir });
        urls = engines.map((e) => e.url);
        engineText = `vLLM ${install.version} (CPU), ${split}, pinned as dolphin serve --vllm`;
      } else {
        urls = String(v["workers"])
          .split(",")
          .map((u) => u.trim().replace(/\/$/, ""));
        if (urls.length < 1 || urls.length > 2 || urls.some((u) => !/^https?:\/\//.test(u)))
          throw new UsageError("--workers takes one or two http(s) URLs: an engine, or a prefill then a decode engine");
        engineText = `vLLM at ${urls.join(", ")}`;
      }
      const stepUrl = urls.at(-1)!;
      const c = await calibrate(
        {
          stepUrl,
          ...(urls.length === 2 ? { prefillUrl: urls[0]! } : {}),
          model: String(v["served-model"] ?? SERVED_MODEL),
          ...facts,
          ...limits,
        },
        grid,
        say,
      );
      const file = clusterFileOf(c, name, {
        tool: "dolphin calibrate",
        measured_at: new Date().toISOString(),
        engine: engineText,
        model: modelDir,
        grid: gridName,
        repeats: grid.repeats,
        note: "step times from the engine's Prometheus histograms; wallMs is the client's wall clock (not fitted)",
      });
      const text = JSON.stringify(file, null, 2) + "\n";
      clusterFromFile(text, out); // what --cluster will read: it must load
      mkdirSync(dirname(out), { recursive: true });
      writeFileSync(out, text);
      const co = c.step.coefficients;
      say(
        `fit: t_fix ${co.tFixMs.toFixed(3)} ms, T_w ${co.weightStreamMs.toFixed(3)} ms, k_lin ${co.kLinMs.toExponential(3)}, ` +
          `k_kv ${co.kKvMs.toExponential(3)}, c_attn ${co.cAttnMs.toExponential(3)} (ms)`,
      );
      for (const e of [...c.step.errors, ...(c.transfer?.errors ?? [])])
        say(
          `  ${e.label}: measured ${e.measuredMs.toFixed(2)} ms, model ${e.fittedMs.toFixed(2)} ms, ${(100 * e.error).toFixed(1)}%`,
        );
      if (c.transfer)
        say(
          `transfer: alpha ${c.transfer.alphaMs.toFixed(3)} ms, ${c.transfer.gbPerSecond.toFixed(3)} GB/s achieved (link ${name}-nixl)`,
        );
      const worst = Math.max(c.step.maxAbsError, c.transfer?.maxAbsError ?? 0);
      say(
        `worst point ${(100 * worst).toFixed(1)}% (target ±10%: ${worst <= 0.1 ? "met" : "NOT met"}); ${c.points.length + c.transfers.length} points in ${c.seconds.toFixed(0)} s; wrote ${out}`,
      );
      say(
        `try: dolphin simulate --cluster ${out}${c.transfer ? ` --link ${name}-nixl` : ""} --workload humaneval --split 1P1D --policy always-remote`,
      );
      return 0;
    } finally {
      process.off("SIGINT", stop);
      await stopEngines(engines);
    }
  },
};
