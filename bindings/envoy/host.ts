// The few host calls the filter makes, each returning a status instead of throwing: the SDK's header helpers throw
// on any non-OK result (replace/remove after the headers left, a stream that died during an HTTP call), and a throw
// traps the VM, which would fail every later request on that worker thread.

import * as imports from "@gcoredev/proxy-wasm-sdk-as/assembly/imports";
import {
  BufferTypeValues, get_buffer_bytes, get_header_map_value, HeaderMapTypeValues, log, LogLevelValues, makeHeaderPair,
  send_http_response, set_property, WasmResultValues,
} from "@gcoredev/proxy-wasm-sdk-as/assembly/runtime";

export { BufferTypeValues, HeaderMapTypeValues, WasmResultValues };

/** A header's value ("" when absent). */
export function header(map: HeaderMapTypeValues, name: string): string {
  return String.UTF8.decode(get_header_map_value(map, String.UTF8.encode(name)));
}

export function addHeader(map: HeaderMapTypeValues, name: string, value: string): bool {
  const k = String.UTF8.encode(name);
  const v = String.UTF8.encode(value);
  return imports.proxy_add_header_map_value(map, changetype<usize>(k), k.byteLength, changetype<usize>(v), v.byteLength) == WasmResultValues.Ok;
}

export function removeHeader(map: HeaderMapTypeValues, name: string): bool {
  const k = String.UTF8.encode(name);
  return imports.proxy_remove_header_map_value(map, changetype<usize>(k), k.byteLength) == WasmResultValues.Ok;
}

export function bufferBytes(type: BufferTypeValues, length: u32): Uint8Array {
  return Uint8Array.wrap(get_buffer_bytes(type, 0, length));
}

export function replaceRequestBody(oldLength: u32, body: Uint8Array): bool {
  return imports.proxy_set_buffer_bytes(BufferTypeValues.HttpRequestBody, 0, oldLength, body.dataStart, body.byteLength) == WasmResultValues.Ok;
}

export function continueRequest(): bool {
  return imports.proxy_continue_stream(0) == WasmResultValues.Ok;
}

/**
 * Where the request goes: filter state `wasm.dolphin_cluster`, which the header_mutation filter after the buffer
 * filter copies into the header the route's cluster_header reads, then a cleared route cache so that the route is
 * chosen again with it (docs/envoy.md: why a header cannot be set directly from the body phase).
 */
export function setCluster(cluster: string): bool {
  if (set_property("dolphin_cluster", String.UTF8.encode(cluster)) != WasmResultValues.Ok) return false;
  const name = String.UTF8.encode("clear_route_cache");
  const out = memory.data(8);
  imports.proxy_call_foreign_function(changetype<usize>(name), name.byteLength, 0, 0, out, out + 4);
  return true;
}

/** An answer from the filter itself (OpenAI-style JSON error bodies). */
export function localReply(status: u32, details: string, body: ArrayBuffer): void {
  send_http_response(status, details, body, [makeHeaderPair("content-type", "application/json")]);
}

export function nowNs(): u64 {
  const out = memory.data(8);
  if (imports.proxy_get_current_time_nanoseconds(out) != WasmResultValues.Ok) return 0;
  return load<u64>(out);
}

export function logInfo(message: string): void {
  log(LogLevelValues.info, message);
}

export function logWarn(message: string): void {
  log(LogLevelValues.warn, message);
}

export function logError(message: string): void {
  log(LogLevelValues.error, message);
}
