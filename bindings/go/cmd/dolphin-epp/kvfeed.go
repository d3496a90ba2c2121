package main

// One engine's KV events over ZMQ (vLLM's kv_events_config.endpoint, a PUB socket): frames [topic, sequence
// (8 bytes big-endian), payload], each payload an EventBatch applied through the engine's Ingest. As dolphin serve
// (src/serve/proxy/kv-feed.ts): a sequence that goes back means the engine restarted, so its index and map are
// reset; a sequence that skips counts the batches missed. With a replay endpoint (vLLM's replay_endpoint, a ROUTER
// socket: send [empty, start sequence (8 bytes big-endian)], receive [empty, topic, seq, payload] per buffered batch
// from it on, then [empty, empty, -1, empty]), what the engine still buffers is asked for on subscribe, after a gap
// and after a restart; live batches wait meanwhile, and those the replay gave are skipped.

import (
	"context"
	"encoding/binary"
	"errors"
	"time"

	"github.com/go-zeromq/zmq4"
)

const (
	redialEvery   = 200 * time.Millisecond
	replayTimeout = 3 * time.Second // for each replayed batch (or the end marker) to arrive
	pendingLive   = 20_000          // live batches kept while a replay runs
)

type feedState struct {
	last  *uint64       // the last sequence number applied
	live  chan [][]byte // live batches, queued while a replay runs
	check int           // queued live batches to compare with what the last replay gave
}

func (p *Pool) feed(ctx context.Context, addr string, m *member) {
	st := &feedState{}
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
		live := make(chan [][]byte, pendingLive)
		st.live = live
		go func() {
			defer close(live)
			for {
				msg, err := sub.Recv()
				if err != nil {
					if ctx.Err() == nil {
						p.log.Warn("KV event subscription ended", "worker", addr, "error", err.Error())
					}
					return
				}
				live <- msg.Frames
			}
		}()
		if m.ep.KVEventsReplay != "" {
			p.replay(ctx, addr, m, st, 0, "subscribe")
		}
		p.drain(ctx, addr, m, st, live)
		_ = sub.Close()
	}
}

// drain applies live batches until the subscription ends or ctx does.
func (p *Pool) drain(ctx context.Context, addr string, m *member, st *feedState, live <-chan [][]byte) {
	for {
		select {
		case <-ctx.Done():
			return
		case frames, ok := <-live:
			if !ok {
				return
			}
			p.onLive(ctx, addr, m, st, frames)
		}
	}
}

func sequenceOf(frames [][]byte) (uint64, bool) {
	if len(frames) >= 2 && len(frames[len(frames)-2]) == 8 {
		return binary.BigEndian.Uint64(frames[len(frames)-2]), true
	}
	return 0, false
}

// onLive handles one live batch: a restart resets the engine's index, a gap is counted (and replayed when the
// engine has a replay socket), a batch a replay already gave is skipped.
func (p *Pool) onLive(ctx context.Context, addr string, m *member, st *feedState, frames [][]byte) {
	seq, has := sequenceOf(frames)
	if st.check > 0 {
		st.check--
		if has && st.last != nil && seq <= *st.last {
			return // queued while the replay ran, and given by it
		}
	}
	if has && st.last != nil {
		replays := m.ep.KVEventsReplay != ""
		switch {
		case seq <= *st.last:
			p.metrics.KVRestarts.WithLabelValues(addr).Inc()
			p.log.Warn("KV event sequence started over (engine restarted): index reset", "worker", addr, "last", *st.last, "now", seq)
			if p.current(addr, m) {
				_ = p.router.Index().Clear(addr)
			}
			m.ingest.Reset()
			st.last = nil
			if replays && seq > 0 {
				p.replay(ctx, addr, m, st, 0, "restart") // the batches the restarted engine sent before this one
				if st.last != nil && seq <= *st.last {
					return
				}
			}
		case seq > *st.last+1:
			p.metrics.KVGaps.WithLabelValues(addr).Add(float64(seq - *st.last - 1))
			p.log.Warn("KV event batches missed", "worker", addr, "from", *st.last+1, "to", seq-1, "replay", replays)
			if replays {
				p.replay(ctx, addr, m, st, *st.last+1, "gap")
				if st.last != nil && seq <= *st.last {
					return
				}
			}
		}
	}
	p.apply(addr, m, st, frames)
}

