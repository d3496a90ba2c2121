// The proxy-wasm HTTP filter: one root context per VM (the configuration, the core) and one stream context per
// request. A POST to /v1/chat/completions or /v1/completions is buffered (up to max_body_bytes), read as
// `dolphin serve` reads it in approximate mode, routed by the core, and sent on:
//   local  → the decode worker's cluster, body unchanged
//   remote → first a prefill request to the prefill worker's cluster (dispatch_http_call), then the body rewritten
//            with the answer's kv_transfer_params to the decode worker's cluster (vLLM's NixlConnector protocol);
//            when the prefill fails and fallback_local is on, the unchanged body goes to the decode worker.
// Bad input gets an OpenAI-style error from the filter. Nothing here throws: a trap would stop the VM.

import * as imports from "@gcoredev/proxy-wasm-sdk-as/assembly/imports";
import { get_buffer_bytes } from "@gcoredev/proxy-wasm-sdk-as/assembly/runtime";
import { E_NO_DECODE_WORKER } from "../../assembly/generated/abi";
import { parseConfig } from "./config";
import {
  addHeader, bufferBytes, BufferTypeValues, continueRequest, header, HeaderMapTypeValues, localReply, logError, logInfo,
  nowNs, removeHeader, replaceRequestBody, setCluster,
} from "./host";
import { count, metrics, record } from "./metrics";
import { decodeBody, Endpoint, errorBody, kvTransferParams, prefillBody, Prompt, readPrompt } from "./openai";
import { FilterDecision, Routing } from "./routing";
import { addPrefills, initSharedKeys, logHead } from "./shared";

const CHAT_PATH = "/v1/chat/completions";
const COMPLETIONS_PATH = "/v1/completions";

// proxy-wasm status values (FilterHeadersStatus, FilterDataStatus)
const CONTINUE: i32 = 0;
const STOP_ITERATION: i32 = 1;
const STOP_ITERATION_AND_BUFFER: i32 = 1;
const STOP_ITERATION_NO_BUFFER: i32 = 3;

/** Prefill requests in flight: dispatch_http_call token → the stream waiting for the answer. */
export const pendingCalls = new Map<u32, DolphinStream>();

export class DolphinRoot {
  readonly routing: Routing = new Routing();
  configured: bool = false;

  configure(size: u32): bool {
    const text = Uint8Array.wrap(get_buffer_bytes(BufferTypeValues.PluginConfiguration, 0, size));
    const parsed = parseConfig(text);
    if (parsed.error.length > 0) {
      logError("dolphin: plugin configuration: " + parsed.error);
      return false;
    }
    metrics.define();
    const error = this.routing.configure(parsed.config);
    if (error.length > 0) {
      logError("dolphin: plugin configuration: " + error);
      return false;
    }
    count(metrics.tableLoads);
    initSharedKeys(parsed.config.maxWorkers);
    this.configured = true;
    const c = parsed.config;
    logInfo("dolphin: configured: " + c.workers.length.toString() + " workers, block size " + c.blockSize.toString() +
      ", decision log at " + logHead().toString());
    return true;
  }
}

export class DolphinStream {
  private endpoint: i32 = -1;
  private prompt: Prompt | null = null;
  private decision: FilterDecision | null = null;
  private bodyLength: u32 = 0;
  private route: string = "";
  private matchedBlocks: f64 = 0;
  private requestId: string = "";
  private authorization: string = "";
  /** Loads held for this request, released once (the answer's end, or the stream's end). */
  private heldDecodePrefill: f64 = 0;
  private heldDecodeTokens: f64 = 0;
  private answered: bool = false;

  constructor(readonly contextId: u32, readonly root: DolphinRoot) {}

  onRequestHeaders(endOfStream: bool): i32 {
    const path = header(HeaderMapTypeValues.RequestHeaders, ":path");
    const q = path.indexOf("?");
    const bare = q >= 0 ? path.substring(0, q) : path;
    if (bare != CHAT_PATH && bare != COMPLETIONS_PATH) return CONTINUE;
    const method = header(HeaderMapTypeValues.RequestHeaders, ":method");
    if (method != "POST") {
      this.reject(405, method + " is not allowed on " + bare + " (allowed: POST)", "method_not_allowed");
      return STOP_ITERATION;
    }
    this.endpoint = bare == CHAT_PATH ? Endpoint.Chat : Endpoint.Completions;
    const c = this.root.routing.config;
    const declared = header(HeaderMapTypeValues.RequestHeaders, "content-length");
    if (declared.length > 0 && parseFloat(declared) > <f64>c.maxBodyBytes) {
      this.tooLarge();
      return STOP_ITERATION;
    }
    if (endOfStream) {
      this.reject(400, "empty request body", "invalid_json");
      return STOP_ITERATION;
    }
    this.requestId = header(HeaderMapTypeValues.RequestHeaders, "x-request-id");
    this.authorization = header(HeaderMapTypeValues.RequestHeaders, "authorization");
    // the body may change length (remote path): the buffer filter after this one sets the final content-length
    removeHeader(HeaderMapTypeValues.RequestHeaders, "content-length");
    return CONTINUE;
  }

