// /metrics for both servers, in Prometheus text format 0.0.4, rendered by prom-client. Each server keeps its own
// Registry (several proxies and workers share one process in the tests and in `dolphin serve --emulate`). Values a
// server already keeps (queue lengths, its own counters) are read when scraped, through collect().

import type { ServerResponse } from "node:http";
import { Counter, Gauge, Histogram, Registry } from "prom-client";
import { sendBody } from "./http-toolkit.js";

export { Counter, Gauge, Registry };

export type Labels = Record<string, string>;
/** Series read at scrape time: labels and value. */
export type Series = ReadonlyArray<readonly [labels: Labels, value: number]>;

interface RenderedHistogram {
  values: Array<{ labels: Labels; sharedLabels?: Labels }>;
}
type RenderHook = (this: unknown) => Promise<RenderedHistogram>;

/**
 * A prom-client Histogram whose bucket lines carry `le` last, `{model_name="m",le="0.5"}`, as vLLM's (Python
 * prometheus_client) and this project's earlier output do; prom-client writes `le` first. It overrides
 * getForPromString, prom-client's undocumented rendering step (15.x): the worker's /metrics test pins the order, so
 * a prom-client that renders otherwise fails it.
 */
export class LeLastHistogram<T extends string = string> extends Histogram<T> {
  async getForPromString(): Promise<RenderedHistogram> {
    const render = (Histogram.prototype as unknown as { getForPromString: RenderHook }).getForPromString;
    const data = await render.call(this);
    for (const v of data.values) {
      const shared = v.sharedLabels;
      if (shared && v.labels["le"] !== undefined) {
        v.labels = { ...shared, le: v.labels["le"] };
        v.sharedLabels = {};
      }
    }
    return data;
  }
}

/** A gauge whose series are read from `read` when scraped (stale series go). */
export function scrapedGauge(
  registry: Registry,
  name: string,
  help: string,
  labelNames: readonly string[],
  read: () => Series,
): Gauge {
  return new Gauge({
    name,
    help,
    labelNames,
    registers: [registry],
    collect() {
      this.reset();
      for (const [labels, value] of read()) this.set(labels, value);
    },
  });
}

/** A counter mirroring a count the server keeps anyway (for its stats()), read when scraped. */
export function scrapedCounter(
  registry: Registry,
  name: string,
  help: string,
  labelNames: readonly string[],
  read: () => Series,
): Counter {
  return new Counter({
    name,
    help,
    labelNames,
    registers: [registry],
    collect() {
      this.reset();
      for (const [labels, value] of read()) this.inc(labels, value);
    },
  });
}

/** GET /metrics: the registry's text. */
export async function sendMetrics(res: ServerResponse, registry: Registry): Promise<void> {
  sendBody(res, 200, registry.contentType, await registry.metrics());
}
