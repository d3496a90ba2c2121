// Command bench is the Go side of `dolphin bench bindings`: Route of a 20,000-token prompt against 16 workers,
// including the call overhead of copying the prompt in. Same setup and method as bench/bindings.ts (Node) and
// bindings/python/tests/bench_route.py: warm up, then the median over rounds of the mean per-call time. Prints
// JSON (µs). Usage: go run ./internal/bench TABLE
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"time"

	dolphin "github.com/dolphin-routing/dolphin-routing/bindings/go"
)

const (
	workers                   = 16
	rounds, perRound, warmups = 31, 20, 200
)

func lcg(n int, seed uint32) []uint32 {
	out := make([]uint32, n)
	x := seed
	for i := range out {
		x = (x*1103515245 + 12345) & 0x7fffffff
		out[i] = x % 152064
	}
	return out
}

func medianUs(call func()) float64 {
	for i := 0; i < warmups; i++ {
		call()
	}
	per := make([]float64, rounds)
	for r := range per {
		t := time.Now()
		for i := 0; i < perRound; i++ {
			call()
		}
		per[r] = float64(time.Since(t).Nanoseconds()) / perRound / 1e3
	}
	sort.Float64s(per)
	return per[rounds/2]
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	table, err := os.ReadFile(os.Args[1])
	if err != nil {
		return err
	}
	opts := dolphin.Options{CapacityBlocks: 4096, MaxPromptTokens: 1 << 18}
	for w := 0; w < workers; w++ {
		role := "decode"
		if w < workers/2 {
			role = "prefill"
		}
		opts.Workers = append(opts.Workers, dolphin.Worker{ID: fmt.Sprintf("w%d", w), Role: role})
	}
	r, err := dolphin.Load(table, opts)
	if err != nil {
		return err
	}
	tokens := lcg(20_000, 42)
	hashes, err := r.Hash(tokens)
	if err != nil {
		return err
	}
	for w := 0; w < workers; w++ {
		id := fmt.Sprintf("w%d", w)
		if err := r.Index().Store(id, hashes[:(w+1)*len(hashes)/(workers+1)]); err != nil {
			return err
		}
		if err := r.SetLoad(id, float64((w*997)%4000), float64((w*1999)%30000)); err != nil {
			return err
		}
	}
	osl := dolphin.Float(300)
	var failed error
	us := medianUs(func() {
		if _, err := r.Route(dolphin.Request{Tokens: tokens, OSLHat: osl}); err != nil {
			failed = err
		}
	})
	if failed != nil {
		return failed
	}
	return json.NewEncoder(os.Stdout).Encode(map[string]float64{"route_20k_tokens_us": float64(int(us*100+0.5)) / 100})
}
