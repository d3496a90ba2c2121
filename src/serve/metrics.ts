// The proxy's metrics, in Prometheus text format 0.0.4.

// ---- metrics (Prometheus text format 0.0.4) -------------------------------------------------------------------

export type Labels = Record<string, string>;
export const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

export const METRIC_HELP: Record<string, [type: "counter" | "gauge" | "histogram", help: string]> = {
  dolphin_requests_total: ["counter", "Requests answered, by endpoint, status code and route (local, remote, fallback, none)"],
  dolphin_request_duration_seconds: ["histogram", "Time from request to the last byte of the answer, inference endpoints"],
  dolphin_decisions_total: ["counter", "Routing decisions by path and reason"],
  dolphin_prefill_failures_total: ["counter", "Remote prefills that failed before the KV handoff, by kind"],
  dolphin_fallbacks_total: ["counter", "Remote prefills replaced by local prefill on the decode worker"],
  dolphin_upstream_errors_total: ["counter", "Failed worker calls, by worker, stage and kind"],
  dolphin_stream_errors_total: ["counter", "Streams cut mid-way by the decode worker (the client got an SSE error event)"],
  dolphin_worker_down_total: ["counter", "Workers taken out of rotation after a failure"],
  dolphin_worker_up_total: ["counter", "Workers put back after their /health answered"],
  dolphin_worker_expired_total: ["counter", "Registered workers removed after missing heartbeats"],
  dolphin_tokenize_failures_total: ["counter", "Precise mode: /tokenize failures (the request was routed on its text)"],
  dolphin_kv_events_total: ["counter", "KV events applied to the index, by worker, source and kind"],
  dolphin_kv_event_errors_total: ["counter", "KV event batches that did not decode"],
  dolphin_kv_blocks_unmapped_total: ["counter", "Stored blocks skipped: parent unknown to the index or a different block size"],
  dolphin_kv_sequence_gaps_total: ["counter", "ZMQ event batches missed (sequence gaps), by worker"],
  dolphin_table_swaps_total: ["counter", "Routing tables swapped in via PUT /admin/table"],
  dolphin_index_clears_total: ["counter", "Approximate mode: periodic clears of the whole index"],
  dolphin_prompt_tokens_total: ["counter", "Prompt tokens routed (isl), by path"],
  dolphin_cache_predicted_tokens_total: ["counter", "Predicted cached prompt tokens on the worker that prefills (matched blocks × block tokens), by path"],
  dolphin_cache_compared_requests_total: ["counter", "Requests whose worker reported usage.prompt_tokens_details.cached_tokens, by path"],
  dolphin_cache_compared_predicted_tokens_total: ["counter", "Predicted cached tokens of the requests in dolphin_cache_compared_requests_total"],
  dolphin_cache_reported_tokens_total: ["counter", "Cached tokens the workers reported for the same requests"],
  dolphin_inflight_requests: ["gauge", "Inference requests in flight"],
  dolphin_workers: ["gauge", "Workers by role and state"],
  dolphin_index_blocks: ["gauge", "Blocks in the router's index, by worker"],
  dolphin_sessions: ["gauge", "Conversations tracked"],
  dolphin_table_info: ["gauge", "The routing table in use"],
};

/** Label sets seen so far, by a cheap key of their values, to their rendered form (the set of series is small). */
const rendered = new Map<string, string>();

export function labelKey(labels: Labels): string {
  let quick = "";
  for (const k in labels) quick += `${k}\u0000${labels[k]}\u0001`;
  const hit = rendered.get(quick);
  if (hit !== undefined) return hit;
  const key = renderLabels(labels);
  if (rendered.size < 10_000) rendered.set(quick, key);
  return key;
}

function renderLabels(labels: Labels): string {
  const esc = (v: string): string => v.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
  const parts = Object.keys(labels).sort().map((k) => `${k}="${esc(labels[k]!)}"`);
  return parts.length ? `{${parts.join(",")}}` : "";
}

export class Metrics {
  private readonly values = new Map<string, Map<string, number>>();
  private readonly histograms = new Map<string, Map<string, { buckets: number[]; sum: number; count: number }>>();

  inc(name: string, labels: Labels = {}, by = 1): void {
    let m = this.values.get(name);
    if (!m) this.values.set(name, (m = new Map()));
    const k = labelKey(labels);
    m.set(k, (m.get(k) ?? 0) + by);
  }

  observe(name: string, labels: Labels, value: number): void {
    let m = this.histograms.get(name);
    if (!m) this.histograms.set(name, (m = new Map()));
    const k = labelKey(labels);
    let h = m.get(k);
    if (!h) m.set(k, (h = { buckets: DURATION_BUCKETS.map(() => 0), sum: 0, count: 0 }));
    DURATION_BUCKETS.forEach((b, i) => { if (value <= b) h!.buckets[i]!++; });
    h.sum += value;
    h.count++;
  }

  /** Counters and histograms, plus gauges computed now. */
  render(gauges: Array<[string, Labels, number]>): string {
    const lines: string[] = [];
    const header = (name: string): void => {
      const [type, help] = METRIC_HELP[name] ?? ["untyped", name];
      lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
    };
    for (const [name, m] of this.values) {
      header(name);
      for (const [k, v] of m) lines.push(`${name}${k} ${v}`);
    }
    for (const [name, m] of this.histograms) {
      header(name);
      for (const [k, h] of m) {
        const inner = k.slice(1, -1);
        const with_ = (extra: string): string => `{${inner ? `${inner},` : ""}${extra}}`;
        DURATION_BUCKETS.forEach((b, i) => lines.push(`${name}_bucket${with_(`le="${b}"`)} ${h.buckets[i]}`));
        lines.push(`${name}_bucket${with_('le="+Inf"')} ${h.count}`, `${name}_sum${k} ${h.sum}`, `${name}_count${k} ${h.count}`);
      }
    }
    const byName = new Map<string, string[]>();
    for (const [name, labels, v] of gauges) {
      let l = byName.get(name);
      if (!l) byName.set(name, (l = []));
      l.push(`${name}${labelKey(labels)} ${v}`);
    }
    for (const [name, l] of byName) {
      header(name);
      lines.push(...l);
    }
    return lines.join("\n") + "\n";
  }
}
