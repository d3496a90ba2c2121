package main

// The picker's pieces: the endpoints file, KV-event decoding and the rehash of engine hashes, and the ext_proc
// exchange over a real gRPC connection (the pick in headers and metadata, the body streamed back, 503, 429, the
// subset hint, gRPC health).

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocfilter "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extproc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/vmihailenco/msgpack/v5"
	"google.golang.org/protobuf/types/known/structpb"

	dolphin "github.com/dolphin-routing/dolphin-routing/bindings/go"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func table(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "spec", "vectors", "tables", name+".msgpack"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newPool(t testing.TB, tableName string, eps []Endpoint) *Pool {
	t.Helper()
	r, err := dolphin.Load(table(t, tableName), dolphin.Options{Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	p := NewPool(r, 16, 1000, false, quiet)
	p.metrics = NewMetrics(p.Gauges)
	if err := p.Apply(eps); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func seq(from, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(from + i)
	}
	return out
}

func TestParseEndpoints(t *testing.T) {
	eps, err := ParseEndpoints([]byte(`
endpoints:
  - {address: "10.0.0.1:8000", labels: {llm-d.ai/role: prefill}, kv_events: "tcp://10.0.0.1:5557"}
  - {address: "10.0.0.2:8000", labels: {llm-d.ai/role: decode}}
  - {address: "10.0.0.3:8000"}
`), "f.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := []string{eps[0].Role(), eps[1].Role(), eps[2].Role()}; !slices.Equal(got, []string{"prefill", "decode", "both"}) {
		t.Fatalf("roles %v", got)
	}
	if eps[0].KVEvents != "tcp://10.0.0.1:5557" {
		t.Fatalf("kv_events %q", eps[0].KVEvents)
	}
	for text, want := range map[string]string{
		`endpoints: [{address: "nohost"}]`:                               `f.yaml: endpoints[0].address: expected ip:port, got "nohost"`,
		`endpoints: [{address: "a:0"}]`:                                  `f.yaml: endpoints[0].address: port must be 1–65535, got "0"`,
		`endpoints: [{address: "a:1"}, {address: "a:1"}]`:                `f.yaml: endpoints[1].address: a:1 is listed twice`,
		`endpoints: [{address: "a:1", labels: {llm-d.ai/role: router}}]`: `f.yaml: endpoints[0].labels.llm-d.ai/role: expected prefill, decode or both, got "router"`,
		`endpoints: [{address: "a:1", kv_events_replay: "tcp://a:2"}]`:   `f.yaml: endpoints[0].kv_events_replay: needs kv_events (it replays what that socket publishes)`,
		`endpoints: [{address: "a:1", port: 3}]`:                         `field port not found`,
	} {
		if _, err := ParseEndpoints([]byte(text), "f.yaml"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", text, err, want)
		}
	}
}

// vllmBatch is an EventBatch as vLLM 0.32 writes it: [ts, [events as maps], rank].
func vllmBatch(t testing.TB, events ...map[string]any) []byte {
	t.Helper()
	list := make([]any, len(events))
	for i, e := range events {
		list[i] = e
	}
	b, err := msgpack.Marshal([]any{1.5, list, 0})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeEventBatch(t *testing.T) {
	payload := vllmBatch(t,
		map[string]any{"type": "BlockStored", "block_hashes": []any{int64(-1), []byte{9, 1, 2, 3, 4, 5, 6, 7, 8}},
			"parent_block_hash": nil, "token_ids": seq(0, 32), "block_size": 16, "lora_id": nil, "medium": "GPU"},
		map[string]any{"type": "BlockRemoved", "block_hashes": []any{uint64(7)}, "medium": nil},
		map[string]any{"type": "AllBlocksCleared"})
	ev, err := DecodeEventBatch(payload)
	if err != nil {
		t.Fatal(err)
	}
	if len(ev) != 3 || ev[0].Kind != "stored" || ev[1].Kind != "removed" || ev[2].Kind != "cleared" {
		t.Fatalf("events %+v", ev)
	}
	if ev[0].Hashes[0] != ^uint64(0) || ev[0].Hashes[1] != 0x0102030405060708 || len(ev[0].TokenIDs) != 32 || ev[0].Medium != "GPU" {
		t.Fatalf("stored %+v", ev[0])
	}
	tagged, _ := msgpack.Marshal([]any{1.0, []any{[]any{"BlockRemoved", []any{int64(5)}, nil}}})
	if ev, err := DecodeEventBatch(tagged); err != nil || ev[0].Hashes[0] != 5 {
		t.Fatalf("tagged array: %v %v", ev, err)
	}
	for payload, want := range map[string]string{
		"\xc1": "kv event: (payload): not msgpack",
		string(vllmBatch(t, map[string]any{"type": "Nope"})):                                                  `kv event: events[0]: unknown event type "Nope"`,
		string(vllmBatch(t, map[string]any{"type": "BlockRemoved", "block_hashes": []any{"x"}})):              "kv event: events[0].block_hashes[0]: expected an integer or bytes block hash, got string",
		string(vllmBatch(t, map[string]any{"type": "BlockStored", "block_hashes": []any{}, "block_size": 0})): "kv event: events[0].block_size: expected a positive integer",
	} {
		if _, err := DecodeEventBatch([]byte(payload)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want %q", err, want)
		}
	}
}

// Engine hashes unlike the router's (as vLLM's sha256 ones are): a run stored under a parent is rehashed from its
// whole prefix, so the index matches the router's own hashes of the prompt; a removal finds the router's hashes.
func TestIngestRehashesEngineHashes(t *testing.T) {
	p := newPool(t, "dynamo-isl", []Endpoint{{Address: "d:1", Labels: map[string]string{RoleLabel: "decode"}}})
	g := NewIngest(16, 1000)
	parent := uint64(1001)
	n, err := g.Apply(p.router, "d:1", []KVEvent{
		{Kind: "stored", Hashes: []uint64{1000, 1001}, TokenIDs: seq(0, 32), BlockSize: 16},
		{Kind: "stored", Hashes: []uint64{1002}, Parent: &parent, TokenIDs: seq(32, 16), BlockSize: 16},
		{Kind: "stored", Hashes: []uint64{1003}, TokenIDs: seq(0, 8), BlockSize: 8}, // another block size
		{Kind: "stored", Hashes: []uint64{5}, TokenIDs: seq(0, 16), BlockSize: 16, Medium: "CPU"},
	})
	if err != nil || n.Stored != 4 || n.Lower != 1 || n.Unmapped != 1 {
		t.Fatalf("counts %+v, %v", n, err)
	}
	ours, _ := p.router.Hash(seq(0, 48))
	if m, _ := p.router.Index().Match(ours); m["d:1"] != 3 {
		t.Fatalf("matched %v blocks, want 3", m)
	}
	if _, err := g.Apply(p.router, "d:1", []KVEvent{{Kind: "removed", Hashes: []uint64{1001}}}); err != nil {
		t.Fatal(err)
	}
	if m, _ := p.router.Index().Match(ours); m["d:1"] != 1 {
		t.Fatalf("after removing block 1: matched %v, want 1", m)
	}
	if g.sameScheme {
		t.Fatal("engine hashes unlike the router's were taken as the router's")
	}
}

// An engine hashing as the router does (the emulated worker) is detected and its hashes used as they come.
func TestIngestSameScheme(t *testing.T) {
	p := newPool(t, "dynamo-isl", []Endpoint{{Address: "d:1", Labels: map[string]string{RoleLabel: "decode"}}})
	ours, _ := p.router.Hash(seq(0, 48))
	g := NewIngest(16, 1000)
	if _, err := g.Apply(p.router, "d:1", []KVEvent{{Kind: "stored", Hashes: ours[:2], TokenIDs: seq(0, 32), BlockSize: 16}}); err != nil {
		t.Fatal(err)
	}
	if !g.sameScheme {
		t.Fatal("the router's own hashes were not recognised")
	}
	// from now on no token ids are needed
	if _, err := g.Apply(p.router, "d:1", []KVEvent{{Kind: "stored", Hashes: ours[2:], Parent: &ours[1], BlockSize: 16}}); err != nil {
		t.Fatal(err)
	}
	if m, _ := p.router.Index().Match(ours); m["d:1"] != 3 {
		t.Fatalf("matched %v, want 3", m)
	}
}

// ---- ext_proc over gRPC ----

func serve(t *testing.T, pk *Picker) extproc.ExternalProcessorClient {
	return serveWith(t, &Server{picker: pk, metrics: pk.pool.metrics})
}

type exchange struct {
	headers map[string]string
	removed []string
	meta    string
	body    []byte
	status  int
	stream  extproc.ExternalProcessor_ProcessClient
}

// send plays Envoy: headers, the body in two chunks, then reads the answers until the body's end or an immediate
// response. The stream stays open (the request is in flight) until the test ends or closes it.
func send(t *testing.T, c extproc.ExternalProcessorClient, path, body string, subset []string) exchange {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s, err := c.Process(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var md *corev3.Metadata
	if subset != nil {
		list := []any{}
		for _, a := range subset {
			list = append(list, a)
		}
		st, _ := structpb.NewStruct(map[string]any{SubsetKey: list})
		md = &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{SubsetNamespace: st}}
	}
	hdrs := &corev3.HeaderMap{Headers: []*corev3.HeaderValue{{Key: ":path", RawValue: []byte(path)}, {Key: ":method", RawValue: []byte("POST")}}}
	msgs := []*extproc.ProcessingRequest{
		{Request: &extproc.ProcessingRequest_RequestHeaders{RequestHeaders: &extproc.HttpHeaders{Headers: hdrs}}, MetadataContext: md},
		{Request: &extproc.ProcessingRequest_RequestBody{RequestBody: &extproc.HttpBody{Body: []byte(body[:len(body)/2])}}},
		{Request: &extproc.ProcessingRequest_RequestBody{RequestBody: &extproc.HttpBody{Body: []byte(body[len(body)/2:]), EndOfStream: true}}},
	}
	for _, m := range msgs {
		if err := s.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	x := exchange{headers: map[string]string{}, stream: s}
	for {
		r, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		switch v := r.Response.(type) {
		case *extproc.ProcessingResponse_ImmediateResponse:
			x.status = int(v.ImmediateResponse.Status.Code)
			x.body = v.ImmediateResponse.Body
			return x
		case *extproc.ProcessingResponse_RequestHeaders:
			x.status = 200
			for _, h := range v.RequestHeaders.Response.HeaderMutation.SetHeaders {
				x.headers[h.Header.Key] = string(h.Header.RawValue)
			}
			x.removed = v.RequestHeaders.Response.HeaderMutation.RemoveHeaders
			x.meta = r.DynamicMetadata.Fields[MetadataNamespace].GetStructValue().Fields[DestinationHeader].GetStringValue()
		case *extproc.ProcessingResponse_RequestBody:
			sr := v.RequestBody.Response.BodyMutation.GetStreamedResponse()
			x.body = append(x.body, sr.Body...)
			if sr.EndOfStream {
				return x
			}
		}
	}
}

var pdEndpoints = []Endpoint{
	{Address: "10.0.0.1:8000", Labels: map[string]string{RoleLabel: "prefill"}},
	{Address: "10.0.0.2:8000", Labels: map[string]string{RoleLabel: "decode"}},
	{Address: "10.0.0.3:8000", Labels: map[string]string{RoleLabel: "decode"}},
}

func completion(tokens []uint32) string {
	var sb strings.Builder
	sb.WriteString(`{"model":"m","max_tokens":8,"prompt":[`)
	for i, t := range tokens {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(strconv.Itoa(int(t)))
	}
	sb.WriteString("]}")
	return sb.String()
}

func newPicker(p *Pool, maxInflight int) *Picker {
	return &Picker{pool: p, model: "m", defaultOSLHat: 256, maxInflight: maxInflight, client: http.DefaultClient}
}

// A long uncached prompt prefills remotely (dynamo-isl: effective ISL ≥ 2048): the destination is a decode
// endpoint, the prefill endpoint is in x-prefiller-host-port, the metadata names the same destination, and the
// body comes back whole with its length.
func TestExtProcRemotePick(t *testing.T) {
	p := newPool(t, "dynamo-isl", pdEndpoints)
	c := serve(t, newPicker(p, 0))
	body := completion(seq(0, 3000))
	x := send(t, c, "/v1/completions", body, nil)
	if x.status != 200 || x.headers[PrefillerHeader] != "10.0.0.1:8000" || !strings.HasPrefix(x.headers[DestinationHeader], "10.0.0.") {
		t.Fatalf("pick %+v", x.headers)
	}
	if x.meta != x.headers[DestinationHeader] {
		t.Fatalf("metadata %q differs from the header %q", x.meta, x.headers[DestinationHeader])
	}
	if string(x.body) != body || x.headers["content-length"] != strconv.Itoa(len(body)) {
		t.Fatalf("body changed (%d bytes back of %d) or content-length %q", len(x.body), len(body), x.headers["content-length"])
	}
}

// A prompt whose blocks the decode endpoint holds (from KV events) stays local there: no prefill header, and a
// client-sent one is removed.
func TestExtProcLocalPickFollowsTheIndex(t *testing.T) {
	p := newPool(t, "dynamo-isl", pdEndpoints)
	prompt := seq(0, 3000)
	hashes, _ := p.router.Hash(prompt)
	if err := p.router.Index().Store("10.0.0.3:8000", hashes); err != nil {
		t.Fatal(err)
	}
	x := send(t, serve(t, newPicker(p, 0)), "/v1/completions", completion(prompt), nil)
	if x.headers[DestinationHeader] != "10.0.0.3:8000" || x.headers[PrefillerHeader] != "" || !slices.Contains(x.removed, PrefillerHeader) {
		t.Fatalf("pick %+v, removed %v", x.headers, x.removed)
	}
}

func TestExtProcSubsetHint(t *testing.T) {
	p := newPool(t, "dynamo-isl", pdEndpoints)
	prompt := seq(0, 3000)
	hashes, _ := p.router.Hash(prompt)
	_ = p.router.Index().Store("10.0.0.3:8000", hashes) // the router alone would pick .3
	c := serve(t, newPicker(p, 0))
	if x := send(t, c, "/v1/completions", completion(prompt), []string{"10.0.0.2:8000"}); x.headers[DestinationHeader] != "10.0.0.2:8000" {
		t.Fatalf("subset [.2]: picked %q", x.headers[DestinationHeader])
	}
	for _, subset := range [][]string{{}, {"10.0.0.1:8000"}, {"10.9.9.9:1"}} {
		if x := send(t, c, "/v1/completions", completion(prompt), subset); x.status != 503 {
			t.Fatalf("subset %v: status %d, want 503", subset, x.status)
		}
	}
}

func TestExtProcNoDecodeEndpointIs503(t *testing.T) {
	p := newPool(t, "dynamo-isl", pdEndpoints[:1])
	x := send(t, serve(t, newPicker(p, 0)), "/v1/completions", completion(seq(0, 100)), nil)
	if x.status != 503 || !strings.Contains(string(x.body), "no decode endpoint is ready") {
		t.Fatalf("status %d body %s", x.status, x.body)
	}
}

// With -max-inflight 1 and one decode endpoint, a second request while the first is in flight is shed (429); once
// the first one's stream ends, the next one is picked again.
func TestExtProcShedsAt429(t *testing.T) {
	p := newPool(t, "dynamo-isl", pdEndpoints[:2])
	c := serve(t, newPicker(p, 1))
	first := send(t, c, "/v1/completions", completion(seq(0, 100)), nil)
	if first.status != 200 {
		t.Fatalf("first: %d", first.status)
	}
	if x := send(t, c, "/v1/completions", completion(seq(0, 100)), nil); x.status != 429 {
		t.Fatalf("second while the first is in flight: %d, want 429", x.status)
	}
	_ = first.stream.CloseSend()
	if _, err := first.stream.Recv(); err != io.EOF {
		t.Fatalf("stream end: %v", err)
	}
	if x := send(t, c, "/v1/completions", completion(seq(0, 100)), nil); x.status != 200 {
		t.Fatalf("after the first ended: %d, want 200", x.status)
	}
}

func TestExtProcBadBodyIs400(t *testing.T) {
	p := newPool(t, "dynamo-isl", pdEndpoints)
	if x := send(t, serve(t, newPicker(p, 0)), "/v1/completions", "{not json", nil); x.status != 400 {
		t.Fatalf("status %d", x.status)
	}
}

// An endpoints file edit: a removed endpoint is no longer picked, and its blocks are forgotten.
func TestApplyRemovesEndpoints(t *testing.T) {
	p := newPool(t, "dynamo-isl", pdEndpoints)
	prompt := seq(0, 3000)
	hashes, _ := p.router.Hash(prompt)
	_ = p.router.Index().Store("10.0.0.3:8000", hashes)
	if err := p.Apply(pdEndpoints[:2]); err != nil {
		t.Fatal(err)
	}
	c := serve(t, newPicker(p, 0))
	for i := 0; i < 3; i++ {
		if x := send(t, c, "/v1/completions", completion(seq(i, 3000)), nil); x.headers[DestinationHeader] != "10.0.0.2:8000" {
			t.Fatalf("picked %q after .3 left the file", x.headers[DestinationHeader])
		}
	}
}

// Envoy in BUFFERED body mode (what fail-open needs): the headers are answered at once, empty, and the pick comes
// with the body's answer, the body untouched.
func TestExtProcBufferedMode(t *testing.T) {
	p := newPool(t, "dynamo-isl", pdEndpoints)
	c := serve(t, newPicker(p, 0))
	s, err := c.Process(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	hdrs := &corev3.HeaderMap{Headers: []*corev3.HeaderValue{{Key: ":path", RawValue: []byte("/v1/completions")}}}
	_ = s.Send(&extproc.ProcessingRequest{
		Request:        &extproc.ProcessingRequest_RequestHeaders{RequestHeaders: &extproc.HttpHeaders{Headers: hdrs}},
		ProtocolConfig: &extproc.ProtocolConfiguration{RequestBodyMode: extprocfilter.ProcessingMode_BUFFERED},
	})
	r, err := s.Recv()
	if err != nil || r.GetRequestHeaders() == nil || r.GetRequestHeaders().GetResponse() != nil {
		t.Fatalf("headers answer %v, %v", r, err)
	}
	_ = s.Send(&extproc.ProcessingRequest{Request: &extproc.ProcessingRequest_RequestBody{RequestBody: &extproc.HttpBody{
		Body: []byte(completion(seq(0, 3000))), EndOfStream: true}}})
	r, err = s.Recv()
	if err != nil || r.GetRequestBody() == nil {
		t.Fatalf("body answer %v, %v", r, err)
	}
	common := r.GetRequestBody().GetResponse()
	got := map[string]string{}
	for _, h := range common.GetHeaderMutation().GetSetHeaders() {
		got[h.Header.Key] = string(h.Header.RawValue)
	}
	if got[PrefillerHeader] != "10.0.0.1:8000" || got[DestinationHeader] == "" || got["content-length"] != "" || common.GetBodyMutation() != nil || !common.ClearRouteCache {
		t.Fatalf("body answer %+v", common)
	}
}

// An endpoint whose /health fails twice leaves the rotation (not picked, 503 when it was the only decode endpoint)
// and comes back with its first success.
func TestHealthChecksTakeEndpointsOutAndBack(t *testing.T) {
	var healthy atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !healthy.Load() {
			w.WriteHeader(503)
		}
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	r, _ := dolphin.Load(table(t, "dynamo-isl"), dolphin.Options{Model: "m"})
	p := NewPool(r, 16, 1000, false, quiet)
	p.metrics = NewMetrics(p.Gauges)
	p.healthy, p.client = 10*time.Millisecond, http.DefaultClient
	healthy.Store(true)
	if err := p.Apply([]Endpoint{{Address: addr, Labels: map[string]string{RoleLabel: "decode"}}}); err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c := serve(t, newPicker(p, 0))
	if x := send(t, c, "/v1/completions", completion(seq(0, 50)), nil); x.headers[DestinationHeader] != addr {
		t.Fatalf("while healthy: %+v", x)
	}
	healthy.Store(false)
	waitFor(t, func() bool { return len(p.Roles()) == 0 })
	if x := send(t, c, "/v1/completions", completion(seq(0, 50)), nil); x.status != 503 {
		t.Fatalf("while down: status %d", x.status)
	}
	if g := p.Gauges(); g.Workers[[2]string{"decode", "down"}] != 1 {
		t.Fatalf("gauges %+v", g.Workers)
	}
	healthy.Store(true)
	waitFor(t, func() bool { return len(p.Roles()) == 1 })
	if x := send(t, c, "/v1/completions", completion(seq(0, 50)), nil); x.headers[DestinationHeader] != addr {
		t.Fatalf("back: %+v", x)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for i := 0; i < 500; i++ {
		if cond() {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("condition not reached in 2.5 s")
}

func testCounter(c prometheus.Counter) float64 {
	var m dto.Metric
	_ = c.Write(&m)
	return m.GetCounter().GetValue()
}