// apply decodes one batch into the index (when the engine is in rotation) and notes its sequence number.
func (p *Pool) apply(addr string, m *member, st *feedState, frames [][]byte) {
	if len(frames) == 0 {
		return
	}
	if seq, ok := sequenceOf(frames); ok {
		st.last = &seq
	}
	if !p.current(addr, m) {
		return // out of rotation (or out of the file): the index is rebuilt from events after it is back
	}
	events, err := DecodeEventBatch(frames[len(frames)-1])
	if err != nil {
		p.metrics.KVEventErrors.WithLabelValues(addr).Inc()
		p.log.Debug("KV event batch rejected", "worker", addr, "error", err.Error())
		return
	}
	p.ApplyEvents(addr, m, events, "zmq")
}

// replay asks the engine's replay socket for every batch it buffers from `from` on and applies them in order. It
// never fails the feed: a failed replay is logged and counted, and the live batches go on.
func (p *Pool) replay(ctx context.Context, addr string, m *member, st *feedState, from uint64, reason string) {
	outcome, batches := "ok", 0
	err := func() error {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		dealer := zmq4.NewDealer(ctx, zmq4.WithDialerTimeout(replayTimeout))
		defer dealer.Close()
		if err := dealer.Dial(m.ep.KVEventsReplay); err != nil {
			return err
		}
		start := make([]byte, 8)
		binary.BigEndian.PutUint64(start, from)
		if err := dealer.Send(zmq4.NewMsgFrom([]byte{}, start)); err != nil {
			return err
		}
		var first *uint64
		for {
			msg, err := recvWithin(dealer, replayTimeout)
			if err != nil {
				return err
			}
			f := msg.Frames
			if len(f) < 2 || len(f[len(f)-2]) != 8 {
				return errors.New("unexpected replay frames")
			}
			if int64(binary.BigEndian.Uint64(f[len(f)-2])) == -1 {
				break // the end marker
			}
			seq := binary.BigEndian.Uint64(f[len(f)-2])
			if first == nil {
				first = &seq
			}
			batches++
			p.apply(addr, m, st, f)
		}
		if first != nil && *first > from {
			outcome = "partial"
		}
		return nil
	}()
	if err != nil {
		outcome = "failed"
		p.log.Warn("KV event replay failed", "worker", addr, "endpoint", m.ep.KVEventsReplay, "reason", reason, "error", err.Error())
	} else {
		p.log.Info("KV events replayed", "worker", addr, "reason", reason, "batches", batches, "from", from, "outcome", outcome)
	}
	st.check = len(st.live)
	p.metrics.KVReplays.WithLabelValues(addr, reason, outcome).Inc()
	if batches > 0 {
		p.metrics.KVReplayed.WithLabelValues(addr).Add(float64(batches))
	}
}

// recvWithin is one Recv that gives up after d (the socket is closed by the caller's deferred Close).
func recvWithin(s zmq4.Socket, d time.Duration) (zmq4.Msg, error) {
	type result struct {
		msg zmq4.Msg
		err error
	}
	ch := make(chan result, 1)
	go func() {
		msg, err := s.Recv()
		ch <- result{msg, err}
	}()
	select {
	case r := <-ch:
		return r.msg, r.err
	case <-time.After(d):
		return zmq4.Msg{}, errors.New("no answer from the replay socket in time")
	}
}

// ApplyEvents applies decoded events to a member's index entries, counted.
func (p *Pool) ApplyEvents(addr string, m *member, events []KVEvent, source string) {
	n, err := m.ingest.Apply(p.router, addr, events)
	if err != nil {
		p.log.Debug("KV events not applied", "worker", addr, "error", err.Error())
	}
	if len(n.Hashes) > 0 {
		p.waits.stored(addr, n.Hashes) // in the index now: the prefills waiting for them are done
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
	if n.Lower > 0 {
		p.metrics.KVEvents.WithLabelValues("stored_lower_tier_blocks", source, addr).Add(float64(n.Lower))
	}
	if n.Untiered > 0 {
		p.metrics.KVEvents.WithLabelValues("untiered_blocks", source, addr).Add(float64(n.Untiered))
	}
}
