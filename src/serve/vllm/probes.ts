// Probes of a live vLLM engine for `dolphin calibrate`: requests on token ids whose step times are read from the
// engine's own Prometheus histograms (the delta of _sum and _count around each probe): a prefill's step from
// vllm:request_prefill_time_seconds (first scheduled to first token), a decode step from
// vllm:inter_token_latency_seconds, a KV transfer from the decode engine's vllm:nixl_xfer_time_seconds; its KV cache
// from vllm:cache_config_info. Wall clock on the client is kept beside them as a cross-check.

/** A Prometheus text exposition: each sample line's value by its full name (labels included). */
export type Scrape = Map<string, number>;

export async function scrape(url: string): Promise<Scrape> {
  const text = await (await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(10_000) })).text();
  const out: Scrape = new Map();
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const at = line.lastIndexOf(" ");
    out.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return out;
}

/** The sum of a metric's series (every label set), 0 when absent. */
export function total(s: Scrape, name: string): number {
  let sum = 0;
  for (const [key, v] of s) if (key === name || key.startsWith(`${name}{`)) sum += v;
  return sum;
}

/** A histogram's _sum (seconds) and _count. */
export const histogram = (s: Scrape, name: string) => ({
  sum: total(s, `${name}_sum`),
  count: total(s, `${name}_count`),
});

/** The labels of a metric's first series (vllm:cache_config_info carries the cache config as labels). */
export function labelsOf(s: Scrape, name: string): Record<string, string> {
  for (const key of s.keys()) {
    if (!key.startsWith(`${name}{`)) continue;
    const out: Record<string, string> = {};
    for (const m of key.slice(name.length + 1, -1).matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) out[m[1]!] = m[2]!;
    return out;
  }
  return {};
}

/** The engine's KV cache as it reports it (vllm:cache_config_info). */
export async function kvCacheOf(url: string): Promise<{ numGpuBlocks: number; blockSize: number }> {
  const l = labelsOf(await scrape(url), "vllm:cache_config_info");
  const numGpuBlocks = Number(l["num_gpu_blocks"]);
  const blockSize = Number(l["block_size"]);
  if (!(numGpuBlocks > 0 && blockSize > 0))
    throw new Error(`${url}/metrics: vllm:cache_config_info has no num_gpu_blocks and block_size`);
  return { numGpuBlocks, blockSize };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface Completion {
  json: {
    usage?: { prompt_tokens: number; prompt_tokens_details?: { cached_tokens?: number } };
    kv_transfer_params?: unknown;
  };
  wallMs: number;
}

/** A greedy completions request on token ids. */
export async function complete(url: string, model: string, prompt: number[], extra: Record<string, unknown> = {}) {
  const t0 = performance.now();
  const r = await fetch(`${url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model, prompt, max_tokens: 1, temperature: 0, ...extra }),
    signal: AbortSignal.timeout(120_000),
  });
  const text = await r.text();
  if (r.status !== 200) throw new Error(`${url}/v1/completions: ${r.status} ${text.slice(0, 300)}`);
  return { json: JSON.parse(text) as Completion["json"], wallMs: performance.now() - t0 };
}

/**
 * Runs `probe`, then reads how much histogram `name` grew on `url`: its mean observation (ms) over the new ones.
 * The engine records after it answers, so this waits (≤ 2 s) for `expect` new observations.
 */
export async function histogramDelta<T>(
  url: string,
  name: string,
  expect: number,
  probe: () => Promise<T>,
): Promise<{ meanMs: number; count: number; result: T }> {
  const before = histogram(await scrape(url), name);
  const result = await probe();
  let after = histogram(await scrape(url), name);
  for (let i = 0; i < 40 && after.count - before.count < expect; i++) {
    await sleep(50);
    after = histogram(await scrape(url), name);
  }
  const count = after.count - before.count;
  if (count <= 0) throw new Error(`${url}: ${name} recorded nothing for the probe`);
  return { meanMs: ((after.sum - before.sum) / count) * 1000, count, result };
}

/** n token ids in [10, 8000) from a seed: distinct seeds give prompts with no common block. */
export function tokenIds(seed: number, n: number): number[] {
  let s = (seed * 2654435761) >>> 0 || 1;
  return Array.from({ length: n }, () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return 10 + (s % 7990);
  });
}

/** Waits until the engine runs and queues no request (aborted streams are gone). */
export async function idle(url: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const s = await scrape(url);
    if (total(s, "vllm:num_requests_running") + total(s, "vllm:num_requests_waiting") === 0) return;
    if (Date.now() > deadline) throw new Error(`${url}: requests still running after ${timeoutMs / 1000} s`);
    await sleep(50);
  }
}

/**
 * `seqs` streamed decodes of long outputs, each started once its first token is out; `stop()` aborts them (vLLM
 * aborts a request whose client goes away).
 */
export async function backgroundDecodes(
  url: string,
  model: string,
  prompts: number[][],
): Promise<{ stop(): Promise<void> }> {
  const ctl = new AbortController();
  const started = prompts.map(async (prompt) => {
    const r = await fetch(`${url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model, prompt, max_tokens: 2000, ignore_eos: true, temperature: 0, stream: true }),
      signal: ctl.signal,
    });
    const reader = r.body!.getReader();
    await reader.read(); // the first token
    void (async () => {
      try {
        while (!(await reader.read()).done);
      } catch {
        // aborted
      }
    })();
  });
  await Promise.all(started);
  return {
    async stop() {
      ctl.abort();
      await idle(url);
    },
  };
}
