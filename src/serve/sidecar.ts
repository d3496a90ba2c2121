// `dolphin serve --sidecar`: the decode-side sidecar for an endpoint picker (dolphin-epp, or llm-d's scheduler) that
// names a prefill endpoint in the `x-prefiller-host-port` header (llm-d's convention; a comma-separated list, the
// first is used). It sits in front of one decode engine. A request with the header takes vLLM's NixlConnector
// two-step, as llm-d's sidecar does: the prefill leg sends the client's body to the prefill endpoint with
// kv_transfer_params marking a remote decode, stream false, stream_options dropped, max_tokens (and
// max_completion_tokens, min_tokens when given) 1 and a new x-request-id (remote-path.ts prefillBody); the decode
// leg sends the client's body plus the prefill answer's kv_transfer_params to the decode engine, whose answer
// (streamed or not) is passed on as it comes. A 502/503/504 from the prefill is retried up to prefillRetries
// times; a prefill that still fails (refused, reset, timed out, 5xx) falls back to local prefill on the decode
// engine, as dolphin serve does (x-dolphin-route: fallback); a 4xx is the client's and is answered as it came.
// Without the header, and for every other path, the request goes to the decode engine unchanged.

import http, { type IncomingMessage, type ServerResponse } from "node:http";
import { randomUUID } from "node:crypto";
import { isPlainObject } from "../contract/values.js";
import { closeServer, HttpError, listen, readBody, sendError, type ErrorDialect } from "./http-toolkit.js";
import {
  classify,
  keepAliveAgents,
  parseJson,
  readUpstream,
  UpstreamError,
  upstreamRequest,
  type Agents,
} from "./proxy/upstream.js";
import { prefillBody } from "./proxy/remote-path.js";

export const PREFILLER_HEADER = "x-prefiller-host-port";
const INFERENCE_PATHS = new Set(["/v1/completions", "/v1/chat/completions"]);
const RETRIED_STATUSES = new Set([502, 503, 504]);
const MAX_BODY_BYTES = 64 * 2 ** 20;
/** Hop-by-hop headers (RFC 9110 §7.6.1) and those the sidecar sets itself. */
const NOT_FORWARDED = new Set([
  "connection",
  "keep-alive",
  "transfer-encoding",
  "content-length",
  "host",
  "upgrade",
  "te",
  "trailer",
  "proxy-connection",
  PREFILLER_HEADER,
]);

export interface SidecarOptions {
  /** The decode engine, e.g. http://127.0.0.1:8200. */
  decodeUrl: string;
  port?: number;
  host?: string;
  /** Retries of a prefill answered 502, 503 or 504 (default 0: as llm-d's sidecar, none unless configured). */
  prefillRetries?: number;
  /** Prefill locally on the decode engine when the prefill endpoint fails (default true). */
  fallbackLocal?: boolean;
  connectMs?: number;
  requestMs?: number;
  log?: (line: string) => void;
}

export interface SidecarStats {
  remote: number;
  local: number;
  fallback: number;
  prefillRetries: number;
}

export interface RunningSidecar {
  url: string;
  port: number;
  stats: SidecarStats;
  close(): Promise<void>;
}

const dialect: ErrorDialect = {
  notFound: (m, p) => new HttpError(404, `${m} ${p}: not found`, "not_found_error", 404),
  methodNotAllowed: (m, p) => new HttpError(405, `${m} ${p}: method not allowed`, "invalid_request_error", 405),
  bodyTooLarge: (n) => new HttpError(413, `request body larger than ${n} bytes`, "invalid_request_error", 413),
  bodyUnreadable: (why) => new HttpError(400, `request body unreadable: ${why}`, "invalid_request_error", 400),
};

