package main

// One engine's events applied to the router's index (kv-ingest.ts's EventIngest, in Go): the rehash of stored
// blocks under the router's scheme and the engine → router map that finds removed blocks again.
//
// The core hashes from the root only (setRoot takes model ‖ salt bytes, not a hash), so a run stored under a
// parent is rehashed from its whole prefix: the map keeps each mapped block's tokens and parent, the prefix is
// rebuilt from them and hashed in one core call, and the run's hashes are the last ones. A run whose ancestry is
// no longer in the map (evicted past maxEntries) is unmapped, as Node's is when its direct parent is.
//
// Tiers as kv-ingest.ts: a lower-tier (CPU) BlockStored without token ids is matched by hash only, through the map
// when the device stored the block before with its tokens, as it comes when the engine's hashes are the router's,
// and otherwise unmapped.

import dolphin "github.com/dolphin-routing/dolphin-routing/bindings/go"

// IngestCounts are the blocks one batch stored (Lower of them in a lower tier), removed or could not map, the
// blocks of events in a medium with no tier (Untiered), and the clears; Hashes are the router hashes of the blocks
// stored on the device (what ends a prefill's hold: prefill.go).
type IngestCounts struct {
	Stored, Removed, Cleared, Unmapped, Lower, Untiered int
	Hashes                                              []uint64
}

type mappedBlock struct {
	ours   uint64
	parent uint64
	root   bool // no parent: the run started at the root
	tokens []uint32
}

// Ingest maps one engine's block hashes to the router's.
type Ingest struct {
	blockSize  int
	maxEntries int
	sameScheme bool
	givenHash  bool // the device's events came without token ids: the engine's hashes are taken as the router's
	blocks     map[uint64]*mappedBlock
	order      []uint64 // insertion order, for eviction
}

// NewIngest makes an engine's ingest (blockSize the router's; maxEntries bounds the map).
func NewIngest(blockSize, maxEntries int) *Ingest {
	return &Ingest{blockSize: blockSize, maxEntries: maxEntries, blocks: map[uint64]*mappedBlock{}}
}

// Reset forgets the map (the engine restarted).
func (g *Ingest) Reset() {
	g.blocks = map[uint64]*mappedBlock{}
	g.order = nil
	g.sameScheme = false
	g.givenHash = false
}

// Apply applies one batch to the worker's entries of the router's index.
func (g *Ingest) Apply(r *dolphin.Router, worker string, events []KVEvent) (IngestCounts, error) {
	var n IngestCounts
	x := r.Index()
	for _, e := range events {
		if e.Kind == "cleared" {
			if err := x.Clear(worker); err != nil {
				return n, err
			}
			g.blocks = map[uint64]*mappedBlock{}
			g.order = nil
			n.Cleared++
			continue
		}
		tier, ok := dolphin.TierOfMedium(e.Medium)
		if !ok {
			n.Untiered += len(e.Hashes)
			continue
		}
		if e.Kind == "removed" {
			hashes := e.Hashes
			if !g.sameScheme && !g.givenHash {
				hashes = g.translateRemoved(e.Hashes)
			}
			if err := x.RemoveTier(worker, hashes, tier); err != nil {
				return n, err
			}
			n.Removed += len(e.Hashes)
			continue
		}
		var ours []uint64
		switch {
		case g.sameScheme || g.givenHash:
			ours = e.Hashes
		case len(e.TokenIDs) > 0:
			var err error
			if ours, err = g.rehash(r, e); err != nil {
				return n, err
			}
		case tier == "GPU":
			g.givenHash = true
			ours = e.Hashes
		default:
			ours = g.translateKnown(e.Hashes)
		}
		if len(ours) > 0 {
			if err := x.StoreTier(worker, ours, tier); err != nil {
				return n, err
			}
		}
		n.Stored += len(ours)
		n.Unmapped += len(e.Hashes) - len(ours)
		if tier != "GPU" {
			n.Lower += len(ours)
		} else {
			n.Hashes = append(n.Hashes, ours...)
		}
	}
	return n, nil
}

// translateKnown is the router's hashes of the blocks whose engine hash the map knows; the others are left out.
func (g *Ingest) translateKnown(engine []uint64) []uint64 {
	var out []uint64
	for _, h := range engine {
		if b := g.blocks[h]; b != nil {
			out = append(out, b.ours)
		}
	}
	return out
}

// rehash is the router's hashes of a stored run, or nil when its block size or ancestry does not allow them.
func (g *Ingest) rehash(r *dolphin.Router, e KVEvent) ([]uint64, error) {
	blocks := len(e.Hashes)
	if e.BlockSize != g.blockSize || len(e.TokenIDs) != blocks*g.blockSize {
		return nil, nil
	}
	prefix := []uint32{}
	if e.Parent != nil {
		var chain [][]uint32
		for at, ok := *e.Parent, true; ok; {
			b := g.blocks[at]
			if b == nil || len(chain) > len(g.blocks) { // unknown ancestry, or a cycle in bad events
				return nil, nil
			}
			chain = append(chain, b.tokens)
			at, ok = b.parent, !b.root
		}
		for i := len(chain) - 1; i >= 0; i-- {
			prefix = append(prefix, chain[i]...)
		}
	}
	all, err := r.Hash(append(prefix, e.TokenIDs...))
	if err != nil {
		return nil, nil // a prefix longer than the router takes: these blocks cannot be mapped
	}
	ours := all[len(all)-blocks:]
	if e.Parent == nil && equalHashes(ours, e.Hashes) {
		g.sameScheme = true
		g.Reset()
		g.sameScheme = true
		return ours, nil
	}
	for i, h := range e.Hashes {
		b := &mappedBlock{ours: ours[i], tokens: e.TokenIDs[i*g.blockSize : (i+1)*g.blockSize]}
		if i > 0 {
			b.parent = e.Hashes[i-1]
		} else if e.Parent != nil {
			b.parent = *e.Parent
		} else {
			b.root = true
		}
		if _, had := g.blocks[h]; !had {
			g.order = append(g.order, h)
		}
		g.blocks[h] = b // a re-stored block keeps its first place in the order
	}
	for len(g.blocks) > g.maxEntries && len(g.order) > 0 {
		delete(g.blocks, g.order[0])
		g.order = g.order[1:]
	}
	return ours, nil
}

func equalHashes(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func (g *Ingest) translateRemoved(engine []uint64) []uint64 {
	out := make([]uint64, len(engine))
	for i, h := range engine {
		out[i] = h
		if b := g.blocks[h]; b != nil {
			out[i] = b.ours // kept in the map: a child stored later still needs it in its ancestry
		}
	}
	return out
}
