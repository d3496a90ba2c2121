package main

// A request's prefill load ends when its engine stores the prompt's blocks (KV events), not at the stream's end:
// the load the core routes on is what the engines are computing.

import (
	"context"
	"net"
	"testing"
	"time"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/data/accesslog/v3"
	alsv3 "github.com/envoyproxy/go-control-plane/envoy/service/accesslog/v3"
	extproc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

func load(p *Pool, addr string) (prefill, decode float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.members[addr]
	return m.prefill, m.decode
}

func releases(p *Pool, signal string) float64 {
	return testCounter(p.metrics.PrefillReleases.WithLabelValues(signal).(prometheus.Counter))
}

func storedOn(p *Pool, addr string, hashes []uint64) {
	p.mu.Lock()
	m := p.members[addr]
	p.mu.Unlock()
	p.ApplyEvents(addr, m, []KVEvent{{Kind: "stored", Hashes: hashes, BlockSize: 16}}, "zmq")
}

func TestLastCacheableBlock(t *testing.T) {
	for _, c := range []struct{ isl, blocks, want int }{{3000, 187, 186}, {16, 1, -1}, {17, 1, 0}, {32, 2, 0}, {33, 2, 1}, {1, 0, -1}} {
		if got := lastCacheable(c.isl, 16, c.blocks); got != c.want {
			t.Errorf("lastCacheable(%d, 16, %d) = %d, want %d", c.isl, c.blocks, got, c.want)
		}
	}
}

func TestPrefillLoadEndsWhenTheEngineStoresThePrompt(t *testing.T) {
	p := newPool(t, "dynamo-isl", pdEndpoints)
	pk := newPicker(p, 0)
	pk.precise = true
	c := serve(t, pk)
	prompt := seq(0, 3000)
	hashes, _ := p.router.Hash(prompt)
	x := send(t, c, "/v1/completions", completion(prompt), nil)
	pre, dec := x.headers[PrefillerHeader], x.headers[DestinationHeader]
	if pre != "10.0.0.1:8000" || dec == "" {
		t.Fatalf("a remote pick expected, got %+v", x.headers)
	}
	if lp, _ := load(p, pre); lp < 2000 {
		t.Fatalf("prefill endpoint's prefill load %v, want the prompt's tokens", lp)
	}
	// the prefill engine computed the prompt: its load ends while the request is still in flight
	storedOn(p, pre, hashes[:100])
	if lp, _ := load(p, pre); lp == 0 {
		t.Fatal("prefill load ended before the prompt's last block was stored")
	}
	storedOn(p, pre, hashes[100:])
	if lp, _ := load(p, pre); lp != 0 {
		t.Fatalf("prefill endpoint's prefill load %v after its engine stored the prompt, want 0", lp)
	}
	if dp, _ := load(p, dec); dp == 0 {
		t.Fatal("the decode endpoint's prefill load ended before its engine stored the prompt")
	}
	storedOn(p, dec, hashes) // the decode engine received the blocks
	dp, dd := load(p, dec)
	if dp != 0 || dd != 3000 {
		t.Fatalf("decode endpoint load prefill %v decode %v in flight, want 0 and 3000", dp, dd)
	}
	if got := releases(p, signalKVEvents); got != 2 {
		t.Fatalf("kv_events releases %v, want 2", got)
	}
	// the stream's end ends the decode load
	_ = x.stream.CloseSend()
	waitFor(t, func() bool { _, d := load(p, dec); return d == 0 })
	if got := releases(p, signalStreamEnd); got != 0 {
		t.Fatalf("stream_end releases %v, want 0: both had ended", got)
	}

	// the same prompt again: cached on the decode endpoint, nothing to wait for and nothing held
	again := send(t, c, "/v1/completions", completion(prompt), nil)
	if again.headers[DestinationHeader] != dec || again.headers[PrefillerHeader] != "" {
		t.Fatalf("the repeat should stay local on %s, got %+v", dec, again.headers)
	}
	if dp, _ := load(p, dec); dp != 0 || releases(p, signalNothing) != 1 {
		t.Fatalf("repeat: prefill load %v, nothing_to_wait %v", dp, releases(p, signalNothing))
	}
	_ = again.stream.CloseSend()

	// blocks that never come: the stream's end ends the hold, and the wait is gone
	lost := send(t, c, "/v1/completions", completion(seq(50_000, 3000)), nil)
	_ = lost.stream.CloseSend()
	waitFor(t, func() bool { return releases(p, signalStreamEnd) == 2 && p.waits.pending() == 0 })
	for _, a := range []string{"10.0.0.1:8000", "10.0.0.2:8000", "10.0.0.3:8000"} {
		if lp, ld := load(p, a); lp != 0 || ld != 0 {
			t.Fatalf("%s still holds prefill %v decode %v", a, lp, ld)
		}
	}
}

// With -loads-until access-log a request's holds outlive its ext_proc stream (Envoy closes it right after the
// pick) and end with its access-log entry, found by the pick's x-dolphin-pick header.
func TestAccessLogEndsARequestsHolds(t *testing.T) {
	p := newPool(t, "dynamo-isl", pdEndpoints)
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	srv := grpc.NewServer()
	reqs := NewRequests(time.Minute, p.metrics)
	extproc.RegisterExternalProcessorServer(srv, &Server{picker: newPicker(p, 0), metrics: p.metrics, requests: reqs})
	alsv3.RegisterAccessLogServiceServer(srv, reqs)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, _ := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	t.Cleanup(func() { _ = conn.Close() })
	x := send(t, extproc.NewExternalProcessorClient(conn), "/v1/completions", completion(seq(0, 3000)), nil)
	dec, id := x.headers[DestinationHeader], x.headers[PickHeader]
	if id == "" {
		t.Fatalf("no %s header in %+v", PickHeader, x.headers)
	}
	_ = x.stream.CloseSend()
	time.Sleep(50 * time.Millisecond)
	if _, d := load(p, dec); d != 3000 || p.Inflight(dec) != 1 {
		t.Fatalf("after the stream's end: decode load %v, in flight %d; want 3000 and 1 until the log entry", d, p.Inflight(dec))
	}
	logs, err := alsv3.NewAccessLogServiceClient(conn).StreamAccessLogs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	entry := &accesslogv3.HTTPAccessLogEntry{Request: &accesslogv3.HTTPRequestProperties{RequestHeaders: map[string]string{PickHeader: id}}}
	_ = logs.Send(&alsv3.StreamAccessLogsMessage{LogEntries: &alsv3.StreamAccessLogsMessage_HttpLogs{
		HttpLogs: &alsv3.StreamAccessLogsMessage_HTTPAccessLogEntries{LogEntry: []*accesslogv3.HTTPAccessLogEntry{entry}}}})
	waitFor(t, func() bool { _, d := load(p, dec); return d == 0 && p.Inflight(dec) == 0 && reqs.Pending() == 0 })
	if releases(p, signalRequestEnd) != 2 {
		t.Fatalf("request_end releases %v, want 2 (the prefill and decode endpoints' prefill holds)", releases(p, signalRequestEnd))
	}
}
