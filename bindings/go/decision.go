package dolphin

// Routing one request: Route and Explain and the decision record read back from the core (explain.go: the sentence
// Explain gives for it).

// Features are the policy's inputs.
type Features struct{ ISL, EffP, EffD, OSLHat float64 }

// Decision is the core's answer for one request.
type Decision struct {
	Path          string // "local" or "remote"
	Bit           int    // the policy's bit before worker constraints (1 = remote)
	Reason        string // one of spec/abi.json "reasons" ("cluster", "rule", …, "load-out-of-range")
	DecodeWorker  string
	PrefillWorker string // "" when none; also set when local (where eff_P was measured)
	Cluster       int    // the cluster (k-means, GMM) or PPD cell; -1 for other rules
	Features      Features
	MatchedBlocks struct{ Decode, Prefill int }
	Blocks        int
	OSLClass      int // the output-length class the table's model predicted; -1 when OSLHat or a class was given
	Reuse         float64
	Cost          struct{ Decode, Prefill float64 }
	// Load is what a table's load bounds are checked against (table version 3), in tokens: the chosen prefill
	// worker's active prefill tokens (-1 when none was chosen) and the chosen decode worker's active prefill +
	// active decode tokens.
	Load struct{ Prefill, Decode float64 }
}

// Explanation says why: the standardized features and every cluster's score (learned kinds).
type Explanation struct {
	Decision     Decision
	Kind         string
	FeatureNames []string
	Standardized []float64
	Scores       []float64
	Why          string
}

// Route routes one request.
func (r *Router) Route(req Request) (Decision, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.run(&req, r.record); err != nil {
		return Decision{}, err
	}
	return r.decision(), nil
}

// Explain routes without recording and says why.
func (r *Router) Explain(req Request) (Explanation, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.run(&req, false); err != nil {
		return Explanation{}, err
	}
	d := r.decision()
	x := Explanation{Decision: d, Kind: r.table.Kind, FeatureNames: []string{}, Standardized: []float64{}, Scores: []float64{}}
	if isLearned(r.table.Kind) {
		x.FeatureNames = r.table.Features
		x.Scores = r.c.f64s(r.c.scores, r.table.Clusters)
		x.Standardized = r.c.f64s(r.c.stdzd, r.table.Dims)
	}
	x.Why = why(r.table, d, x.Scores)
	return x, nil
}

func (r *Router) decision() Decision {
	c, p := r.c, r.c.decision
	at := func(slot int) float64 { return c.f64At(p, slot) }
	d := Decision{
		Path:          "local",
		Bit:           0,
		Reason:        "rule",
		DecodeWorker:  r.name(int(at(dDecode))),
		PrefillWorker: r.name(int(at(dPrefill))),
		Cluster:       -1,
		Features:      Features{at(dIsl), at(dEffP), at(dEffD), at(dOslHat)},
		Blocks:        int(at(dBlocks)),
		OSLClass:      -1,
		Reuse:         at(dReuse),
	}
	if at(dPath) == 1 {
		d.Path = "remote"
	}
	if at(dBit) == 1 {
		d.Bit = 1
	}
	if reason := int(at(dReason)); reason >= 0 && reason < len(reasonNames) {
		d.Reason = reasonNames[reason]
	}
	if cl := at(dCluster); cl >= 0 {
		d.Cluster = int(cl)
	}
	if oc := at(dOslClass); oc >= 0 {
		d.OSLClass = int(oc)
	}
	d.MatchedBlocks.Decode, d.MatchedBlocks.Prefill = int(at(dMatchedD)), int(at(dMatchedP))
	d.Cost.Decode, d.Cost.Prefill = at(dCostD), at(dCostP)
	d.Load.Prefill, d.Load.Decode = at(dLoadP), at(dLoadD)
	return d
}
