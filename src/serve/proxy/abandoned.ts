// A client that leaves after its prefill: the prefill engine has finished and holds the prompt's KV blocks for the
// handoff, and no decode request will come to pull them. vLLM 0.32's NixlConnector would keep them for the lease
// (kv_transfer_config.kv_connector_extra_config.kv_lease_duration, 30 s by default; pull_scheduler.py
// request_finished, base_worker.py _reap_expired_send_leases). What frees them at once is a decode request for the
// handoff that the decode engine refuses before it is scheduled: its serving layer then submits a pre-aborted request
// (_with_kv_transfer_rejection_cleanup → notify_kv_transfer_request_rejected), whose request_finished on the decode
// side, with do_remote_prefill still set, notifies the prefill engine that its blocks may go. So the proxy sends the
// decode worker the handoff with a model no engine serves: a 404, no scheduling, no KV pulled, the blocks released.
// The same goes for a handoff whose decode call failed and was retried on another decode worker (which prefilled
// locally): the other worker is sent the release. docs/serving.md "A client that leaves".

import type { ServeConfig } from "../config.js";
import { withRank } from "../config-workers.js";
import { Counter } from "../prometheus.js";
import type { Logger } from "./log.js";
import type { ProxyMetrics } from "./metrics.js";
import type { WorkerRegistry } from "./registry.js";
import type { RequestContext } from "./request-context.js";
import { readUpstream, upstreamRequest, type Agents } from "./upstream.js";

/** The model of a release request: served by no engine, so its decode request is refused before scheduling. */
export const RELEASE_MODEL = "dolphin-routing/release-kv";

export class AbandonedPrefills {
  private readonly released: Counter;

  constructor(
    private readonly config: ServeConfig,
    private readonly registry: WorkerRegistry,
    private readonly agents: Agents,
    metrics: ProxyMetrics,
    private readonly log: Logger,
  ) {
    this.released = new Counter({
      name: "dolphin_abandoned_prefills_total",
      help: "Remote prefills whose handoff no decode call pulled (cause client_gone: the client left before it; decode_retried: the decode was retried elsewhere with a local prefill), sent to a decode worker to be refused so that the prefill engine frees its blocks, by outcome (released: refused as asked; failed)",
      labelNames: ["cause", "outcome"],
      registers: [metrics.registry],
    });
  }

  /** Sends `decodeWorker` the handoff `kvParams` to refuse (see above); resolves when it answered, never throws. */
  async release(
    ctx: RequestContext,
    decodeWorker: string,
    kvParams: Record<string, unknown>,
    cause: "client_gone" | "decode_retried",
  ): Promise<void> {
    const w = this.registry.get(decodeWorker);
    const t = this.config.timeouts;
    let outcome: "released" | "failed" = "failed";
    let why = "";
    try {
      if (!w) throw new Error(`decode worker ${decodeWorker} is gone`);
      const res = await upstreamRequest(this.agents, `${w.spec.url}/v1/completions`, {
        method: "POST",
        headers: withRank(w.spec, ctx.upstreamHeaders()),
        body: JSON.stringify({ model: RELEASE_MODEL, prompt: [0], max_tokens: 1, kv_transfer_params: kvParams }),
        connectMs: t.connect_ms,
        responseMs: t.tokenize_ms,
      });
      await readUpstream(res, t.tokenize_ms);
      const status = res.statusCode ?? 0;
      // vLLM refuses an unknown model with 404 (any 4xx is a refusal before scheduling)
      if (status >= 400 && status < 500) outcome = "released";
      else why = `answered ${status}`;
    } catch (e) {
      why = (e as Error).message;
    }
    this.released.inc({ cause, outcome });
    if (outcome === "failed")
      this.log.log("warn", "could not release an abandoned prefill's handoff", {
        id: ctx.id,
        worker: decodeWorker,
        cause,
        error: why,
      });
    else this.log.log("debug", "abandoned prefill's handoff released", { id: ctx.id, worker: decodeWorker });
  }
}
