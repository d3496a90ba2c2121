// The servers the loopback benchmarks measure against, as `node -e` child scripts (harness.ts runs them):
//   fake worker   a fake OpenAI worker (node:http): POST /v1/chat/completions answers a fixed small JSON (usage
//                 included) or, with "stream":true, 8 SSE content chunks + a usage chunk + [DONE], all written in the
//                 same tick. A prefill request (kv_transfer_params.do_remote_decode) gets kv_transfer_params back. It
//                 listens on two ports: decode (every path) and prefill (the two-step detail). Its answers are built
//                 here and handed to the child, so the expected byte counts are known (EXPECTED_BYTES).
//   pass-through  a bare pass-through (node:http): reads the body, JSON-parses it, forwards the raw bytes to the
//                 upstream and pipes the answer back; no routing. Its client is a keep-alive node:http Agent, the same
//                 client `dolphin serve` uses for workers (src/serve/proxy/upstream.ts), for a like-for-like
//                 comparison (the issue says undici; the proxy does not use it, so neither does this).

import { CHILD_PRELUDE, MODEL, portsLine, type Children } from "./harness.js";

// ---- the fake worker's answers -------------------------------------------------------------------------------------

const USAGE = {
  prompt_tokens: 14,
  completion_tokens: 8,
  total_tokens: 22,
  prompt_tokens_details: { cached_tokens: 0 },
};
export const JSON_ANSWER = JSON.stringify({
  id: "chatcmpl-bench",
  object: "chat.completion",
  created: 0,
  model: MODEL,
  choices: [
    { index: 0, message: { role: "assistant", content: "Hello! How can I help you today?" }, finish_reason: "stop" },
  ],
  usage: USAGE,
});
export const SSE_EVENTS = [
  ...["Hello", "!", " How", " can", " I", " help", " you", " today?"].map(
    (piece, i) =>
      `data: ${JSON.stringify({ id: "chatcmpl-bench", object: "chat.completion.chunk", created: 0, model: MODEL, choices: [{ index: 0, delta: { content: piece }, finish_reason: i === 7 ? "stop" : null }] })}\n\n`,
  ),
  `data: ${JSON.stringify({ id: "chatcmpl-bench", object: "chat.completion.chunk", created: 0, model: MODEL, choices: [], usage: USAGE })}\n\n`,
  "data: [DONE]\n\n",
];
export const PREFILL_ANSWER = JSON.stringify({
  id: "chatcmpl-bench-prefill",
  object: "chat.completion",
  created: 0,
  model: MODEL,
  choices: [{ index: 0, message: { role: "assistant", content: "Hello" }, finish_reason: "length" }],
  usage: { ...USAGE, completion_tokens: 1, total_tokens: 15 },
  kv_transfer_params: {
    do_remote_prefill: true,
    do_remote_decode: false,
    remote_engine_id: "bench-prefill",
    remote_block_ids: [1, 2],
    remote_host: "127.0.0.1",
    remote_port: 5600,
    remote_request_id: "bench",
  },
});
export const EXPECTED_BYTES = { json: Buffer.byteLength(JSON_ANSWER), sse: Buffer.byteLength(SSE_EVENTS.join("")) };

// ---- the child scripts ---------------------------------------------------------------------------------------------

export const UPSTREAM_SCRIPT = `${CHILD_PRELUDE}
const json = Buffer.from(cfg.json), prefill = Buffer.from(cfg.prefill), sse = cfg.sse.map((s) => Buffer.from(s));
listenAll(2, (req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    if (req.url === "/health") { res.writeHead(200, { "content-type": "application/json", "content-length": 2 }); res.end("{}"); return; }
    if (req.method !== "POST" || (req.url !== "/v1/chat/completions" && req.url !== "/v1/completions")) { res.writeHead(404, { "content-length": 0 }); res.end(); return; }
    const body = Buffer.concat(chunks).toString("utf8");
    if (body.includes('"do_remote_decode":true')) {
      res.writeHead(200, { "content-type": "application/json", "content-length": prefill.length }); res.end(prefill);
    } else if (body.includes('"stream":true')) {
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
      for (let i = 0; i < sse.length - 1; i++) res.write(sse[i]);
      res.end(sse[sse.length - 1]);
    } else {
      res.writeHead(200, { "content-type": "application/json", "content-length": json.length }); res.end(json);
    }
  });
});`;

export const PASSTHROUGH_SCRIPT = `${CHILD_PRELUDE}
const target = new URL(cfg.upstream);
const agent = new http.Agent({ keepAlive: true });
listenAll(1, (req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const raw = Buffer.concat(chunks);
    let body;
    try { body = JSON.parse(raw.toString("utf8")); } catch { body = undefined; }
    if (body === null || typeof body !== "object") { res.writeHead(400, { "content-length": 0 }); res.end(); return; }
    const up = http.request({ hostname: target.hostname, port: target.port, path: req.url, method: "POST", agent,
      headers: { "content-type": "application/json", "content-length": raw.length } }, (ur) => {
      const headers = { "content-type": ur.headers["content-type"] || "application/json" };
      if (ur.headers["content-length"] !== undefined) headers["content-length"] = ur.headers["content-length"];
      res.writeHead(ur.statusCode || 502, headers);
      ur.pipe(res);
      ur.on("error", () => res.destroy());
    });
    up.on("error", () => { if (!res.headersSent) res.writeHead(502, { "content-length": 0 }); res.end(); });
    res.on("close", () => { if (!res.writableFinished) up.destroy(); });
    up.end(raw);
  });
});`;

// ---- starting them --------------------------------------------------------------------------------------------------

export interface FakeWorker {
  decodeUrl: string;
  prefillUrl: string;
  pid: number | undefined;
}

/** The fake worker as the child "upstream"; resolves once it listens on its decode and prefill ports. */
export async function startFakeWorker(children: Children): Promise<FakeWorker> {
  const upstream = children.spawn("upstream", ["-e", UPSTREAM_SCRIPT], {
    DOLPHIN_BENCH_CHILD: JSON.stringify({ json: JSON_ANSWER, sse: SSE_EVENTS, prefill: PREFILL_ANSWER }),
  });
  const [decodePort, prefillPort] = await children.ready(upstream, portsLine);
  return {
    decodeUrl: `http://127.0.0.1:${decodePort}`,
    prefillUrl: `http://127.0.0.1:${prefillPort}`,
    pid: upstream.proc.pid,
  };
}

/** The bare pass-through in front of `upstream`, as the child `name`; resolves with its URL once it listens. */
export async function startPassthrough(children: Children, name: string, upstream: string): Promise<string> {
  const pass = children.spawn(name, ["-e", PASSTHROUGH_SCRIPT], {
    DOLPHIN_BENCH_CHILD: JSON.stringify({ upstream }),
  });
  return `http://127.0.0.1:${(await children.ready(pass, portsLine))[0]}`;
}