export async function startSidecar(o: SidecarOptions): Promise<RunningSidecar> {
  const decodeUrl = o.decodeUrl.replace(/\/+$/, "");
  const retries = o.prefillRetries ?? 0;
  if (!Number.isInteger(retries) || retries < 0)
    throw new Error(`sidecar: prefillRetries must be an integer ≥ 0, got ${retries}`);
  const agents = keepAliveAgents();
  const stats: SidecarStats = { remote: 0, local: 0, fallback: 0, prefillRetries: 0 };
  const t = { connectMs: o.connectMs ?? 2_000, requestMs: o.requestMs ?? 600_000 };
  const log = o.log ?? (() => {});
  const server = http.createServer((req, res) => {
    handle(req, res).catch((e: unknown) => {
      const err = e instanceof HttpError ? e : new HttpError(502, (e as Error).message, "upstream_error", 502);
      if (!res.headersSent) sendError(res, err);
      else res.destroy();
    });
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? "/").split("?")[0]!;
    const body = await readBody(req, MAX_BODY_BYTES, dialect);
    const prefiller = String(req.headers[PREFILLER_HEADER] ?? "")
      .split(",")[0]!
      .trim();
    const headers = forwardedHeaders(req);
    if (req.method !== "POST" || !INFERENCE_PATHS.has(path) || prefiller === "") {
      if (req.method === "POST" && INFERENCE_PATHS.has(path)) stats.local++;
      return relay(res, req.method === "POST" ? "POST" : "GET", req.url ?? "/", headers, body, "local");
    }
    const json = parseJson(body);
    if (!isPlainObject(json))
      throw new HttpError(400, "request body: expected a JSON object", "invalid_request_error", 400);
    const kv = await prefill(`http://${prefiller}${path}`, json, headers);
    if (kv === null) {
      stats.fallback++;
      return relay(res, "POST", req.url ?? "/", headers, body, "fallback");
    }
    stats.remote++;
    return relay(
      res,
      "POST",
      req.url ?? "/",
      headers,
      JSON.stringify({ ...json, kv_transfer_params: kv }),
      "remote",
      prefiller,
    );
  }

  /** The prefill leg: its kv_transfer_params, or null for a fallback to local prefill. */
  async function prefill(
    url: string,
    body: Record<string, unknown>,
    headers: Record<string, string>,
  ): Promise<Record<string, unknown> | null> {
    const payload = prefillBody(body);
    if (body["min_tokens"] !== undefined) payload["min_tokens"] = 1;
    const text = JSON.stringify(payload);
    for (let attempt = 0; ; attempt++) {
      let failure: UpstreamError;
      try {
        const r = await upstreamRequest(agents, url, {
          method: "POST",
          headers: { ...headers, "content-type": "application/json", "x-request-id": randomUUID() },
          body: text,
          connectMs: t.connectMs,
          responseMs: t.requestMs,
        });
        const buf = await readUpstream(r, t.requestMs);
        const status = r.statusCode ?? 0;
        if (status >= 400 && status < 500)
          throw new HttpError(
            status,
            `prefill endpoint answered ${status}: ${buf.toString("utf8").slice(0, 300)}`,
            "invalid_request_error",
            status,
          );
        if (status >= 400) failure = new UpstreamError("status", `${url} answered ${status}`, status);
        else {
          const answer = parseJson(buf);
          const kv = isPlainObject(answer) ? answer["kv_transfer_params"] : undefined;
          if (isPlainObject(kv)) return kv;
          failure = new UpstreamError("protocol", `${url}: the prefill answer carries no kv_transfer_params`);
        }
      } catch (e) {
        if (e instanceof HttpError) throw e;
        failure = classify(e, url);
      }
      if (RETRIED_STATUSES.has(failure.status) && attempt < retries) {
        stats.prefillRetries++;
        continue;
      }
      log(`prefill failed (${failure.message}): ${o.fallbackLocal === false ? "answered 502" : "local prefill"}`);
      if (o.fallbackLocal === false)
        throw new HttpError(502, `prefill failed: ${failure.message}`, "upstream_error", 502);
      return null;
    }
  }

  /** The decode engine's answer, passed on as it arrives. */
  async function relay(
    res: ServerResponse,
    method: "GET" | "POST",
    path: string,
    headers: Record<string, string>,
    body: Buffer | string,
    route: string,
    prefiller: string | null = null,
  ): Promise<void> {
    const up = await upstreamRequest(agents, `${decodeUrl}${path}`, {
      method,
      headers,
      ...(method === "POST" ? { body } : {}),
      connectMs: t.connectMs,
      responseMs: t.requestMs,
    }).catch((e: unknown) => {
      throw new HttpError(502, `decode engine: ${classify(e, decodeUrl).message}`, "upstream_error", 502);
    });
    // which engines answered: route local, remote or fallback, this sidecar's address, and the prefill endpoint
    const out: Record<string, string | string[]> = { "x-dolphin-route": route, "x-dolphin-decode-worker": self };
    if (prefiller !== null) out["x-dolphin-prefill-worker"] = prefiller;
    for (const [k, v] of Object.entries(up.headers)) if (v !== undefined && !NOT_FORWARDED.has(k)) out[k] = v;
    if (up.headers["content-length"] !== undefined) out["content-length"] = up.headers["content-length"];
    res.writeHead(up.statusCode ?? 502, out);
    up.once("error", () => res.destroy()); // cut mid-way: the client sees the cut, as from the engine itself
    up.pipe(res);
    await new Promise<void>((resolve) =>
      res.once("close", () => {
        up.destroy(); // the client left first: stop the engine's answer too
        resolve();
      }),
    );
  }

  let self = "";
  const port = await listen(server, o.port ?? 0, o.host ?? "127.0.0.1");
  self = `${o.host ?? "127.0.0.1"}:${port}`;
  return {
    url: `http://${o.host ?? "127.0.0.1"}:${port}`,
    port,
    stats,
    close: async () => {
      await closeServer(server);
      agents.http.destroy();
    },
  };
}

function forwardedHeaders(req: IncomingMessage): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(req.headers)) if (v !== undefined && !NOT_FORWARDED.has(k)) out[k] = String(v);
  return out;
}
