package main

// The EPP side of Envoy's ext_proc protocol as GIE specifies it (docs/proposals/004-endpoint-picker-protocol):
// the request body arrives in FULL_DUPLEX_STREAMED chunks; at its end the picker answers the request headers with
// the destination endpoint (header x-gateway-destination-endpoint, and the same value as dynamic metadata
// envoy.lb / x-gateway-destination-endpoint), the prefill endpoint in x-prefiller-host-port on the remote path
// (llm-d's sidecar convention), the body's length, and route-cache clearing; then the body itself, unchanged, in
// streamed chunks of at most 62,000 bytes (GIE's limit). When Envoy says (protocol_config) that it buffers the body
// instead (BUFFERED: the mode in which Envoy 1.40 honours failure_mode_allow), the headers are answered at once and
// the pick comes with the body's answer. No endpoint: an immediate 503; shedding: 429; a body that
// is not JSON: 400. A body-less request (a GET) goes to a decode endpoint at once. A request's prefill load ends
// when its engine stores the prompt's blocks, or at the response headers when Envoy sends them (prefill.go); the
// stream's end ends the rest.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocfilter "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extproc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
)

const (
	DestinationHeader   = "x-gateway-destination-endpoint"
	PrefillerHeader     = "x-prefiller-host-port"
	MetadataNamespace   = "envoy.lb"
	SubsetNamespace     = "envoy.lb.subset_hint"
	SubsetKey           = "x-gateway-destination-endpoint-subset"
	bodyChunkLimitBytes = 62_000
)

// Server is the ext_proc service.
type Server struct {
	extproc.UnimplementedExternalProcessorServer
	picker   *Picker
	metrics  *Metrics
	requests *Requests // -loads-until access-log: holds end with the request's access-log entry (requestend.go)
	// fixed (-fixed-endpoint) answers every request with this endpoint, the same messages as a pick, without
	// parsing the body or calling the core: the ext_proc exchange alone, dolphin bench epp's baseline
	fixed string
}

type stream struct {
	answered bool // the pick (or an immediate response) went out
	buffered bool // Envoy sends the body BUFFERED: headers are answered at once, the pick goes with the body's answer
	path     string
	body     []byte
	subset   []string
	releases []func()
	prefill  []func(signal string) // ended by the engine's KV events, the response headers or the stream's end
	held     bool                  // the holds wait for the request's access-log entry, not for this stream's end
}

// Process handles one HTTP request's ext_proc stream.
func (s *Server) Process(srv extproc.ExternalProcessor_ProcessServer) error {
	st := &stream{}
	defer func() {
		if st.held {
			return
		}
		for _, end := range st.prefill {
			end(signalStreamEnd)
		}
		for _, r := range st.releases {
			r()
		}
	}()
	for {
		req, err := srv.Recv()
		if err == io.EOF || status.Code(err) == codes.Canceled {
			return nil
		}
		if err != nil {
			return err
		}
		if st.subset == nil {
			st.subset = subsetHint(req)
		}
		if pc := req.GetProtocolConfig(); pc != nil {
			st.buffered = pc.GetRequestBodyMode() == extprocfilter.ProcessingMode_BUFFERED
		}
		var out []*extproc.ProcessingResponse
		switch v := req.Request.(type) {
		case *extproc.ProcessingRequest_RequestHeaders:
			for _, h := range v.RequestHeaders.GetHeaders().GetHeaders() {
				if h.Key == ":path" {
					st.path = headerValue(h)
				}
			}
			if v.RequestHeaders.EndOfStream {
				out = s.answer(srv.Context(), st, nil)
			} else if st.buffered {
				out = []*extproc.ProcessingResponse{{Response: &extproc.ProcessingResponse_RequestHeaders{RequestHeaders: &extproc.HeadersResponse{}}}}
			}
		case *extproc.ProcessingRequest_RequestBody:
			st.body = append(st.body, v.RequestBody.Body...)
			if v.RequestBody.EndOfStream {
				out = s.answer(srv.Context(), st, st.body)
			}
		case *extproc.ProcessingRequest_RequestTrailers:
			if !st.answered { // the body's end came with trailers: it is whole now
				out = s.answer(srv.Context(), st, st.body)
			}
			out = append(out, &extproc.ProcessingResponse{Response: &extproc.ProcessingResponse_RequestTrailers{RequestTrailers: &extproc.TrailersResponse{}}})
		case *extproc.ProcessingRequest_ResponseHeaders:
			for _, end := range st.prefill {
				end(signalResponseHeaders)
			}
			st.prefill = nil
			out = []*extproc.ProcessingResponse{{Response: &extproc.ProcessingResponse_ResponseHeaders{ResponseHeaders: &extproc.HeadersResponse{}}}}
		case *extproc.ProcessingRequest_ResponseBody:
			out = []*extproc.ProcessingResponse{{Response: &extproc.ProcessingResponse_ResponseBody{ResponseBody: &extproc.BodyResponse{
				Response: &extproc.CommonResponse{BodyMutation: &extproc.BodyMutation{Mutation: &extproc.BodyMutation_StreamedResponse{
					StreamedResponse: &extproc.StreamedBodyResponse{Body: v.ResponseBody.Body, EndOfStream: v.ResponseBody.EndOfStream}}}},
			}}}}
		case *extproc.ProcessingRequest_ResponseTrailers:
			out = []*extproc.ProcessingResponse{{Response: &extproc.ProcessingResponse_ResponseTrailers{ResponseTrailers: &extproc.TrailersResponse{}}}}
		}
		for _, r := range out {
			if err := srv.Send(r); err != nil {
				return err
			}
		}
	}
}

