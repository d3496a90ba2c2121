// The proxy asking a decode worker for a stream's usage the client did not ask for (src/serve/proxy/stream-usage.ts):
// the body it sends, and the filter that takes the usage-only event out of the client's stream wherever the worker's
// bytes are cut.
import { describe, expect, it } from "vitest";
import { askedOptions, askForUsage, UsageEventFilter } from "../src/serve/proxy/stream-usage.js";

const bytes = (s: string): Buffer => Buffer.from(s, "utf8");
const event = (v: unknown): string => `data: ${JSON.stringify(v)}\n\n`;

const USAGE = {
  prompt_tokens: 12,
  completion_tokens: 3,
  total_tokens: 15,
  prompt_tokens_details: { cached_tokens: 8 },
};
const chunk = (content: string, finish: string | null = null): unknown => ({
  id: "chatcmpl-1",
  object: "chat.completion.chunk",
  created: 1,
  model: "m",
  choices: [{ index: 0, delta: { content }, logprobs: null, finish_reason: finish }],
});
/** vLLM's last event with include_usage: no choices, the usage. */
const USAGE_EVENT = event({
  id: "chatcmpl-1",
  object: "chat.completion.chunk",
  created: 1,
  model: "m",
  choices: [],
  usage: USAGE,
});
/** A chat stream as vLLM writes it without include_usage (a content chunk mentions "usage" in its text too). */
const WITHOUT_USAGE =
  event({ ...(chunk("") as object), choices: [{ index: 0, delta: { role: "assistant", content: "" } }] }) +
  event(chunk('the "usage" of')) +
  event(chunk(" words")) +
  event(chunk(" here", "length"));
const DONE = "data: [DONE]\n\n";
/** The same stream with include_usage: the usage event before [DONE]. */
const WORKER_STREAM = WITHOUT_USAGE + USAGE_EVENT + DONE;
const CLIENT_STREAM = WITHOUT_USAGE + DONE;

/** What the filter passes on for `pieces`, one output per piece as the relay writes it. */
function filtered(pieces: Buffer[]): { out: string; usage: UsageEventFilter["usage"]; writes: number } {
  const f = new UsageEventFilter();
  const outs = pieces.map((p, i) => f.push(p, i === pieces.length - 1));
  return { out: Buffer.concat(outs).toString("utf8"), usage: f.usage, writes: outs.length };
}

describe("askForUsage: the decode worker's body", () => {
  const body = { model: "m", messages: [{ role: "user", content: "hi" }], stream: true };

  it("splices stream_options after the opening brace when the client sent none, keeping the client's bytes", () => {
    const raw = bytes(`  \n{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`);
    const sent = askForUsage(raw, body) as Buffer;
    expect(Buffer.isBuffer(sent)).toBe(true);
    expect(sent.toString()).toBe(
      `  \n{"stream_options":{"include_usage":true},"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`,
    );
    expect(JSON.parse(sent.toString())).toEqual({ ...body, stream_options: { include_usage: true } });
  });

  it("re-serializes when the client sent stream_options without include_usage, keeping its other keys", () => {
    for (const given of [null, {}, { include_usage: false }, { include_usage: false, other: 1 }]) {
      const b = { ...body, stream_options: given };
      const sent = askForUsage(bytes(JSON.stringify(b)), b);
      expect(typeof sent).toBe("string");
      const want = { include_usage: true, ...(given && "other" in given ? { other: 1 } : {}) };
      expect(JSON.parse(sent as string)).toEqual({ ...body, stream_options: want });
    }
  });

  it("drops continuous_usage_stats, which with include_usage would put usage in every chunk", () => {
    const b = { ...body, stream_options: { continuous_usage_stats: true } };
    expect(askedOptions(b)).toEqual({ include_usage: true });
  });

  it("asks nothing of a request that is not a stream, already asked, or sent stream_options that is not an object", () => {
    const raw = bytes("{}");
    expect(askForUsage(raw, { ...body, stream: false })).toBeNull();
    expect(askForUsage(raw, { messages: body.messages })).toBeNull();
    expect(askForUsage(raw, { ...body, stream_options: { include_usage: true } })).toBeNull();
    expect(askForUsage(raw, { ...body, stream_options: 3 })).toBeNull();
    expect(askForUsage(raw, { ...body, stream_options: [] })).toBeNull();
  });

  it("re-serializes a body it cannot splice into (an empty object)", () => {
    const sent = askForUsage(bytes(" { } "), { stream: true });
    expect(JSON.parse(sent as string)).toEqual({ stream: true, stream_options: { include_usage: true } });
  });
});

