package main

// Endpoint health, as dolphin serve's active checks keep workers in rotation: each endpoint's GET /health is asked
// every interval; downAfter failures in a row (a refused connection, no answer within max(interval, 1 s), a status
// other than 200) take it
// out of the router (its blocks forgotten, its KV events ignored meanwhile, as dolphin serve does), and one success
// puts it back with an empty index. A pool whose decode endpoints are all down answers 503.

import (
	"context"
	"net/http"
	"time"
)

const (
	downAfter    = 2
	probeTimeout = time.Second // at least: a busy machine's slow answer is not a failure
)

// health polls one member until ctx ends.
func (p *Pool) health(ctx context.Context, addr string, m *member, every time.Duration, client *http.Client) {
	t := time.NewTicker(every)
	defer t.Stop()
	fails := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ok := probe(ctx, client, "http://"+addr+"/health", max(every, probeTimeout))
		if ok {
			fails = 0
		} else {
			fails++
		}
		switch {
		case ok && !p.isHealthy(m):
			p.setHealthy(addr, m, true)
		case !ok && fails >= downAfter && p.isHealthy(m):
			p.setHealthy(addr, m, false)
		}
	}
}

func probe(ctx context.Context, client *http.Client, url string, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	res, err := client.Do(req)
	if err != nil {
		return false
	}
	res.Body.Close()
	return res.StatusCode == http.StatusOK
}

func (p *Pool) isHealthy(m *member) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !m.down
}

// setHealthy moves a member out of the router or back in (with an empty index and a fresh map of its hashes).
func (p *Pool) setHealthy(addr string, m *member, up bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.members[addr] != m || m.down == !up {
		return
	}
	var err error
	if up {
		err = p.router.AddWorker(dolphinWorker(m.ep))
		m.ingest.Reset()
		p.log.Info("endpoint back in rotation", "endpoint", addr)
	} else {
		err = p.router.RemoveWorker(addr)
		p.log.Warn("endpoint out of rotation: its /health failed", "endpoint", addr)
	}
	if err != nil {
		p.log.Error("endpoint rotation change failed", "endpoint", addr, "error", err.Error())
		return
	}
	m.down = !up
	if !up {
		m.prefill, m.decode = 0, 0
	}
}