// answer picks for the request and builds the responses: headers (with the pick), then the body, or one
// immediate response.
func (s *Server) answer(ctx context.Context, st *stream, body []byte) []*extproc.ProcessingResponse {
	st.answered = true
	if s.fixed != "" {
		common := &extproc.CommonResponse{ClearRouteCache: true, HeaderMutation: &extproc.HeaderMutation{
			SetHeaders: []*corev3.HeaderValueOption{header(DestinationHeader, s.fixed)}, RemoveHeaders: []string{PrefillerHeader}}}
		return respond(st, common, s.fixed, body)
	}
	start := time.Now()
	since := s.picker.pool.waits.batches.Load()
	var pick Pick
	var err error
	if body == nil {
		pick, err = s.picker.PickAny(st.subset)
	} else {
		pick, err = s.picker.Pick(ctx, body, st.path, st.subset)
	}
	s.metrics.PickSeconds.Observe(time.Since(start).Seconds())
	endpoint := "completions"
	if pick.Chat || (err != nil && isChat(st.path)) {
		endpoint = "chat"
	}
	if err != nil {
		code := 500
		var pe *PickError
		if errors.As(err, &pe) {
			code = pe.Status
		}
		if code == 429 {
			s.metrics.Shed.WithLabelValues("decode_inflight").Inc()
		}
		s.metrics.Requests.WithLabelValues(endpoint, "none", strconv.Itoa(code)).Inc()
		return []*extproc.ProcessingResponse{immediate(code, err.Error())}
	}
	d := pick.Decision
	route := "local"
	if pick.Prefill != "" {
		route = "remote"
	}
	if body != nil {
		s.metrics.Decisions.WithLabelValues(d.Path, d.Reason).Inc()
		s.metrics.PromptTokens.WithLabelValues(d.Path).Add(d.Features.ISL)
	}
	s.metrics.Requests.WithLabelValues(endpoint, route, "200").Inc()
	pool := s.picker.pool
	if pick.Prefill != "" {
		st.prefill = append(st.prefill, pool.HoldPrefill(pick.Prefill, d.Features.EffP, pick, d.MatchedBlocks.Prefill, since))
	}
	st.prefill = append(st.prefill, pool.HoldPrefill(pick.Decode, d.Features.EffD, pick, d.MatchedBlocks.Decode, since))
	st.releases = append(st.releases, pool.Hold(pick.Decode, 0, d.Features.ISL, true))

	set := []*corev3.HeaderValueOption{header(DestinationHeader, pick.Decode)}
	if pick.Prefill != "" {
		set = append(set, header(PrefillerHeader, pick.Prefill))
	}
	if s.requests != nil {
		id := s.requests.ID()
		set = append(set, header(PickHeader, id))
		s.requests.Hold(id, st.prefill, st.releases)
		st.held = true
	}
	common := &extproc.CommonResponse{ClearRouteCache: true, HeaderMutation: &extproc.HeaderMutation{SetHeaders: set}}
	if pick.Prefill == "" {
		// a prefill endpoint named by the client must not reach a decode sidecar on the local path
		common.HeaderMutation.RemoveHeaders = []string{PrefillerHeader}
	}
	return respond(st, common, pick.Decode, body)
}

