// The proxy's hot-path shortcuts give what the plain way gives: the answer's usage read from its tail equals the
// usage of the parsed answer (and falls back to parsing where the tail does not prove it), the byte-level SSE sniffer
// finds usage in a line cut anywhere between chunks, and a client leaving cuts its calls as an AbortSignal would.
import { describe, expect, it } from "vitest";
import { parseJson, usageOf, usageOfAnswer, UsageSniffer } from "../src/serve/proxy/upstream.js";
import { ClientAbort } from "../src/serve/proxy/request-context.js";

const usage = { prompt_tokens: 14, completion_tokens: 8, prompt_tokens_details: { cached_tokens: 5 } };
const plain = (body: string): ReturnType<typeof usageOf> => usageOf(parseJson(Buffer.from(body)));

describe("usageOfAnswer", () => {
  const cases: Array<[string, string]> = [
    ["usage last", JSON.stringify({ id: "x", choices: [{ text: "hi" }], usage })],
    ["usage last, pretty-printed", JSON.stringify({ id: "x", usage }, null, 2) + "\n"],
    ["usage first", JSON.stringify({ usage, id: "x", choices: [] })],
    ["a nested usage key last", JSON.stringify({ usage, meta: { usage: { completion_tokens: 99 } } })],
    ['"usage" inside a string', JSON.stringify({ usage, text: 'a "usage": {"completion_tokens": 1}}' })],
    ["usage null", JSON.stringify({ id: "x", usage: null })],
    ["no usage", JSON.stringify({ id: "x", choices: [] })],
    ["usage with a string holding braces", JSON.stringify({ id: "x", usage: { ...usage, note: '}{"' } })],
    ["not JSON", 'oops "usage": {"completion_tokens": 3}}'],
    ["empty", ""],
  ];
  for (const [name, body] of cases)
    it(`equals the parsed answer's usage: ${name}`, () => {
      expect(usageOfAnswer(Buffer.from(body))).toEqual(plain(body));
    });
});

describe("UsageSniffer", () => {
  const stream =
    `data: {"choices":[{"delta":{"content":"a \\"usage\\" word"}}]}\n\n` +
    `data: ${JSON.stringify({ choices: [], usage })}\n\n` +
    "data: [DONE]\n\n";
  it("finds the usage line whole or cut at every byte", () => {
    const bytes = Buffer.from(stream);
    for (let cut = 0; cut <= bytes.length; cut++) {
      const s = new UsageSniffer();
      s.push(bytes.subarray(0, cut));
      s.push(bytes.subarray(cut));
      expect(s.usage, `cut at ${cut}`).toEqual({ cached: 5, completion: 8 });
    }
  });
  it("finds it one byte at a time, and nothing in a stream without usage", () => {
    const s = new UsageSniffer();
    for (const b of Buffer.from(stream)) s.push(Buffer.from([b]));
    expect(s.usage).toEqual({ cached: 5, completion: 8 });
    const none = new UsageSniffer();
    none.push(Buffer.from('data: {"choices":[{"delta":{"content":"usage"}}]}\n\ndata: [DONE]\n\n'));
    expect(none.usage).toBeNull();
  });
});

describe("ClientAbort", () => {
  it("runs the cuts once on abort, at once for one added after, and aborts a signal asked for", () => {
    const a = new ClientAbort();
    const signal = a.signal;
    let cuts = 0;
    a.onAbort(() => cuts++);
    expect(signal.aborted).toBe(false);
    a.abort();
    a.abort();
    expect(cuts).toBe(1);
    expect(signal.aborted).toBe(true);
    a.onAbort(() => cuts++);
    expect(cuts).toBe(2);
    expect(a.signal.aborted).toBe(true);
  });
});
