// Worker health: registered workers that miss their heartbeats are removed; workers in rotation are checked
// (GET /health with a timeout) and ejected after `health.unhealthy_after` failed checks in a row, which finds a frozen
// worker (SIGSTOP: the kernel still accepts its connections, nothing answers) within a few seconds; workers out of
// rotation are probed, once their back-off is over, until they answer 200 and come back. All run on the proxy's
// timers (proxy.ts).

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

/** Active checks: every worker in rotation is asked for /health; a late or non-200 answer is a failed check. */
export function checkWorkers(registry: WorkerRegistry, config: ServeConfig, agents: Agents): void {
  const limit = config.health.check_timeout_ms;
  for (const w of registry.all()) {
    if (!w.healthy || w.checking) continue;
    w.checking = true;
    const verdict = (ok: boolean, why: string): void => {
      w.checking = false;
      if (!w.healthy) return;
      if (ok) {
        w.failedChecks = 0;
        return;
      }
      if (++w.failedChecks >= config.health.unhealthy_after)
        registry.markDown(w, `${w.failedChecks} health checks failed, the last: ${why}`, "health_check");
    };
    upstreamRequest(agents, `${w.spec.url}/health`, { method: "GET", connectMs: limit, responseMs: limit })
      .then(async (res) => {
        await readUpstream(res, limit, 1 << 20).catch(() => undefined);
        verdict(res.statusCode === 200, `/health answered ${res.statusCode}`);
      })
      .catch((e: Error) => verdict(false, e.message));
  }
}

/** Asks every worker out of rotation, once its back-off is over, for /health (one probe at a time); a 200 puts it back. */
export function probeDownWorkers(registry: WorkerRegistry, config: ServeConfig, agents: Agents): void {
  const t = config.timeouts;
  const probeMs = Math.max(t.connect_ms, 1000);
  const now = Date.now();
  for (const w of registry.all()) {
    if (w.healthy || w.probing || now < w.ejectedUntilMs) continue;
    w.probing = true;
    upstreamRequest(agents, `${w.spec.url}/health`, { method: "GET", connectMs: t.connect_ms, responseMs: probeMs })
      .then(async (res) => {
        await readUpstream(res, probeMs, 1 << 20).catch(() => undefined);
        if (res.statusCode === 200) registry.markUp(w);
      })
      .catch(() => undefined)
      .finally(() => {
        w.probing = false;
      });
  }
}