describe("UsageEventFilter: the client's stream without the usage event", () => {
  it("takes the usage event out of a whole stream, reads its usage, and passes the rest byte for byte", () => {
    const r = filtered([bytes(WORKER_STREAM)]);
    expect(r.out).toBe(CLIENT_STREAM);
    expect(r.usage).toEqual({ cached: 8, completion: 3 });
  });

  it("gives the same output whatever position the stream is cut at (two pieces)", () => {
    const all = bytes(WORKER_STREAM);
    for (let i = 0; i <= all.length; i++) {
      const r = filtered([all.subarray(0, i), all.subarray(i)]);
      expect(r.out, `cut at ${i}`).toBe(CLIENT_STREAM);
      expect(r.usage, `cut at ${i}`).toEqual({ cached: 8, completion: 3 });
    }
  });

  it("gives the same output when the usage event is cut in three pieces at every pair of positions", () => {
    const all = bytes(WORKER_STREAM);
    const from = WITHOUT_USAGE.length - 1; // the blank line before it
    const to = from + USAGE_EVENT.length + 3; // into [DONE]
    for (let i = from; i <= to; i++) {
      for (let j = i; j <= to; j++) {
        const r = filtered([all.subarray(0, i), all.subarray(i, j), all.subarray(j)]);
        if (r.out !== CLIENT_STREAM) expect(r.out, `cut at ${i} and ${j}`).toBe(CLIENT_STREAM);
        if (r.usage?.completion !== 3) expect(r.usage, `cut at ${i} and ${j}`).toEqual({ cached: 8, completion: 3 });
      }
    }
  });

  it("gives the same output fed one byte at a time", () => {
    const all = bytes(WORKER_STREAM);
    const r = filtered(Array.from({ length: all.length }, (_, i) => all.subarray(i, i + 1)));
    expect(r.out).toBe(CLIENT_STREAM);
  });

  it("handles CRLF line ends", () => {
    const crlf = (s: string): string => s.replace(/\n/g, "\r\n");
    const all = bytes(crlf(WORKER_STREAM));
    for (let i = 0; i <= all.length; i++) {
      expect(filtered([all.subarray(0, i), all.subarray(i)]).out, `cut at ${i}`).toBe(crlf(CLIENT_STREAM));
    }
  });

  it("holds back only an incomplete last line: complete lines pass as they come, in one piece per push", () => {
    const f = new UsageEventFilter();
    const first = event(chunk("a"));
    const whole = f.push(bytes(first));
    expect(whole.toString()).toBe(first); // the piece itself, nothing held
    expect(f.push(bytes('data: {"choices":[{"delta":')).length).toBe(0);
    expect(f.push(bytes('{"content":"b"}}]}\n\ndata: [DO')).toString()).toBe(
      'data: {"choices":[{"delta":{"content":"b"}}]}\n\n',
    );
    expect(f.push(bytes("NE]\n\n"), true).toString()).toBe(DONE);
  });

  it("passes on an incomplete line at the stream's end", () => {
    expect(filtered([bytes(WITHOUT_USAGE + "data: {unfinished")]).out).toBe(WITHOUT_USAGE + "data: {unfinished");
  });

  it("leaves usage that is not an event of its own: a content chunk's, or one sharing its event with another line", () => {
    const withUsage = event({ ...(chunk("x") as object), usage: USAGE });
    const shared = `event: usage\n${USAGE_EVENT}`;
    const stream = WITHOUT_USAGE + withUsage + shared + DONE;
    const r = filtered([bytes(stream)]);
    expect(r.out).toBe(stream);
    expect(r.usage).toEqual({ cached: 8, completion: 3 });
  });

  it("passes a line too long to be the usage event as it arrives rather than holding it", () => {
    const f = new UsageEventFilter();
    const long = `data: ${JSON.stringify({ choices: [{ delta: { content: "x".repeat(70_000) } }] })}`;
    const head = bytes(long.slice(0, 66_000));
    expect(f.push(head).length).toBe(head.length);
    // the rest of the long line, unread, then the usage event, still taken out
    expect(f.push(bytes(`${long.slice(66_000)}\n\n${USAGE_EVENT}${DONE}`), true).toString()).toBe(
      `${long.slice(66_000)}\n\n${DONE}`,
    );
    expect(f.usage).toEqual({ cached: 8, completion: 3 });
  });

  it("reads no usage from a stream that has none, and changes nothing in it", () => {
    const r = filtered([bytes(CLIENT_STREAM)]);
    expect(r.out).toBe(CLIENT_STREAM);
    expect(r.usage).toBeNull();
  });
});
