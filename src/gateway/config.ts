// Envoy's configuration for the endpoint picker (GIE's EPP protocol, docs/gateway.md): one listener whose ext_proc
// filter sends each request's headers and body (FULL_DUPLEX_STREAMED) to dolphin-epp; the picked endpoint comes back
// as the x-gateway-destination-endpoint header, and an ORIGINAL_DST cluster sends the request there. The route
// cache is cleared by the picker's answer, so the route is chosen again once the header is set: with the header,
// the picked endpoint; without it (the picker unreachable and fail-open configured), a fallback cluster of the
// decode endpoints, round robin. Fail-closed (the default) answers the client Envoy's error instead.
//
// Fail-open needs the BUFFERED body mode: Envoy 1.40 does not honour failure_mode_allow once body chunks went to
// the processor in FULL_DUPLEX_STREAMED mode (it answered 500 with failure_mode_allowed 0 when the picker was down:
// the streamed chunks are gone), while a buffered body is still Envoy's to forward. dolphin-epp answers both modes.

export const DESTINATION_HEADER = "x-gateway-destination-endpoint";
/** The header dolphin-epp names each pick in, for the access log (bindings/go/cmd/dolphin-epp/requestend.go). */
export const PICK_HEADER = "x-dolphin-pick";

export interface GatewayEnvoySetup {
  listen: { host?: string; port: number };
  admin: { host?: string; port: number };
  /** dolphin-epp's ext_proc address. */
  epp: { host: string; port: number };
  /** Where requests go when the picker is unreachable and failOpen is set (the decode endpoints). */
  fallback: { host: string; port: number }[];
  /**
   * Let requests through when the picker fails (ext_proc failure_mode_allow, with the body BUFFERED: see above).
   * Default false (fail-closed, the body FULL_DUPLEX_STREAMED as GIE specifies).
   */
  failOpen?: boolean;
  /** Send response headers to the picker (it then ends a request's prefill load at its first byte). Default false. */
  responseHeaders?: boolean;
  /**
   * Envoy's gRPC access log to the picker (its ext_proc port), each entry naming the request's pick
   * (x-dolphin-pick): the picker ends a request's loads with it (dolphin-epp -loads-until access-log). Default true.
   */
  accessLog?: boolean;
  /** How often Envoy sends the access log's buffered entries (ms, default 20). */
  accessLogFlushMs?: number;
  /** Envoy worker threads (default 2). */
  concurrency?: number;
}

const socket = (host: string, port: number): object => ({ socket_address: { address: host, port_value: port } });

const endpoints = (name: string, list: { host: string; port: number }[]): object => ({
  cluster_name: name,
  endpoints: [{ lb_endpoints: list.map((a) => ({ endpoint: { address: socket(a.host, a.port) } })) }],
});

// LLM requests are long-lived: Envoy's default 1,024 concurrent requests per cluster would queue them
const breakers = { thresholds: [{ max_connections: 100000, max_pending_requests: 100000, max_requests: 100000 }] };

/** The whole bootstrap (static listener and clusters), as an object Envoy reads as YAML or JSON. */
export function gatewayBootstrap(s: GatewayEnvoySetup): object {
  const route = (cluster: string): object => ({ cluster, timeout: "0s", idle_timeout: "3600s" });
  const hcm = {
    "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
    stat_prefix: "gateway",
    route_config: {
      name: "gateway",
      virtual_hosts: [
        {
          name: "pool",
          domains: ["*"],
          routes: [
            {
              match: { prefix: "/", headers: [{ name: DESTINATION_HEADER, present_match: true }] },
              route: route("picked"),
            },
            { match: { prefix: "/" }, route: route("fallback") },
          ],
        },
      ],
    },
    // one entry per request when it is done, batched every 20 ms, off the request's path: the end of a request's
    // loads (Envoy closes the ext_proc stream as soon as nothing more goes to the picker, right after the pick)
    ...(s.accessLog === false
      ? {}
      : {
          access_log: [
            {
              name: "envoy.access_loggers.http_grpc",
              typed_config: {
                "@type": "type.googleapis.com/envoy.extensions.access_loggers.grpc.v3.HttpGrpcAccessLogConfig",
                common_config: {
                  log_name: "dolphin-gateway",
                  transport_api_version: "V3",
                  grpc_service: { envoy_grpc: { cluster_name: "epp" } },
                  buffer_flush_interval: `${(s.accessLogFlushMs ?? 20) / 1000}s`,
                },
                additional_request_headers_to_log: [PICK_HEADER],
              },
            },
          ],
        }),
    http_filters: [
      {
        name: "envoy.filters.http.ext_proc",
        typed_config: {
          "@type": "type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor",
          grpc_service: { envoy_grpc: { cluster_name: "epp" }, timeout: "10s" },
          failure_mode_allow: s.failOpen ?? false,
          processing_mode: {
            request_header_mode: "SEND",
            request_body_mode: s.failOpen ? "BUFFERED" : "FULL_DUPLEX_STREAMED",
            request_trailer_mode: "SEND",
            // SKIP saves the picker a round trip per answer (about 0.3 ms at p50 in dolphin bench epp); the price: the
            // picker holds a request's prefill load until its stream ends instead of until its first byte
            response_header_mode: s.responseHeaders ? "SEND" : "SKIP",
            response_body_mode: "NONE",
            response_trailer_mode: "SKIP",
          },
          message_timeout: "10s",
          // the picker reads the path alone: fewer headers to serialize and parse (about 0.03 ms at p50)
          forward_rules: { allowed_headers: { patterns: [{ exact: ":path" }] } },
        },
      },
      {
        name: "envoy.filters.http.router",
        typed_config: {
          "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router",
          suppress_envoy_headers: true,
        },
      },
    ],
  };
  return {
    node: { id: "dolphin-gateway", cluster: "dolphin-gateway" },
    admin: { address: socket(s.admin.host ?? "127.0.0.1", s.admin.port) },
    static_resources: {
      listeners: [
        {
          name: "gateway",
          address: socket(s.listen.host ?? "127.0.0.1", s.listen.port),
          filter_chains: [{ filters: [{ name: "envoy.filters.network.http_connection_manager", typed_config: hcm }] }],
        },
      ],
      clusters: [
        {
          name: "epp",
          type: "STATIC",
          connect_timeout: "1s",
          circuit_breakers: breakers,
          typed_extension_protocol_options: {
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
              "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
              explicit_http_config: { http2_protocol_options: {} },
            },
          },
          load_assignment: endpoints("epp", [s.epp]),
        },
        {
          name: "picked",
          type: "ORIGINAL_DST",
          lb_policy: "CLUSTER_PROVIDED",
          connect_timeout: "5s",
          circuit_breakers: breakers,
          original_dst_lb_config: { use_http_header: true, http_header_name: DESTINATION_HEADER },
        },
        {
          name: "fallback",
          type: "STATIC",
          lb_policy: "ROUND_ROBIN",
          connect_timeout: "5s",
          circuit_breakers: breakers,
          load_assignment: endpoints("fallback", s.fallback),
        },
      ],
    },
  };
}
