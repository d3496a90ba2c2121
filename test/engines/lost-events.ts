// Lost KV events against a real engine (vllm.test.ts runs these on its R0, whose replay socket keeps only the last
// REPLAY_BUFFER_BATCHES batches): the proxy subscribes to R0's events through a relay that drops batches on purpose
// and asks R0's own replay socket for what it missed. A gap R0 still buffers is replayed, and a prompt R0 cached
// during the gap is matched; a gap past R0's buffer, or one the proxy has no replay socket for, resets R0's index
// and says so (src/serve/proxy/kv-feed.ts).
import { describe, expect, it } from "vitest";
import { lossyRelay, type LossyRelay } from "../relays.js";
import {
  cacheableBlocks,
  complete,
  decisionOf,
  matched,
  metric,
  sleep,
  tokens,
  waitFor,
  type EngineSuite,
  type TestProxy,
} from "./engine-tools.js";

/** R0's kv_events_config.buffer_steps in vllm.test.ts. */
export const REPLAY_BUFFER_BATCHES = 8;

const BLOCK = 32;

export function lostEventsTests(s: EngineSuite): void {
  /** A proxy in front of R0 alone whose subscription to R0's events goes through a lossy relay. */
  async function throughRelay(replay: boolean): Promise<{ p: TestProxy; relay: LossyRelay }> {
    const R0 = s.engine("R0");
    const relay = await lossyRelay(R0.kvEventsEndpoint);
    s.closeAfter(relay);
    // cache_evidence off: only R0's events (live or replayed) may fill the index
    const p = await s.proxy([R0], {
      table: "always-local",
      replay,
      via: { R0: { kv_events_endpoint: relay.endpoint } },
      extra: { cache_evidence: false },
    });
    await sleep(500); // both subscriptions connected (a PUB socket drops what it sends before: ZMQ's slow joiner)
    return { p, relay };
  }

  /** Serves `prompt` and waits until the proxy's index holds its blocks on R0. */
  async function servedAndIndexed(p: TestProxy, prompt: number[]): Promise<void> {
    expect((await complete(p.url, prompt)).status).toBe(200);
    const blocks = cacheableBlocks(prompt.length);
    await waitFor(`${blocks} blocks in R0's index`, () => (matched(p, prompt)["R0"] ?? 0) >= blocks);
  }

  describe("lost KV events, against R0's own replay socket", () => {
    it("replays the batches a relay dropped: a prompt R0 cached during the gap is matched and predicted as R0 reports it", async () => {
      const { p, relay } = await throughRelay(true);
      await servedAndIndexed(p, tokens(70, 300));
      const during = tokens(71, 600);
      relay.dropping = true;
      expect((await complete(p.url, during)).status).toBe(200);
      await waitFor("R0's batches for it dropped", () => relay.dropped > 0);
      await sleep(200);
      relay.dropping = false;
      expect(matched(p, during)["R0"]).toBe(0); // what R0 said about it never arrived
      // the next batch that passes shows the gap: the proxy asks R0's replay socket for the missing ones
      await servedAndIndexed(p, tokens(72, 300));
      await waitFor("the gap replayed", () => (matched(p, during)["R0"] ?? 0) === cacheableBlocks(600));
      expect(await metric(p.url, "dolphin_kv_sequence_gaps_total", 'worker="R0"')).toBeGreaterThanOrEqual(
        relay.dropped,
      );
      expect(await metric(p.url, "dolphin_kv_replays_total", 'outcome="ok",reason="gap"')).toBe(1);
      expect(await metric(p.url, "dolphin_kv_index_resets_total")).toBe(0);
      // the index is R0's cache again: a repeat is predicted as R0 reports it
      const again = await complete(p.url, during);
      const d = await decisionOf(p, again.id!);
      expect([d.predicted_cached_tokens, d.reported_cached_tokens]).toEqual([
        cacheableBlocks(600) * BLOCK,
        cacheableBlocks(600) * BLOCK,
      ]);
    });

    it(`resets R0's index when the gap is older than its replay buffer (${REPLAY_BUFFER_BATCHES} batches), and says so`, async () => {
      const { p, relay } = await throughRelay(true);
      const before = tokens(73, 300);
      await servedAndIndexed(p, before);
      // more requests than R0 buffers batches, each of which publishes at least one
      relay.dropping = true;
      for (let i = 0; i <= REPLAY_BUFFER_BATCHES + 2; i++)
        expect((await complete(p.url, tokens(200 + i, 100), { max_tokens: 1 })).status).toBe(200);
      await waitFor("the batches dropped", () => relay.dropped > REPLAY_BUFFER_BATCHES);
      await sleep(200);
      relay.dropping = false;
      const after = tokens(74, 300);
      await servedAndIndexed(p, after);
      await waitFor(
        "the reset",
        async () => (await metric(p.url, "dolphin_kv_index_resets_total", 'cause="replay_partial",worker="R0"')) === 1,
      );
      expect(p.log.some((l) => l.includes("beyond the replay buffer: index reset") && l.includes('"R0"'))).toBe(true);
      expect(await metric(p.url, "dolphin_kv_replays_total", 'outcome="partial",reason="gap"')).toBe(1);
      // what it held before the gap is forgotten (R0 may still cache it: a reset index is short, never wrong)
      expect(matched(p, before)["R0"]).toBe(0);
      const d = await decisionOf(p, (await complete(p.url, after)).id!);
      expect(d.predicted_cached_tokens).toBe(d.reported_cached_tokens);
    });

    it("resets R0's index on a gap when the proxy has no replay socket for it", async () => {
      const { p, relay } = await throughRelay(false);
      const before = tokens(75, 300);
      await servedAndIndexed(p, before);
      relay.dropping = true;
      expect((await complete(p.url, tokens(76, 300))).status).toBe(200);
      await waitFor("a batch dropped", () => relay.dropped > 0);
      await sleep(200);
      relay.dropping = false;
      await servedAndIndexed(p, tokens(77, 300));
      expect(await metric(p.url, "dolphin_kv_index_resets_total", 'cause="gap_unreplayable",worker="R0"')).toBe(1);
      expect(p.log.some((l) => l.includes("no replay socket: index reset"))).toBe(true);
      expect(matched(p, before)["R0"]).toBe(0);
    });
  });
}
