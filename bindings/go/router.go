// Package dolphin is the dolphin-routing core (core.wasm, the module the Node and Python packages run) from Go,
// on wazero (pure Go, no cgo). Tables, hashing, matching, worker choice and the policies all happen in the core;
// this package copies inputs into its memory, reads the decision record and maps error codes to the messages
// generated from spec/abi.json.
//
// A Router is safe for concurrent use: one mutex guards its core instance (see docs/bindings.md for why a pool of
// instances would not be: each instance holds its own prefix index).
package dolphin

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Worker is one engine the router chooses between.
type Worker struct {
	ID             string
	Role           string // "prefill", "decode" or "both"
	CapacityBlocks int    // blocks the index keeps for it; 0: Options.CapacityBlocks
}

// Options configure Load. Zero values mean the Node defaults.
type Options struct {
	Workers         []Worker
	BlockSize       int // tokens per block, 1–4096; 0: 16
	Model, Salt     string
	RecordDecisions bool    // store each routed prompt on the chosen workers (when no KV events feed the index)
	CapacityBlocks  int     // default per-worker index capacity; 0: 31,250
	LoadScale       float64 // weight of prefill work against decode load; 0: the core's default (1)
	MaxWorkers      int     // worker slots; 0: 1024
	MaxPromptTokens int     // longest prompt in tokens (text: bytes / 4); 0: 1,048,576
	IndexBlocks     int     // index pool shared by all workers; 0: max(1,048,576, sum of capacities)
}

// Request is one request to route: exactly one of Tokens, Text or BlockHashes. Its predicted output length is OSLHat
// when given, else the representative length of the output-length class OSLClassName or OSLClassIndex picks (in the
// table's osl_classes: Table().OSLClassNames), else what the table's output-length model predicts (0 without one).
type Request struct {
	Tokens           []uint32
	Text             string
	BlockHashes      []uint64
	PromptTokens     int      // isl in text and hash modes (0: derived from the input)
	OSLHat           *float64 // predicted output tokens; nil: not given
	OSLClassName     string   // the class by name; "": none
	OSLClassIndex    *int     // the class by index (Int(i)); nil: none
	Turn             int      // the turn in its session (1 = first); 0: 1, the Node default
	DecodeWorker     string   // pin the decode worker (a session's); "": none
	ContextTokens    *float64 // session context the prompt repeats (PPD); nil: unknown
	PrevOutputTokens float64  // the session's previous output tokens (≤ 0 unknown)
	MaxTokens        float64  // the request's max_tokens (≤ 0 not given)
	text             bool     // Text was set (an empty string is still a text prompt)
}

// Float returns a pointer to v, for Request.OSLHat and Request.ContextTokens.
func Float(v float64) *float64 { return &v }

// Int returns a pointer to v, for Request.OSLClassIndex.
func Int(v int) *int { return &v }

// TextRequest is a Request for a text prompt (64-byte blocks).
func TextRequest(text string) Request { return Request{Text: text, text: true} }

// Features are the policy's inputs.
type Features struct{ ISL, EffP, EffD, OSLHat float64 }

