// The endpoint-picker gateway in front of the engine suite's running 1P1D (vllm.test.ts starts them and calls
// this): real Envoy with ext_proc to dolphin-epp (precise mode on the engines' real KV events), the sidecar on the
// decode engine doing the NixlConnector two-step. No engine of its own: each start costs half a minute or more.
import { describe, expect, it } from "vitest";
import { startGatewayFront, type RunningGateway } from "../../src/gateway/gateway.js";
import { vllmBackend, vllmFront } from "../../src/gateway/vllm.js";
import type { VllmEngine } from "../../src/serve/vllm/engines.js";
import { encodeTable } from "../../src/table/codec.js";
import { ruleTable } from "../../src/table/rule-table.js";
import { cacheableBlocks, complete, metric, sseData, tokens, waitFor } from "./engine-tools.js";

const BLOCK = 32;

/** The picker's figure of a series (its /metrics), 0 when absent. */
async function eppMetric(g: RunningGateway, series: string): Promise<number> {
  const text = await (await fetch(g.epp.metricsUrl)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line ? Number(line.slice(series.length + 1)) : 0;
}

export function gatewayCases(engines: () => { P0: VllmEngine; D0: VllmEngine }): void {
  describe("dolphin gateway in front of 1P1D (Envoy, dolphin-epp on the engines' KV events, the sidecar)", () => {
    it("prefills a long new prompt through the sidecar's NixlConnector two-step, then serves it again locally on blocks matched from the engines' events", async () => {
      const { P0, D0 } = engines();
      // the engines stay the suite's: the gateway's close stops only what it started
      const g = await startGatewayFront(
        [vllmBackend(P0, false), vllmBackend(D0, false)],
        vllmFront({ port: 0, adminPort: 0, table: encodeTable(ruleTable("dynamo-isl")) }),
      );
      try {
        const [prefill, decode] = [g.workers[0]!.address, g.workers[1]!.address];
        const prompt = tokens(80, 2000);
        const transfers = await metric(D0.url, "vllm:nixl_xfer_time_seconds_count");
        const first = await complete(g.url, prompt);
        expect([first.status, first.route, first.prefill, first.decode]).toEqual([200, "remote", prefill, decode]);
        expect(await metric(D0.url, "vllm:nixl_xfer_time_seconds_count")).toBe(transfers + 1);
        expect(first.json.usage.prompt_tokens_details.cached_tokens).toBe(0);
        // both engines published the prompt's blocks (P0 computed them, D0 received them): the picker's index
        // holds them, and the prefill loads ended on those events
        const full = cacheableBlocks(2000);
        await waitFor("the prompt's blocks in the picker's index", async () => {
          const [p, d] = [`dolphin_index_blocks{worker="${prefill}"}`, `dolphin_index_blocks{worker="${decode}"}`];
          return (await eppMetric(g, p)) >= full && (await eppMetric(g, d)) >= full;
        });
        expect(await eppMetric(g, 'dolphin_epp_prefill_releases_total{signal="kv_events"}')).toBe(2);
        const again = await complete(g.url, prompt);
        expect([again.status, again.route, again.prefill, again.decode]).toEqual([200, "local", null, decode]);
        expect(again.json.usage.prompt_tokens_details.cached_tokens).toBe(full * BLOCK);
        expect(again.json.choices[0].text).toBe(first.json.choices[0].text); // greedy: the same whichever prefilled
        // streamed, on the same path
        const streamed = await complete(g.url, prompt, { stream: true });
        expect([streamed.status, streamed.route]).toEqual([200, "local"]);
        expect(sseData(streamed.text).at(-1)).toBe("[DONE]");
        // every request's loads ended with its access-log entry
        await waitFor(
          "no request in flight at the picker",
          async () => (await eppMetric(g, "dolphin_inflight_requests")) === 0,
        );
      } finally {
        await g.close();
      }
    });
  });
}
