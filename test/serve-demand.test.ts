// `dolphin serve`'s signals for autoscalers (proxy/demand.ts), in front of emulated workers (`dolphin worker`
// processes) on loopback: queued and in-flight prefill tokens and decode sequences per role while requests run, all
// back to 0 once they are over, and the shed and fallback rates after requests were shed or prefilled locally.
import { afterEach, describe, expect, it } from "vitest";
import type { RunningProxy } from "../src/serve/proxy.js";
import { cleanUp, MODEL, post, proxy, workerProcess } from "./serve-fault-tools.js";

afterEach(cleanUp);

/** The value of one series (its name with labels, as /metrics prints it); NaN when absent. */
async function gauge(p: RunningProxy, series: string): Promise<number> {
  const text = await (await fetch(`${p.url}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? NaN : Number(line.split(" ").at(-1));
}

async function gaugeReaches(p: RunningProxy, series: string, ok: (v: number) => boolean): Promise<number> {
  let v = NaN;
  const end = Date.now() + 10_000;
  while (!ok((v = await gauge(p, series)))) {
    if (Date.now() > end) throw new Error(`${series} stayed at ${v}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  return v;
}

const request = (i: number, maxTokens = 24): Record<string, unknown> => ({
  model: MODEL,
  prompt: `request ${i}: ${"a long shared document ".repeat(60)}`,
  max_tokens: maxTokens,
});

describe("dolphin serve: signals for autoscalers", () => {
  it("reports queued and in-flight prefill tokens and decode sequences per role, 0 once requests are over", async () => {
    const pf = await workerProcess("prefill", "p0", 0.2);
    const d = await workerProcess("decode", "d0", 0.2);
    const p = await proxy(
      [
        { id: "p0", url: pf.url, role: "prefill" },
        { id: "d0", url: d.url, role: "decode" },
      ],
      {
        table: "always-remote",
        fallback_local: false, // a full prefill worker makes its requests wait rather than prefill locally
        admission: { max_inflight_per_worker: 1, max_queued_per_worker: 8 },
      },
    );
    const answers = Promise.all([0, 1, 2].map((i) => post(p, "/v1/completions", request(i))));
    // one request at a time on each worker: the others wait with their prompts queued for the prefill role
    await gaugeReaches(p, 'dolphin_demand_prefill_tokens{role="prefill",state="queued"}', (v) => v > 0);
    await gaugeReaches(p, 'dolphin_demand_decode_sequences{role="decode"}', (v) => v === 1);
    await gaugeReaches(p, 'dolphin_demand_decode_tokens{role="decode"}', (v) => v > 0);
    expect((await answers).map((r) => r.status)).toEqual([200, 200, 200]);
    for (const series of [
      'dolphin_demand_prefill_tokens{role="prefill",state="queued"}',
      'dolphin_demand_prefill_tokens{role="prefill",state="inflight"}',
      'dolphin_demand_prefill_tokens{role="decode",state="inflight"}',
      'dolphin_demand_decode_sequences{role="decode"}',
      'dolphin_demand_decode_tokens{role="decode"}',
    ])
      expect(await gauge(p, series), series).toBe(0);
  });

  it("sees a prefill under way on the prefill role", async () => {
    const pf = await workerProcess("prefill", "p0", 0.02); // a long prefill: ~2 s
    const d = await workerProcess("decode", "d0");
    const p = await proxy(
      [
        { id: "p0", url: pf.url, role: "prefill" },
        { id: "d0", url: d.url, role: "decode" },
      ],
      { table: "always-remote" },
    );
    const answer = post(p, "/v1/completions", request(0, 2));
    const inflight = await gaugeReaches(
      p,
      'dolphin_demand_prefill_tokens{role="prefill",state="inflight"}',
      (v) => v > 0,
    );
    expect(inflight).toBeGreaterThan(100); // the prompt's ~1,400 bytes as tokens, none cached yet
    expect(await gauge(p, 'dolphin_demand_decode_sequences{role="decode"}')).toBe(0); // the decode leg waits for it
    expect((await answer).status).toBe(200);
  });

  it("gives the rates of requests shed at a decode worker and of prefills done locally", async () => {
    const pf = await workerProcess("prefill", "p0", 0.05); // the first prefill still runs when the second comes
    const d0 = await workerProcess("decode", "d0", 0.2);
    const d1 = await workerProcess("decode", "d1", 0.2);
    const p = await proxy(
      [
        { id: "p0", url: pf.url, role: "prefill" },
        { id: "d0", url: d0.url, role: "decode" },
        { id: "d1", url: d1.url, role: "decode" },
      ],
      { table: "always-remote", admission: { max_inflight_per_worker: 1, max_queued_per_worker: 0 } },
    );
    expect(await gauge(p, 'dolphin_demand_shed_per_second{role="decode"}')).toBe(0);
    // three at once: two decode places, one prefill place; the second prefills locally, the third is shed
    const statuses = (await Promise.all([0, 1, 2].map((i) => post(p, "/v1/completions", request(i))))).map(
      (r) => r.status,
    );
    expect(statuses.sort()).toEqual([200, 200, 503]);
    await gaugeReaches(p, 'dolphin_demand_shed_per_second{role="decode"}', (v) => v > 0);
    await gaugeReaches(p, 'dolphin_demand_fallbacks_per_second{role="prefill"}', (v) => v > 0);
    expect(await gauge(p, 'dolphin_demand_shed_per_second{role="proxy"}')).toBe(0);
    expect(await gauge(p, 'dolphin_demand_shed_per_second{role="prefill"}')).toBe(0);
  });
});
