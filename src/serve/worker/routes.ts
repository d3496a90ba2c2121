// The emulated worker's HTTP API, as vLLM's OpenAI server has it: POST /v1/completions, /v1/chat/completions (SSE
// with "stream": true), /tokenize, /detokenize; GET /v1/models, /health, /metrics; and POST /internal/kv-release,
// where a decode worker says it pulled a prefill's KV (NIXL's notification, which real vLLM sends over its own
// channel).

import type http from "node:http";
import { randomUUID } from "node:crypto";
import { describeValue } from "../../contract/values.js";
import { hashTokens, type Hash64 } from "../../hashing/hashes.js";
import { SIM_BLOCK_TOKENS, type SimRequest } from "../../sim/types.js";
import { HttpError, pathOf, readBody, RouteTable, sendError, sendJson } from "../http-toolkit.js";
import { sendMetrics } from "../prometheus.js";
import { chatPrompt, decode, encode } from "../tokenizer.js";
import { Completion } from "./answers.js";
import type { WorkerEngine } from "./engine.js";
import type { WorkerMetrics } from "./metrics.js";
import type { NixlHandshake } from "./handshake.js";
import {
  bad,
  chatMessages,
  checkModel,
  jsonObject,
  readCompletion,
  tokenIds,
  vllmError,
  VLLM_ERRORS,
  type CompletionLimits,
} from "./requests.js";

const MAX_BODY_BYTES = 8 * 1024 * 1024;

export interface WorkerExchange {
  req: http.IncomingMessage;
  res: http.ServerResponse;
}

export interface WorkerApi extends CompletionLimits {
  engine: WorkerEngine;
  metrics: WorkerMetrics;
  /** The root of the block-hash chain (llm-d's scheme, as the router's precise mode). */
  root: Hash64;
  /** The engine's version (GET /version) and the check of a prefill engine before a pull from it. */
  handshake: NixlHandshake;
  /** Unix seconds the worker started (/v1/models). */
  created: number;
}

export function workerRoutes(api: WorkerApi): RouteTable<WorkerExchange> {
  const { engine, model, maxModelLen } = api;
  let nextReq = 0;
  const jsonBody = async (req: http.IncomingMessage): Promise<Record<string, unknown>> =>
    jsonObject(await readBody(req, MAX_BODY_BYTES, VLLM_ERRORS));

  async function completions({ req, res }: WorkerExchange, chat: boolean): Promise<void> {
    const body = await jsonBody(req);
    let request: ReturnType<typeof readCompletion>;
    try {
      request = readCompletion(body, chat, api);
    } catch (e) {
      engine.releaseRejected(body["kv_transfer_params"]);
      throw e;
    }
    const { tokens, kind, outputTokens } = request;
    if (request.remote) await api.handshake.check(request.remote);
    const reqNo = nextReq++;
    const header = req.headers["x-request-id"];
    const base = typeof header === "string" && header !== "" ? header : randomUUID().replace(/-/g, "");
    const blocks = hashTokens(tokens, SIM_BLOCK_TOKENS, api.root);
    const simReq: SimRequest = { id: reqNo, arrivalMs: 0, promptTokens: tokens.length, outputTokens, blocks, turn: 1 };
    const ids = engine.blockIds.intern(blocks);
    const c = new Completion(
      `${chat ? "chatcmpl" : "cmpl"}-${base}`,
      `${engine.address.workerId}/${reqNo}`,
      request,
      simReq,
      res,
      model,
    );
    res.on("close", () => {
      if (!res.writableFinished && !c.closed) {
        c.closed = true;
        engine.abort(c);
      }
    });
    engine.submit(c, ids);
    if (c.rejected) {
      const need = Math.ceil((tokens.length + (kind === "prefill" ? 0 : outputTokens)) / SIM_BLOCK_TOKENS);
      throw vllmError(
        503,
        "ServiceUnavailableError",
        `the request needs ${need} KV blocks of ${SIM_BLOCK_TOKENS} tokens ` +
          `(prompt ${tokens.length}, output ${outputTokens}); this worker holds ${engine.inst.cache.capacityBlocks}`,
      );
    }
    if (request.stream) c.startStream();
  }

  async function tokenize({ req, res }: WorkerExchange): Promise<void> {
    const body = await jsonBody(req);
    checkModel(body, model);
    let tokens: number[];
    if (body["messages"] !== undefined) tokens = encode(chatPrompt(chatMessages(body["messages"])));
    else if (typeof body["prompt"] === "string") tokens = encode(body["prompt"]);
    else throw bad(`give prompt (a string) or messages, got prompt ${describeValue(body["prompt"])}`, "prompt");
    sendJson(res, 200, { count: tokens.length, max_model_len: maxModelLen, tokens, token_strs: null });
  }

  async function detokenize({ req, res }: WorkerExchange): Promise<void> {
    const body = await jsonBody(req);
    checkModel(body, model);
    const t = body["tokens"];
    if (!Array.isArray(t)) throw bad(`tokens must be a list of token ids, got ${describeValue(t)}`, "tokens");
    sendJson(res, 200, { prompt: decode(tokenIds(t, "tokens")) });
  }

  async function kvRelease({ req, res }: WorkerExchange): Promise<void> {
    const body = await jsonBody(req);
    const id = body["remote_request_id"];
    if (typeof id !== "string" || id === "")
      throw bad(`remote_request_id must be a string, got ${describeValue(id)}`, "remote_request_id");
    const ok = engine.atNow(() => engine.releasePin(id, "pulled"));
    if (!ok)
      throw vllmError(
        404,
        "NotFoundError",
        `no blocks pinned for remote_request_id ${JSON.stringify(id)}`,
        "remote_request_id",
      );
    sendJson(res, 200, { released: true });
  }

  return new RouteTable<WorkerExchange>(VLLM_ERRORS)
    .on("/v1/completions", { POST: (x) => completions(x, false) })
    .on("/v1/chat/completions", { POST: (x) => completions(x, true) })
    .on("/tokenize", { POST: tokenize })
    .on("/detokenize", { POST: detokenize })
    .on("/internal/kv-release", { POST: kvRelease })
    .on("/health", {
      GET: ({ res }) => {
        res.writeHead(200, { "content-length": 0 });
        res.end();
      },
    })
    .on("/version", { GET: ({ res }) => sendJson(res, 200, { version: api.handshake.version }) })
    .on("/v1/models", {
      GET: ({ res }) =>
        sendJson(res, 200, {
          object: "list",
          data: [
            {
              id: model,
              object: "model",
              created: api.created,
              owned_by: "vllm",
              root: model,
              parent: null,
              max_model_len: maxModelLen,
            },
          ],
        }),
    })
    .on("/metrics", {
      GET: ({ res }) => {
        engine.pump();
        return sendMetrics(res, api.metrics.registry);
      },
    });
}

/** One HTTP request: its route's handler, and vLLM's error answer for whatever it throws (a 500 is logged). */
export function answer(routes: RouteTable<WorkerExchange>, x: WorkerExchange, logInternal: (e: unknown) => void): void {
  const fail = (e: unknown): void => {
    if (e instanceof HttpError) return sendError(x.res, e);
    logInternal(e);
    sendError(x.res, vllmError(500, "InternalServerError", (e as Error).message ?? "internal error"));
  };
  try {
    const r = routes.find(x.req.method ?? "GET", pathOf(x.req))(x);
    if (r) r.catch(fail);
  } catch (e) {
    x.req.resume();
    fail(e);
  }
}
