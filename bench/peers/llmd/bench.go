package main

// The "bench" request, `dolphin bench peers`'s llm-d turn: llm-d's own code timed in this process on the workload
// bench/peers.ts describes (the same prompt and cache states), medians of slices of slice_ms each.
//
//	{"op":"bench","tokens":20000,"seed":1,"block_size":16,"workers":[16,256,1024],"slice_ms":20,"slices":7,
//	 "distinct_blocks":160000,"event_blocks":1000,"store_payload":"<base64>","remove_payload":"<base64>"}
//	→ {"hash_20k_tokens_us", "match_us": {"16": …}, "route_us": null, "bytes_per_block", "events_us_per_1k_blocks"}
//
// match: the index's Lookup of the prompt's keys plus LongestPrefixScorer's loop (match in events.go). route: null,
// llm-d-kv-cache has no routing decision (its scheduler lives in llm-d-router, which the Go proxy refuses).
// bytes_per_block: Go heap bytes (after GC) of an in-memory index with llm-d's default config where 16 pods each
// hold distinct blocks, per (pod, block). Events: the vLLM store batch and its removal (the same bytes our side
// decodes) through a kvevents.Pool, per 1,000 blocks, the pool's queue included.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"runtime"
	"sort"
	"time"

	"github.com/llm-d/llm-d-kv-cache/pkg/kvcache/kvblock"
	"github.com/llm-d/llm-d-kv-cache/pkg/kvevents"
	"github.com/llm-d/llm-d-kv-cache/pkg/kvevents/engineadapter"
)

type benchRequest struct {
	Tokens         int    `json:"tokens"`
	Seed           uint32 `json:"seed"`
	BlockSize      int    `json:"block_size"`
	Workers        []int  `json:"workers"`
	SliceMs        int    `json:"slice_ms"`
	Slices         int    `json:"slices"`
	DistinctBlocks int    `json:"distinct_blocks"`
	EventBlocks    int    `json:"event_blocks"`
	StorePayload   string `json:"store_payload"`
	RemovePayload  string `json:"remove_payload"`
}

// lcg is bench/peers.ts's prompt: x = seed; n times { x = (x·1103515245 + 12345) mod 2^31; emit x mod 152064 }.
func lcg(n int, seed uint32) []uint32 {
	out := make([]uint32, n)
	x := seed
	for i := range out {
		x = (x*1103515245 + 12345) & 0x7fffffff
		out[i] = x % 152064
	}
	return out
}

// medianUs is the median over slices of the mean µs per call, after one warm-up slice.
func medianUs(slices int, sliceMs int, f func()) float64 {
	per := make([]float64, 0, slices)
	for s := 0; s <= slices; s++ {
		t := time.Now()
		n := 0
		for time.Since(t) < time.Duration(sliceMs)*time.Millisecond {
			f()
			n++
		}
		if s > 0 {
			per = append(per, float64(time.Since(t).Microseconds())/float64(n))
		}
	}
	sort.Float64s(per)
	return per[len(per)/2]
}

func heapBytes() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

const benchModel = "bench-model"

func benchRun(input []byte) (any, error) {
	var r benchRequest
	if err := json.Unmarshal(input, &r); err != nil {
		return nil, badRequest{fmt.Sprintf("request: %v", err)}
	}
	tokens := lcg(r.Tokens, r.Seed)
	ctx := context.Background()
	p, err := newPipeline(r.BlockSize, "", benchModel)
	if err != nil {
		return nil, badRequest{fmt.Sprintf("request: %v", err)}
	}
	keys, _ := p.tp.TokensToKVBlockKeys(kvblock.EmptyBlockHash, tokens, benchModel, nil)
	hashUs := medianUs(r.Slices, r.SliceMs, func() {
		_, _ = p.tp.TokensToKVBlockKeys(kvblock.EmptyBlockHash, tokens, benchModel, nil)
	})

	matchUs := map[string]float64{}
	for _, n := range r.Workers {
		q, _ := newPipeline(r.BlockSize, "", benchModel) // pods per key ≥ n: llm-d's default 10 would drop holders
		for w := 0; w < n; w++ {
			held := (w + 1) * len(keys) / (n + 1)
			if held > 0 {
				entry := []kvblock.PodEntry{{PodIdentifier: fmt.Sprintf("w%d", w), DeviceTier: "gpu"}}
				_ = q.index.Add(ctx, keys[:held], keys[:held], entry)
			}
		}
		matchUs[fmt.Sprint(n)] = medianUs(r.Slices, r.SliceMs, func() { _, _ = q.matchKeys(keys) })
	}

	// bytes per (pod, block): llm-d's default in-memory index, 16 pods holding distinct blocks each
	before := heapBytes()
	index, _ := kvblock.NewInMemoryIndex(kvblock.DefaultInMemoryIndexConfig())
	perPod := r.DistinctBlocks / 16
	for w := 0; w < 16; w++ {
		own := make([]kvblock.BlockHash, perPod)
		for i := range own {
			own[i] = kvblock.BlockHash(uint64(w)<<40 | uint64(i+1))
		}
		_ = index.Add(ctx, own, own, []kvblock.PodEntry{{PodIdentifier: fmt.Sprintf("w%d", w), DeviceTier: "gpu"}})
	}
	bytesPerBlock := float64(heapBytes()-before) / float64(16*perPod)
	runtime.KeepAlive(index)

	store, err1 := base64.StdEncoding.DecodeString(r.StorePayload)
	remove, err2 := base64.StdEncoding.DecodeString(r.RemovePayload)
	if err1 != nil || err2 != nil {
		return nil, badRequest{"request.store_payload / remove_payload: expected base64"}
	}
	const pairs = 16 // store + remove pairs a pool run applies
	ev, _ := newPipeline(r.BlockSize, "", benchModel)
	eventsUs := medianUs(r.Slices, r.SliceMs, func() {
		pool := kvevents.NewPool(&kvevents.Config{Concurrency: 1}, ev.index, ev.tp, engineadapter.NewVLLMAdapter())
		pool.Start(ctx)
		for i := 0; i < pairs; i++ {
			pool.AddTask(&kvevents.RawMessage{Topic: "kv@w0@" + benchModel, Sequence: uint64(2 * i), Payload: store})
			pool.AddTask(&kvevents.RawMessage{Topic: "kv@w0@" + benchModel, Sequence: uint64(2*i + 1), Payload: remove})
		}
		pool.Shutdown(ctx)
	}) / (2 * pairs) * 1000 / float64(r.EventBlocks)

	return map[string]any{
		"hash_20k_tokens_us":      hashUs,
		"match_us":                matchUs,
		"route_us":                nil,
		"bytes_per_block":         bytesPerBlock,
		"events_us_per_1k_blocks": eventsUs,
	}, nil
}
