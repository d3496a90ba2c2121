// The emulated vLLM worker over real sockets: OpenAI endpoints (streaming and not), the tokenizer, the prefix cache,
// the disaggregated kv_transfer_params protocol between a prefill and a decode worker, KV events over ZMQ and HTTP,
// /metrics, errors, timing against the step model, and close().
import http from "node:http";
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { decodeEventBatch, type EventBatch, type KvEvent } from "../src/router/kv-events.js";
import { hashTokens, rootHash } from "../src/hashing/hashes.js";
import { attnPairs, stepTimeMs } from "../src/sim/step-time.js";
import { kvTransferMs, LINKS } from "../src/sim/kv-transfer.js";
import { PRESETS } from "../src/sim/model-presets.js";
import { chatPrompt, decodeToken, encode, OUTPUT_WORDS, pieces, tokenId, VOCAB_SIZE } from "../src/serve/tokenizer.js";
import { startWorker, type WorkerHandle } from "../src/serve/worker.js";

const SCALE = 50; // simulated ms per wall ms
const MODEL = "dolphin-emulated";

interface Reply {
  status: number;
  headers: Headers;
  json: any;
  text: string;
}

async function post(base: string, path: string, body: unknown, init: RequestInit = {}): Promise<Reply> {
  const r = await fetch(base + path, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
    ...init,
  });
  const text = await r.text();
  let json: any = null;
  try {
    json = JSON.parse(text);
  } catch {
    /* not JSON */
  }
  return { status: r.status, headers: r.headers, json, text };
}