  onRequestBody(size: u32, endOfStream: bool): i32 {
    if (this.endpoint < 0 || this.answered || this.decision !== null) return CONTINUE;
    const c = this.root.routing.config;
    if (size > <u32>c.maxBodyBytes) {
      this.tooLarge();
      return STOP_ITERATION_NO_BUFFER;
    }
    if (!endOfStream) return STOP_ITERATION_AND_BUFFER;
    this.bodyLength = <u32>size;
    const started = nowNs();
    const p = readPrompt(this.endpoint, bufferBytes(BufferTypeValues.HttpRequestBody, <u32>size), c.model);
    if (p.status != 0) {
      this.reject(p.status, p.errorMessage, p.errorCode);
      return STOP_ITERATION_NO_BUFFER;
    }
    this.prompt = p;
    const routing = this.root.routing;
    count(metrics.logSkipped, routing.catchUp(<f64>started / 1e9));
    const d = routing.route(p);
    record(metrics.routeTimeUs, (nowNs() - started) / 1000);
    if (d.code != 0) {
      count(metrics.routeErrors);
      if (d.code == E_NO_DECODE_WORKER) this.answer(503, "no decode worker is in rotation", "service_unavailable", "no_decode_worker");
      else this.answer(500, "internal error: routing failed: " + d.error, "server_error", "internal_error");
      return STOP_ITERATION_NO_BUFFER;
    }
    this.decision = d;
    if (!d.shared) count(metrics.logUnshared);
    count(metrics.promptBlocks, <i64>d.blocks);
    // the decode worker holds the prompt until the answer ends, and its local prefill until the answer starts
    this.heldDecodeTokens = d.isl;
    this.heldDecodePrefill = d.remote ? 0 : d.effD;
    routing.hold(d.decode, this.heldDecodePrefill, this.heldDecodeTokens);
    if (!d.remote) return this.sendToDecode("local", d.matchedDecode);
    return this.dispatchPrefill(p, d);
  }

  /** Step 1 of the NixlConnector protocol; the answer continues the request (onPrefillAnswer). */
  private dispatchPrefill(p: Prompt, d: FilterDecision): i32 {
    const routing = this.root.routing;
    const worker = unchecked(routing.workers[d.prefill]);
    const headers = new Array<string>();
    headers.push(":method"); headers.push("POST");
    headers.push(":path"); headers.push(this.endpoint == Endpoint.Chat ? CHAT_PATH : COMPLETIONS_PATH);
    headers.push(":authority"); headers.push(worker.cluster);
    headers.push("content-type"); headers.push("application/json");
    if (this.requestId.length > 0) { headers.push("x-request-id"); headers.push(this.requestId); }
    if (this.authorization.length > 0) { headers.push("authorization"); headers.push(this.authorization); }
    routing.hold(d.prefill, d.effP, 0);
    addPrefills(1);
    const token = httpCall(worker.cluster, headers, prefillBody(p), <u32>routing.config.prefillTimeoutMs);
    if (token < 0) {
      this.prefillDone();
      return this.prefillFailed("dispatch_http_call to cluster " + worker.cluster + " failed (" + (-token).toString() + ")", false);
    }
    pendingCalls.set(<u32>token, this);
    return STOP_ITERATION_AND_BUFFER;
  }

  onPrefillAnswer(headerCount: u32, bodySize: u32): void {
    this.prefillDone();
    if (this.answered) return;
    const d = this.decision!;
    const status = headerCount > 0 ? header(HeaderMapTypeValues.HttpCallResponseHeaders, ":status") : "";
    if (status.length == 0) {
      this.prefillFailed("no answer (timeout or connection failure)", true);
      return;
    }
    const answer = bufferBytes(BufferTypeValues.HttpCallResponseBody, <u32>bodySize);
    if (!status.startsWith("2")) {
      this.prefillFailed("answered " + status, true, status, answer);
      return;
    }
    const kv = kvTransferParams(answer);
    if (kv.length == 0) {
      this.prefillFailed("the prefill response carries no kv_transfer_params", true);
      return;
    }
    const body = decodeBody(this.prompt!, kv);
    if (!replaceRequestBody(this.bodyLength, body)) {
      this.prefillFailed("could not rewrite the request body", true);
      return;
    }
    this.sendToDecode("remote", d.matchedPrefill);
    continueRequest();
  }

  private prefillDone(): void {
    const d = this.decision!;
    this.root.routing.hold(d.prefill, -d.effP, 0);
    addPrefills(-1);
  }

