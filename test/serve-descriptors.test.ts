// A worker call the proxy cannot open because it is out of file descriptors (EMFILE, ENFILE) is the proxy's own
// overload, not the worker's failure: the client is told to retry (503 with Retry-After, not 502), and the worker is
// neither counted failed nor ejected. Under a burst of connections past the open-file limit this had turned healthy
// workers' calls into 502s and counted them toward the workers' ejection.

import { describe, expect, it } from "vitest";
import { Router } from "../src/router/router.js";
import { parseConfig } from "../src/serve/config.js";
import { outOfDescriptors } from "../src/serve/proxy/admission.js";
import { Logger } from "../src/serve/proxy/log.js";
import { ProxyMetrics } from "../src/serve/proxy/metrics.js";
import { WorkerRegistry, type WorkerSubscriptions } from "../src/serve/proxy/registry.js";
import { classify } from "../src/serve/proxy/upstream.js";
import { ruleTable } from "../src/table/rule-table.js";

/** Metrics of a proxy with nothing in flight. */
const idleMetrics = (): ProxyMetrics =>
  new ProxyMetrics(() => ({
    inflight: 0,
    queued: 0,
    sessions: 0,
    workers: [],
    table: { kind: "always-local", checksum: "" },
  }));

const outOf = (code: string): Error =>
  Object.assign(new Error(`connect ${code} 127.0.0.1:8000 - Local (undefined:undefined)`), { code });

describe("dolphin serve: out of file descriptors on a worker call", () => {
  it("is classified as the proxy's own failure: not retryable, not the worker down", () => {
    for (const code of ["EMFILE", "ENFILE"]) {
      const e = classify(outOf(code), "decode d0");
      expect(e.kind).toBe("local");
      expect(e.message).toBe(`decode d0: the proxy is out of file descriptors (${code})`);
      expect(e.retryable).toBe(false);
      expect(e.workerDown).toBe(false);
    }
    // a worker that resets the connection still counts as one
    expect(classify(Object.assign(new Error("socket hang up"), { code: "ECONNRESET" }), "decode d0").kind).toBe(
      "reset",
    );
  });

  it("answers 503 overloaded with Retry-After, counted as shed for file_descriptors", async () => {
    const metrics = idleMetrics();
    const answer = outOfDescriptors(metrics, classify(outOf("EMFILE"), "decode d0"));
    expect(answer.status).toBe(503);
    expect(answer.headers).toEqual({ "retry-after": "1" });
    expect(JSON.parse(answer.body())).toMatchObject({ error: { code: "overloaded" } });
    expect(await metrics.registry.metrics()).toMatch(/dolphin_shed_total\{reason="file_descriptors"\} 1/);
  });

  it("never counts against the worker: no failure noted, no ejection however many", () => {
    const config = parseConfig({ model: "m", outlier: { consecutive_failures: 1 } });
    const router = Router.create(ruleTable("always-local"), { engine: "reference", workers: [] });
    const quiet: WorkerSubscriptions = {
      subscribe: async () => undefined,
      unsubscribe: () => undefined,
      resync: () => undefined,
      close: () => {},
    };
    const metrics = idleMetrics();
    const registry = new WorkerRegistry(config, router, quiet, metrics, new Logger("silent", () => undefined));
    const w = registry.add({ id: "d0", url: "http://127.0.0.1:9", role: "decode" }, "config");
    for (let i = 0; i < 20; i++) registry.upstreamFailed(w, "decode", classify(outOf("EMFILE"), "decode d0"));
    expect(w.healthy).toBe(true);
    expect(w.consecutiveFailures).toBe(0);
    // the same calls failing at the worker (resets) eject it at the configured count
    registry.upstreamFailed(w, "decode", classify(Object.assign(new Error("reset"), { code: "ECONNRESET" }), "x"));
    expect(w.healthy).toBe(false);
  });
});
