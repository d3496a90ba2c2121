// The drift guard in `dolphin serve` (src/router/drift-guard.ts holds the guard itself): each request is routed through
// it, and when an armed request's answer is over its outcome (end-to-end latency, output tokens from the worker's
// usage, failure) goes back to the guard. Reverts and re-enables are logged and counted; /metrics reads its status.

import { DriftGuard, type DriftEvent, type DriftTicket } from "../../router/drift-guard.js";
import type { Router } from "../../router/router.js";
import type { Decision, RouteRequest } from "../../router/types.js";
import type { ServeConfig } from "../config.js";
import type { Logger } from "./log.js";
import type { ProxyMetrics } from "./metrics.js";
import type { RequestContext } from "./request-context.js";

export class ServeDriftGuard {
  readonly guard: DriftGuard;

  constructor(
    config: ServeConfig["drift"],
    router: Router,
    private readonly metrics: ProxyMetrics,
    private readonly log: Logger,
  ) {
    this.guard = new DriftGuard(router, {
      controlShare: config.control_share,
      windowS: config.window_s,
      minSamples: config.min_samples,
      zRevert: config.z_revert,
      minGap: config.min_gap,
      revertAfterS: config.revert_after_s,
      reenableAfterS: config.reenable_after_s,
      seed: config.seed,
    });
    this.guard.onEvent = (e) => this.changed(e);
    metrics.watchDrift(() => this.guard.status());
  }

  /** The guard's decision; an armed request reports its outcome when its response closes. */
  route(ctx: RequestContext, request: RouteRequest): Decision {
    const { decision, ticket } = this.guard.route(request);
    if (ticket) ctx.afterClose.push(() => this.observe(ctx, ticket));
    return decision;
  }

  /**
   * A 5xx (or a stream cut mid-way) is a miss; a client that left or a 4xx is no outcome (not the route's doing);
   * an answer without a known output length cannot be judged against the TPOT part of the SLO and is counted apart.
   */
  private observe(ctx: RequestContext, ticket: DriftTicket): void {
    if (ctx.clientGone) return;
    const status = ctx.statusOverride ?? ctx.res.statusCode;
    if (status >= 500) return this.guard.observe(ticket, { failed: true });
    if (status >= 400) return;
    if (ctx.completionTokens === null) {
      this.metrics.driftUnjudged.inc();
      return;
    }
    this.guard.observe(ticket, { e2eMs: performance.now() - ctx.startMs, outputTokens: ctx.completionTokens });
  }

  private changed(e: DriftEvent): void {
    const labels = { cluster: String(e.cluster) };
    if (e.type === "revert") this.metrics.driftReverts.inc(labels);
    else this.metrics.driftReenables.inc(labels);
    this.log.log(
      e.type === "revert" ? "warn" : "info",
      e.type === "revert"
        ? "drift guard: cluster reverted to the fallback rule"
        : "drift guard: cluster re-enabled after a clean probation",
      {
        cluster: e.cluster,
        value: e.value,
        learned: e.learned,
        control: e.control,
        z: Math.round(e.z * 100) / 100,
        table: e.table,
      },
    );
  }
}
