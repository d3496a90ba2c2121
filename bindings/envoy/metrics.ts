// The filter's metrics (proxy_define_metric). Envoy shows them as wasmcustom.<name> on /stats and as <name> on
// /stats/prometheus; counters add up across the VMs of all worker threads. Defining a name again (a new
// configuration in the same VM) returns the same metric.

import * as imports from "@gcoredev/proxy-wasm-sdk-as/assembly/imports";
import { WasmResultValues } from "@gcoredev/proxy-wasm-sdk-as/assembly/runtime";

// proxy-wasm MetricType
const COUNTER: i32 = 0;
const HISTOGRAM: i32 = 2;

export class Metrics {
  requestsLocal: u32 = 0;
  requestsRemote: u32 = 0;
  requestsFallback: u32 = 0;
  fallbacks: u32 = 0;
  prefillFailures: u32 = 0;
  badRequests: u32 = 0;
  routeErrors: u32 = 0;
  promptBlocks: u32 = 0;
  matchedBlocks: u32 = 0;
  routeTimeUs: u32 = 0;
  logSkipped: u32 = 0;
  logUnshared: u32 = 0;
  tableLoads: u32 = 0;
  defined: bool = false;

  define(): void {
    if (this.defined) return;
    this.requestsLocal = define(COUNTER, "dolphin_requests_local_total");
    this.requestsRemote = define(COUNTER, "dolphin_requests_remote_total");
    this.requestsFallback = define(COUNTER, "dolphin_requests_fallback_total");
    this.fallbacks = define(COUNTER, "dolphin_fallbacks_total");
    this.prefillFailures = define(COUNTER, "dolphin_prefill_failures_total");
    this.badRequests = define(COUNTER, "dolphin_bad_requests_total");
    this.routeErrors = define(COUNTER, "dolphin_route_errors_total");
    this.promptBlocks = define(COUNTER, "dolphin_prompt_blocks_total");
    this.matchedBlocks = define(COUNTER, "dolphin_matched_blocks_total");
    this.routeTimeUs = define(HISTOGRAM, "dolphin_route_time_us");
    this.logSkipped = define(COUNTER, "dolphin_decision_log_skipped_total");
    this.logUnshared = define(COUNTER, "dolphin_decision_log_unshared_total");
    this.tableLoads = define(COUNTER, "dolphin_table_loads_total");
    this.defined = true;
  }
}

export const metrics = new Metrics();

function define(type: i32, name: string): u32 {
  const bytes = String.UTF8.encode(name);
  const out = memory.data(4);
  if (imports.proxy_define_metric(type, changetype<usize>(bytes), bytes.byteLength, out) != WasmResultValues.Ok) return 0xffffffff;
  return load<u32>(out);
}

/** Adds to a counter (a metric that failed to define is skipped). */
export function count(metric: u32, by: i64 = 1): void {
  if (metric != 0xffffffff && by != 0) imports.proxy_increment_metric(metric, by);
}

export function record(metric: u32, v: u64): void {
  if (metric != 0xffffffff) imports.proxy_record_metric(metric, v);
}
