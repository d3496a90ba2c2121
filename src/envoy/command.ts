// `dolphin envoy`: Envoy with the dolphin filter, in front of emulated workers (--emulate nPmD) or real ones
// (--config envoy-plugin.json), or just the configuration written for real workers (--config … --write DIR).
// The CLI registers this command in a few lines (usage.ts: its help and options); everything it does is here.

import { mkdirSync } from "node:fs";
import { resolve } from "node:path";
import { loadSetup, type EnvoySetup } from "./config.js";
import { startEmulatedEnvoy } from "./emulate.js";
import { findEnvoy, startEnvoy, writeEnvoyConfig } from "./launch.js";

export class EnvoyUsageError extends Error {}

function integer(v: unknown, name: string, min: number, max: number, dflt: number): number {
  if (v === undefined) return dflt;
  const n = Number(v);
  if (!Number.isInteger(n) || n < min || n > max) throw new EnvoyUsageError(`--${name} must be an integer in ${min}–${max}, got ${String(v)}`);
  return n;
}

export async function runEnvoyCommand(v: Record<string, string | boolean | undefined>, print: (line: string) => void = (l) => process.stderr.write(`${l}\n`)): Promise<number> {
  const port = integer(v["port"], "port", 0, 65535, 8000);
  const adminPort = integer(v["admin-port"], "admin-port", 0, 65535, 9901);
  const concurrency = integer(v["concurrency"], "concurrency", 1, 256, 2);
  let close: () => Promise<void>;
  if (v["emulate"] !== undefined) {
    findEnvoy(); // before starting workers: says to run npm run setup
    const timeScale = v["time-scale"] !== undefined ? Number(v["time-scale"]) : 1;
    if (!(timeScale > 0 && Number.isFinite(timeScale))) throw new EnvoyUsageError("--time-scale must be a number > 0");
    const e = await startEmulatedEnvoy({
      split: String(v["emulate"]), port, adminPort, concurrency, timeScale, ...(v["table"] !== undefined ? { table: String(v["table"]) } : {}),
    });
    print(`dolphin envoy: Envoy + dolphin filter at ${e.envoy.url} (admin ${e.envoy.adminUrl}, ${concurrency} worker threads) in front of ` +
      `${e.workers.length} emulated workers (${e.workers.map((w) => `${w.workerId} ${w.role} ${w.url}`).join(", ")}); try:\n  curl ${e.envoy.url}/v1/chat/completions ` +
      `-H 'content-type: application/json' -d '{"model":"dolphin-emulated","messages":[{"role":"user","content":"hello"}],"max_tokens":8}'\n` +
      `  curl -s ${e.envoy.adminUrl}/stats/prometheus | grep ^dolphin_`);
    close = () => e.close();
  } else {
    if (v["config"] === undefined) throw new EnvoyUsageError("give --config envoy-plugin.json or --emulate nPmD");
    const setup: EnvoySetup = loadSetup(String(v["config"]));
    if (v["port"] !== undefined) setup.listen = { ...setup.listen, port };
    if (v["admin-port"] !== undefined) setup.admin = { ...setup.admin, port: adminPort };
    if (v["concurrency"] !== undefined) setup.concurrency = concurrency;
    if (v["table"] !== undefined) setup.table = String(v["table"]);
    if (v["write"] !== undefined) {
      const dir = resolve(String(v["write"]));
      mkdirSync(dir, { recursive: true });
      const paths = writeEnvoyConfig(setup, dir);
      print(`dolphin envoy: wrote ${paths.bootstrap} and ${paths.listener}; run: ${findEnvoySafe()} -c ${paths.bootstrap} --concurrency ${setup.concurrency ?? 2}`);
      return 0;
    }
    const envoy = await startEnvoy(setup, { dir: undefined });
    print(`dolphin envoy: Envoy + dolphin filter at ${envoy.url} (admin ${envoy.adminUrl}) in front of ${setup.workers.length} workers; configuration in ${envoy.dir}`);
    close = () => envoy.close();
  }
  await new Promise<void>((done) => {
    const stop = (): void => void close().then(done);
    process.once("SIGINT", stop);
    process.once("SIGTERM", stop);
  });
  return 0;
}

function findEnvoySafe(): string {
  try {
    return findEnvoy();
  } catch {
    return "envoy";
  }
}
