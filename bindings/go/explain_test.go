package dolphin

// Explain's sentences for a table with load bounds (spec/vectors/tables/kmeans-load.msgpack), the same as
// src/router/explain.ts gives (test/table-v3.test.ts checks the Node host with the same inputs).

import (
	"regexp"
	"testing"
)

func loadBoundRouter(t *testing.T, workers []Worker) *Router {
	t.Helper()
	r, err := Load(fixture(t, "kmeans-load.msgpack"), Options{Workers: workers})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// explainLoaded explains an uncached 16-token prompt with osl_hat 16: cluster 3 (value 0; bounds 16384, 10000).
func explainLoaded(t *testing.T, r *Router, loads map[string][2]float64) Explanation {
	t.Helper()
	for id, l := range loads {
		if err := r.SetLoad(id, l[0], l[1]); err != nil {
			t.Fatal(err)
		}
	}
	tokens := make([]uint32, 16)
	for i := range tokens {
		tokens[i] = uint32((i*7919 + 3) % 50000)
	}
	osl := 16.0
	x, err := r.Explain(Request{Tokens: tokens, OSLHat: &osl})
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func TestExplainLoadBounds(t *testing.T) {
	both := []Worker{{ID: "d0", Role: "decode"}, {ID: "p0", Role: "prefill"}}
	x := explainLoaded(t, loadBoundRouter(t, both), map[string][2]float64{"d0": {1000, 7000}, "p0": {8192, 0}})
	if x.Decision.Load.Prefill != 8192 || x.Decision.Load.Decode != 8000 || x.Decision.Reason != "cluster" {
		t.Fatalf("decision %+v", x.Decision)
	}
	within := `^nearest centroid is cluster 3 \(squared distance \d+\.\d{4}\) at decode load 0\.80 and prefill load 0\.50 of its bounds, whose bit is 0: local prefill$`
	if !regexp.MustCompile(within).MatchString(x.Why) {
		t.Fatalf("why %q", x.Why)
	}
	x = explainLoaded(t, loadBoundRouter(t, both), map[string][2]float64{"d0": {2000, 10000}})
	want := "cluster 3 is beyond the load it was trained at (decode load 12000 > bound 10000) → rule → remote because " +
		"nothing matched on the decode worker or isl − match > 512 (trtllm): remote prefill"
	if x.Decision.Reason != "load-out-of-range" || x.Why != want {
		t.Fatalf("why %q (%s)", x.Why, x.Decision.Reason)
	}
	x = explainLoaded(t, loadBoundRouter(t, both), map[string][2]float64{"p0": {16385, 0}})
	if !regexp.MustCompile(`\(prefill load 16385 > bound 16384\) → rule → remote`).MatchString(x.Why) {
		t.Fatalf("why %q", x.Why)
	}
	x = explainLoaded(t, loadBoundRouter(t, both[:1]), map[string][2]float64{"d0": {0, 5000}})
	if x.Decision.Load.Prefill != -1 || !regexp.MustCompile(`at decode load 0\.50 of its bound, whose bit is 0: local prefill$`).MatchString(x.Why) {
		t.Fatalf("why %q, load %+v", x.Why, x.Decision.Load)
	}
}
