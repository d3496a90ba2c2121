// `dolphin bench proxy --vllm`: what `dolphin serve` adds in front of a real vLLM engine (the CPU build and tiny
// model `npm run setup` installs), measured on real vLLM (CPU, tiny model) in one run. Two engines (1P1D) are
// started; two proxies run in their own processes in front of them with the always-local table (so every request
// does the same engine work as a direct call to the decode engine): one in precise mode (each chat request is first
// tokenized by an engine's /tokenize, then routed on its token ids) and one in approximate mode (routed on the text).
// Each round sends the same chat request directly to the decode engine, through the precise proxy and through the
// approximate one, one at a time, in an order that rotates per round (alternated, so the machine's slow phases fall
// on all three alike), non-streaming and streaming (time to the first content event, and to the end). The prompts
// are warmed first, so every call is a prefix-cache hit and the engine's share is steady. What the proxy adds is
// the median (and p99) of its per-round differences from the direct call; /tokenize is also timed on its own.
// What it does not say: a GPU engine's step is faster and steadier than this CPU's, so the same added milliseconds
// are a larger share there; the engines and the proxies share two cores here.

import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { proxyConfigFor, engineSpecs } from "../src/serve/vllm/cluster.js";
import { SERVED_MODEL, startEngines, stopEngines, type VllmEngine } from "../src/serve/vllm/engines.js";
import { startPassthrough } from "./fake-servers.js";
import { Children, startServe } from "./harness.js";
import { r3 } from "./stats.js";

export interface VllmProxyBenchOptions {
  /** Measured rounds per mode (default 200; quick 40). */
  rounds?: number;
  quick?: boolean;
  progress?: (line: string) => void;
}

interface Q {
  p50: number;
  p99: number;
}

export interface VllmProxyBenchResult {
  measured_on: string;
  rounds: number;
  prompt_tokens: number;
  /** Milliseconds per call, directly to the decode engine and through each proxy. */
  non_streaming: {
    direct: Q;
    precise: Q;
    approximate: Q;
    added_precise: Q;
    added_approximate: Q;
    /** A bare node:http pass-through's, the yardstick of what any Node hop costs here. */
    added_pass_through: Q;
    p99_ratio: number;
  };
  streaming_ttft: {
    direct: Q;
    precise: Q;
    approximate: Q;
    added_precise: Q;
    added_approximate: Q;
    added_pass_through: Q;
  };
  streaming_total: { direct: Q; precise: Q; added_precise: Q; p99_ratio: number };
  /** The engine's POST /tokenize alone, and what precise mode costs over approximate per request. */
  tokenize_ms: Q;
  precise_over_approximate_ms: Q;
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 8, timeout: 4000 });

