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

/** One series of a HotCounter: its labels and the count not yet handed to prom-client. */
export class HotSeries {
  /** Counted since the last scrape (a series counted by 0 still appears, as prom-client's would). */
  pending = 0;
  fresh = true;
  constructor(readonly labels: Labels) {}

  inc(value = 1): void {
    // prom-client's checks, at the call as before rather than at the scrape
    if (value && !Number.isFinite(value)) throw new TypeError(`Value is not a valid number: ${value}`);
    if (value < 0) throw new Error("It is not possible to decrease a counter");
    this.pending += value;
  }
}

/**
 * A counter bumped on every request. prom-client's inc() builds a string key from its labels object and looks the
 * series up by it on each call: for the proxy's eight per-request counts ~4 µs and ~1 KB of garbage a request
 * (measured), so more scavenges. Here a series is found by its label values (one Map per label, keyed by the values
 * themselves, nothing built) and counts a number; the counts go into prom-client when /metrics is scraped, in the
 * order the series were first counted, which is prom-client's own order. Label values are given in `labelNames`'
 * order, which is alphabetical (metrics.ts), so each series' labels object has its keys sorted as before.
 */
export class HotCounter {
  private readonly root = new Map<string | number, unknown>();
  private readonly series: HotSeries[] = [];

  constructor(
    registry: Registry,
    name: string,
    help: string,
    private readonly labelNames: readonly string[],
  ) {
    if (labelNames.length < 1 || labelNames.length > 3)
      throw new Error(`${name}: a HotCounter has one to three labels`);
    const series = this.series;
    new Counter({
      name,
      help,
      labelNames,
      registers: [registry],
      collect() {
        for (const s of series) {
          if (s.pending === 0 && !s.fresh) continue;
          this.inc(s.labels, s.pending);
          s.pending = 0;
          s.fresh = false;
        }
      },
    });
  }

  /** The series of these label values, in labelNames' order (a status code may be a number); one to three labels. */
  at(a: string | number, b?: string | number, c?: string | number): HotSeries {
    const n = this.labelNames.length;
    let level = this.root;
    let last = a;
    if (n >= 2) {
      level = this.level(level, a);
      last = b!;
    }
    if (n === 3) {
      level = this.level(level, b!);
      last = c!;
    }
    let s = level.get(last) as HotSeries | undefined;
    if (!s) {
      const values = [a, b, c];
      const labels: Labels = {};
      this.labelNames.forEach((name, i) => (labels[name] = String(values[i])));
      s = new HotSeries(labels);
      level.set(last, s);
      this.series.push(s);
    }
    return s;
  }

  private level(from: Map<string | number, unknown>, value: string | number): Map<string | number, unknown> {
    let next = from.get(value) as Map<string | number, unknown> | undefined;
    if (!next) from.set(value, (next = new Map()));
    return next;
  }
}

/** GET /metrics: the registry's text. */
export async function sendMetrics(res: ServerResponse, registry: Registry): Promise<void> {
  sendBody(res, 200, registry.contentType, await registry.metrics());
}
