package main

import (
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"

	extproc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// -fixed-endpoint: the same messages as a pick, to the one endpoint, whatever the body (not JSON here: not parsed),
// and no pick made.
func TestExtProcFixedEndpoint(t *testing.T) {
	p := newPool(t, "dynamo-isl", pdEndpoints)
	c := serveWith(t, &Server{picker: newPicker(p, 0), metrics: p.metrics, fixed: "10.0.0.9:8000"})
	body := strings.Repeat("not json ", 10_000)
	x := send(t, c, "/v1/completions", body, nil)
	if x.status != 200 || x.headers[DestinationHeader] != "10.0.0.9:8000" || x.meta != "10.0.0.9:8000" || x.headers[PrefillerHeader] != "" {
		t.Fatalf("answer %+v, metadata %q", x.headers, x.meta)
	}
	if string(x.body) != body || x.headers["content-length"] != strconv.Itoa(len(body)) || !slices.Contains(x.removed, PrefillerHeader) {
		t.Fatalf("body changed (%d bytes back of %d), content-length %q, removed %v", len(x.body), len(body), x.headers["content-length"], x.removed)
	}
	for _, e := range pdEndpoints {
		if n := p.Inflight(e.Address); n != 0 {
			t.Fatalf("%s: %d requests held", e.Address, n)
		}
	}
}

// serveWith serves one ext_proc Server on loopback (epp_test.go's serve: a picker's) and connects to it.
func serveWith(t *testing.T, server *Server) extproc.ExternalProcessorClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	extproc.RegisterExternalProcessorServer(srv, server)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return extproc.NewExternalProcessorClient(conn)
}
