//go:build dolphin

package main

// The "bench-go" request: our Go binding (bindings/go, the core in wazero) next to llm-d in this one process, each
// measure's slices alternating between the two: the same-language comparison. Built only by
// `dolphin bench peers` (`go build -tags dolphin`), after the core is built: the binding embeds build/core.wasm, which
// `npm run setup` (run before the build) cannot count on, so the harness the tests use is built without this file.
//
//	{"op":"bench-go","table":"<path of a table file>", …the "bench" request's workload…}
//	→ {"dolphin_go": {"hash_20k_tokens_us", "hash_20k_tokens_cbor_fnv_us", "match_us", "route_us"},
//	   "llm_d": {"hash_20k_tokens_us", "match_us"}}

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"time"

	dolphin "github.com/dolphin-routing/dolphin-routing/bindings/go"
	"github.com/llm-d/llm-d-kv-cache/pkg/kvcache/kvblock"
)

func init() { extraOps["bench-go"] = benchGo }

// alternatingUs times a and b in alternating slices (a warm-up slice each first): the median µs per call of each.
func alternatingUs(slices, sliceMs int, a, b func()) (float64, float64) {
	slice := func(f func()) float64 {
		t := time.Now()
		n := 0
		for time.Since(t) < time.Duration(sliceMs)*time.Millisecond {
			f()
			n++
		}
		return float64(time.Since(t).Nanoseconds()) / 1e3 / float64(n)
	}
	var as, bs []float64
	for s := 0; s <= slices; s++ {
		x, y := slice(a), slice(b)
		if s > 0 {
			as, bs = append(as, x), append(bs, y)
		}
	}
	sort.Float64s(as)
	sort.Float64s(bs)
	return as[len(as)/2], bs[len(bs)/2]
}

func dolphinRouter(table []byte, n int, scheme string) (*dolphin.Router, error) {
	workers := make([]dolphin.Worker, n)
	for w := range workers {
		role := "decode"
		if w%2 == 1 {
			role = "prefill"
		}
		workers[w] = dolphin.Worker{ID: fmt.Sprintf("w%d", w), Role: role}
	}
	return dolphin.Load(table, dolphin.Options{
		Workers: workers, BlockSize: 16, HashScheme: scheme, MaxWorkers: 1024, CapacityBlocks: 1250, MaxPromptTokens: 1 << 18,
	})
}

func benchGo(input []byte) (any, error) {
	var r benchRequest
	var t struct {
		Table string `json:"table"`
	}
	if err := json.Unmarshal(input, &r); err != nil {
		return nil, badRequest{fmt.Sprintf("request: %v", err)}
	}
	_ = json.Unmarshal(input, &t)
	table, err := os.ReadFile(t.Table)
	if err != nil {
		return nil, badRequest{fmt.Sprintf("request.table: %v", err)}
	}
	tokens := lcg(r.Tokens, r.Seed)
	ctx := context.Background()
	p, err := newPipeline(r.BlockSize, "", benchModel)
	if err != nil {
		return nil, err
	}
	keys, _ := p.tp.TokensToKVBlockKeys(kvblock.EmptyBlockHash, tokens, benchModel, nil)
	xx, err := dolphinRouter(table, 16, "")
	if err != nil {
		return nil, err
	}
	fnv, err := dolphinRouter(table, 16, "llm-d-cbor-fnv")
	if err != nil {
		return nil, err
	}
	hashes, _ := xx.Hash(tokens)
	llmdHash := func() { _, _ = p.tp.TokensToKVBlockKeys(kvblock.EmptyBlockHash, tokens, benchModel, nil) }
	ours, theirs := alternatingUs(r.Slices, r.SliceMs, func() { _, _ = xx.Hash(tokens) }, llmdHash)
	oursFnv, _ := alternatingUs(r.Slices, r.SliceMs, func() { _, _ = fnv.Hash(tokens) }, llmdHash)
	match, route, llmdMatch := map[string]float64{}, map[string]float64{}, map[string]float64{}
	osl := 300.0
	for _, n := range r.Workers {
		d, err := dolphinRouter(table, n, "")
		if err != nil {
			return nil, err
		}
		q, _ := newPipeline(r.BlockSize, "", benchModel)
		for w := 0; w < n; w++ {
			held := (w + 1) * len(keys) / (n + 1)
			id := fmt.Sprintf("w%d", w)
			_ = d.Index().Store(id, hashes[:held])
			_ = d.SetLoad(id, float64((w*997)%4000), float64((w*1999)%30000))
			if held > 0 {
				_ = q.index.Add(ctx, keys[:held], keys[:held], []kvblock.PodEntry{{PodIdentifier: id, DeviceTier: "gpu"}})
			}
		}
		k := fmt.Sprint(n)
		match[k], llmdMatch[k] = alternatingUs(r.Slices, r.SliceMs,
			func() { _, _ = d.Index().Match(hashes) }, func() { _, _ = q.matchKeys(keys) })
		route[k], _ = alternatingUs(r.Slices, r.SliceMs,
			func() { _, _ = d.Route(dolphin.Request{Tokens: tokens, OSLHat: &osl}) }, func() {})
	}
	return map[string]any{
		"dolphin_go": map[string]any{
			"hash_20k_tokens_us": ours, "hash_20k_tokens_cbor_fnv_us": oursFnv, "match_us": match, "route_us": route,
		},
		"llm_d": map[string]any{"hash_20k_tokens_us": theirs, "match_us": llmdMatch},
	}, nil
}
