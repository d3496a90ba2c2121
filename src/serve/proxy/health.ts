// Worker health: registered workers that miss their heartbeats are removed; workers in rotation are checked
// (GET /health with a timeout) and ejected after `health.unhealthy_after` failed checks in a row, which finds a frozen
// worker (SIGSTOP: the kernel still accepts its connections, nothing answers) within a few seconds; workers out of
// rotation are probed, once their back-off is over, until they answer 200 and come back. All run on the proxy's
// timers (proxy.ts).
//
// A check that times out while the proxy's own event loop was saturated proves nothing about the worker: the answer
// may have sat unread in the socket while the loop worked through requests (measured in bench overload: a slow but
// healthy worker ejected twice, its requests turned into 502s). Such a check is not counted, unless it happens
// SATURATED_CHECKS_PER_FAILURE times in a row: a worker frozen during a long overload is still ejected, later.

import { performance } from "node:perf_hooks";
import type { ServeConfig } from "../config.js";
import { readUpstream, upstreamRequest, UpstreamError, type Agents } from "./upstream.js";
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

/** The share of a check's time the proxy's loop was busy above which a timed-out check is not the worker's fault. */
export const SATURATED_LOOP = 0.9;
/** Timed-out checks in a row, all during a saturated loop, that count as one failed check. */
export const SATURATED_CHECKS_PER_FAILURE = 3;

/** Active checks: every worker in rotation is asked for /health; a late or non-200 answer is a failed check. */
export function checkWorkers(registry: WorkerRegistry, config: ServeConfig, agents: Agents): void {
  const limit = config.health.check_timeout_ms;
  for (const w of registry.all()) {
    if (!w.healthy || w.checking) continue;
    w.checking = true;
    const started = performance.eventLoopUtilization();
    const verdict = (ok: boolean, why: string, timedOut = false): void => {
      w.checking = false;
      if (!w.healthy) return;
      if (ok) {
        w.failedChecks = 0;
        w.saturatedChecks = 0;
        return;
      }
      const busy = performance.eventLoopUtilization(performance.eventLoopUtilization(), started).utilization;
      if (timedOut && busy >= SATURATED_LOOP && ++w.saturatedChecks % SATURATED_CHECKS_PER_FAILURE !== 0) return;
      if (++w.failedChecks >= config.health.unhealthy_after)
        registry.markDown(w, `${w.failedChecks} health checks failed, the last: ${why}`, "health_check");
    };
    upstreamRequest(agents, `${w.spec.url}/health`, { method: "GET", connectMs: limit, responseMs: limit })
      .then(async (res) => {
        await readUpstream(res, limit, 1 << 20).catch(() => undefined);
        verdict(res.statusCode === 200, `/health answered ${res.statusCode}`);
      })
      .catch((e: Error) => {
        // the proxy out of descriptors could not ask: no verdict on the worker
        if (e instanceof UpstreamError && e.kind === "local") w.checking = false;
        else verdict(false, e.message, isTimeout(e));
      });
  }
}

/** A failure only a timer saw (no connection or no answer in time), as opposed to a refusal, reset or bad status. */
function isTimeout(e: Error): boolean {
  return e instanceof UpstreamError && (e.kind === "timeout" || e.kind === "connect") && !e.refused;
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
