package main

// The pool the EPP picks from: one router (the Go binding over core.wasm) whose workers are the endpoints file's
// entries, each with its KV-event feed and the load the picker has put on it (tokens held from pick to answer,
// the same fields dolphin serve holds: prefill tokens until the first byte, decode tokens until the end).

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	dolphin "github.com/dolphin-routing/dolphin-routing/bindings/go"
)

type member struct {
	ep       Endpoint
	ingest   *Ingest
	stop     context.CancelFunc
	inflight int
	down     bool    // out of rotation: its /health failed (health.go)
	prefill  float64 // active prefill tokens
	decode   float64 // active decode tokens
}

// Pool is the endpoints and their router.
type Pool struct {
	mu         sync.Mutex
	router     *dolphin.Router
	members    map[string]*member
	order      []string // addresses in file order
	blockSize  int
	maxEntries int
	metrics    *Metrics
	log        *slog.Logger
	feeds      bool          // subscribe to KV events (precise mode)
	healthy    time.Duration // how often each endpoint's /health is asked; 0: never (every endpoint is up)
	client     *http.Client
	tokenTurn  int
	waits      prefillWaits // prefill holds waiting for KV events (prefill.go)
}

// NewPool makes an empty pool over a router.
func NewPool(r *dolphin.Router, blockSize, maxEntries int, feeds bool, log *slog.Logger) *Pool {
	return &Pool{router: r, members: map[string]*member{}, blockSize: blockSize, maxEntries: maxEntries, feeds: feeds, log: log}
}

// Apply makes the pool the file's endpoints: removed ones leave the router (their blocks forgotten, their feed
// stopped), new ones join it, changed ones (role or KV endpoints) are replaced.
func (p *Pool) Apply(eps []Endpoint) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	want := map[string]Endpoint{}
	for _, e := range eps {
		want[e.Address] = e
	}
	for addr, m := range p.members {
		if e, ok := want[addr]; !ok || e.Role() != m.ep.Role() || e.KVEvents != m.ep.KVEvents || e.KVEventsReplay != m.ep.KVEventsReplay {
			m.stop()
			if !m.down {
				if err := p.router.RemoveWorker(addr); err != nil {
					return err
				}
			}
			delete(p.members, addr)
			p.log.Info("endpoint removed", "endpoint", addr)
		}
	}
	p.order = p.order[:0]
	for _, e := range eps {
		p.order = append(p.order, e.Address)
		if _, ok := p.members[e.Address]; ok {
			continue
		}
		if err := p.router.AddWorker(dolphinWorker(e)); err != nil {
			return err
		}
		ctx, stop := context.WithCancel(context.Background())
		m := &member{ep: e, ingest: NewIngest(p.blockSize, p.maxEntries), stop: stop}
		p.members[e.Address] = m
		if p.feeds && e.KVEvents != "" {
			go p.feed(ctx, e.Address, m)
		}
		if p.healthy > 0 {
			go p.health(ctx, e.Address, m, p.healthy, p.client)
		}
		p.log.Info("endpoint added", "endpoint", e.Address, "role", e.Role(), "kv_events", e.KVEvents)
	}
	return nil
}

func dolphinWorker(e Endpoint) dolphin.Worker { return dolphin.Worker{ID: e.Address, Role: e.Role()} }

// Close stops every feed.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range p.members {
		m.stop()
	}
}

// current reports whether addr is (still) that member and in rotation: a feed applies events only then.
func (p *Pool) current(addr string, m *member) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.members[addr] == m && !m.down
}

// Roles lists the members' roles by address.
func (p *Pool) Roles() map[string]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]string{}
	for a, m := range p.members {
		if !m.down {
			out[a] = m.ep.Role()
		}
	}
	return out
}

// Tokenizer is the endpoint whose /tokenize the next request uses (round robin over the members, file order).
func (p *Pool) Tokenizer() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	up := []string{}
	for _, a := range p.order {
		if m := p.members[a]; m != nil && !m.down {
			up = append(up, a)
		}
	}
	if len(up) == 0 {
		return ""
	}
	p.tokenTurn++
	return up[p.tokenTurn%len(up)]
}

// Inflight is the number of requests picked for addr and not yet done.
func (p *Pool) Inflight(addr string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if m := p.members[addr]; m != nil {
		return m.inflight
	}
	return 0
}

// Hold puts load on an endpoint until the returned function runs (once); requests counts the request itself.
func (p *Pool) Hold(addr string, prefillTokens, decodeTokens float64, request bool) func() {
	p.add(addr, prefillTokens, decodeTokens, request, 1)
	var once sync.Once
	return func() { once.Do(func() { p.add(addr, prefillTokens, decodeTokens, request, -1) }) }
}

func (p *Pool) add(addr string, prefillTokens, decodeTokens float64, request bool, sign float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.members[addr]
	if m == nil {
		return
	}
	m.prefill = max(0, m.prefill+sign*prefillTokens)
	m.decode = max(0, m.decode+sign*decodeTokens)
	if request {
		m.inflight += int(sign)
	}
	_ = p.router.SetLoad(addr, m.prefill, m.decode)
}

// Gauges are the pool's state for the metrics.
func (p *Pool) Gauges() PoolGauges {
	p.mu.Lock()
	g := PoolGauges{Workers: map[[2]string]int{}, Index: map[string]int{}, PerWorker: map[string]int{}}
	for a, m := range p.members {
		state := "healthy"
		if m.down {
			state = "down"
		}
		g.Workers[[2]string{m.ep.Role(), state}]++
		g.PerWorker[a] = m.inflight
		g.Inflight += m.inflight
	}
	p.mu.Unlock()
	for a := range g.PerWorker {
		if n, err := p.router.Index().Count(a); err == nil { // a down endpoint is not in the router: no series
			g.Index[a] = n
		}
	}
	t := p.router.Table()
	g.Checksum, g.Kind = t.Checksum, t.Kind
	return g
}

// Order is the members' addresses in file order.
func (p *Pool) Order() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.order...)
}