/** An SSE response's data payloads, in order ("[DONE]" kept as a string). */
async function sse(
  base: string,
  path: string,
  body: unknown,
): Promise<{ status: number; contentType: string | null; events: any[] }> {
  const r = await fetch(base + path, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const text = await r.text();
  const events: any[] = [];
  expect(text.endsWith("\n\n")).toBe(true);
  for (const block of text.split("\n\n")) {
    if (block === "") continue;
    expect(block.startsWith("data: ")).toBe(true);
    const data = block.slice(6);
    events.push(data === "[DONE]" ? data : JSON.parse(data));
  }
  return { status: r.status, contentType: r.headers.get("content-type"), events };
}

const textChunks = (events: any[]): any[] =>
  events.filter(
    (e) => e !== "[DONE]" && e.choices?.length > 0 && (e.choices[0].text ?? e.choices[0].delta?.content ?? "") !== "",
  );

async function until(cond: () => boolean, ms = 3000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error("timed out waiting");
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** n token ids from a seed (distinct prompts for distinct seeds). */
const tokensOf = (seed: number, n: number): number[] =>
  Array.from({ length: n }, (_, i) => 1000 + ((seed * 7919 + i * 104729) % 150000));

describe("tokenizer", () => {
  it("pre-splits into letter/digit runs, whitespace runs and single symbols, at most 4 UTF-16 units per token", () => {
    expect(pieces("Hello, world!")).toEqual(["Hell", "o", ",", " ", "worl", "d", "!"]);
    expect(pieces("abc123def  \n\n\t x")).toEqual(["abc1", "23de", "f", "  \n\n", "\t ", "x"]);
    expect(pieces("a𝒳𝒳")).toEqual(["a𝒳", "𝒳"]); // never splits a surrogate pair
    expect(pieces("😀😀")).toEqual(["😀", "😀"]);
    expect(pieces("")).toEqual([]);
  });

  it("gives ids 1000 + FNV-1a 32 mod 150000, deterministic", () => {
    // FNV-1a 32 of "a" is 0xe40c292c
    expect(tokenId("a")).toBe(1000 + (0xe40c292c % 150000));
    const t = encode("The quick brown fox jumps over the lazy dog. 12345");
    expect(t).toEqual(encode("The quick brown fox jumps over the lazy dog. 12345"));
    for (const id of t) expect(id >= 1000 && id < VOCAB_SIZE).toBe(true);
    expect(t.length).toBe(pieces("The quick brown fox jumps over the lazy dog. 12345").length);
  });

  it("has a documented chat template and one-token output words", () => {
    expect(
      chatPrompt([
        { role: "system", content: "Be brief." },
        { role: "user", content: [{ type: "text", text: "Hi" }] },
      ]),
    ).toBe("<|system|>\nBe brief.\n<|user|>\nHi\n<|assistant|>\n");
    const ids = OUTPUT_WORDS.map((w) => encode(w));
    for (const t of ids) expect(t.length).toBe(1);
    expect(new Set(ids.map((t) => t[0])).size).toBe(OUTPUT_WORDS.length);
    expect(decodeToken(ids[1]![0]!)).toBe(" cat");
    expect(decodeToken(5)).toBe(" tok5");
  });
});

describe("dolphin worker", () => {
  let w: WorkerHandle;
  beforeAll(async () => {
    w = await startWorker({ role: "both", timeScale: SCALE, log: () => {} });
  });
  afterAll(async () => {
    await w.close();
  });

  it("serves /health, /v1/models", async () => {
    expect((await fetch(`${w.url}/health`)).status).toBe(200);
    const models = (await (await fetch(`${w.url}/v1/models`)).json()) as any;
    expect(models.object).toBe("list");
    expect(models.data[0].id).toBe(MODEL);
    expect(models.data[0].max_model_len).toBe(131072);
  });

  it("answers a non-streaming completion with exactly max_tokens tokens and usage", async () => {
    const prompt = "Tell me about dolphins and how they sleep.";
    const r = await post(w.url, "/v1/completions", { model: MODEL, prompt, max_tokens: 12 });
    expect(r.status).toBe(200);
    expect(r.json.object).toBe("text_completion");
    expect(r.json.id).toMatch(/^cmpl-/);
    expect(r.json.model).toBe(MODEL);
    const choice = r.json.choices[0];
    expect(choice.finish_reason).toBe("length");
    expect(choice.text.split(" ").filter(Boolean)).toHaveLength(12);
    for (const word of choice.text.trim().split(" ")) expect(OUTPUT_WORDS).toContain(word);
    expect(r.json.usage).toEqual({
      prompt_tokens: encode(prompt).length,
      completion_tokens: 12,
      total_tokens: encode(prompt).length + 12,
      prompt_tokens_details: { cached_tokens: 0 },
    });
    // deterministic output for the same prompt
    const again = await post(w.url, "/v1/completions", { prompt, max_tokens: 12 });
    expect(again.json.choices[0].text).toBe(choice.text);
  });

  it("takes token-id prompts, min_tokens and the default max_tokens", async () => {
    const r = await post(w.url, "/v1/completions", { prompt: tokensOf(1, 20), max_tokens: 2, min_tokens: 5 });
    expect(r.json.usage.prompt_tokens).toBe(20);
    expect(r.json.usage.completion_tokens).toBe(5);
    const d = await post(w.url, "/v1/completions", { prompt: ["one prompt in a list"] });
    expect(d.status).toBe(200);
    expect(d.json.usage.completion_tokens).toBe(64);
  });

  it("streams completions as vLLM does: one chunk per token, finish_reason on the last, usage, [DONE]", async () => {
    const { status, contentType, events } = await sse(w.url, "/v1/completions", {
      prompt: "Stream this please",
      max_tokens: 10,
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(status).toBe(200);
    expect(contentType).toMatch(/^text\/event-stream/);
    expect(events.at(-1)).toBe("[DONE]");
    const tokens = textChunks(events);
    expect(tokens).toHaveLength(10);
    for (const c of tokens) expect(c.object).toBe("text_completion");
    expect(tokens.slice(0, -1).every((c) => c.choices[0].finish_reason === null)).toBe(true);
    expect(tokens.at(-1).choices[0].finish_reason).toBe("length");
    const usage = events.at(-2);
    expect(usage.choices).toEqual([]);
    expect(usage.usage.completion_tokens).toBe(10);
    expect(usage.usage.prompt_tokens).toBe(encode("Stream this please").length);
    // the streamed text is the non-streamed text
    const whole = await post(w.url, "/v1/completions", { prompt: "Stream this please", max_tokens: 10 });
    expect(tokens.map((c) => c.choices[0].text).join("")).toBe(whole.json.choices[0].text);
  });

  it("streams without a usage chunk unless asked", async () => {
    const { events } = await sse(w.url, "/v1/completions", { prompt: "no usage", max_tokens: 3, stream: true });
    expect(events).toHaveLength(4);
    expect(events.some((e) => e !== "[DONE]" && e.usage)).toBe(false);
  });

  it("answers chat completions, streaming and not", async () => {
    const messages = [
      { role: "system", content: "You are terse." },
      { role: "user", content: "What is a dolphin?" },
    ];
    const r = await post(w.url, "/v1/chat/completions", { model: MODEL, messages, max_tokens: 7 });
    expect(r.status).toBe(200);
    expect(r.json.object).toBe("chat.completion");
    expect(r.json.id).toMatch(/^chatcmpl-/);
    expect(r.json.choices[0].message.role).toBe("assistant");
    expect(r.json.choices[0].message.content.trim().split(" ")).toHaveLength(7);
    expect(r.json.choices[0].finish_reason).toBe("length");
    expect(r.json.usage.prompt_tokens).toBe(encode(chatPrompt(messages)).length);
    const mc = await post(w.url, "/v1/chat/completions", { messages, max_completion_tokens: 3 });
    expect(mc.json.usage.completion_tokens).toBe(3);

    const { events } = await sse(w.url, "/v1/chat/completions", {
      messages,
      max_tokens: 5,
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(events.at(-1)).toBe("[DONE]");
    expect(events[0].object).toBe("chat.completion.chunk");
    expect(events[0].choices[0].delta).toEqual({ role: "assistant", content: "" });
    const tokens = textChunks(events);
    expect(tokens).toHaveLength(5);
    expect(tokens.at(-1).choices[0].finish_reason).toBe("length");
    expect(tokens.map((c) => c.choices[0].delta.content).join("")).toBe(
      r.json.choices[0].message.content.split(" ").slice(0, 6).join(" "),
    );
    expect(events.at(-2).usage.completion_tokens).toBe(5);
  });

  it("reports the prefix-cache hit as usage.prompt_tokens_details.cached_tokens", async () => {
    const prompt = tokensOf(42, 200); // 12 full blocks + 8 tokens
    const first = await post(w.url, "/v1/completions", { prompt, max_tokens: 2 });
    expect(first.json.usage.prompt_tokens_details.cached_tokens).toBe(0);
    const second = await post(w.url, "/v1/completions", { prompt, max_tokens: 2 });
    expect(second.json.usage.prompt_tokens_details.cached_tokens).toBe(192);
    // a prompt that shares the first 100 tokens hits their 6 full blocks
    const shared = await post(w.url, "/v1/completions", {
      prompt: [...prompt.slice(0, 100), ...tokensOf(43, 50)],
      max_tokens: 2,
    });
    expect(shared.json.usage.prompt_tokens_details.cached_tokens).toBe(96);
    // a full hit (a multiple of 16) recomputes its last block, as vLLM
    const exact = tokensOf(44, 64);
    await post(w.url, "/v1/completions", { prompt: exact, max_tokens: 1 });
    const full = await post(w.url, "/v1/completions", { prompt: exact, max_tokens: 1 });
    expect(full.json.usage.prompt_tokens_details.cached_tokens).toBe(48);
  });

  it("tokenizes deterministically with vLLM's /tokenize shape", async () => {
    const prompt = "Deterministic: the same text, the same ids!";
    const a = await post(w.url, "/tokenize", { model: MODEL, prompt });
    const b = await post(w.url, "/tokenize", { prompt });
    expect(a.status).toBe(200);
    expect(a.json).toEqual({
      count: encode(prompt).length,
      max_model_len: 131072,
      tokens: encode(prompt),
      token_strs: null,
    });
    expect(b.json).toEqual(a.json);
    const messages = [{ role: "user", content: "hello" }];
    const c = await post(w.url, "/tokenize", { messages });
    expect(c.json.tokens).toEqual(encode(chatPrompt(messages)));
    const d = await post(w.url, "/detokenize", { tokens: [...encode("cat"), ...encode("sat")] });
    expect(d.json.prompt).toBe(" cat sat");
  });

  it("batches concurrent requests and keeps every stream whole", async () => {
    const runs = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        sse(w.url, "/v1/completions", { prompt: tokensOf(100 + i, 300 + 10 * i), max_tokens: 20 + i, stream: true }),
      ),
    );
    runs.forEach((r, i) => {
      expect(r.events.at(-1)).toBe("[DONE]");
      expect(textChunks(r.events)).toHaveLength(20 + i);
    });
    const s = w.stats();
    expect(s.running).toBe(0);
    expect(s.waiting).toBe(0);
  });

  it("stops writing to a client that disconnects mid-stream and keeps serving", async () => {
    const before = w.stats().aborted;
    const ac = new AbortController();
    const r = await fetch(`${w.url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      signal: ac.signal,
      body: JSON.stringify({ prompt: "a long answer", max_tokens: 5000, stream: true }),
    });
    const reader = r.body!.getReader();
    await reader.read();
    ac.abort();
    await until(() => w.stats().aborted === before + 1);
    const ok = await post(w.url, "/v1/completions", { prompt: "still here?", max_tokens: 2 });
    expect(ok.status).toBe(200);
  });

  it("exposes vLLM-style /metrics", async () => {
    const r = await fetch(`${w.url}/metrics`);
    expect(r.status).toBe(200);
    expect(r.headers.get("content-type")).toMatch(/^text\/plain/);
    const text = await r.text();
    const label = `model_name="${MODEL}"`;
    for (const name of [
      "vllm:num_requests_running",
      "vllm:num_requests_waiting",
      "vllm:gpu_cache_usage_perc",
      "vllm:kv_cache_usage_perc",
      "vllm:prefix_cache_queries_total",
      "vllm:prefix_cache_hits_total",
      "vllm:prompt_tokens_total",
      "vllm:generation_tokens_total",
      "vllm:time_to_first_token_seconds_bucket",
      "vllm:time_to_first_token_seconds_sum",
      "vllm:time_to_first_token_seconds_count",
    ])
      expect(text).toMatch(new RegExp(`^${name}\\{${label}[,}]`, "m"));
    const value = (name: string): number => Number(new RegExp(`^${name}\\{[^}]*\\} (\\S+)$`, "m").exec(text)![1]);
    expect(value("vllm:prefix_cache_hits_total")).toBeGreaterThan(0);
    expect(value("vllm:prefix_cache_queries_total")).toBeGreaterThan(value("vllm:prefix_cache_hits_total"));
    expect(value("vllm:generation_tokens_total")).toBeGreaterThan(0);
    expect(value("vllm:time_to_first_token_seconds_count")).toBeGreaterThan(10);
    expect(text).toMatch(/^vllm:time_to_first_token_seconds_bucket\{model_name="dolphin-emulated",le="\+Inf"\} \d+$/m);
    expect(text).toMatch(/^# TYPE vllm:time_to_first_token_seconds histogram$/m);
  });

  it("answers every malformed request with an OpenAI-style error", async () => {
    const cases: [string, unknown, number, RegExp][] = [
      ["/v1/completions", "{not json", 400, /invalid JSON/],
      ["/v1/completions", "[1,2]", 400, /JSON object/],
      ["/v1/completions", {}, 400, /prompt/],
      ["/v1/completions", { prompt: 5 }, 400, /prompt/],
      ["/v1/completions", { prompt: "" }, 400, /empty/],
      ["/v1/completions", { prompt: [] }, 400, /empty/],
      ["/v1/completions", { prompt: ["a", "b"] }, 400, /batched/],
      ["/v1/completions", { prompt: [1, -2] }, 400, /token id/],
      ["/v1/completions", { prompt: [VOCAB_SIZE] }, 400, /token id/],
      ["/v1/completions", { prompt: "x", max_tokens: 0 }, 400, /max_tokens/],
      ["/v1/completions", { prompt: "x", max_tokens: "5" }, 400, /max_tokens/],
      ["/v1/completions", { prompt: "x", min_tokens: -1 }, 400, /min_tokens/],
      ["/v1/completions", { prompt: "x", stream: "yes" }, 400, /stream/],
      ["/v1/completions", { prompt: "x", stream_options: 3 }, 400, /stream_options/],
      ["/v1/completions", { prompt: "x", n: 2 }, 400, /n = 1/],
      ["/v1/completions", { prompt: "x", model: 7 }, 400, /model/],
      ["/v1/completions", { prompt: "x", max_tokens: 131072 }, 400, /maximum context length/],
      ["/v1/completions", { prompt: "x", kv_transfer_params: "yes" }, 400, /kv_transfer_params/],
      ["/v1/completions", { prompt: "x", kv_transfer_params: { do_remote_prefill: true } }, 400, /remote_host/],
      [
        "/v1/completions",
        { prompt: "x", kv_transfer_params: { do_remote_prefill: true, do_remote_decode: true } },
        400,
        /both/,
      ],
      ["/v1/completions", { prompt: "x", kv_transfer_params: { do_remote_decode: "true" } }, 400, /boolean/],
      ["/v1/chat/completions", { messages: [] }, 400, /messages/],
      ["/v1/chat/completions", { messages: "hi" }, 400, /messages/],
      ["/v1/chat/completions", { messages: [{ content: "no role" }] }, 400, /role/],
      ["/v1/chat/completions", { messages: [{ role: "user", content: 5 }] }, 400, /content/],
      ["/tokenize", {}, 400, /prompt/],
      ["/detokenize", { tokens: "x" }, 400, /tokens/],
      ["/internal/kv-release", {}, 400, /remote_request_id/],
      ["/internal/kv-release", { remote_request_id: "nope" }, 404, /no blocks pinned/],
      ["/v1/completions", { prompt: "x", model: "gpt-4" }, 404, /The model `gpt-4` does not exist/],
      ["/v1/chat/completions", { messages: [{ role: "user", content: "x" }], model: "other" }, 404, /does not exist/],
      ["/tokenize", { prompt: "x", model: "other" }, 404, /does not exist/],
      ["/v1/nothing", {}, 404, /no route/],
    ];
    for (const [path, body, status, message] of cases) {
      const r = await post(w.url, path, body);
      expect({ path, body, status: r.status }).toEqual({ path, body, status });
      expect(r.headers.get("content-type")).toBe("application/json");
      expect(Object.keys(r.json)).toEqual(["error"]);
      expect(r.json.error.message).toMatch(message);
      expect(r.json.error.code).toBe(status);
      expect(typeof r.json.error.type).toBe("string");
    }
    const get = await fetch(`${w.url}/v1/completions`);
    expect(get.status).toBe(405);
    expect(((await get.json()) as any).error.code).toBe(405);
    const big = await post(w.url, "/v1/completions", JSON.stringify({ prompt: "x".repeat(9 * 1024 * 1024) }));
    expect(big.status).toBe(413);
    expect(big.json.error.code).toBe(413);
  });

  it("answers 503 when the prompt can never fit the KV cache", async () => {
    const small = await startWorker({ timeScale: SCALE, capacityBlocks: 8, log: () => {} });
    try {
      const r = await post(small.url, "/v1/completions", { prompt: tokensOf(1, 120), max_tokens: 16 });
      expect(r.status).toBe(503);
      expect(r.json.error.code).toBe(503);
      expect(r.json.error.message).toMatch(/holds 8/);
      const s = await post(small.url, "/v1/completions", { prompt: tokensOf(1, 120), max_tokens: 16, stream: true });
      expect(s.status).toBe(503);
      const ok = await post(small.url, "/v1/completions", { prompt: tokensOf(1, 100), max_tokens: 16 });
      expect(ok.status).toBe(200);
      expect(small.stats().rejected).toBe(2);
    } finally {
      await small.close();
    }
  });
});

describe("disaggregated prefill (NixlConnector's kv_transfer_params)", () => {
  let p: WorkerHandle;
  let d: WorkerHandle;
  beforeAll(async () => {
    p = await startWorker({ role: "prefill", timeScale: SCALE, log: () => {} });
    d = await startWorker({ role: "decode", timeScale: SCALE, log: () => {} });
  });
  afterAll(async () => {
    await Promise.all([p.close(), d.close()]);
  });

  it("prefills on one worker, pulls and decodes on the other, then releases the prefill's blocks", async () => {
    const prompt = tokensOf(7, 1000);
    const client = { model: MODEL, prompt, max_tokens: 16, stream: true, stream_options: { include_usage: true } };
    // 1. the prefill request, as vLLM's proxy sends it
    const pre = await post(p.url, "/v1/completions", {
      ...client,
      stream: false,
      max_tokens: 1,
      kv_transfer_params: {
        do_remote_decode: true,
        do_remote_prefill: false,
        remote_engine_id: null,
        remote_block_ids: null,
        remote_host: null,
        remote_port: null,
      },
    });
    expect(pre.status).toBe(200);
    expect(pre.json.usage.completion_tokens).toBe(1);
    const kv = pre.json.kv_transfer_params;
    expect(kv).toMatchObject({
      do_remote_prefill: true,
      do_remote_decode: false,
      remote_engine_id: p.workerId,
      remote_host: "127.0.0.1",
      remote_port: p.port,
      tp_size: 1,
    });
    expect(typeof kv.remote_request_id).toBe("string");
    expect(kv.remote_block_ids).toHaveLength(62); // full blocks of 1000 tokens
    expect(p.stats().pendingPulls).toBe(1);
    expect(p.stats().kvUsage).toBeGreaterThan(0); // pinned, not evictable

    // 2. the decode request: the client's body plus those params
    const { events } = await sse(d.url, "/v1/completions", { ...client, kv_transfer_params: kv });
    expect(events.at(-1)).toBe("[DONE]");
    expect(textChunks(events)).toHaveLength(16);
    expect(events.at(-2).usage).toMatchObject({ prompt_tokens: 1000, completion_tokens: 16 });

    // 3. the decode worker told the prefill worker to release the blocks
    await until(() => p.stats().pendingPulls === 0);
    expect(p.stats().kvReleases).toEqual({ pulled: 1, timeout: 0 });
    expect(p.stats().kvUsage).toBe(0); // cached, evictable
    expect(d.stats().kvReleaseFailures).toBe(0);
    // a second release of the same id is unknown
    const again = await post(p.url, "/internal/kv-release", { remote_request_id: kv.remote_request_id });
    expect(again.status).toBe(404);
    // the decode worker now has the pulled blocks in its prefix cache
    const local = await post(d.url, "/v1/completions", { prompt, max_tokens: 1 });
    expect(local.json.usage.prompt_tokens_details.cached_tokens).toBe(992);
  });

  it("refuses the wrong half of the protocol on a single-role worker", async () => {
    const r1 = await post(d.url, "/v1/completions", { prompt: "x", kv_transfer_params: { do_remote_decode: true } });
    expect(r1.status).toBe(400);
    expect(r1.json.error.message).toMatch(/role is decode/);
    const r2 = await post(p.url, "/v1/completions", {
      prompt: "x",
      kv_transfer_params: { do_remote_prefill: true, remote_host: "127.0.0.1", remote_port: 1, remote_request_id: "r" },
    });
    expect(r2.status).toBe(400);
    expect(r2.json.error.message).toMatch(/role is prefill/);
    // plain requests run locally on either role
    expect(
      (await post(p.url, "/v1/completions", { prompt: "local", max_tokens: 3 })).json.usage.completion_tokens,
    ).toBe(3);
    expect(
      (await post(d.url, "/v1/completions", { prompt: "local", max_tokens: 3 })).json.usage.completion_tokens,
    ).toBe(3);
  });

  it("releases blocks nobody pulls after the pin timeout", async () => {
    const q = await startWorker({ role: "prefill", timeScale: SCALE, kvPinTimeoutMs: 2000, log: () => {} });
    try {
      const pre = await post(q.url, "/v1/completions", {
        prompt: tokensOf(9, 100),
        max_tokens: 1,
        kv_transfer_params: { do_remote_decode: true },
      });
      expect(pre.json.kv_transfer_params.do_remote_prefill).toBe(true);
      expect(q.stats().pendingPulls).toBe(1);
      await until(() => q.stats().pendingPulls === 0); // 2 s simulated = 40 ms
      expect(q.stats().kvReleases).toEqual({ pulled: 0, timeout: 1 });
    } finally {
      await q.close();
    }
  });

  it("models the pull: the decode side's first token comes a transfer plus a step after the request", async () => {
    const tokens = 4000;
    const prompt = tokensOf(11, tokens);
    const pre = await post(p.url, "/v1/completions", {
      prompt,
      max_tokens: 1,
      kv_transfer_params: { do_remote_decode: true },
    });
    const before = d.stats().simNowMs;
    const { events } = await sse(d.url, "/v1/completions", {
      prompt,
      max_tokens: 2,
      stream: true,
      kv_transfer_params: pre.json.kv_transfer_params,
    });
    const after = d.stats().simNowMs;
    expect(textChunks(events)).toHaveLength(2);
    const h100 = PRESETS["h100-8b"];
    const pull = kvTransferMs(tokens, h100, LINKS["ib-ndr"], { alphaMs: 0.5, eta: 0.7, links: 1 });
    const step = (ctx: number): number => stepTimeMs(h100, 1, ctx, 0, 0);
    // at least: the pull, then two decode steps (simulated time)
    expect(after - before).toBeGreaterThanOrEqual(pull + step(tokens) + step(tokens + 1) - 1e-6);
  });
});

describe("KV events", () => {
  it("publishes vLLM EventBatches over ZMQ and HTTP: BlockStored with the chained 16-token hashes, BlockRemoved on eviction", async () => {
    const posted: {
      worker: string | undefined;
      seq: string | undefined;
      type: string | undefined;
      batch: EventBatch;
    }[] = [];
    const sink = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        posted.push({
          worker: req.headers["x-dolphin-worker"] as string | undefined,
          seq: req.headers["x-dolphin-seq"] as string | undefined,
          type: req.headers["content-type"],
          batch: decodeEventBatch(Buffer.concat(chunks)),
        });
        res.end();
      });
    });
    await new Promise<void>((r) => sink.listen(0, "127.0.0.1", r));
    const sinkPort = (sink.address() as net.AddressInfo).port;

    const w = await startWorker({
      timeScale: SCALE,
      capacityBlocks: 10,
      kvEventsEndpoint: "tcp://127.0.0.1:*",
      kvEventsUrl: `http://127.0.0.1:${sinkPort}/events`,
      log: () => {},
    });
    const zmq = await import("zeromq");
    const sub = new zmq.Subscriber();
    const received: { topic: string; seq: bigint; batch: EventBatch }[] = [];
    try {
      expect(w.kvEventsEndpoint).toMatch(/^tcp:\/\/127\.0\.0\.1:\d+$/);
      sub.connect(w.kvEventsEndpoint!);
      sub.subscribe("kv-events");
      const reading = (async () => {
        for await (const [topic, seq, payload] of sub) {
          received.push({ topic: topic!.toString(), seq: seq!.readBigUInt64BE(0), batch: decodeEventBatch(payload!) });
        }
      })();
      void reading.catch(() => {});
      await new Promise((r) => setTimeout(r, 300)); // ZMQ's slow joiner

      const root = rootHash(MODEL);
      const a = tokensOf(21, 40); // 2 full blocks
      await post(w.url, "/v1/completions", { prompt: a, max_tokens: 8 });
      const dPrompt = [...a, ...tokensOf(22, 8)]; // extends a: its third block is new, child of a's second
      await post(w.url, "/v1/completions", { prompt: dPrompt, max_tokens: 8 });
      const b = tokensOf(23, 100); // 6 blocks, fits beside the 3 cached
      await post(w.url, "/v1/completions", { prompt: b, max_tokens: 8 });
      const c = tokensOf(24, 150); // needs all 10 blocks: evicts everything cached
      await post(w.url, "/v1/completions", { prompt: c, max_tokens: 8 });

      const all = (batches: EventBatch[]): KvEvent[] => batches.flatMap((x) => x.events);
      await until(() => all(posted.map((x) => x.batch)).filter((e) => e.kind === "stored").length >= 4);
      await until(() => all(received.map((x) => x.batch)).filter((e) => e.kind === "removed").length >= 1);

      for (const events of [all(posted.map((x) => x.batch)), all(received.map((x) => x.batch))]) {
        const stored = events.filter((e) => e.kind === "stored");
        const hashA = hashTokens(a, 16, root);
        const hashD = hashTokens(dPrompt, 16, root);
        expect(stored[0]).toEqual({
          kind: "stored",
          hashes: hashA,
          parent: null,
          tokenIds: a.slice(0, 32),
          blockSize: 16,
          medium: "GPU",
        });
        expect(stored[1]).toEqual({
          kind: "stored",
          hashes: hashD.slice(4, 6),
          parent: hashA.slice(2, 4),
          tokenIds: dPrompt.slice(32, 48),
          blockSize: 16,
          medium: "GPU",
        });
        expect(stored[2]).toMatchObject({ hashes: hashTokens(b, 16, root), parent: null, tokenIds: b.slice(0, 96) });
        expect(stored[3]).toMatchObject({ hashes: hashTokens(c, 16, root), tokenIds: c.slice(0, 144) });
        const removed = events.filter((e) => e.kind === "removed");
        const gone = new Set<string>();
        for (const e of removed) {
          expect(e.kind === "removed" && e.medium).toBe("GPU");
          if (e.kind === "removed")
            for (let i = 0; i < e.hashes.length; i += 2) gone.add(`${e.hashes[i]}:${e.hashes[i + 1]}`);
        }
        expect(gone.size).toBe(9); // a's 2, d's 1 and b's 6
        // nothing is removed before c is stored (eviction happens at c's admission, its blocks stored after)
        expect(events.findIndex((e) => e.kind === "removed")).toBeLessThan(events.indexOf(stored[3]!));
      }
      // frames as vLLM: topic, 8-byte big-endian sequence from 0
      expect(received.every((r) => r.topic === "kv-events")).toBe(true);
      expect(received.map((r) => Number(r.seq))).toEqual(received.map((_, i) => i));
      expect(posted.every((x) => x.worker === w.workerId && x.type === "application/msgpack")).toBe(true);
      expect(posted.map((x) => Number(x.seq))).toEqual(posted.map((_, i) => i));
      expect(w.stats().kvEventFailures).toBe(0);
    } finally {
      sub.close();
      await w.close();
      await new Promise<void>((r) => sink.close(() => r()));
    }
  });
});

describe("timing and lifecycle", () => {
  it("gives a 1,000-token prompt its modeled TTFT in real time (timeScale 1)", async () => {
    const w = await startWorker({ timeScale: 1, log: () => {} });
    try {
      const h100 = PRESETS["h100-8b"];
      const model = stepTimeMs(h100, 0, 0, 1000, attnPairs(1000, 0)); // ≈ 24.7 ms
      await post(w.url, "/v1/completions", { prompt: "warm up", max_tokens: 1 });
      const ttfts: number[] = [];
      for (let i = 0; i < 3; i++) {
        const t0 = performance.now();
        const r = await fetch(`${w.url}/v1/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ prompt: tokensOf(300 + i, 1000), max_tokens: 8, stream: true }),
        });
        const reader = r.body!.getReader();
        let got = "";
        while (!got.includes("data: {")) got += new TextDecoder().decode((await reader.read()).value);
        ttfts.push(performance.now() - t0);
        while (!(await reader.read()).done) {
          /* drain */
        }
      }
      const best = Math.min(...ttfts);
      expect(best).toBeGreaterThanOrEqual(model * 0.95);
      expect(best).toBeLessThan(model + 30);
    } finally {
      await w.close();
    }
  });

  it("aborts a request whose client goes away: it leaves the batch and its KV is released", async () => {
    const w = await startWorker({ timeScale: 5, log: () => {} });
    try {
      const ac = new AbortController();
      const r = await fetch(`${w.url}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        signal: ac.signal,
        body: JSON.stringify({ prompt: tokensOf(77, 2000), max_tokens: 5000, stream: true }),
      });
      const reader = r.body!.getReader();
      let got = "";
      while (!got.includes("data: {")) got += new TextDecoder().decode((await reader.read()).value);
      expect(w.stats().running).toBe(1);
      const held = w.stats().usedBlocks;
      expect(held).toBeGreaterThan(0);
      ac.abort();
      await until(() => w.stats().running === 0 && w.stats().aborted === 1, 5000);
      // the prompt's blocks stay cached (unpinned, evictable); the output reservation is given back
      expect(w.stats().usedBlocks).toBeLessThan(held);
      expect(w.stats().completed).toBe(0);
    } finally {
      await w.close();
    }
  });

  it("close() frees the port", async () => {
    const w = await startWorker({ timeScale: SCALE, log: () => {} });
    const port = w.port;
    // an open keep-alive connection and a stream in flight do not hold close() up
    const ac = new AbortController();
    const r = await fetch(`${w.url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      signal: ac.signal,
      body: JSON.stringify({ prompt: "long", max_tokens: 100000, stream: true }),
    });
    await r.body!.getReader().read();
    await w.close();
    ac.abort();
    await expect(fetch(`http://127.0.0.1:${port}/health`)).rejects.toThrow();
    const srv = net.createServer();
    await new Promise<void>((resolve, reject) => {
      srv.once("error", reject);
      srv.listen(port, "127.0.0.1", () => resolve());
    });
    await new Promise<void>((r) => srv.close(() => r()));
  });
});
