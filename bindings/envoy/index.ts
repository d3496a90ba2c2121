// The Envoy filter's entry (built to build/dolphin-envoy.wasm by build/build.mjs): the proxy-wasm ABI 0.2.1
// exports, the root context, and the routing core compiled in from assembly/ (docs/envoy.md).
//
// The SDK's exports are used as they are, except the three that end a context: its proxy_on_done and
// proxy_on_delete look the root context up among the stream contexts and trap ("Key does not exist"), which
// happens whenever Envoy retires a plugin (every table swap, and at shutdown); with FAIL_RELOAD that would cost a
// second of 503s per swap. These versions know which contexts are streams (filter.ts liveStreams).

import { deleteContext, getContext, registerRootContext, RootContext } from "@gcoredev/proxy-wasm-sdk-as/assembly/runtime";
import { DolphinRoot, liveStreams } from "./filter";

export { malloc } from "@gcoredev/proxy-wasm-sdk-as/assembly/malloc";
export {
  proxy_abi_version_0_2_1, proxy_on_vm_start, proxy_validate_configuration, proxy_on_configure, proxy_on_tick,
  proxy_on_foreign_function, proxy_on_queue_ready, proxy_on_context_create, proxy_on_request_headers,
  proxy_on_request_body, proxy_on_request_trailers, proxy_on_request_metadata, proxy_on_response_headers,
  proxy_on_response_body, proxy_on_response_trailers, proxy_on_response_metadata, proxy_on_http_call_response,
  proxy_on_grpc_receive_initial_metadata, proxy_on_grpc_trailing_metadata, proxy_on_grpc_receive, proxy_on_grpc_close,
  proxy_on_downstream_data, proxy_on_upstream_data, proxy_on_upstream_connection_close,
  proxy_on_downstream_connection_close, proxy_on_new_connection,
} from "@gcoredev/proxy-wasm-sdk-as/assembly/exports";

export function proxy_on_done(_contextId: u32): u32 {
  return 1; // nothing to finish asynchronously
}

export function proxy_on_log(contextId: u32): void {
  if (liveStreams.has(contextId)) getContext(contextId).onLog();
}

export function proxy_on_delete(contextId: u32): void {
  if (!liveStreams.has(contextId)) return; // a root context: it lives as long as the VM
  getContext(contextId).onDelete();
  deleteContext(contextId);
}

registerRootContext((contextId: u32): RootContext => new DolphinRoot(contextId), "dolphin");