  /** The prefill failed: local prefill on the decode worker (fallback_local), else 502 (or the worker's 4xx). */
  private prefillFailed(why: string, resume: bool, status: string = "", answer: Uint8Array | null = null): i32 {
    count(metrics.prefillFailures);
    const d = this.decision!;
    const routing = this.root.routing;
    if (!routing.config.fallbackLocal) {
      const worker = unchecked(routing.workers[d.prefill]).id;
      if (answer !== null && status.startsWith("4") && answer.length > 0) {
        localReply(<u32>parseInt(status), "dolphin_prefill_rejected", answer.buffer);
        this.answered = true;
      } else this.answer(502, "prefill worker " + worker + " failed: " + why, "upstream_error", "prefill_failed");
      return STOP_ITERATION_NO_BUFFER;
    }
    count(metrics.fallbacks);
    logInfo("dolphin: prefill failed, falling back to local prefill: " + why);
    // the decode worker now prefills locally
    this.heldDecodePrefill = d.effD;
    routing.hold(d.decode, d.effD, 0);
    const next = this.sendToDecode("fallback", d.matchedDecode);
    if (resume) continueRequest();
    return next;
  }

  private sendToDecode(route: string, matchedBlocks: f64): i32 {
    const d = this.decision!;
    this.route = route;
    this.matchedBlocks = matchedBlocks;
    count(route == "local" ? metrics.requestsLocal : route == "remote" ? metrics.requestsRemote : metrics.requestsFallback);
    count(metrics.matchedBlocks, <i64>matchedBlocks);
    setCluster(unchecked(this.root.routing.workers[d.decode]).cluster);
    return CONTINUE;
  }

  onResponseHeaders(endOfStream: bool): i32 {
    const d = this.decision;
    if (d === null || this.route.length == 0) return CONTINUE;
    const workers = this.root.routing.workers;
    addHeader(HeaderMapTypeValues.ResponseHeaders, "x-dolphin-decode-worker", unchecked(workers[d.decode]).id);
    if (this.route == "remote") addHeader(HeaderMapTypeValues.ResponseHeaders, "x-dolphin-prefill-worker", unchecked(workers[d.prefill]).id);
    addHeader(HeaderMapTypeValues.ResponseHeaders, "x-dolphin-route", this.route);
    // the prefix the index expected cached on the worker that prefilled (blocks of 64 bytes of text, or block_size tokens)
    addHeader(HeaderMapTypeValues.ResponseHeaders, "x-dolphin-matched-blocks", (<i64>this.matchedBlocks).toString());
    this.releasePrefill();
    if (endOfStream) this.release();
    return CONTINUE;
  }

  onResponseBody(endOfStream: bool): i32 {
    if (endOfStream) this.release();
    return CONTINUE;
  }

  private releasePrefill(): void {
    const d = this.decision;
    if (d === null || this.heldDecodePrefill == 0) return;
    this.root.routing.hold(d.decode, -this.heldDecodePrefill, 0);
    this.heldDecodePrefill = 0;
  }

  /** Releases the loads this request holds (once; the answer's end, or the stream's). */
  release(): void {
    this.releasePrefill();
    const d = this.decision;
    if (d === null || this.heldDecodeTokens == 0) return;
    this.root.routing.hold(d.decode, 0, -this.heldDecodeTokens);
    this.heldDecodeTokens = 0;
  }

  private reject(status: i32, message: string, code: string): void {
    count(metrics.badRequests);
    this.answer(status, message, "invalid_request_error", code);
  }

  private tooLarge(): void {
    const max = this.root.routing.config.maxBodyBytes;
    this.reject(413, "request body larger than max_body_bytes (" + max.toString() + " bytes)", "body_too_large");
  }

  private answer(status: i32, message: string, type: string, code: string): void {
    if (this.answered) return;
    this.answered = true;
    this.release();
    localReply(<u32>status, "dolphin_" + code, errorBody(message, type, code));
  }
}

/**
 * proxy_dispatch_http_call with the headers as name, value, name, value…; the token, or −status when the call could
 * not be made. Header pairs are proxy-wasm's map encoding: count, (name length, value length)…, then each name and
 * value followed by a NUL.
 */
function httpCall(cluster: string, pairs: Array<string>, body: Uint8Array, timeoutMs: u32): i64 {
  const encoded = new Array<ArrayBuffer>(pairs.length);
  let size = 4 + pairs.length * 4;
  for (let k = 0; k < pairs.length; k++) {
    const b = String.UTF8.encode(unchecked(pairs[k]));
    unchecked(encoded[k] = b);
    size += b.byteLength + 1;
  }
  const map = new ArrayBuffer(size);
  const at = changetype<usize>(map);
  store<u32>(at, pairs.length >> 1);
  let data = at + 4 + (<usize>pairs.length << 2);
  for (let k = 0; k < pairs.length; k++) {
    const b = unchecked(encoded[k]);
    store<u32>(at + 4 + (<usize>k << 2), b.byteLength);
    memory.copy(data, changetype<usize>(b), b.byteLength);
    data += b.byteLength;
    store<u8>(data++, 0);
  }
  const name = String.UTF8.encode(cluster);
  const token = memory.data(4);
  const rc = imports.proxy_http_call(changetype<usize>(name), name.byteLength, at, size, body.dataStart, body.byteLength, 0, 0, timeoutMs, token);
  return rc == 0 ? <i64>load<u32>(token) : -<i64>rc;
}
