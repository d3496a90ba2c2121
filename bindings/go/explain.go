package dolphin

// Explain's sentence, the twin of src/router/explain.ts explainWhy: which rule or cluster gave the bit and the
// numbers it compared. A learned table's guard (its fallback rule, out-of-distribution bounds and load bounds) is
// read back from the core's staging area right after loadTable, in the layout assembly/policy/set-table.ts
// documents, so the sentence names the same bounds the core compared against.

import (
	"fmt"
	"math"
	"strings"
)

// tableGuard is what a learned table's sentence needs beyond its kind: its fallback rule (kind, two staged
// parameters) and its bounds per cluster (nil when the table has none).
type tableGuard struct {
	fallback           string
	p0, p1             float64
	oodBound           []float64
	loadP, loadD       []float64
	hasLoad, hasGuards bool
}

// readGuard reads the guard section of the learned table loadTable just staged:
// fallbackKind p0 p1 nBounds oodBound[nBounds] nLoadBounds loadBoundPrefill[n] loadBoundDecode[n].
func (c *core) readGuard(info TableInfo) tableGuard {
	if !isLearned(info.Kind) {
		return tableGuard{}
	}
	k, d := info.Clusters, info.Dims
	g := 3*d + k*d + k
	if info.Kind == "gmm" {
		g = 3*d + 2*k*d + 2*k
	}
	staging := uint32(c.call("stagingPtr"))
	at := func(i int) float64 { return c.f64At(staging, i) }
	nB := int(at(g + 3))
	loadAt := g + 4 + nB
	nL := int(at(loadAt))
	t := tableGuard{fallback: kindName(int(at(g))), p0: at(g + 1), p1: at(g + 2), hasGuards: true}
	if nB > 0 {
		t.oodBound = c.f64s(staging+uint32(8*(g+4)), nB)
	}
	if nL > 0 {
		t.hasLoad = true
		t.loadP = c.f64s(staging+uint32(8*(loadAt+1)), nL)
		t.loadD = c.f64s(staging+uint32(8*(loadAt+1+nL)), nL)
	}
	return t
}

func why(t TableInfo, d Decision, scores []float64) string {
	path := "local prefill"
	if d.Path == "remote" {
		path = "remote prefill"
	}
	switch {
	case d.Reason == "no-prefill-worker":
		return "the policy said remote, but no prefill worker is registered: " + path
	case d.Reason == "first-turn":
		return "PPD: turn 1 always goes through a prefill worker: " + path
	case isLearned(t.Kind):
		return learnedWhy(t, d, scores, path)
	case t.Kind == "ppd":
		return fmt.Sprintf("PPD: grid cell %d holds %d: %s", d.Cluster, d.Bit, path)
	}
	return fmt.Sprintf("%s rule gives %d: %s", t.Kind, d.Bit, path)
}

func learnedWhy(t TableInfo, d Decision, scores []float64, path string) string {
	c := max(d.Cluster, 0)
	measure, noun := "log-likelihood", "component"
	if t.Kind == "kmeans" {
		measure, noun = "squared distance", "centroid"
	}
	score := "?"
	if c < len(scores) {
		score = fmt.Sprintf("%.4f", scores[c])
	}
	measure += " " + score
	g := t.guard
	dir := "local"
	if d.Bit == 1 {
		dir = "remote"
	}
	fallback := g.fallback
	if !g.hasGuards {
		fallback, g.p0, g.p1 = "dynamo-isl", 2048, 0.7
	}
	ruled := fmt.Sprintf("→ rule → %s because %s (%s)", dir, ruleClause(fallback, g.p0, g.p1, d), fallback)
	switch {
	case d.Reason == "rule-fallback":
		return fmt.Sprintf("cluster %d %s: %s", c, ruled, path)
	case d.Reason == "out-of-distribution" && c < len(g.oodBound):
		beyond := measure + " < floor " + jsNumber(g.oodBound[c])
		if t.Kind == "kmeans" {
			beyond = measure + " > bound " + jsNumber(g.oodBound[c])
		}
		return fmt.Sprintf("cluster %d is out of distribution (%s) %s: %s", c, beyond, ruled, path)
	case d.Reason == "load-out-of-range" && c < len(g.loadD):
		var over []string
		if d.Load.Prefill >= 0 && d.Load.Prefill > g.loadP[c] {
			over = append(over, "prefill load "+jsNumber(d.Load.Prefill)+" > bound "+jsNumber(g.loadP[c]))
		}
		if d.Load.Decode > g.loadD[c] {
			over = append(over, "decode load "+jsNumber(d.Load.Decode)+" > bound "+jsNumber(g.loadD[c]))
		}
		return fmt.Sprintf("cluster %d is beyond the load it was trained at (%s) %s: %s", c, strings.Join(over, " and "), ruled, path)
	}
	loads := ""
	if g.hasLoad && c < len(g.loadD) {
		loads = loadClause(g.loadP[c], g.loadD[c], d)
	}
	return fmt.Sprintf("nearest %s is cluster %d (%s)%s whose bit is %d: %s", noun, c, measure, loads, d.Bit, path)
}

// loadClause gives the loads as fractions of the cluster's bounds (a bound of 0 admits only 0: fraction 0).
func loadClause(boundP, boundD float64, d Decision) string {
	frac := func(load, bound float64) string {
		if bound > 0 {
			return fmt.Sprintf("%.2f", load/bound)
		}
		return "0.00"
	}
	decode := "decode load " + frac(d.Load.Decode, boundD)
	if d.Load.Prefill < 0 {
		return " at " + decode + " of its bound,"
	}
	return " at " + decode + " and prefill load " + frac(d.Load.Prefill, boundP) + " of its bounds,"
}

// ruleClause says why a rule that decides from the request alone gave the bit (the fallback of a learned table);
// p0 and p1 are its parameters in their staging slots (spec/abi.json "kinds").
func ruleClause(kind string, p0, p1 float64, d Decision) string {
	isl, effD := d.Features.ISL, d.Features.EffD
	remote := d.Bit == 1
	n := jsNumber
	switch kind {
	case "dynamo-isl":
		r := fmt.Sprintf("%.3f", effD/math.Max(isl, 1))
		if !remote {
			return fmt.Sprintf("eff_D %s < %s and eff_D/isl %s < %s", n(effD), n(p0), r, n(p1))
		}
		if effD >= p0 {
			return fmt.Sprintf("eff_D %s ≥ %s", n(effD), n(p0))
		}
		return fmt.Sprintf("eff_D/isl %s ≥ %s", r, n(p1))
	case "dynamo-load":
		if remote {
			return fmt.Sprintf("the prefill worker is not busy (≤ %s active tokens) or its load is unknown", n(p0*p1))
		}
		return fmt.Sprintf("the prefill worker is busy (> %s active tokens)", n(p0*p1))
	case "dynamo-legacy":
		if remote {
			return fmt.Sprintf("eff_D %s > %s and the prefill queue < %s", n(effD), n(p0), n(p1))
		}
		return fmt.Sprintf("eff_D %s ≤ %s or the prefill queue ≥ %s", n(effD), n(p0), n(p1))
	case "trtllm":
		if remote {
			return "nothing matched on the decode worker or isl − match > " + n(p0)
		}
		return "isl − match ≤ " + n(p0)
	case "llm-d":
		if remote {
			return fmt.Sprintf("isl %s ≥ %s and uncached tokens ≥ %s", n(isl), n(p1), n(p0))
		}
		return fmt.Sprintf("non_cached_tokens is 0, isl < %s or uncached tokens < %s", n(p1), n(p0))
	}
	return kind + " always does"
}
