package dolphin

// The Go API: workers, the index, errors with the Node host's messages, atomic SetTable, Explain, concurrent use,
// JavaScript number formatting, and benchmarks of Route (one goroutine and many sharing one Router).

import (
	"errors"
	"math"
	"slices"
	"strconv"
	"sync"
	"testing"
)

var workers = []Worker{{"d0", "decode", 1000}, {"d1", "decode", 1000}, {"p0", "prefill", 1000}}

func newRouter(t testing.TB, table string) *Router {
	t.Helper()
	opts := small
	opts.Workers = workers
	r, err := Load(fixture(t, table), opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func seq(from, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(from + i)
	}
	return out
}

func TestIndexAndWorkers(t *testing.T) {
	r := newRouter(t, "dynamo-isl.msgpack")
	hashes, err := r.Hash(seq(0, 64))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Index().Store("d1", hashes); err != nil {
		t.Fatal(err)
	}
	if n, _ := r.Index().Count("d1"); n != 4 {
		t.Fatalf("count %d", n)
	}
	m, _ := r.Index().Match(hashes)
	if m["d1"] != 4 || m["d0"] != 0 || m["p0"] != 0 {
		t.Fatalf("match %v", m)
	}
	d, err := r.Route(Request{Tokens: seq(0, 64), OSLHat: Float(1)})
	if err != nil || d.DecodeWorker != "d1" || d.MatchedBlocks.Decode != 4 {
		t.Fatalf("route %+v %v", d, err)
	}
	_ = r.Index().Remove("d1", hashes[2:])
	if m, _ := r.Index().Match(hashes); m["d1"] != 2 {
		t.Fatalf("after remove %v", m)
	}
	_ = r.Index().Clear("")
	if m, _ := r.Index().Match(hashes); m["d1"] != 0 {
		t.Fatalf("after clear %v", m)
	}
	if err := r.AddWorker(Worker{ID: "d2", Role: "both", CapacityBlocks: 1000}); err != nil {
		t.Fatal(err)
	}
	if d, _ := r.Route(Request{Tokens: seq(0, 32), OSLHat: Float(1), DecodeWorker: "d2"}); d.DecodeWorker != "d2" {
		t.Fatalf("pin: %+v", d)
	}
	if err := r.RemoveWorker("d2"); err != nil {
		t.Fatal(err)
	}
	_, err = r.Route(Request{Tokens: seq(0, 32), OSLHat: Float(1), DecodeWorker: "d2"})
	if err == nil || err.Error() != `router: unknown worker "d2"` {
		t.Fatalf("unknown worker: %v", err)
	}
}

func TestErrorsHaveTheNodeMessages(t *testing.T) {
	r := newRouter(t, "dynamo-isl.msgpack")
	cases := []struct {
		err  error
		want string
	}{
		{r.SetLoad("d0", -1, 0), "setLoad: core: load must be a finite number ≥ 0, got -1"},
		{func() error { _, err := r.Route(Request{Tokens: seq(0, 1), OSLHat: Float(-2)}); return err }(), "route: oslHat must be a number ≥ 0, got -2"},
		{func() error { _, err := r.Route(Request{Tokens: seq(0, 1), OSLHat: Float(1), Turn: -3}); return err }(), "route: core: turn must be an integer ≥ 0, got -3"},
		{func() error { _, err := r.Route(Request{Tokens: seq(0, 1), Text: "x"}); return err }(), "route: give exactly one of tokens, text or blockHashes"},
		{func() error { _, err := r.Route(Request{Tokens: seq(0, 65537), OSLHat: Float(1)}); return err }(), "route (262148 bytes > 262144): core: input of 262148 items does not fit the input buffer (raise maxPromptTokens)"},
		{func() error { _, err := HashBlocks(seq(0, 4), 5000, "", ""); return err }(), "setBlockSize: core: blockSize must be an integer in 1–4096, got 5000"},
		{r.SetTable(fixture(t, "invalid-bits-not-0-1.msgpack")), "table: bits[2]: expected 0 (local) or 1 (remote), got 2"},
	}
	for i, c := range cases {
		if c.err == nil || c.err.Error() != c.want {
			t.Errorf("#%d: got %v, want %s", i, c.err, c.want)
		}
	}
	var coreErr *Error
	if err := r.SetLoad("d0", math.NaN(), 0); !errors.As(err, &coreErr) || coreErr.Name != "BAD_LOAD" || coreErr.Code != CodeBadLoad {
		t.Fatalf("error type: %#v", err)
	}
	if r.Table().Kind != "dynamo-isl" {
		t.Fatal("a rejected table replaced the active one")
	}
	if err := r.SetTable(fixture(t, "kmeans.msgpack")); err != nil || r.Table().Kind != "kmeans" {
		t.Fatalf("set table: %v", err)
	}
	x, err := r.Explain(Request{Tokens: seq(0, 500), OSLHat: Float(100)})
	if err != nil || len(x.Scores) != 8 || len(x.Standardized) != 4 || x.Decision.Cluster < 0 {
		t.Fatalf("explain %+v %v", x, err)
	}
	if _, err := r.Route(Request{Tokens: seq(0, 10)}); err == nil || err.Error() != "route: this table uses osl_hat and has no output-length model: give oslHat or oslClass" {
		t.Fatalf("osl: %v", err)
	}
}

func TestRouteByOutputLengthClass(t *testing.T) {
	r := newRouter(t, "kmeans.msgpack") // osl_classes short, medium, long: representative 64, 512, 2048; no model
	info := r.Table()
	if !slices.Equal(info.OSLClassNames, []string{"short", "medium", "long"}) ||
		!slices.Equal(info.OSLClassRepresentative, []float64{64, 512, 2048}) {
		t.Fatalf("classes %q %v", info.OSLClassNames, info.OSLClassRepresentative)
	}
	byName, err := r.Route(Request{Tokens: seq(0, 64), OSLClassName: "long"})
	if err != nil || byName.Features.OSLHat != 2048 || byName.OSLClass != -1 {
		t.Fatalf("by name: %+v %v", byName, err)
	}
	if d, err := r.Route(Request{Tokens: seq(0, 64), OSLClassIndex: Int(0)}); err != nil || d.Features.OSLHat != 64 {
		t.Fatalf("by index: %+v %v", d, err)
	}
	if d, _ := r.Route(Request{Tokens: seq(0, 64), OSLClassIndex: Int(2)}); d != byName {
		t.Fatalf("index 2 %+v, name long %+v", d, byName)
	}
	if d, _ := r.Route(Request{Tokens: seq(0, 64), OSLClassName: "long", OSLHat: Float(7)}); d.Features.OSLHat != 7 {
		t.Fatalf("a given OSLHat wins: %+v", d)
	}
	if x, err := r.Explain(Request{Tokens: seq(0, 64), OSLClassName: "medium"}); err != nil || x.Decision.Features.OSLHat != 512 {
		t.Fatalf("explain: %+v %v", x, err)
	}
	none := newRouter(t, "dynamo-isl.msgpack")
	if none.Table().OSLClassNames != nil {
		t.Fatalf("a table without classes: %q", none.Table().OSLClassNames)
	}
	route := func(r *Router, req Request) error { _, err := r.Route(req); return err }
	cases := []struct {
		err  error
		want string
	}{
		{route(r, Request{Tokens: seq(0, 1), OSLClassName: "huge"}), `route: unknown oslClass "huge" (table classes: short, medium, long)`},
		{route(r, Request{Tokens: seq(0, 1), OSLClassName: `"q"`}), `route: unknown oslClass "\"q\"" (table classes: short, medium, long)`},
		{route(r, Request{Tokens: seq(0, 1), OSLClassIndex: Int(3)}), "route: unknown oslClass 3 (table classes: short, medium, long)"},
		{route(r, Request{Tokens: seq(0, 1), OSLClassIndex: Int(-1)}), "route: unknown oslClass -1 (table classes: short, medium, long)"},
		{route(r, Request{Tokens: seq(0, 1), OSLClassName: "long", OSLClassIndex: Int(0)}), "route: give OSLClassName or OSLClassIndex, not both"},
		{route(none, Request{Tokens: seq(0, 1), OSLClassName: "long"}), "route: oslClass given but the table has no osl_classes"},
	}
	for i, c := range cases {
		if c.err == nil || c.err.Error() != c.want {
			t.Errorf("#%d: got %v, want %s", i, c.err, c.want)
		}
	}
}

func TestConcurrentRoutes(t *testing.T) {
	r := newRouter(t, "kmeans.msgpack")
	want := make([]Decision, 8)
	for i := range want {
		want[i], _ = r.Route(Request{Tokens: seq(i, 300), OSLHat: Float(7)})
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	bad := 0
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < 50; n++ {
				for i := range want {
					d, err := r.Route(Request{Tokens: seq(i, 300), OSLHat: Float(7)})
					if err != nil || d != want[i] {
						mu.Lock()
						bad++
						mu.Unlock()
					}
				}
				if _, err := HashBlocks(seq(n, 64), 16, "m", ""); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if bad != 0 {
		t.Fatalf("%d concurrent routes differed", bad)
	}
}

func TestJSNumber(t *testing.T) {
	cases := map[float64]string{
		0: "0", 1: "1", -1: "-1", 0.5: "0.5", 1e21: "1e+21", 1e20: "100000000000000000000", 1e-6: "0.000001",
		1e-7: "1e-7", 1.5e-7: "1.5e-7", 123.456: "123.456", 1.0 / 3: "0.3333333333333333", 5e-324: "5e-324",
		math.Inf(1): "Infinity", math.Inf(-1): "-Infinity", math.NaN(): "NaN", 2.5e25: "2.5e+25", 4294967296: "4294967296",
	}
	for x, want := range cases {
		if got := jsNumber(x); got != want {
			t.Errorf("jsNumber(%v) = %s, want %s", x, got, want)
		}
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			if back, _ := strconv.ParseFloat(jsNumber(x), 64); back != x {
				t.Errorf("jsNumber(%v) does not round-trip", x)
			}
		}
	}
}

func BenchmarkRoute20kTokens(b *testing.B) {
	r := newRouter(b, "kmeans.msgpack")
	tokens := lcg(20_000, 7)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := r.Route(Request{Tokens: tokens, OSLHat: Float(256)}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRoute20kTokensParallel: goroutines sharing one Router queue on its mutex (one core instance); compare
// with BenchmarkRoute20kTokens to see what sharing costs.
func BenchmarkRoute20kTokensParallel(b *testing.B) {
	r := newRouter(b, "kmeans.msgpack")
	tokens := lcg(20_000, 7)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := r.Route(Request{Tokens: tokens, OSLHat: Float(256)}); err != nil {
				b.Error(err)
			}
		}
	})
}

func BenchmarkHashBlocks20kTokens(b *testing.B) {
	tokens := lcg(20_000, 7)
	for i := 0; i < b.N; i++ {
		if _, err := HashBlocks(tokens, 16, "", ""); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHashBlocksParallel: HashBlocks takes an idle core instance (or makes one), so goroutines run in parallel.
func BenchmarkHashBlocksParallel(b *testing.B) {
	tokens := lcg(20_000, 7)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := HashBlocks(tokens, 16, "", ""); err != nil {
				b.Error(err)
			}
		}
	})
}
