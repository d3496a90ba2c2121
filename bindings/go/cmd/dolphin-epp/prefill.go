package main

// When a request's prefill load ends. dolphin serve holds a request's prefill tokens on an engine until the
// engine's first byte (the prefill answer on the remote path, the first streamed byte on the decode engine); the
// picker does not see those bytes unless Envoy sends it the response headers, which costs a round trip to the
// picker per request before the client gets its answer (about 0.3 ms at p50 in dolphin bench epp). In precise mode
// the engines say it anyway: an engine publishes BlockStored for a prompt's blocks in the step that computes them,
// so the prompt's last block that the engine will cache (block ⌊(isl − 1) / block size⌋, counted from 1: vLLM
// caches at most isl − 1 tokens of a prompt) stored on that engine means its prefill is done, at no cost to the
// request. The hold ends at the first of: that event; the response headers (when Envoy sends them); the request's
// stream ending (always: an event lost or never coming, a text prompt whose blocks no engine publishes, approximate
// mode). A prompt with no such block (shorter than a block and one token), or with it already in the engine's
// index when picked, holds nothing: there is no prefill left to wait for (at most a block of tokens).

import (
	"sync"
	"sync/atomic"
)

// prefillWait is one prefill hold waiting for an engine to store a block.
type prefillWait struct {
	addr    string
	hash    uint64
	release func()
}

// prefillWaits are the holds waiting for KV events, by endpoint and router block hash.
type prefillWaits struct {
	mu      sync.Mutex
	by      map[string]map[uint64][]*prefillWait
	batches atomic.Uint64 // stored batches applied so far: a change since a pick may have stored its block
}

// lastCacheable is the index of the prompt's last block an engine caches after its prefill, or -1 for none.
func lastCacheable(isl, blockSize, blocks int) int {
	return min((isl-1)/blockSize, blocks) - 1
}

// waitStored makes release run when addr stores hash; the returned remove takes the wait out (the hold ended first).
func (w *prefillWaits) waitStored(addr string, hash uint64, release func()) (remove func()) {
	pw := &prefillWait{addr: addr, hash: hash, release: release}
	w.mu.Lock()
	if w.by == nil {
		w.by = map[string]map[uint64][]*prefillWait{}
	}
	if w.by[addr] == nil {
		w.by[addr] = map[uint64][]*prefillWait{}
	}
	w.by[addr][hash] = append(w.by[addr][hash], pw)
	w.mu.Unlock()
	return func() {
		w.mu.Lock()
		list := w.by[addr][hash]
		for i, x := range list {
			if x == pw {
				list = append(list[:i], list[i+1:]...)
				break
			}
		}
		if len(list) == 0 {
			delete(w.by[addr], hash)
		} else {
			w.by[addr][hash] = list
		}
		w.mu.Unlock()
	}
}

// stored runs the releases waiting for any of hashes on addr (called once they are in the index) and reports how
// many there were.
func (w *prefillWaits) stored(addr string, hashes []uint64) int {
	w.batches.Add(1)
	var due []*prefillWait
	w.mu.Lock()
	if m := w.by[addr]; len(m) > 0 {
		for _, h := range hashes {
			if list, ok := m[h]; ok {
				due = append(due, list...)
				delete(m, h)
			}
		}
	}
	w.mu.Unlock()
	for _, pw := range due {
		pw.release()
	}
	return len(due)
}

// pending is the number of holds waiting (for the tests and the metrics).
func (w *prefillWaits) pending() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, m := range w.by {
		for _, list := range m {
			n += len(list)
		}
	}
	return n
}

// How a prefill hold ended (dolphin_epp_prefill_releases_total{signal}).
const (
	signalKVEvents        = "kv_events"
	signalResponseHeaders = "response_headers"
	signalStreamEnd       = "stream_end"
	signalNothing         = "nothing_to_wait" // no block left to compute: nothing held
)

// HoldPrefill puts a request's prefill tokens on addr; the returned end(signal) ends the hold (once). matched is
// the prompt's blocks addr held when picked; since is waits.batches read before the pick.
func (p *Pool) HoldPrefill(addr string, tokens float64, pick Pick, matched int, since uint64) func(signal string) {
	last := -1
	if pick.Hashes != nil {
		last = lastCacheable(int(pick.Decision.Features.ISL), p.blockSize, len(pick.Hashes))
	}
	if pick.Hashes != nil && matched > last {
		p.metrics.PrefillReleases.WithLabelValues(signalNothing).Inc()
		return func(string) {}
	}
	release := p.Hold(addr, tokens, 0, false)
	remove := func() {}
	var once sync.Once
	end := func(signal string) {
		once.Do(func() {
			remove()
			release()
			p.metrics.PrefillReleases.WithLabelValues(signal).Inc()
		})
	}
	if pick.Hashes == nil {
		return end // routed on text: no engine publishes these blocks
	}
	remove = p.waits.waitStored(addr, pick.Hashes[last], func() { end(signalKVEvents) })
	if p.waits.batches.Load() != since {
		// a batch came in between the pick and the wait: it may have stored the block already
		if m, err := p.router.Index().Match(pick.Hashes[:last+1]); err == nil && m[addr] > last {
			end(signalKVEvents)
		}
	}
	return end
}
