// Starts Envoy (the binary npm run setup installs into .venv) with the gateway's bootstrap (config.ts) and waits
// until its listener is bound; close stops it.

import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { findEnvoy, listenerPort, spawnEnvoy } from "../envoy/launch.js";
import { gatewayBootstrap, type GatewayEnvoySetup } from "./config.js";

const READY_TIMEOUT_MS = 30_000;

export interface RunningGatewayEnvoy {
  url: string;
  adminUrl: string;
  port: number;
  log(): string;
  close(): Promise<void>;
}

/** Envoy with the gateway bootstrap; its files go into dir (envoy-<name>.yaml, its admin address file). */
export async function startGatewayEnvoy(
  setup: GatewayEnvoySetup,
  dir: string,
  name = "gateway",
  onLog?: (line: string) => void,
): Promise<RunningGatewayEnvoy> {
  const binary = findEnvoy();
  const config = join(dir, `envoy-${name}.yaml`);
  const adminPath = join(dir, `envoy-${name}.admin`);
  writeFileSync(config, `${JSON.stringify(gatewayBootstrap(setup), null, 1)}\n`); // JSON is YAML
  const args = ["-c", config, "--concurrency", String(setup.concurrency ?? 2), "--log-level", "warn"];
  args.push("--admin-address-path", adminPath, "--disable-hot-restart");
  const envoy = spawnEnvoy(binary, args, onLog);
  const deadline = Date.now() + READY_TIMEOUT_MS;
  let adminUrl = "";
  let port = 0;
  while (Date.now() < deadline && port === 0) {
    if (envoy.exited()) break;
    if (!adminUrl && existsSync(adminPath)) {
      const address = readFileSync(adminPath, "utf8").trim();
      if (address) adminUrl = `http://${address}`;
    }
    if (adminUrl) port = await listenerPort(adminUrl, "gateway");
    if (port === 0) await new Promise((r) => setTimeout(r, 50));
  }
  if (port === 0) {
    envoy.child.kill("SIGKILL");
    const why = envoy.exited() ? `Envoy ${envoy.exited()}` : "not ready";
    throw new Error(`envoy: ${why}\n${envoy.log().split("\n").slice(-30).join("\n")}`);
  }
  const host = setup.listen.host ?? "127.0.0.1";
  return {
    url: `http://${host === "0.0.0.0" ? "127.0.0.1" : host}:${port}`,
    adminUrl,
    port,
    log: envoy.log,
    async close() {
      if (!envoy.exited()) {
        envoy.child.kill("SIGTERM");
        const timer = setTimeout(() => envoy.child.kill("SIGKILL"), 5000);
        await envoy.exit;
        clearTimeout(timer);
      }
    },
  };
}
