// `dolphin tune --live`: the learner's search against a running proxy, through its admin API.

import { writeFileSync } from "node:fs";
import { checkAdminAccess, tuneLive } from "../serve/tune.js";
import { parseSlo } from "../sim/metrics.js";
import { loadWorkload } from "../sim/workload-files.js";
import { encodeTable } from "../table/codec.js";
import { flag, intOption, UsageError, type Command } from "./args.js";

export const command: Command = {
  usage: `dolphin tune --live <proxy-url> --workload <name|file> --rate <req/s> --admin-token T [--model M]
             [--slo <preset|ttft_ms,tpot_ms>] [--k 8] [--requests N] [--max-rounds 30] [--max-output-tokens 32]
             [--seed N] [--out table.msgpack]

The search of dolphin train with the proxy as the environment: logs features by replaying the workload under the
proxy's current table, clusters them (isl, eff_P, eff_D), then for each candidate table swaps it in
(PUT /admin/table), replays the workload at --rate (streaming; TTFT and TPOT measured at the client, so the SLO is
in wall-clock terms), and reads each request's cluster from GET /admin/decisions. Leaves the best table in place.`,
  options: {
    live: { type: "string" },
    workload: { type: "string" },
    rate: { type: "string" },
    "admin-token": { type: "string" },
    model: { type: "string" },
    slo: { type: "string" },
    k: { type: "string" },
    requests: { type: "string" },
    "max-rounds": { type: "string" },
    "max-output-tokens": { type: "string" },
    seed: { type: "string" },
    out: { type: "string" },
  },
  async run(v) {
    for (const k of ["live", "workload", "rate", "admin-token"]) if (!v[k]) throw new UsageError(`--${k} is required`);
    const rate = Number(v["rate"]);
    if (!(rate > 0 && Number.isFinite(rate)))
      throw new UsageError(`--rate must be a number > 0, got ${String(v["rate"])}`);
    const slo = flag("slo", () => parseSlo(String(v["slo"] ?? "default")));
    const proxyUrl = String(v["live"]).replace(/\/$/, "");
    // before the workload is built and anything replayed: a refused token found at the end would waste minutes
    await checkAdminAccess(proxyUrl, String(v["admin-token"]));
    const workload = loadWorkload(String(v["workload"]), "auto", {
      seed: intOption(v["seed"], "seed", 0, 2 ** 31 - 1, 1),
      requests: intOption(v["requests"], "requests", 2, 1_000_000, 200),
    });
    const r = await tuneLive({
      proxyUrl,
      adminToken: String(v["admin-token"]),
      model: String(v["model"] ?? "dolphin-emulated"),
      workload,
      rate,
      slo,
      k: intOption(v["k"], "k", 1, 256, 8),
      maxRounds: intOption(v["max-rounds"], "max-rounds", 1, 10_000, 30),
      maxOutputTokens: intOption(v["max-output-tokens"], "max-output-tokens", 1, 100_000, 32),
      seed: intOption(v["seed"], "seed", 0, 2 ** 31 - 1, 1),
      onProgress: (l) => process.stderr.write(l + "\n"),
    });
    if (v["out"]) writeFileSync(String(v["out"]), encodeTable(r.table));
    process.stdout.write(
      JSON.stringify({
        bits: r.table.bits,
        rounds: r.search.log.length,
        best_reward: r.search.bestReward,
        log: r.search.log.map((s) => ({ round: s.round, phase: s.phase, table: s.bits.join(""), reward: s.reward })),
      }) + "\n",
    );
    return 0;
  },
};
