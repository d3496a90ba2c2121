package dolphin

// Explain's sentence, the twin of src/router/explain.ts explainWhy: which rule or cluster gave the bit and the
// numbers it compared. The words are each kind's explain templates, generated from spec/abi.json into abi_gen.go
// (kindExplains); here only the frame around them, the values they may name and the filler. A rule's parameters
// and a learned table's guard (its fallback rule, out-of-distribution bounds and load bounds) are read back from
// the core's staging area right after loadTable, in the layout assembly/policy/set-table.ts documents, so the
// sentence names the same numbers the core compared.

import (
	"fmt"
	"math"
	"math/big"
	"regexp"
	"strconv"
	"strings"
)

// tableGuard is what a table's sentence needs beyond its kind: a rule table's staged parameters, and a learned
// table's fallback rule (kind, staged parameters) and bounds per cluster (nil when the table has none).
type tableGuard struct {
	params             map[string]float64
	fallback           string
	fallbackParams     map[string]float64
	oodBound           []float64
	loadP, loadD       []float64
	hasLoad, hasGuards bool
}

// readGuard reads back what loadTable just staged: a rule's parameters (kindStagedParams), or a learned table's
// guard section: fallbackKind p[limitRuleSlots] nBounds oodBound[nBounds] nLoadBounds loadBoundPrefill[n] loadBoundDecode[n].
func (c *core) readGuard(info TableInfo) tableGuard {
	staging := uint32(c.call("stagingPtr"))
	at := func(i int) float64 { return c.f64At(staging, i) }
	if !isLearned(info.Kind) {
		return tableGuard{params: stagedParams(info.Kind, at, 0)}
	}
	k, d := info.Clusters, info.Dims
	g := 3*d + k*d + k
	if info.Kind == "gmm" {
		g = 3*d + 2*k*d + 2*k
	}
	boundsAt := g + 1 + limitRuleSlots
	nB := int(at(boundsAt))
	loadAt := boundsAt + 1 + nB
	nL := int(at(loadAt))
	fallback := kindName(int(at(g)))
	t := tableGuard{fallback: fallback, fallbackParams: stagedParams(fallback, at, g+1), hasGuards: true}
	if nB > 0 {
		t.oodBound = c.f64s(staging+uint32(8*(boundsAt+1)), nB)
	}
	if nL > 0 {
		t.hasLoad = true
		t.loadP = c.f64s(staging+uint32(8*(loadAt+1)), nL)
		t.loadD = c.f64s(staging+uint32(8*(loadAt+1+nL)), nL)
	}
	return t
}

// stagedParams names a rule's staged values (its slots from staging index `from` on) by its parameters in them.
func stagedParams(kind string, at func(int) float64, from int) map[string]float64 {
	params := map[string]float64{}
	for i, name := range kindStagedParams[kind] {
		params[name] = at(from + i)
	}
	return params
}

func explainOf(kind string) kindExplain {
	for _, e := range kindExplains {
		if e.kind == kind {
			return e
		}
	}
	return kindExplain{kind: kind}
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
	}
	if rule := explainOf(t.Kind).rule; rule != "" {
		return fill(rule, d, t.guard.params) + ": " + path
	}
	return fmt.Sprintf("%s rule gives %d: %s", t.Kind, d.Bit, path)
}

