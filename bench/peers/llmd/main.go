// dolphin-peer-llmd: llm-d's KV-cache library (github.com/llm-d/llm-d-kv-cache v0.9.0) behind a JSON CLI, so the
// differential tests (test/peers-*.test.ts) and `dolphin bench peers` call llm-d's own code the same way.
// Reads one JSON request on stdin, writes one JSON answer on stdout; a bad request exits 2 with the reason on stderr.
//
//	{"op":"hash","cases":[{"tokens":[...],"block_size":16,"hash_seed":"","model":"m"}]}
//	    kvblock.TokenProcessor (cbor-fnv): {"answers":[{"hashes":["<u64 decimal>", ...]}]}
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/llm-d/llm-d-kv-cache/pkg/kvcache/kvblock"
)

type hashCase struct {
	Tokens    []uint32 `json:"tokens"`
	BlockSize int      `json:"block_size"`
	HashSeed  string   `json:"hash_seed"`
	Model     string   `json:"model"`
}

type request struct {
	Op    string            `json:"op"`
	Cases []json.RawMessage `json:"cases"`
}

// badRequest is a client's mistake in the request: exit 2 with its message.
type badRequest struct{ msg string }

func (e badRequest) Error() string { return e.msg }

func decimal(hashes []kvblock.BlockHash) []string {
	out := make([]string, len(hashes))
	for i, h := range hashes {
		out[i] = strconv.FormatUint(uint64(h), 10)
	}
	return out
}

func hashOne(raw json.RawMessage, at string) (any, error) {
	var c hashCase
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, badRequest{fmt.Sprintf("%s: %v", at, err)}
	}
	if c.BlockSize <= 0 {
		return nil, badRequest{fmt.Sprintf("%s.block_size: must be positive, got %d", at, c.BlockSize)}
	}
	tp, err := kvblock.NewChunkedTokenDatabase(&kvblock.TokenProcessorConfig{BlockSizeTokens: c.BlockSize, HashSeed: c.HashSeed})
	if err != nil {
		return nil, badRequest{fmt.Sprintf("%s: %v", at, err)}
	}
	keys, err := tp.TokensToKVBlockKeys(kvblock.EmptyBlockHash, c.Tokens, c.Model, nil)
	if err != nil {
		return nil, badRequest{fmt.Sprintf("%s: %v", at, err)}
	}
	return map[string]any{"hashes": decimal(keys)}, nil
}

func eachCase(req request, one func(json.RawMessage, string) (any, error)) (any, error) {
	answers := make([]any, len(req.Cases))
	for i, raw := range req.Cases {
		a, err := one(raw, fmt.Sprintf("request.cases[%d]", i))
		if err != nil {
			return nil, err
		}
		answers[i] = a
	}
	return map[string]any{"answers": answers}, nil
}

func answer(input []byte) (any, error) {
	var req request
	if err := json.Unmarshal(input, &req); err != nil {
		return nil, badRequest{fmt.Sprintf("stdin: not a JSON request: %v", err)}
	}
	switch req.Op {
	case "hash":
		return eachCase(req, hashOne)
	case "events":
		return eachCase(req, eventsOne)
	case "bench":
		return benchRun(input)
	}
	if op, ok := extraOps[req.Op]; ok {
		return op(input)
	}
	return nil, badRequest{fmt.Sprintf("request.op: expected hash, events or bench, got %q", req.Op)}
}

// extraOps are the requests of files built with a tag (dolphin.go: -tags dolphin).
var extraOps = map[string]func([]byte) (any, error){}

func main() {
	input, err := io.ReadAll(os.Stdin)
	if err == nil {
		var out any
		if out, err = answer(input); err == nil {
			err = json.NewEncoder(os.Stdout).Encode(out)
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "dolphin-peer-llmd: %v\n", err)
		os.Exit(2)
	}
}
