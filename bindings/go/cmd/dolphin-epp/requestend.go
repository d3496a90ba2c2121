package main

// When a request ends. Envoy closes a request's ext_proc stream as soon as nothing more is to be sent to the
// picker: with the response phases skipped (no round trip per answer), right after the pick, long before the
// answer ends (seen: 7 ms after the pick of a 570 ms streamed request). A stream's end is then no measure of a
// request's life, and loads held until it (the decode tokens, the request counted against -max-inflight) would be
// gone at once. With -loads-until access-log the picker serves Envoy's gRPC access-log service (ALS,
// envoy.access_loggers.http_grpc, on the ext_proc port): Envoy writes one entry per request when it is done, in
// batches, off the request's path; each pick names itself in a request header (x-dolphin-pick) that the log entry
// carries, and the entry ends that request's holds. A hold no entry ends (a gateway not logging to the picker) ends
// after -hold-max. With -loads-until stream (the default: what every Envoy gives an EPP) holds end with the stream.

import (
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	alsv3 "github.com/envoyproxy/go-control-plane/envoy/service/accesslog/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// PickHeader names a pick to the access log (and is forwarded upstream, harmless).
const PickHeader = "x-dolphin-pick"

// signalRequestEnd: the access log said the request was done.
const signalRequestEnd = "request_end"

type heldRequest struct {
	prefill  []func(signal string)
	releases []func()
	timer    *time.Timer
}

// Requests are the picks whose holds wait for their request's access-log entry.
type Requests struct {
	alsv3.UnimplementedAccessLogServiceServer
	mu      sync.Mutex
	held    map[string]*heldRequest
	next    atomic.Uint64
	prefix  string
	holdMax time.Duration
	metrics *Metrics
}

// NewRequests makes the registry; ids are prefix-n (the prefix tells two picker processes apart).
func NewRequests(holdMax time.Duration, m *Metrics) *Requests {
	return &Requests{held: map[string]*heldRequest{}, prefix: strconv.FormatInt(time.Now().UnixNano()%1e9, 36), holdMax: holdMax, metrics: m}
}

// ID is a new pick id.
func (r *Requests) ID() string { return r.prefix + "-" + strconv.FormatUint(r.next.Add(1), 36) }

// Hold keeps a request's holds until its log entry (end) or holdMax.
func (r *Requests) Hold(id string, prefill []func(string), releases []func()) {
	h := &heldRequest{prefill: prefill, releases: releases}
	r.mu.Lock()
	r.held[id] = h
	h.timer = time.AfterFunc(r.holdMax, func() {
		if r.take(id) != nil {
			r.metrics.HoldTimeouts.Inc()
			h.end(signalStreamEnd)
		}
	})
	r.mu.Unlock()
}

func (r *Requests) take(id string) *heldRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.held[id]
	delete(r.held, id)
	return h
}

func (h *heldRequest) end(signal string) {
	for _, end := range h.prefill {
		end(signal)
	}
	for _, rel := range h.releases {
		rel()
	}
}

// Pending is the number of requests held.
func (r *Requests) Pending() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.held)
}

// StreamAccessLogs reads Envoy's access-log entries and ends the holds of the requests they name.
func (r *Requests) StreamAccessLogs(srv alsv3.AccessLogService_StreamAccessLogsServer) error {
	for {
		msg, err := srv.Recv()
		if err == io.EOF || status.Code(err) == codes.Canceled {
			return nil
		}
		if err != nil {
			return err
		}
		for _, e := range msg.GetHttpLogs().GetLogEntry() {
			id := e.GetRequest().GetRequestHeaders()[PickHeader]
			if id == "" {
				continue
			}
			if h := r.take(id); h != nil {
				h.timer.Stop()
				h.end(signalRequestEnd)
			}
		}
	}
}
