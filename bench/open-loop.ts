// The in-process load generator of bench proxy and bench envoy: open loop (request i is sent at t0 + i/rate,
// whatever the answers do), node:http with a keep-alive Agent per target, process.hrtime.bigint() timing. A
// request's latency runs from just before http.request() to the response's `end` (the full body; for streams the
// last byte), and counts only when the status is 200 and the body has exactly the fake worker's byte count.
// (bench overload's generator, overload-load.ts, runs in processes of its own and counts every outcome instead.)

import http from "node:http";
import { EXPECTED_BYTES } from "./fake-servers.js";
import { MODEL } from "./harness.js";

const REQUEST_TIMEOUT_MS = 10_000;

export interface Endpoint {
  name: string;
  host: string;
  port: number;
  agent: http.Agent;
}

export function endpoint(name: string, url: string): Endpoint {
  const u = new URL(url);
  // timeout < the servers' 5 s keep-alive: an idle pooled socket is dropped by us first, not reset under a request
  return {
    name,
    host: u.hostname,
    port: Number(u.port),
    agent: new http.Agent({ keepAlive: true, maxSockets: 1024, timeout: 4000 }),
  };
}

function requestBody(i: number, stream: boolean): Buffer {
  const tail = stream ? `,"stream":true,"stream_options":{"include_usage":true}` : "";
  return Buffer.from(
    `{"model":"${MODEL}","messages":[{"role":"user","content":"Request ${i}: say hello in a few words."}],"max_tokens":16${tail}}`,
  );
}

export interface RunStats {
  /** Latencies of the successful requests, ms. */
  latencies: number[];
  failed: number;
  firstFailure: string | null;
  /** How late each request was sent against its schedule, ms. */
  lags: number[];
  /** First send to last completion, ms. */
  spanMs: number;
}

/** One request; `done(null, ms)` on a 200 with the full body, `done(reason)` otherwise. Retries once when a reused
 *  keep-alive socket turns out closed (Node's documented advice), as the proxy does. */
function sendOne(
  ep: Endpoint,
  body: Buffer,
  expectBytes: number,
  done: (failure: string | null, ms: number) => void,
  retried = false,
): void {
  const t0 = process.hrtime.bigint();
  let settled = false;
  const settle = (failure: string | null): void => {
    if (settled) return;
    settled = true;
    clearTimeout(timer);
    done(failure, Number(process.hrtime.bigint() - t0) / 1e6);
  };
  const req = http.request({
    host: ep.host,
    port: ep.port,
    path: "/v1/chat/completions",
    method: "POST",
    agent: ep.agent,
    headers: { "content-type": "application/json", "content-length": body.length },
  });
  const timer = setTimeout(
    () => req.destroy(new Error(`no answer within ${REQUEST_TIMEOUT_MS} ms`)),
    REQUEST_TIMEOUT_MS,
  );
  req.on("response", (res) => {
    let bytes = 0;
    res.on("data", (c: Buffer) => {
      bytes += c.length;
    });
    res.on("end", () => {
      if (res.statusCode !== 200) settle(`${ep.name}: status ${res.statusCode}`);
      else if (bytes !== expectBytes) settle(`${ep.name}: body of ${bytes} bytes, expected ${expectBytes}`);
      else settle(null);
    });
    res.on("error", (e) => settle(`${ep.name}: ${e.message}`));
    res.on("close", () => settle(`${ep.name}: connection closed mid-answer`));
  });
  req.on("error", (e) => {
    if (settled) return;
    if (!retried && req.reusedSocket && (e as NodeJS.ErrnoException).code === "ECONNRESET") {
      settled = true;
      clearTimeout(timer);
      sendOne(ep, body, expectBytes, done, true);
      return;
    }
    settle(`${ep.name}: ${e.message}`);
  });
  req.end(body);
}

let requestCounter = 0;

