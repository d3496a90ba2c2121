package main

// The "events" request: vLLM KV-event batches through llm-d's own pipeline (kvevents.Pool with the vLLM engine
// adapter, kvblock's in-memory index and cbor-fnv token processor), then what the index holds.
//
//	{"op":"events","cases":[{"block_size":16,"hash_seed":"","model":"m",
//	    "messages":[{"pod":"w0","payload":"<base64 msgpack batch>"}, ...],   in arrival order
//	    "keys":["<u64 decimal>", ...],                                        request keys to look up
//	    "prompts":[[token ids], ...]}]}                                        prompts to score
//	→ {"answers":[{"holders":[["w0", ...] per key], "cpu_holders":[[...] per key],
//	               "matches":[{"w0": blocks, ...} per prompt]}]}
//
// holders are the pods a key is held by on the GPU tier, cpu_holders on the CPU tier. A prompt's match per pod is
// LongestPrefixScorer's count on the GPU tier (pkg/kvcache/kvblock_scorer.go, weight 1 per block): the blocks from
// the first one while the pod holds each. It is computed here, not imported: pkg/kvcache pulls in the tokenizer
// and tracing stacks (about 750 packages) for a ten-line loop.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"

	"github.com/llm-d/llm-d-kv-cache/pkg/kvcache/kvblock"
	"github.com/llm-d/llm-d-kv-cache/pkg/kvevents"
	"github.com/llm-d/llm-d-kv-cache/pkg/kvevents/engineadapter"
	"k8s.io/apimachinery/pkg/util/sets"
)

type eventsCase struct {
	BlockSize int    `json:"block_size"`
	HashSeed  string `json:"hash_seed"`
	Model     string `json:"model"`
	Messages  []struct {
		Pod     string `json:"pod"`
		Payload string `json:"payload"`
	} `json:"messages"`
	Keys    []string   `json:"keys"`
	Prompts [][]uint32 `json:"prompts"`
}

// llmdPipeline is one pool over one index, as llm-d's KV-cache manager wires them.
type llmdPipeline struct {
	index *kvblock.InMemoryIndex
	tp    kvblock.TokenProcessor
	pool  *kvevents.Pool
	model string
}

func newPipeline(blockSize int, hashSeed, model string) (*llmdPipeline, error) {
	// PodCacheSize: pods kept per key (llm-d's default, 10, would drop holders beyond ten workers)
	index, err := kvblock.NewInMemoryIndex(&kvblock.InMemoryIndexConfig{Size: 1 << 22, PodCacheSize: 1024})
	if err != nil {
		return nil, err
	}
	tp, err := kvblock.NewChunkedTokenDatabase(&kvblock.TokenProcessorConfig{BlockSizeTokens: blockSize, HashSeed: hashSeed})
	if err != nil {
		return nil, err
	}
	// one queue: every batch in arrival order (the pool shards by pod, so order per pod holds at any concurrency)
	pool := kvevents.NewPool(&kvevents.Config{Concurrency: 1}, index, tp, engineadapter.NewVLLMAdapter())
	return &llmdPipeline{index: index, tp: tp, pool: pool, model: model}, nil
}

// apply runs the payloads through the pool and waits until every one is processed.
func (p *llmdPipeline) apply(pods []string, payloads [][]byte) {
	ctx := context.Background()
	p.pool.Start(ctx)
	for i, payload := range payloads {
		p.pool.AddTask(&kvevents.RawMessage{Topic: "kv@" + pods[i] + "@" + p.model, Sequence: uint64(i), Payload: payload})
	}
	p.pool.Shutdown(ctx) // the queue drains before its worker stops
}

func (p *llmdPipeline) holders(key kvblock.BlockHash) (gpu, cpu []string) {
	found, _ := p.index.Lookup(context.Background(), []kvblock.BlockHash{key}, sets.New[string]())
	gpu, cpu = []string{}, []string{}
	for _, e := range found[key] {
		if e.DeviceTier == "gpu" {
			gpu = append(gpu, e.PodIdentifier)
		} else {
			cpu = append(cpu, e.PodIdentifier)
		}
	}
	sort.Strings(gpu)
	sort.Strings(cpu)
	return gpu, cpu
}

// match hashes a prompt as llm-d does and scores it (matchKeys).
func (p *llmdPipeline) match(tokens []uint32) (map[string]int, error) {
	keys, err := p.tp.TokensToKVBlockKeys(kvblock.EmptyBlockHash, tokens, p.model, nil)
	if err != nil || len(keys) == 0 {
		return map[string]int{}, err
	}
	return p.matchKeys(keys)
}

// matchKeys is LongestPrefixScorer.Score (pkg/kvcache/kvblock_scorer.go) on the GPU tier at weight 1, written the
// way it is written there (one weight map reused across keys, the active set shrinking): per pod, the blocks from the
// first while it holds each.
func (p *llmdPipeline) matchKeys(keys []kvblock.BlockHash) (map[string]int, error) {
	found, err := p.index.Lookup(context.Background(), keys, sets.New[string]())
	if err != nil {
		return nil, err
	}
	fill := func(dst map[string]struct{}, entries []kvblock.PodEntry) {
		for _, e := range entries {
			if e.DeviceTier == "gpu" {
				dst[e.PodIdentifier] = struct{}{}
			}
		}
	}
	scores := map[string]int{}
	cur := map[string]struct{}{}
	fill(cur, found[keys[0]])
	active := make(map[string]struct{}, len(cur))
	for pod := range cur {
		active[pod] = struct{}{}
		scores[pod] = 1
	}
	for _, k := range keys[1:] {
		if len(active) == 0 {
			break
		}
		clear(cur)
		fill(cur, found[k])
		for pod := range active {
			if _, ok := cur[pod]; ok {
				scores[pod]++
			} else {
				delete(active, pod)
			}
		}
	}
	return scores, nil
}

func eventsOne(raw json.RawMessage, at string) (any, error) {
	var c eventsCase
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, badRequest{fmt.Sprintf("%s: %v", at, err)}
	}
	p, err := newPipeline(c.BlockSize, c.HashSeed, c.Model)
	if err != nil {
		return nil, badRequest{fmt.Sprintf("%s: %v", at, err)}
	}
	pods := make([]string, len(c.Messages))
	payloads := make([][]byte, len(c.Messages))
	for i, m := range c.Messages {
		if payloads[i], err = base64.StdEncoding.DecodeString(m.Payload); err != nil {
			return nil, badRequest{fmt.Sprintf("%s.messages[%d].payload: %v", at, i, err)}
		}
		pods[i] = m.Pod
	}
	p.apply(pods, payloads)
	holders, cpuHolders := make([][]string, len(c.Keys)), make([][]string, len(c.Keys))
	for i, k := range c.Keys {
		v, err := strconv.ParseUint(k, 10, 64)
		if err != nil {
			return nil, badRequest{fmt.Sprintf("%s.keys[%d]: %v", at, i, err)}
		}
		holders[i], cpuHolders[i] = p.holders(kvblock.BlockHash(v))
	}
	matches := make([]map[string]int, len(c.Prompts))
	for i, tokens := range c.Prompts {
		if matches[i], err = p.match(tokens); err != nil {
			return nil, badRequest{fmt.Sprintf("%s.prompts[%d]: %v", at, i, err)}
		}
	}
	return map[string]any{"holders": holders, "cpu_holders": cpuHolders, "matches": matches}, nil
}
