package dolphin

// Explain's sentences for a table with load bounds (spec/vectors/tables/kmeans-load.msgpack), the same as
// src/router/explain.ts gives (test/table-v3.test.ts checks the Node host with the same inputs), a rule table's
// template, and the filler's pieces. test/bindings-agree.test.ts compares every host's sentences with Node's.

import (
	"math"
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

// A rule table's sentence is its descriptor's rule template, filled with the parameters the core staged.
func TestExplainRuleTemplate(t *testing.T) {
	r, err := Load(fixture(t, "dynamo-isl.msgpack"), Options{Workers: []Worker{{ID: "d0", Role: "decode"}, {ID: "p0", Role: "prefill"}}})
	if err != nil {
		t.Fatal(err)
	}
	x := explainLoaded(t, r, nil)
	want := "Dynamo isl_bounding: eff_D 16 < 2048 and eff_D/isl 1.000 < 0.7 is false: remote prefill"
	if x.Why != want {
		t.Fatalf("why %q", x.Why)
	}
}

// Every value spec/abi.json lets a template name has its value here, and no other.
func TestExplainValuesAllKnown(t *testing.T) {
	for _, name := range explainValues {
		if decisionValues[name] == nil {
			t.Errorf("explain value %q has no value in decisionValues", name)
		}
	}
	if len(decisionValues) != len(explainValues) {
		t.Errorf("decisionValues has %d values, spec/abi.json explain_values %d", len(decisionValues), len(explainValues))
	}
}

// toFixed writes what JavaScript's toFixed writes, exact ties (which strconv rounds to even) included.
func TestToFixedIsJavaScripts(t *testing.T) {
	for _, c := range []struct {
		x      float64
		digits int
		want   string
	}{
		{0.625, 2, "0.63"}, {0.0625, 3, "0.063"}, {0.125, 2, "0.13"}, {-0.625, 2, "-0.63"}, {0.375, 2, "0.38"},
		{1.005, 2, "1.00"}, {math.Copysign(0, -1), 2, "0.00"}, {-0.001, 2, "-0.00"}, {2.5, 0, "3"},
		{123.456, 4, "123.4560"}, {1e21, 2, "1e+21"}, {math.NaN(), 2, "NaN"}, {-12.34565, 4, "-12.3456"},
		{0.00005, 4, "0.0001"},
	} {
		if got := toFixed(c.x, c.digits); got != c.want {
			t.Errorf("toFixed(%v, %d) = %q, want %q", c.x, c.digits, got, c.want)
		}
	}
}