/** One POST; resolves with [ms to the first body byte after the headers' 200 (first event of a stream), ms to the end]. */
function call(url: string, body: string): Promise<[number, number]> {
  const u = new URL(url);
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: u.hostname,
        port: u.port,
        path: u.pathname,
        method: "POST",
        agent,
        headers: { "content-type": "application/json" },
      },
      (res) => {
        let first = -1;
        res.on("data", () => {
          if (first < 0) first = performance.now() - t0;
        });
        res.on("end", () => {
          if (res.statusCode !== 200) reject(new Error(`${url} answered ${res.statusCode}`));
          else resolve([first, performance.now() - t0]);
        });
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

function quantiles(xs: number[]): Q {
  const s = [...xs].sort((a, b) => a - b);
  const at = (q: number) => s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
  return { p50: r3(at(0.5)), p99: r3(at(0.99)) };
}

const PROMPT = (i: number) =>
  `Request ${i % 8}: summarize what a prefill/decode router does with the KV cache of a long prompt. `.repeat(12);

export async function runVllmProxyBench(o: VllmProxyBenchOptions = {}): Promise<VllmProxyBenchResult> {
  const rounds = o.rounds ?? (o.quick ? 40 : 200);
  const say = o.progress ?? (() => undefined);
  say("bench proxy --vllm: starting 1P1D vLLM engines (30–60 s)");
  const engines: VllmEngine[] = await startEngines(engineSpecs("1P1D"), { progress: say });
  const children = new Children();
  const dir = mkdtempSync(join(tmpdir(), "dolphin-bench-vllm-"));
  try {
    const decode = engines.find((e) => e.role === "decode")!;
    const proxies: Record<"precise" | "approximate", string> = { precise: "", approximate: "" };
    for (const mode of ["precise", "approximate"] as const) {
      const file = join(dir, `${mode}.json`);
      writeFileSync(
        file,
        JSON.stringify({ ...proxyConfigFor(engines, { port: 0, table: "always-local", mode }), log_level: "warn" }),
      );
      proxies[mode] = await startServe(children, `proxy (${mode})`, file);
    }
    // the yardstick: a bare node:http pass-through in front of the same engine, as bench proxy's
    const passUrl = await startPassthrough(children, "pass-through", decode.url);
    const body = (i: number, stream: boolean) =>
      JSON.stringify({
        model: SERVED_MODEL,
        messages: [{ role: "user", content: PROMPT(i) }],
        max_tokens: 8,
        temperature: 0,
        ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
      });
    const tok = (i: number) =>
      JSON.stringify({ model: SERVED_MODEL, messages: [{ role: "user", content: PROMPT(i) }] });
    const promptTokens = (
      (await (
        await fetch(`${decode.url}/tokenize`, {
          method: "POST",
          body: tok(0),
          headers: { "content-type": "application/json" },
        })
      ).json()) as { count: number }
    ).count;
    say(`bench proxy --vllm: warming ${8} prompts of ${promptTokens} tokens`);
    for (let i = 0; i < 16; i++)
      for (const url of [decode.url, proxies.precise, proxies.approximate, passUrl])
        await call(`${url}/v1/chat/completions`, body(i, false));

    const targets = [
      ["direct", decode.url],
      ["precise", proxies.precise],
      ["approximate", proxies.approximate],
      ["pass", passUrl],
    ] as const;
    type Name = (typeof targets)[number][0];
    const run = async (stream: boolean) => {
      const out: Record<Name, [number, number][]> = { direct: [], precise: [], approximate: [], pass: [] };
      for (let i = 0; i < rounds; i++) {
        for (let k = 0; k < targets.length; k++) {
          const [name, url] = targets[(i + k) % targets.length]!;
          out[name].push(await call(`${url}/v1/chat/completions`, body(i, stream)));
        }
        if (i % 50 === 49) say(`bench proxy --vllm: ${stream ? "streaming" : "non-streaming"} ${i + 1}/${rounds}`);
      }
      return out;
    };
    const plain = await run(false);
    const streamed = await run(true);
    const tokenize: number[] = [];
    for (let i = 0; i < rounds; i++) tokenize.push((await call(`${decode.url}/tokenize`, tok(i)))[1]);

    const col = (xs: [number, number][], k: 0 | 1) => xs.map((x) => x[k]);
    const diff = (a: number[], b: number[]) => a.map((x, i) => x - b[i]!);
    const total = (m: keyof typeof plain) => col(plain[m], 1);
    const q = (xs: number[]) => quantiles(xs);
    return {
      measured_on: "real vLLM 0.32 (CPU build, tiny model), 1P1D on this machine, loopback",
      rounds,
      prompt_tokens: promptTokens,
      non_streaming: {
        direct: q(total("direct")),
        precise: q(total("precise")),
        approximate: q(total("approximate")),
        added_precise: q(diff(total("precise"), total("direct"))),
        added_approximate: q(diff(total("approximate"), total("direct"))),
        added_pass_through: q(diff(total("pass"), total("direct"))),
        p99_ratio: r3(q(total("precise")).p99 / q(total("direct")).p99),
      },
      streaming_ttft: {
        direct: q(col(streamed.direct, 0)),
        precise: q(col(streamed.precise, 0)),
        approximate: q(col(streamed.approximate, 0)),
        added_precise: q(diff(col(streamed.precise, 0), col(streamed.direct, 0))),
        added_approximate: q(diff(col(streamed.approximate, 0), col(streamed.direct, 0))),
        added_pass_through: q(diff(col(streamed.pass, 0), col(streamed.direct, 0))),
      },
      streaming_total: {
        direct: q(col(streamed.direct, 1)),
        precise: q(col(streamed.precise, 1)),
        added_precise: q(diff(col(streamed.precise, 1), col(streamed.direct, 1))),
        p99_ratio: r3(q(col(streamed.precise, 1)).p99 / q(col(streamed.direct, 1)).p99),
      },
      tokenize_ms: q(tokenize),
      precise_over_approximate_ms: q(diff(total("precise"), total("approximate"))),
    };
  } finally {
    await children.closeAll();
    await stopEngines(engines);
    rmSync(dir, { recursive: true, force: true });
  }
}

export function formatVllmProxyBench(r: VllmProxyBenchResult): string {
  const f = (x: Q) => `p50 ${x.p50} ms, p99 ${x.p99} ms`;
  return [
    `dolphin serve in front of ${r.measured_on}: ${r.rounds} rounds, chat prompts of ${r.prompt_tokens} tokens (cache hits), 8 output tokens`,
    `non-streaming: direct ${f(r.non_streaming.direct)}; through the proxy, precise ${f(r.non_streaming.precise)}, approximate ${f(r.non_streaming.approximate)}`,
    `  added: precise ${f(r.non_streaming.added_precise)}; approximate ${f(r.non_streaming.added_approximate)}; bare pass-through ${f(r.non_streaming.added_pass_through)}; p99 ratio (precise) ${r.non_streaming.p99_ratio}`,
    `streaming, first event: direct ${f(r.streaming_ttft.direct)}; added precise ${f(r.streaming_ttft.added_precise)}, approximate ${f(r.streaming_ttft.added_approximate)}, bare pass-through ${f(r.streaming_ttft.added_pass_through)}`,
    `streaming, whole answer: direct ${f(r.streaming_total.direct)}; added precise ${f(r.streaming_total.added_precise)}; p99 ratio ${r.streaming_total.p99_ratio}`,
    `/tokenize alone: ${f(r.tokenize_ms)}; precise over approximate per request: ${f(r.precise_over_approximate_ms)}`,
  ].join("\n");
}
