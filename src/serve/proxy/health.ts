// Worker health: registered workers that miss their heartbeats are removed, and workers out of rotation are probed
// (GET /health) until they answer 200 and come back. Both run on the proxy's timers (proxy.ts).

import type { ServeConfig } from "../config.js";
import { readUpstream, upstreamRequest, type Agents } from "./upstream.js";
import type { ProxyMetrics } from "./metrics.js";
import type { WorkerRegistry } from "./registry.js";

/** Removes registered workers whose last heartbeat is older than heartbeat.expiry_s. */
export function expireWorkers(registry: WorkerRegistry, config: ServeConfig, metrics: ProxyMetrics): void {
  const now = Date.now();
  const expiry = config.heartbeat.expiry_s;
  for (const w of registry.all()) {
    if (w.source === "registered" && now - w.lastHeartbeatMs > expiry * 1000) {
      registry.drop(w, `no heartbeat for ${expiry} s`);
      metrics.workerExpired.inc();
    }
  }
}

/** Asks every worker out of rotation for /health (one probe per worker at a time); a 200 puts it back. */
export function probeDownWorkers(registry: WorkerRegistry, config: ServeConfig, agents: Agents): void {
  const t = config.timeouts;
  const probeMs = Math.max(t.connect_ms, 1000);
  for (const w of registry.all()) {
    if (w.healthy || w.probing) continue;
    w.probing = true;
    upstreamRequest(agents, `${w.spec.url}/health`, { method: "GET", connectMs: t.connect_ms, responseMs: probeMs })
      .then(async (res) => {
        await readUpstream(res, probeMs, 1 << 20).catch(() => undefined);
        if (res.statusCode === 200) registry.markUp(w);
      })
      .catch(() => undefined)
      .finally(() => { w.probing = false; });
  }
}
