// Package dolphin is the dolphin-routing core (core.wasm, the module the Node and Python packages run) from Go,
// on wazero (pure Go, no cgo). Tables, hashing, matching, worker choice and the policies all happen in the core;
// this package copies inputs into its memory, reads the decision record and maps error codes to the messages
// generated from spec/abi.json.
//
// A Router is safe for concurrent use: one mutex guards its core instance (see docs/bindings.md for why a pool of
// instances would not be: each instance holds its own prefix index).
package dolphin

// The front of the API a program uses: Load and its Options, the Router and its table. The rest of the API:
// workers.go (workers, their loads, the cluster signals), request.go (Request), decision.go (Route, Explain,
// Decision), hashing.go (a router's block hashes), index.go (the prefix index, stand-alone hashing), tables.go
// (TableInfo, DescribeTable), errors.go (the errors).

import (
	"fmt"
	"sync"
)

// Options configure Load. Zero values mean the Node defaults.
type Options struct {
	Workers         []Worker
	BlockSize       int // tokens per block, 1–4096; 0: 16
	Model, Salt     string
	HashScheme      string  // block-hash scheme: "xxh64-chain" (""), or "llm-d-cbor-fnv" (llm-d-kv-cache's; tokens only, no salt)
	HashSeed        string  // llm-d's HashSeed (vLLM's PYTHONHASHSEED), for "llm-d-cbor-fnv"
	RecordDecisions bool    // store each routed prompt on the chosen workers (when no KV events feed the index)
	CapacityBlocks  int     // default per-worker index capacity; 0: 31,250
	LoadScale       float64 // weight of prefill work against decode load; 0: the core's default (1)
	// TierWeights: what a block held only in a lower cache tier counts for against a device hit (0–1), by tier
	// name ("CPU"; "GPU" only 1); absent tiers keep the core's defaults (CPU 0.8)
	TierWeights     map[string]float64
	MaxWorkers      int // worker slots; 0: 1024
	MaxPromptTokens int // longest prompt in tokens (text: bytes / 4); 0: 1,048,576
	IndexBlocks     int // index pool shared by all workers; 0: max(1,048,576, sum of capacities)
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
	if err := c.setScheme(opts.HashScheme, opts.HashSeed, opts.Model, opts.Salt); err != nil {
		c.close()
		return nil, err
	}
	if opts.LoadScale != 0 {
		if err := c.check(c.call("setLoadScale", f64(opts.LoadScale)), "setLoadScale"); err != nil {
			return nil, err
		}
	}
	if err := c.setTierWeights(opts.TierWeights); err != nil {
		c.close()
		return nil, err
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