func learnedWhy(t TableInfo, d Decision, scores []float64, path string) string {
	c := max(d.Cluster, 0)
	e := explainOf(t.Kind)
	score := "?"
	if c < len(scores) {
		score = toFixed(scores[c], 4)
	}
	measure := e.score + " " + score
	g := t.guard
	dir := "local"
	if d.Bit == 1 {
		dir = "remote"
	}
	fallback, params := g.fallback, g.fallbackParams
	if !g.hasGuards { // the fallback of a table that names none (src/table/table.ts DEFAULT_FALLBACK)
		fallback, params = "dynamo-isl", stagedParams("dynamo-isl", func(i int) float64 { return []float64{2048, 0.7}[i] }, 0)
	}
	ruled := fmt.Sprintf("→ rule → %s because %s (%s)", dir, ruleClause(fallback, params, d), fallback)
	switch {
	case d.Reason == "rule-fallback":
		return fmt.Sprintf("cluster %d %s: %s", c, ruled, path)
	case d.Reason == "out-of-distribution" && c < len(g.oodBound):
		beyond := measure + " " + e.beyond + " " + jsNumber(g.oodBound[c])
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
	return fmt.Sprintf("nearest %s is cluster %d (%s)%s whose bit is %d: %s", e.nearest, c, measure, loads, d.Bit, path)
}

// loadClause gives the loads as fractions of the cluster's bounds (a bound of 0 admits only 0: fraction 0).
func loadClause(boundP, boundD float64, d Decision) string {
	frac := func(load, bound float64) string {
		if bound > 0 {
			return toFixed(load/bound, 2)
		}
		return "0.00"
	}
	decode := "decode load " + frac(d.Load.Decode, boundD)
	if d.Load.Prefill < 0 {
		return " at " + decode + " of its bound,"
	}
	return " at " + decode + " and prefill load " + frac(d.Load.Prefill, boundP) + " of its bounds,"
}

// ruleClause says why a rule that decides from the request alone gave the bit (the fallback of a learned table).
func ruleClause(kind string, params map[string]float64, d Decision) string {
	e := explainOf(kind)
	clause := e.local
	if d.Bit == 1 {
		clause = e.remote
	}
	for _, alt := range clause { // the first alternative that holds; gen-abi.mjs checks the last one always does
		if alt.when == "" || holds(alt.when, d, params) {
			return fill(alt.say, d, params)
		}
	}
	return kind + " always does"
}

// ---- the template filler (src/router/explain.ts fill, holds) --------------------------------------------------

// decisionValues are the decision's values a template may name besides the rule's parameters (spec/abi.json
// "explain_values"; a test checks every one has its value): a float64, a bool or nil (written "null").
var decisionValues = map[string]func(d Decision) any{
	"isl":       func(d Decision) any { return d.Features.ISL },
	"eff_P":     func(d Decision) any { return d.Features.EffP },
	"eff_D":     func(d Decision) any { return d.Features.EffD },
	"osl_hat":   func(d Decision) any { return d.Features.OSLHat },
	"eff_D/isl": func(d Decision) any { return d.Features.EffD / math.Max(d.Features.ISL, 1) },
	"load_P":    func(d Decision) any { return d.Load.Prefill },
	"load_D":    func(d Decision) any { return d.Load.Decode },
	"bit":       func(d Decision) any { return float64(d.Bit) },
	"local":     func(d Decision) any { return d.Bit == 0 },
	"cluster": func(d Decision) any {
		if d.Cluster < 0 {
			return nil
		}
		return float64(d.Cluster)
	},
}

// written are the values a template writes other than as JavaScript's String(x) does.
var written = map[string]func(x float64) string{"eff_D/isl": func(x float64) string { return toFixed(x, 3) }}

var explainPlaceholder = regexp.MustCompile(`\{[^}]*\}`)

func valueOf(name string, d Decision, params map[string]float64) any {
	if v, ok := decisionValues[name]; ok {
		return v(d)
	}
	if p, ok := params[name]; ok {
		return p
	}
	return "undefined" // gen-abi.mjs checks every name, so never
}

// number is a value as a JavaScript number (true 1, false and null 0).
func number(v any) float64 {
	switch v := v.(type) {
	case float64:
		return v
	case bool:
		if v {
			return 1
		}
	}
	return 0
}

// fill writes `{name}` and `{a × b}` (a product) with the decision's values and the rule's parameters.
func fill(template string, d Decision, params map[string]float64) string {
	return explainPlaceholder.ReplaceAllStringFunc(template, func(m string) string {
		inside := m[1 : len(m)-1]
		if factors := strings.Split(inside, " × "); len(factors) == 2 {
			return jsNumber(number(valueOf(factors[0], d, params)) * number(valueOf(factors[1], d, params)))
		}
		switch v := valueOf(inside, d, params).(type) {
		case nil:
			return "null"
		case bool:
			return strconv.FormatBool(v)
		case float64:
			if w, ok := written[inside]; ok {
				return w(v)
			}
			return jsNumber(v)
		case string:
			return v
		}
		return ""
	})
}

// holds says whether `a op b` holds (a "when" of the spec: op one of <, ≤, >, ≥).
func holds(when string, d Decision, params map[string]float64) bool {
	parts := strings.Split(when, " ")
	if len(parts) != 3 {
		return false
	}
	x, y := number(valueOf(parts[0], d, params)), number(valueOf(parts[2], d, params))
	switch parts[1] {
	case "<":
		return x < y
	case "≤":
		return x <= y
	case ">":
		return x > y
	}
	return x >= y
}

// toFixed writes x with the given decimals as JavaScript's x.toFixed(digits) does. Go's strconv rounds an exact
// tie (0.625 to two decimals) to even ("0.62"); JavaScript picks the larger magnitude ("0.63").
func toFixed(x float64, digits int) string {
	if math.IsNaN(x) || math.IsInf(x, 0) || math.Abs(x) >= 1e21 {
		return jsNumber(x) // what toFixed gives there
	}
	scaled := new(big.Float).SetPrec(256).SetFloat64(math.Abs(x))
	scaled.Mul(scaled, new(big.Float).SetPrec(256).SetFloat64(math.Pow10(digits))) // exact: 53 + 74 bits at most
	up := new(big.Float).SetPrec(256).Add(scaled, big.NewFloat(0.5))
	if !up.IsInt() { // not a tie: strconv rounds the exact value to nearest as toFixed does
		if x == 0 {
			x = 0 // -0 is written "0.00" (toFixed's x < 0 is false)
		}
		return strconv.FormatFloat(x, 'f', digits, 64)
	}
	n := up.Text('f', 0)
	if len(n) <= digits {
		n = strings.Repeat("0", digits-len(n)+1) + n
	}
	sign := ""
	if x < 0 {
		sign = "-"
	}
	if digits == 0 {
		return sign + n
	}
	return sign + n[:len(n)-digits] + "." + n[len(n)-digits:]
}
