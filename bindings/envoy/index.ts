// The Envoy filter's entry (built to build/dolphin-envoy.wasm by build/build.mjs): the proxy-wasm ABI 0.2.1
// exports, and the routing core compiled in from assembly/ (docs/envoy.md).
//
// The exports are written here, not taken from the SDK: its dispatch builds debug strings on every call whether or
// not they are logged (one of them joins the ids of every live context: work that grows with the requests in
// flight), its proxy_on_done / proxy_on_delete trap for a root context (which Envoy retires at every table swap),
// and its httpCall keeps a callback per call that a vanished stream leaks. The SDK still provides the host-import
// declarations, malloc, and the buffer, shared-data and local-reply helpers (host.ts, shared.ts).

import * as imports from "@gcoredev/proxy-wasm-sdk-as/assembly/imports";
import { DolphinRoot, DolphinStream, pendingCalls } from "./filter";

export { malloc } from "@gcoredev/proxy-wasm-sdk-as/assembly/malloc";

let root: DolphinRoot | null = null;
const streams = new Map<u32, DolphinStream>();

/** The stream context `id`, or null (a context Envoy never created here, or already deleted). */
function stream(id: u32): DolphinStream | null {
  return streams.has(id) ? streams.get(id) : null;
}

export function proxy_abi_version_0_2_1(): void {}

export function proxy_on_context_create(contextId: u32, rootContextId: u32): void {
  if (rootContextId == 0) {
    // one root per VM: a new plugin configuration (a table swap) reconfigures it, keeping the core and its index
    if (root === null) root = new DolphinRoot();
    return;
  }
  if (root !== null) streams.set(contextId, new DolphinStream(contextId, root!));
}

export function proxy_on_vm_start(_rootContextId: u32, _vmConfigurationSize: u32): u32 {
  return 1;
}

export function proxy_validate_configuration(_rootContextId: u32, _configurationSize: u32): u32 {
  return 1;
}

export function proxy_on_configure(_rootContextId: u32, configurationSize: u32): u32 {
  return root !== null && root!.configure(configurationSize) ? 1 : 0;
}

export function proxy_on_tick(_rootContextId: u32): void {}

export function proxy_on_queue_ready(_rootContextId: u32, _token: u32): void {}

export function proxy_on_foreign_function(_rootContextId: u32, _functionId: u32, _dataSize: u32): void {}

export function proxy_on_request_headers(contextId: u32, _headers: u32, endOfStream: u32): i32 {
  const s = stream(contextId);
  return s !== null ? s.onRequestHeaders(endOfStream != 0) : 0;
}

export function proxy_on_request_body(contextId: u32, bodySize: u32, endOfStream: u32): i32 {
  const s = stream(contextId);
  return s !== null ? s.onRequestBody(bodySize, endOfStream != 0) : 0;
}

export function proxy_on_request_trailers(_contextId: u32, _trailers: u32): i32 { return 0; }

export function proxy_on_request_metadata(_contextId: u32, _elements: u32): i32 { return 0; }

export function proxy_on_response_headers(contextId: u32, _headers: u32, endOfStream: u32): i32 {
  const s = stream(contextId);
  return s !== null ? s.onResponseHeaders(endOfStream != 0) : 0;
}

export function proxy_on_response_body(contextId: u32, _bodySize: u32, endOfStream: u32): i32 {
  const s = stream(contextId);
  return s !== null ? s.onResponseBody(endOfStream != 0) : 0;
}

export function proxy_on_response_trailers(_contextId: u32, _trailers: u32): i32 { return 0; }

export function proxy_on_response_metadata(_contextId: u32, _elements: u32): i32 { return 0; }

export function proxy_on_http_call_response(_rootContextId: u32, token: u32, headers: u32, bodySize: u32, _trailers: u32): void {
  if (!pendingCalls.has(token)) return;
  const s = pendingCalls.get(token);
  pendingCalls.delete(token);
  if (!streams.has(s.contextId)) return; // the client left while the prefill ran
  imports.proxy_set_effective_context(s.contextId);
  s.onPrefillAnswer(headers, bodySize);
}

export function proxy_on_log(contextId: u32): void {
  const s = stream(contextId);
  if (s !== null) s.release();
}

export function proxy_on_done(_contextId: u32): u32 {
  return 1; // nothing to finish asynchronously
}

export function proxy_on_delete(contextId: u32): void {
  const s = stream(contextId);
  if (s === null) return; // a root context: it lives as long as the VM
  s.release();
  streams.delete(contextId);
}
