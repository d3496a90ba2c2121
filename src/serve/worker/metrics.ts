// The emulated worker's /metrics: vLLM's names and help texts (`vllm:*`, label model_name), read from the worker's
// state and counters when scraped, plus the TTFT histogram (simulated seconds, vLLM's buckets) and two of dolphin's.

import { LeLastHistogram, Registry, scrapedCounter, scrapedGauge, type Labels } from "../prometheus.js";

/** vLLM's TTFT histogram buckets (seconds). */
export const TTFT_BUCKETS = [
  0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0,
  640.0, 2560.0,
];

/** What the gauges and counters read at scrape time. */
export interface WorkerReadings {
  running: number;
  waiting: number;
  kvUsage: number;
  prefixQueryTokens: number;
  prefixHitTokens: number;
  promptTokens: number;
  generationTokens: number;
  completed: number;
  pinnedRequests: number;
  evictions: number;
  failedTransfers: number;
}

export class WorkerMetrics {
  readonly registry = new Registry();
  private readonly ttft: LeLastHistogram;
  private readonly labels: Labels;

  /** `cacheInfo`: the labels of vllm:cache_config_info (vLLM's CacheConfig, block_size among them). */
  constructor(model: string, read: () => WorkerReadings, cacheInfo: Labels = {}) {
    const r = this.registry;
    const labels = (this.labels = { model_name: model });
    const gauge = (name: string, help: string, value: (x: WorkerReadings) => number): void => {
      scrapedGauge(r, name, help, ["model_name"], () => [[labels, value(read())]]);
    };
    const counter = (name: string, help: string, value: (x: WorkerReadings) => number, extra: Labels = {}): void => {
      scrapedCounter(r, `${name}_total`, help, ["model_name", ...Object.keys(extra)], () => [
        [{ ...labels, ...extra }, value(read())],
      ]);
    };
    gauge("vllm:num_requests_running", "Number of requests in model execution batches.", (x) => x.running);
    gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", (x) => x.waiting);
    gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", (x) => x.kvUsage);
    gauge(
      "vllm:gpu_cache_usage_perc",
      "GPU KV-cache usage. 1 means 100 percent usage (deprecated name).",
      (x) => x.kvUsage,
    );
    counter(
      "vllm:prefix_cache_queries",
      "Prefix cache queries, in terms of number of queried tokens.",
      (x) => x.prefixQueryTokens,
    );
    counter(
      "vllm:prefix_cache_hits",
      "Prefix cache hits, in terms of number of cached tokens.",
      (x) => x.prefixHitTokens,
    );
    counter("vllm:prompt_tokens", "Number of prefill tokens processed.", (x) => x.promptTokens);
    counter("vllm:generation_tokens", "Number of generation tokens processed.", (x) => x.generationTokens);
    counter("vllm:request_success", "Count of successfully processed requests.", (x) => x.completed, {
      finished_reason: "length",
    });
    counter("vllm:num_preemptions", "Cumulative number of preemptions (none: KV is reserved at admission).", () => 0);
    this.ttft = new LeLastHistogram({
      name: "vllm:time_to_first_token_seconds",
      help: "Histogram of time to first token in seconds (simulated).",
      labelNames: ["model_name"],
      buckets: TTFT_BUCKETS,
      registers: [r],
    });
    this.ttft.zero(labels);
    gauge(
      "dolphin:kv_pinned_requests",
      "Prefill requests whose KV is pinned, waiting to be pulled.",
      (x) => x.pinnedRequests,
    );
    counter("dolphin:kv_cache_evictions", "KV blocks evicted from the prefix cache.", (x) => x.evictions);
    counter(
      "vllm:nixl_num_failed_transfers",
      "Number of failed NIXL KV Cache transfers, including handshake and notification failures.",
      (x) => x.failedTransfers,
    );
    const info = { ...cacheInfo, engine: "0" };
    scrapedGauge(r, "vllm:cache_config_info", "Information of the LLMEngine CacheConfig", Object.keys(info), () => [
      [info, 1],
    ]);
  }

  observeTtft(seconds: number): void {
    this.ttft.observe(this.labels, seconds);
  }
}
