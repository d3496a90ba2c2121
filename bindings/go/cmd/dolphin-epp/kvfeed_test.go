package main

// The ZMQ feed against a publisher and a replay socket as vLLM runs them (go-zeromq on both ends): batches sent
// before the picker subscribed come from the replay, a sequence gap is replayed, and a sequence that starts over
// resets the engine's index.

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/vmihailenco/msgpack/v5"
)

func freeTCP(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return fmt.Sprintf("tcp://%s", l.Addr())
}

func be64(n uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, n)
	return b
}

// engine is a vLLM-like publisher with a replay socket keeping every batch it published.
type engine struct {
	mu      sync.Mutex
	pub     zmq4.Socket
	batches map[uint64][]byte
	pubAt   string
	replyAt string
}

func startEngine(t *testing.T) *engine {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	e := &engine{pub: zmq4.NewPub(ctx), batches: map[uint64][]byte{}, pubAt: freeTCP(t), replyAt: freeTCP(t)}
	router := zmq4.NewRouter(ctx)
	if err := e.pub.Listen(e.pubAt); err != nil {
		t.Fatal(err)
	}
	if err := router.Listen(e.replyAt); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = e.pub.Close(); _ = router.Close() })
	go func() {
		for {
			msg, err := router.Recv()
			if err != nil {
				return
			}
			id, start := msg.Frames[0], binary.BigEndian.Uint64(msg.Frames[len(msg.Frames)-1])
			e.mu.Lock()
			for seq := start; ; seq++ {
				b, ok := e.batches[seq]
				if !ok {
					break
				}
				_ = router.Send(zmq4.NewMsgFrom(id, []byte{}, []byte("kv-events"), be64(seq), b))
			}
			e.mu.Unlock()
			_ = router.Send(zmq4.NewMsgFrom(id, []byte{}, []byte{}, be64(^uint64(0)), []byte{}))
		}
	}()
	return e
}

// store records a batch as sequence seq; live also publishes it.
func (e *engine) store(t *testing.T, seq uint64, hashes []uint64, live bool) {
	t.Helper()
	list := make([]any, len(hashes))
	for i, h := range hashes {
		list[i] = h
	}
	b, _ := msgpack.Marshal([]any{1.0, []any{[]any{"BlockStored", list, nil, []any{}, 16, nil, nil}}, 0})
	e.mu.Lock()
	e.batches[seq] = b
	e.mu.Unlock()
	if live {
		if err := e.pub.Send(zmq4.NewMsgFrom([]byte("kv-events"), be64(seq), b)); err != nil {
			t.Fatal(err)
		}
	}
}

func waitCount(t *testing.T, p *Pool, addr string, want int) {
	t.Helper()
	for i := 0; i < 400; i++ {
		if n, _ := p.router.Index().Count(addr); n == want {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	n, _ := p.router.Index().Count(addr)
	t.Fatalf("index holds %d blocks of %s, want %d", n, addr, want)
}

func TestFeedReplaysWhatItMissed(t *testing.T) {
	e := startEngine(t)
	p := newPool(t, "dynamo-isl", nil)
	p.feeds = true
	hashes, _ := p.router.Hash(seq(0, 16*8))
	e.store(t, 0, hashes[0:2], false) // before the picker subscribed: only the replay has them
	e.store(t, 1, hashes[2:3], false)
	addr := "10.0.0.9:8000"
	if err := p.Apply([]Endpoint{{Address: addr, Labels: map[string]string{RoleLabel: "decode"}, KVEvents: e.pubAt, KVEventsReplay: e.replyAt}}); err != nil {
		t.Fatal(err)
	}
	waitCount(t, p, addr, 3)
	// the replay ran after the subscription was made: give the publisher a moment to learn of it (a PUB drops what
	// no subscriber has asked for yet)
	time.Sleep(300 * time.Millisecond)
	e.store(t, 2, hashes[3:4], true)
	waitCount(t, p, addr, 4)
	e.store(t, 3, hashes[4:5], false) // missed
	e.store(t, 4, hashes[5:6], false) // missed
	e.store(t, 5, hashes[6:7], true)  // the gap shows: 3 and 4 are replayed
	waitCount(t, p, addr, 7)
	if got := testCounter(p.metrics.KVGaps.WithLabelValues(addr)); got != 2 {
		t.Fatalf("gaps counted %v, want 2", got)
	}
	e.store(t, 0, hashes[7:8], true) // the engine started over: its index is reset, then rebuilt
	waitCount(t, p, addr, 1)
	if got := testCounter(p.metrics.KVRestarts.WithLabelValues(addr)); got != 1 {
		t.Fatalf("restarts counted %v, want 1", got)
	}
}