/** n requests to one endpoint, open loop at `rate`; resolves when every one has finished. */
export function openLoop(ep: Endpoint, n: number, rate: number, stream: boolean): Promise<RunStats> {
  const stats: RunStats = { latencies: [], failed: 0, firstFailure: null, lags: [], spanMs: 0 };
  if (n <= 0) return Promise.resolve(stats);
  const expect = stream ? EXPECTED_BYTES.sse : EXPECTED_BYTES.json;
  const periodNs = 1e9 / rate;
  return new Promise((resolve) => {
    const t0 = process.hrtime.bigint() + 1_000_000n;
    let sent = 0;
    let finished = 0;
    const onDone = (failure: string | null, ms: number): void => {
      if (failure === null) stats.latencies.push(ms);
      else {
        stats.failed++;
        stats.firstFailure ??= failure;
      }
      if (++finished === n) {
        stats.spanMs = Number(process.hrtime.bigint() - t0) / 1e6;
        resolve(stats);
      }
    };
    const tick = (): void => {
      const now = process.hrtime.bigint();
      const elapsed = Number(now - t0);
      while (sent < n && sent * periodNs <= elapsed) {
        stats.lags.push((elapsed - sent * periodNs) / 1e6);
        sendOne(ep, requestBody(requestCounter++, stream), expect, onDone);
        sent++;
      }
      if (sent < n) {
        const waitMs = (sent * periodNs - Number(process.hrtime.bigint() - t0)) / 1e6;
        setTimeout(tick, Math.max(1, Math.floor(waitMs)));
      }
    };
    setTimeout(tick, 1);
  });
}

/** What a loopback latency benchmark takes: requests per path and mode, the rate, a quick run, progress lines. */
export interface LoopbackBenchOptions {
  /** Requests per path and mode (default 3000; quick 300). */
  requests?: number;
  rate?: number;
  quick?: boolean;
  progress?: (line: string) => void;
}

export interface RoundsPlan {
  requests: number;
  rate: number;
  rounds: number;
  warmup: number;
}

/** The plan for the options: 3000 requests (quick 300) at 500/s in 20 rounds (quick 2), after 500 (50) warm-up. */
export function roundsPlan(o: LoopbackBenchOptions): RoundsPlan & { progress: (line: string) => void } {
  const quick = o.quick ?? false;
  const requests = o.requests ?? (quick ? 300 : 3000);
  return {
    requests,
    rate: o.rate ?? 500,
    rounds: Math.min(quick ? 2 : 20, requests),
    warmup: quick ? 50 : 500,
    progress: o.progress ?? (() => undefined),
  };
}

/**
 * Every path warmed up, then measured one at a time at the full rate in rotated rounds (the order shifts each
 * round, so no path always follows the same one): each path's latencies and failures.
 */
export async function rotatedRounds(
  paths: Endpoint[],
  plan: RoundsPlan,
  stream: boolean,
  progress: (line: string) => void,
  onRun: (p: Endpoint, s: RunStats, measured: boolean) => void = () => undefined,
): Promise<{ latencies: Map<string, number[]>; failed: Map<string, number> }> {
  const latencies = new Map<string, number[]>(paths.map((p) => [p.name, []]));
  const failed = new Map<string, number>(paths.map((p) => [p.name, 0]));
  const record = (p: Endpoint, s: RunStats, measured: boolean): void => {
    onRun(p, s, measured);
    failed.set(p.name, failed.get(p.name)! + s.failed);
    if (measured) latencies.get(p.name)!.push(...s.latencies);
  };
  for (const p of paths) record(p, await openLoop(p, plan.warmup, plan.rate, stream), false);
  for (let r = 0; r < plan.rounds; r++) {
    const n = Math.floor(plan.requests / plan.rounds) + (r < plan.requests % plan.rounds ? 1 : 0);
    for (let k = 0; k < paths.length; k++) {
      const p = paths[(k + r) % paths.length]!;
      record(p, await openLoop(p, n, plan.rate, stream), true);
    }
    progress(`${stream ? "streaming" : "non-streaming"}: round ${r + 1}/${plan.rounds} done`);
  }
  return { latencies, failed };
}
