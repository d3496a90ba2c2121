// A client that leaves after its prefill, against real 1P1D (vllm.test.ts's P0 and D0): what the engines' own
// /metrics show of the prefill engine's held blocks (vllm:kv_cache_usage_perc; vllm:nixl_num_kv_expired_reqs counts
// the handoffs freed only when their lease ran out, 30 s) and of the decode (vllm:num_requests_running,
// vllm:generation_tokens_total). src/serve/proxy/abandoned.ts, docs/serving.md "A client that leaves".
import { describe, expect, it } from "vitest";
import { holdingRelay } from "../relays.js";
import { metric, MODEL, sleep, tokens, waitFor, type EngineSuite } from "./engine-tools.js";

/** Within this the blocks must be freed: well inside NixlConnector's 30 s lease (kv_lease_duration). */
const FREED_WITHIN_MS = 10_000;

export function clientLeavesTests(s: EngineSuite): void {
  const usage = (url: string) => metric(url, "vllm:kv_cache_usage_perc");
  const idle = (url: string, what: string) => waitFor(`${what}'s KV cache idle`, async () => (await usage(url)) === 0);

  function leavingClient(url: string, body: Record<string, unknown>) {
    const client = new AbortController();
    const answer = fetch(`${url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: MODEL, temperature: 0, ...body }),
      signal: client.signal,
    });
    return { client, answer };
  }

  describe("a client that leaves after its prefill (1P1D)", () => {
    it("P0 frees the blocks it holds for the handoff at once, not at the lease: D0 refuses the handoff the proxy sends it", async () => {
      const [P0, D0] = [s.engine("P0"), s.engine("D0")];
      await idle(P0.url, "P0");
      const [pulls, decoded, expired] = [
        await metric(D0.url, "vllm:nixl_xfer_time_seconds_count"),
        await metric(D0.url, "vllm:generation_tokens_total"),
        await metric(P0.url, "vllm:nixl_num_kv_expired_reqs_total"),
      ];
      // Two clients leave, one after the other. A decode engine with no NIXL handshake with the prefill engine yet
      // (D0, if nothing was pulled from P0 before) makes it on the first release, and sends that release's
      // notification at its next step: the second release's (docs/serving.md "A client that leaves").
      for (const [i, seed] of [80, 81].entries()) {
        const relay = await holdingRelay(P0.url);
        s.closeAfter(relay);
        const via = await s.proxy([P0, D0], { table: "always-remote", via: { P0: { url: relay.url } } });
        const { client, answer } = leavingClient(via.url, { prompt: tokens(seed, 1500), max_tokens: 8 });
        const gone = answer.catch((e: Error) => e);
        await relay.answerBegan; // P0 has finished the prefill: its answer is half-way to the proxy
        expect(await usage(P0.url)).toBeGreaterThan(0); // the prompt's blocks, held for D0 to pull
        client.abort();
        expect(await gone).toBeInstanceOf(Error);
        await waitFor(
          "the proxy saw the client go",
          async () => (await metric(via.url, "dolphin_requests_total", 'route="remote",status="499"')) === 1,
        );
        relay.release();
        await waitFor(
          "the release refused",
          async () =>
            (await metric(via.url, "dolphin_abandoned_prefills_total", 'cause="client_gone",outcome="released"')) === 1,
        );
        if (i === 0) await sleep(1_000); // the handshake, if D0 had none, is done
      }
      await waitFor("P0's held blocks freed", async () => (await usage(P0.url)) === 0, FREED_WITHIN_MS);
      expect(await metric(P0.url, "vllm:nixl_num_kv_expired_reqs_total")).toBe(expired); // not by the lease
      // D0 pulled nothing and decoded nothing
      expect(await metric(D0.url, "vllm:nixl_xfer_time_seconds_count")).toBe(pulls);
      expect(await metric(D0.url, "vllm:generation_tokens_total")).toBe(decoded);
    });

    it("cancels the decode when the client leaves mid-stream: D0 stops at once, and neither engine holds blocks", async () => {
      const [P0, D0] = [s.engine("P0"), s.engine("D0")];
      const p = await s.proxy([P0, D0], { table: "always-remote" });
      await Promise.all([idle(P0.url, "P0"), idle(D0.url, "D0")]);
      const decoded = await metric(D0.url, "vllm:generation_tokens_total");
      const maxTokens = 3000; // minutes of decode on this CPU were it not cancelled
      const { client, answer } = leavingClient(p.url, {
        prompt: tokens(81, 1000),
        max_tokens: maxTokens,
        ignore_eos: true,
        stream: true,
      });
      const res = await answer;
      expect([res.status, res.headers.get("x-dolphin-route")]).toEqual([200, "remote"]);
      const reader = res.body!.getReader();
      await reader.read(); // tokens are coming: D0 has pulled the KV and is decoding
      expect(await metric(D0.url, "vllm:num_requests_running")).toBe(1);
      client.abort();
      await reader.read().catch(() => undefined);
      await waitFor("D0's decode aborted", async () => (await metric(D0.url, "vllm:num_requests_running")) === 0);
      const generated = (await metric(D0.url, "vllm:generation_tokens_total")) - decoded;
      console.log(`D0 decoded ${generated} of ${maxTokens} tokens before the client's cut reached it`);
      expect(generated).toBeLessThan(maxTokens);
      await waitFor("no blocks held", async () => (await usage(P0.url)) + (await usage(D0.url)) === 0);
      await waitFor(
        "the proxy counted the client gone",
        async () => (await metric(p.url, "dolphin_requests_total", 'route="remote",status="499"')) === 1,
      );
      expect(await metric(p.url, "dolphin_abandoned_prefills_total")).toBe(0); // the handoff was pulled: none to release
    });
  });
}