// Decision is the core's answer for one request.
type Decision struct {
	Path          string // "local" or "remote"
	Bit           int    // the policy's bit before worker constraints (1 = remote)
	Reason        string // "cluster", "rule", "first-turn" or "no-prefill-worker"
	DecodeWorker  string
	PrefillWorker string // "" when none; also set when local (where eff_P was measured)
	Cluster       int    // the cluster (k-means, GMM) or PPD cell; -1 for other rules
	Features      Features
	MatchedBlocks struct{ Decode, Prefill int }
	Blocks        int
	OSLClass      int // the output-length class the table's model predicted; -1 when OSLHat or a class was given
	Reuse         float64
	Cost          struct{ Decode, Prefill float64 }
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

// Router routes requests with one table over named workers.
type Router struct {
	mu       sync.Mutex
	c        *core
	table    TableInfo
	ids      []string
	byID     map[string]int
	free     []int
	record   bool
	capacity int
	maxWork  int
	index    Index
}

const defaultCapacity = 31_250 // GIE's LRU size per pod, the Node default

// Load builds a router over a table file (msgpack bytes, decoded and validated by the core).
func Load(table []byte, opts Options) (*Router, error) {
	capacity := opts.CapacityBlocks
	if capacity == 0 {
		capacity = defaultCapacity
	}
	if capacity < 0 {
		return nil, &RequestError{fmt.Sprintf("router: capacityBlocks must be an integer ≥ 0, got %d", capacity)}
	}
	maxPrompt := opts.MaxPromptTokens
	if maxPrompt == 0 {
		maxPrompt = (4 << 20) / 4
	}
	if maxPrompt < 16 || maxPrompt > 1<<26 {
		return nil, &RequestError{fmt.Sprintf("router: maxPromptTokens must be an integer in 16–67,108,864, got %d", maxPrompt)}
	}
	maxWorkers := opts.MaxWorkers
	if maxWorkers == 0 {
		maxWorkers = 1024
	}
	indexBlocks := opts.IndexBlocks
	if indexBlocks == 0 {
		sum := 0
		for _, w := range opts.Workers {
			if w.CapacityBlocks > 0 {
				sum += w.CapacityBlocks
			} else {
				sum += capacity
			}
		}
		indexBlocks = max(1<<20, sum)
	}
	c, err := newCore(maxWorkers, 4*maxPrompt, indexBlocks)
	if err != nil {
		return nil, err
	}
	if opts.BlockSize != 0 {
		if err := c.check(c.call("setBlockSize", i32(opts.BlockSize)), "setBlockSize"); err != nil {
			return nil, err
		}
	}
	if opts.Model != "" || opts.Salt != "" {
		root := opts.Model + "\x00" + opts.Salt
		if err := c.writeBytes([]byte(root), "setRoot"); err != nil {
			return nil, err
		}
		if err := c.check(c.call("setRoot", i32(len(root))), "setRoot"); err != nil {
			return nil, err
		}
	}
	if opts.LoadScale != 0 {
		if err := c.check(c.call("setLoadScale", f64(opts.LoadScale)), "setLoadScale"); err != nil {
			return nil, err
		}
	}
	info, err := c.loadTable(table)
	if err != nil {
		return nil, err
	}
	r := &Router{c: c, table: info, byID: map[string]int{}, record: opts.RecordDecisions, capacity: capacity, maxWork: maxWorkers}
	r.index = Index{r}
	for _, w := range opts.Workers {
		if err := r.AddWorker(w); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Table describes the active table.
func (r *Router) Table() TableInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.table
}

// SetTable swaps the table atomically: a table the core rejects leaves the old one in place.
func (r *Router) SetTable(table []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	info, err := r.c.loadTable(table)
	if err != nil {
		return err
	}
	r.table = info
	return nil
}

// WorkerIDs lists the workers in index order.
func (r *Router) WorkerIDs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := []string{}
	for _, id := range r.ids {
		if id != "" {
			out = append(out, id)
		}
	}
	return out
}

// AddWorker registers a worker.
func (r *Router) AddWorker(w Worker) error {
	if w.ID == "" {
		return &RequestError{"router: worker id must be a non-empty string"}
	}
	role, ok := map[string]int{"prefill": rolePrefill, "decode": roleDecode, "both": roleBoth}[w.Role]
	if !ok {
		return &RequestError{fmt.Sprintf(`router: worker "%s": role must be prefill, decode or both, got %s`, w.ID, w.Role)}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.byID[w.ID]; dup {
		return &RequestError{fmt.Sprintf(`router: worker "%s" already exists`, w.ID)}
	}
	index := len(r.ids)
	if len(r.free) > 0 {
		index = r.free[len(r.free)-1]
	}
	if index >= r.maxWork {
		return &RequestError{fmt.Sprintf("router: more than maxWorkers (%d) workers", r.maxWork)}
	}
	capacity := w.CapacityBlocks
	if capacity == 0 {
		capacity = r.capacity
	}
	if err := r.c.check(r.c.call("setWorker", i32(index), i32(role), i32(capacity)), "setWorker"); err != nil {
		return err
	}
	if index == len(r.ids) {
		r.ids = append(r.ids, w.ID)
	} else {
		r.free = r.free[:len(r.free)-1]
		r.ids[index] = w.ID
	}
	r.byID[w.ID] = index
	return nil
}

// RemoveWorker forgets a worker and its cached blocks.
func (r *Router) RemoveWorker(id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	index, err := r.indexOf(id)
	if err != nil {
		return err
	}
	if err := r.c.check(r.c.call("setWorker", i32(index), 0, 0), "setWorker"); err != nil {
		return err
	}
	delete(r.byID, id)
	r.ids[index] = ""
	r.free = append(r.free, index)
	return nil
}

func (r *Router) indexOf(id string) (int, error) {
	i, ok := r.byID[id]
	if !ok {
		return 0, &RequestError{fmt.Sprintf(`router: unknown worker "%s"`, id)}
	}
	return i, nil
}

// SetLoad reports a worker's active tokens, for the KV-aware worker choice.
func (r *Router) SetLoad(id string, activePrefillTokens, activeDecodeTokens float64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	i, err := r.indexOf(id)
	if err != nil {
		return err
	}
	return r.c.check(r.c.call("setLoad", i32(i), f64(activePrefillTokens), f64(activeDecodeTokens)), "setLoad")
}

// SetSignals reports cluster-wide signals: queued prefill requests and the request rate.
func (r *Router) SetSignals(prefillQueue, qps float64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.c.check(r.c.call("setSignals", f64(prefillQueue), f64(qps)), "setSignals")
}

// Hash returns the chained block hashes of token ids under this router's block size and root.
func (r *Router) Hash(tokens []uint32) ([]uint64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.c.hashTokens(tokens)
}

// HashText returns the chained 64-byte block hashes of a text prompt under this router's root.
func (r *Router) HashText(text string) ([]uint64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.c.hashText([]byte(text))
}

func (c *core) hashTokens(tokens []uint32) ([]uint64, error) {
	if err := c.writeU32s(tokens, "hashTokens"); err != nil {
		return nil, err
	}
	n, err := c.checkCount(c.call("hashTokens", i32(len(tokens))), "hashTokens")
	if err != nil {
		return nil, err
	}
	return c.u64s(c.hashes, n), nil
}

func (c *core) hashText(text []byte) ([]uint64, error) {
	if err := c.writeBytes(text, "hashText"); err != nil {
		return nil, err
	}
	n, err := c.checkCount(c.call("hashText", i32(len(text))), "hashText")
	if err != nil {
		return nil, err
	}
	return c.u64s(c.hashes, n), nil
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
	x.Why = why(r.table.Kind, d, x.Scores)
	return x, nil
}

func (r *Router) oslHat(req *Request) (float64, error) {
	if req.OSLHat != nil {
		if !(*req.OSLHat >= 0) {
			return 0, &RequestError{"route: oslHat must be a number ≥ 0, got " + jsNumber(*req.OSLHat)}
		}
		return *req.OSLHat, nil
	}
	if req.OSLClassName != "" || req.OSLClassIndex != nil {
		return r.classLength(req)
	}
	if r.table.OSLModel {
		return -1, nil
	}
	for _, f := range r.table.Features {
		if f == "osl_hat" {
			return 0, &RequestError{"route: this table uses osl_hat and has no output-length model: give oslHat or oslClass"}
		}
	}
	return 0, nil
}

// classLength is the representative length of the request's output-length class, with the Node host's messages
// (src/router.ts oslHatOf; the class shown as JSON.stringify shows it).
func (r *Router) classLength(req *Request) (float64, error) {
	if req.OSLClassName != "" && req.OSLClassIndex != nil {
		return 0, &RequestError{"route: give OSLClassName or OSLClassIndex, not both"}
	}
	names := r.table.OSLClassNames
	if len(names) == 0 {
		return 0, &RequestError{"route: oslClass given but the table has no osl_classes"}
	}
	i, shown := slices.Index(names, req.OSLClassName), jsQuote(req.OSLClassName, false)
	if req.OSLClassIndex != nil {
		i, shown = *req.OSLClassIndex, strconv.Itoa(*req.OSLClassIndex)
	}
	if i < 0 || i >= len(names) {
		classes := strings.Join(names, ", ")
		return 0, &RequestError{"route: unknown oslClass " + shown + " (table classes: " + classes + ")"}
	}
	return r.table.OSLClassRepresentative[i], nil
}

func (r *Router) run(req *Request, record bool) error {
	c := r.c
	flags := 0
	if record {
		flags |= flagRecord
	}
	given := 0
	if req.Tokens != nil {
		given++
	}
	if req.text || req.Text != "" {
		given++
	}
	if req.BlockHashes != nil {
		given++
	}
	if given != 1 {
		return &RequestError{"route: give exactly one of tokens, text or blockHashes"}
	}
	var length int
	switch {
	case req.text || req.Text != "":
		if err := c.writeBytes([]byte(req.Text), "route"); err != nil {
			return err
		}
		length, flags = len(req.Text), flags|flagText
	case req.BlockHashes != nil:
		if err := c.writeU64s(req.BlockHashes, "route"); err != nil {
			return err
		}
		length, flags = len(req.BlockHashes), flags|flagHashes
	default:
		if err := c.writeU32s(req.Tokens, "route"); err != nil {
			return err
		}
		length = len(req.Tokens)
	}
	pinned := -1
	if req.DecodeWorker != "" {
		i, err := r.indexOf(req.DecodeWorker)
		if err != nil {
			return err
		}
		pinned = i
	}
	osl, err := r.oslHat(req)
	if err != nil {
		return err
	}
	turn := req.Turn
	if turn == 0 {
		turn = 1
	}
	ctxTokens := -1.0
	if req.ContextTokens != nil {
		ctxTokens = *req.ContextTokens
	}
	q := c.request
	c.setF64(q, rLength, float64(length))
	c.setF64(q, rFlags, float64(flags))
	c.setF64(q, rPromptTokens, float64(req.PromptTokens))
	c.setF64(q, rOslHat, osl)
	c.setF64(q, rTurn, float64(turn))
	c.setF64(q, rPinnedDecode, float64(pinned))
	c.setF64(q, rContextTokens, ctxTokens)
	c.setF64(q, rPrevOutputTokens, req.PrevOutputTokens)
	c.setF64(q, rMaxTokens, req.MaxTokens)
	return c.check(c.call("route"), "route")
}

func (r *Router) name(i int) string {
	if i >= 0 && i < len(r.ids) {
		return r.ids[i]
	}
	return ""
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
	return d
}

func why(kind string, d Decision, scores []float64) string {
	path := "local prefill"
	if d.Path == "remote" {
		path = "remote prefill"
	}
	switch {
	case d.Reason == "no-prefill-worker":
		return "the policy said remote, but no prefill worker is registered: " + path
	case d.Reason == "first-turn":
		return "PPD: turn 1 always goes through a prefill worker: " + path
	case isLearned(kind):
		c := max(d.Cluster, 0)
		measure, noun := "log-likelihood", "component"
		if kind == "kmeans" {
			measure, noun = "squared distance", "centroid"
		}
		score := "?"
		if c < len(scores) {
			score = fmt.Sprintf("%.4f", scores[c])
		}
		return fmt.Sprintf("nearest %s is cluster %d (%s %s) whose bit is %d: %s", noun, c, measure, score, d.Bit, path)
	case kind == "ppd":
		return fmt.Sprintf("PPD: grid cell %d holds %d: %s", d.Cluster, d.Bit, path)
	}
	return fmt.Sprintf("%s rule gives %d: %s", kind, d.Bit, path)
}
