// The drift guard in `dolphin serve` (src/router/drift-guard.ts holds the guard itself): each request is routed through
// it, and when an armed request's answer is over its outcome (end-to-end latency, output tokens from the worker's
// usage, failure) goes back to the guard. Reverts, re-enables, hand-overs, hand-backs and the mix-shift guard's alarms
// are logged and counted; /metrics reads its status.

import { DriftGuard, type DriftEvent, type DriftTicket, type MixShiftEvent } from "../../router/drift-guard.js";
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
    this.guard = new DriftGuard(
      router,
      {
        controlShare: config.control_share,
        windowS: config.window_s,
        minSamples: config.min_samples,
        zRevert: config.z_revert,
        minGap: config.min_gap,
        revertAfterS: config.revert_after_s,
        reenableAfterS: config.reenable_after_s,
        seed: config.seed,
      },
      config.mix_enabled
        ? { window: config.mix_window, psiAlarm: config.mix_psi_alarm, psiClear: config.mix_psi_clear }
        : false,
    );
    this.guard.onEvent = (e) => this.changed(e);
    this.guard.onMixShift = (e) => this.mixShifted(e);
    metrics.watchDrift(
      () => this.guard.status(),
      () => this.guard.mixStatus(),
    );
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
    const { counter, message } = {
      revert: { counter: this.metrics.driftReverts, message: "drift guard: cluster reverted to the fallback rule" },
      reenable: {
        counter: this.metrics.driftReenables,
        message: "drift guard: cluster re-enabled after a clean probation",
      },
      handover: {
        counter: this.metrics.driftHandovers,
        message: "drift guard: cluster handed over to the fallback rule (the traffic's mix departed)",
      },
      handback: {
        counter: this.metrics.driftHandbacks,
        message: "drift guard: handed-over cluster given back its learned value (no worse than the rule)",
      },
    }[e.type];
    counter.inc(labels);
    this.log.log(e.type === "revert" ? "warn" : "info", message, {
      cluster: e.cluster,
      value: e.value,
      learned: e.learned,
      control: e.control,
      z: Math.round(e.z * 100) / 100,
      table: e.table,
    });
  }

  /** One warn line per alarm (with the clusters it handed over), one info line when the mix is back. */
  private mixShifted(e: MixShiftEvent): void {
    if (e.type === "alarm") this.metrics.mixShiftAlarms.inc();
    this.log.log(
      e.type === "alarm" ? "warn" : "info",
      e.type === "alarm"
        ? "mix-shift guard: the traffic's cluster shares departed from the training shares"
        : "mix-shift guard: the traffic's cluster shares are back near the training shares",
      { psi: Math.round(e.psi * 1000) / 1000, handed_over: e.handedOver, table: e.table },
    );
  }
}
