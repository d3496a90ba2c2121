package main

// One engine's KV events over ZMQ (vLLM's kv_events_config.endpoint, a PUB socket): frames [topic, sequence
// (8 bytes big-endian), payload], each payload an EventBatch applied through the engine's Ingest. As dolphin serve
// (src/serve/proxy/kv-feed.ts): a sequence that goes back means the engine restarted, so its index and map are
// reset; a sequence that skips counts the batches missed. Replaying what vLLM buffers (its replay socket) is not
// done here yet: a gap stays a gap until the blocks are stored again.

import (
	"context"
	"encoding/binary"
	"time"

	"github.com/go-zeromq/zmq4"
)

const redialEvery = 200 * time.Millisecond

func (p *Pool) feed(ctx context.Context, addr string, m *member) {
	var last *uint64
	for ctx.Err() == nil {
		sub := zmq4.NewSub(ctx, zmq4.WithDialerRetry(redialEvery), zmq4.WithDialerMaxRetries(-1), zmq4.WithAutomaticReconnect(true))
		if err := sub.Dial(m.ep.KVEvents); err != nil {
			_ = sub.Close()
			if ctx.Err() == nil {
				p.log.Warn("KV event subscription failed", "worker", addr, "endpoint", m.ep.KVEvents, "error", err.Error())
				time.Sleep(redialEvery)
			}
			continue
		}
		_ = sub.SetOption(zmq4.OptionSubscribe, "")
		p.log.Info("subscribed to KV events", "worker", addr, "endpoint", m.ep.KVEvents)
		done := make(chan struct{})
		go func() {
			select {
			case <-ctx.Done():
				_ = sub.Close()
			case <-done:
			}
		}()
		for {
			msg, err := sub.Recv()
			if err != nil {
				if ctx.Err() == nil {
					p.log.Warn("KV event subscription ended", "worker", addr, "error", err.Error())
				}
				break
			}
			last = p.onBatch(addr, m, msg.Frames, last)
		}
		close(done)
		_ = sub.Close()
	}
}

// onBatch applies one frame set and returns the sequence number now last seen.
func (p *Pool) onBatch(addr string, m *member, frames [][]byte, last *uint64) *uint64 {
	if len(frames) == 0 {
		return last
	}
	if len(frames) >= 2 && len(frames[len(frames)-2]) == 8 {
		seq := binary.BigEndian.Uint64(frames[len(frames)-2])
		if last != nil && seq <= *last {
			p.metrics.KVRestarts.WithLabelValues(addr).Inc()
			p.log.Warn("KV event sequence started over (engine restarted): index reset", "worker", addr, "last", *last, "now", seq)
			_ = p.router.Index().Clear(addr)
			m.ingest.Reset()
		} else if last != nil && seq > *last+1 {
			p.metrics.KVGaps.WithLabelValues(addr).Add(float64(seq - *last - 1))
			p.log.Warn("KV event batches missed", "worker", addr, "from", *last+1, "to", seq-1)
		}
		last = &seq
	}
	if !p.current(addr, m) {
		return last // out of rotation (or out of the file): the index is rebuilt from events after it is back
	}
	events, err := DecodeEventBatch(frames[len(frames)-1])
	if err != nil {
		p.metrics.KVEventErrors.WithLabelValues(addr).Inc()
		p.log.Debug("KV event batch rejected", "worker", addr, "error", err.Error())
		return last
	}
	p.ApplyEvents(addr, m, events, "zmq")
	return last
}

// ApplyEvents applies decoded events to a member's index entries, counted.
func (p *Pool) ApplyEvents(addr string, m *member, events []KVEvent, source string) {
	n, err := m.ingest.Apply(p.router, addr, events)
	if err != nil {
		p.log.Debug("KV events not applied", "worker", addr, "error", err.Error())
	}
	if n.Stored > 0 {
		p.metrics.KVEvents.WithLabelValues("stored_blocks", source, addr).Add(float64(n.Stored))
	}
	if n.Removed > 0 {
		p.metrics.KVEvents.WithLabelValues("removed_blocks", source, addr).Add(float64(n.Removed))
	}
	if n.Cleared > 0 {
		p.metrics.KVEvents.WithLabelValues("cleared", source, addr).Add(float64(n.Cleared))
	}
	if n.Unmapped > 0 {
		p.metrics.KVUnmapped.WithLabelValues(addr).Add(float64(n.Unmapped))
	}
}
