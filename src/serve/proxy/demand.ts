// Signals for autoscalers: per worker role, the demand the proxy sees, as gauges an HPA (through a Prometheus adapter),
// KEDA's Prometheus scaler or a Dynamo-style planner can scale each pool on (docs/serving.md "Signals for
// autoscalers"):
//   dolphin_demand_prefill_tokens{role, state}  queued: prompt tokens of routed requests whose prefill has not begun
//                                                (waiting for a place on a worker); inflight: prefills under way
//   dolphin_demand_decode_sequences{role}       decode calls in flight (vLLM's running + waiting requests, as sent)
//   dolphin_demand_decode_tokens{role}          their context tokens (the KV cache they need)
//   dolphin_demand_shed_per_second{role}        requests answered 503 over the last minute: at a place on a worker
//                                                of that stage, or by the proxy's own limits (role "proxy")
//   dolphin_demand_fallbacks_per_second{role}   remote prefills done locally on the decode worker (role "prefill":
//                                                the prefill pool was short) over the last minute
// The in-flight loads are the router's own (registry.ts holds them); the queued tokens and the rates are kept here.

import type { WorkerRole } from "../config-workers.js";
import { scrapedGauge } from "../prometheus.js";
import type { ProxyMetrics } from "./metrics.js";
import type { WorkerRegistry } from "./registry.js";
import type { RequestContext } from "./request-context.js";
import type { WorkerAdmission } from "./worker-admission.js";

const ROLES: readonly WorkerRole[] = ["prefill", "decode", "both"];
/** The rates are over this window, sampled once a second. */
const RATE_WINDOW_S = 60;
const SAMPLE_MS = 1000;

interface Sample {
  s: number;
  proxyShed: number;
  prefillShed: number;
  decodeShed: number;
  fallbacks: number;
}

export class Demand {
  /** Prompt tokens waiting for their prefill, by the worker chosen to prefill them. */
  private readonly queued = new Map<string, number>();
  private readonly samples: Sample[] = [];
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly registry: WorkerRegistry,
    private readonly places: WorkerAdmission,
    private readonly metrics: ProxyMetrics,
  ) {
    const r = metrics.registry;
    const perRole = (f: (role: WorkerRole) => number) => () => ROLES.map((role) => [{ role }, f(role)] as const);
    scrapedGauge(
      r,
      "dolphin_demand_prefill_tokens",
      "Prompt tokens to prefill, by the role of the worker chosen to prefill them and state (queued: routed, prefill not begun; inflight: prefill under way)",
      ["role", "state"],
      () =>
        ROLES.flatMap((role) => [
          [{ role, state: "queued" }, this.queuedOn(role)] as const,
          [{ role, state: "inflight" }, this.sum(role, (w) => w.activePrefillTokens)] as const,
        ]),
    );
    scrapedGauge(
      r,
      "dolphin_demand_decode_sequences",
      "Decode calls in flight, by the role of their worker",
      ["role"],
      perRole((role) => this.sum(role, (w) => w.decodeSequences)),
    );
    scrapedGauge(
      r,
      "dolphin_demand_decode_tokens",
      "Context tokens of the decode calls in flight, by the role of their worker",
      ["role"],
      perRole((role) => this.sum(role, (w) => w.activeDecodeTokens)),
    );
    scrapedGauge(
      r,
      "dolphin_demand_shed_per_second",
      `Requests answered 503 by load shedding per second over the last ${RATE_WINDOW_S} s: waiting for a place on a prefill or decode worker (role), or by the proxy's own limits (role "proxy")`,
      ["role"],
      () => [
        [{ role: "proxy" }, this.rate((x) => x.proxyShed)],
        [{ role: "prefill" }, this.rate((x) => x.prefillShed)],
        [{ role: "decode" }, this.rate((x) => x.decodeShed)],
      ],
    );
    scrapedGauge(
      r,
      "dolphin_demand_fallbacks_per_second",
      `Remote prefills done locally on the decode worker instead, per second over the last ${RATE_WINDOW_S} s`,
      ["role"],
      () => [[{ role: "prefill" }, this.rate((x) => x.fallbacks)]],
    );
  }

  /**
   * A routed request's prompt waits for its prefill on `worker` (`tokens` to compute) until a worker's prefill load
   * is held for it (registry.ts) or its response closes.
   */
  queue(ctx: RequestContext, worker: string, tokens: number): void {
    if (tokens <= 0) return;
    this.queued.set(worker, (this.queued.get(worker) ?? 0) + tokens);
    let held = true;
    const release = (): void => {
      if (!held) return;
      held = false;
      const left = (this.queued.get(worker) ?? 0) - tokens;
      if (left > 0) this.queued.set(worker, left);
      else this.queued.delete(worker);
    };
    ctx.prefillStarted = release;
    ctx.releases.push(release);
  }

  /** Samples the shed and fallback counts once a second from now on. */
  start(): void {
    void this.sample();
    this.timer = setInterval(() => void this.sample(), SAMPLE_MS);
    this.timer.unref();
  }

  close(): void {
    if (this.timer) clearInterval(this.timer);
  }

  private async sample(): Promise<void> {
    const total = (await this.metrics.shed.get()).values.reduce((n, v) => n + v.value, 0);
    const fallbacks = (await this.metrics.fallbacks.get()).values.reduce((n, v) => n + v.value, 0);
    const { prefill, decode } = this.places.shedAt;
    const s = performance.now() / 1000;
    this.samples.push({ s, proxyShed: total - prefill - decode, prefillShed: prefill, decodeShed: decode, fallbacks });
    while (this.samples.length > 2 && s - this.samples[1]!.s >= RATE_WINDOW_S) this.samples.shift();
  }

  /** Per second between the oldest and the newest sample (0 before two). */
  private rate(of: (x: Sample) => number): number {
    const first = this.samples[0];
    const last = this.samples.at(-1);
    if (!first || !last || last.s <= first.s) return 0;
    return (of(last) - of(first)) / (last.s - first.s);
  }

  private queuedOn(role: WorkerRole): number {
    let n = 0;
    for (const [id, tokens] of this.queued) if (this.registry.get(id)?.spec.role === role) n += tokens;
    return n;
  }

  private sum(role: WorkerRole, f: (w: ReturnType<WorkerRegistry["all"]>[number]) => number): number {
    let n = 0;
    for (const w of this.registry.all()) if (w.spec.role === role) n += f(w);
    return n;
  }
}