// respond sends a pick's header mutations (common) and destination: with the request headers' answer, then the
// body in streamed chunks, or with the body's answer when Envoy buffered it.
func respond(st *stream, common *extproc.CommonResponse, decode string, body []byte) []*extproc.ProcessingResponse {
	if st.buffered && body != nil {
		// the body was buffered and its headers already answered: the pick rides on the body's answer, the body
		// itself unchanged (its length too)
		return []*extproc.ProcessingResponse{{
			Response:        &extproc.ProcessingResponse_RequestBody{RequestBody: &extproc.BodyResponse{Response: common}},
			DynamicMetadata: destinationMetadata(decode),
		}}
	}
	if body != nil {
		common.HeaderMutation.SetHeaders = append(common.HeaderMutation.SetHeaders, header("content-length", strconv.Itoa(len(body))))
	}
	out := []*extproc.ProcessingResponse{{
		Response:        &extproc.ProcessingResponse_RequestHeaders{RequestHeaders: &extproc.HeadersResponse{Response: common}},
		DynamicMetadata: destinationMetadata(decode),
	}}
	if body != nil {
		for i := 0; i == 0 || i < len(body); i += bodyChunkLimitBytes {
			end := min(len(body), i+bodyChunkLimitBytes)
			out = append(out, &extproc.ProcessingResponse{Response: &extproc.ProcessingResponse_RequestBody{RequestBody: &extproc.BodyResponse{
				Response: &extproc.CommonResponse{BodyMutation: &extproc.BodyMutation{Mutation: &extproc.BodyMutation_StreamedResponse{
					StreamedResponse: &extproc.StreamedBodyResponse{Body: body[i:end], EndOfStream: end == len(body)}}}},
			}}})
		}
	}
	return out
}

func header(key, value string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: key, RawValue: []byte(value)},
		AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD}
}

func headerValue(h *corev3.HeaderValue) string {
	if len(h.RawValue) > 0 {
		return string(h.RawValue)
	}
	return h.Value
}

func immediate(code int, msg string) *extproc.ProcessingResponse {
	return &extproc.ProcessingResponse{Response: &extproc.ProcessingResponse_ImmediateResponse{ImmediateResponse: &extproc.ImmediateResponse{
		Status:  &typev3.HttpStatus{Code: typev3.StatusCode(code)},
		Body:    errorBody(code, msg),
		Headers: &extproc.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{header("content-type", "application/json")}},
	}}}
}

// errorBody is an OpenAI-style error, as dolphin serve answers.
func errorBody(code int, msg string) []byte {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": "endpoint_picker", "code": code}})
	return b
}

func destinationMetadata(endpoint string) *structpb.Struct {
	return &structpb.Struct{Fields: map[string]*structpb.Value{
		MetadataNamespace: structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
			DestinationHeader: structpb.NewStringValue(endpoint),
		}}),
	}}
}

// subsetHint is the endpoint subset the gateway allows (nil when it names none).
func subsetHint(req *extproc.ProcessingRequest) []string {
	ns := req.GetMetadataContext().GetFilterMetadata()[SubsetNamespace]
	if ns == nil {
		return nil
	}
	v, ok := ns.GetFields()[SubsetKey]
	if !ok {
		return nil
	}
	out := []string{}
	for _, x := range v.GetListValue().GetValues() {
		out = append(out, x.GetStringValue())
	}
	return out
}
