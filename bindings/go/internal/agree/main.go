// Command agree is the Go side of the cross-language agreement test: it replays the seeded scenarios
// test/bindings-agree.test.ts generates (a JSON file, os.Args[1]) through the Go binding and prints the results as
// JSON, for the test to compare with Node's and Python's (an "explain" step gives Explain's sentence).
package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"

	dolphin "github.com/dolphin-routing/dolphin-routing/bindings/go"
)

type prompt struct {
	Tokens []uint32 `json:"tokens"`
	Text   *string  `json:"text"`
}

type step struct {
	Op            string   `json:"op"`
	Worker        string   `json:"worker"`
	Prompt        int      `json:"prompt"`
	Blocks        int      `json:"blocks"`
	Prefill       float64  `json:"prefill"`
	Decode        float64  `json:"decode"`
	PrefillQueue  float64  `json:"prefill_queue"`
	QPS           float64  `json:"qps"`
	Mode          string   `json:"mode"`
	OSLHat        *float64 `json:"osl_hat"`
	OSLClass      any      `json:"osl_class"` // a class name (string) or index (number)
	Turn          int      `json:"turn"`
	ContextTokens float64  `json:"context_tokens"`
	PromptTokens  int      `json:"prompt_tokens"`
	Pin           string   `json:"pin"`
}

type scenario struct {
	Table   string `json:"table"`
	Workers []struct {
		ID             string `json:"id"`
		Role           string `json:"role"`
		CapacityBlocks int    `json:"capacity_blocks"`
	} `json:"workers"`
	BlockSize int      `json:"block_size"`
	Model     string   `json:"model"`
	Salt      string   `json:"salt"`
	Record    bool     `json:"record"`
	LoadScale float64  `json:"load_scale"`
	Prompts   []prompt `json:"prompts"`
	Steps     []step   `json:"steps"`
}

func decisionJSON(d dolphin.Decision) map[string]any {
	var prefill, cluster, oslClass any
	if d.PrefillWorker != "" {
		prefill = d.PrefillWorker
	}
	if d.Cluster >= 0 {
		cluster = d.Cluster
	}
	if d.OSLClass >= 0 {
		oslClass = d.OSLClass
	}
	return map[string]any{
		"path": d.Path, "bit": d.Bit, "reason": d.Reason, "decode_worker": d.DecodeWorker, "prefill_worker": prefill,
		"cluster": cluster, "features": map[string]any{"isl": d.Features.ISL, "eff_P": d.Features.EffP, "eff_D": d.Features.EffD, "osl_hat": d.Features.OSLHat},
		"matched_blocks": map[string]any{"decode": d.MatchedBlocks.Decode, "prefill": d.MatchedBlocks.Prefill},
		"blocks":         d.Blocks, "osl_class": oslClass, "reuse": d.Reuse,
		"cost": map[string]any{"decode": d.Cost.Decode, "prefill": d.Cost.Prefill},
	}
}

func run(s scenario) map[string]any {
	table, err := base64.StdEncoding.DecodeString(s.Table)
	if err != nil {
		return map[string]any{"load_error": err.Error()}
	}
	opts := dolphin.Options{BlockSize: s.BlockSize, Model: s.Model, Salt: s.Salt, RecordDecisions: s.Record, LoadScale: s.LoadScale,
		MaxWorkers: 16, MaxPromptTokens: 1 << 16, IndexBlocks: 1 << 14}
	for _, w := range s.Workers {
		opts.Workers = append(opts.Workers, dolphin.Worker{ID: w.ID, Role: w.Role, CapacityBlocks: w.CapacityBlocks})
	}
	r, err := dolphin.Load(table, opts)
	if err != nil {
		return map[string]any{"load_error": err.Error()}
	}
	hashesOf := func(p prompt) ([]uint64, error) {
		if p.Text != nil {
			return r.HashText(*p.Text)
		}
		return r.Hash(p.Tokens)
	}
	hexes := [][]string{}
	for _, p := range s.Prompts {
		hs, err := hashesOf(p)
		if err != nil {
			return map[string]any{"load_error": err.Error()}
		}
		row := []string{}
		for _, h := range hs {
			row = append(row, fmt.Sprintf("%016x", h))
		}
		hexes = append(hexes, row)
	}
	steps := []any{}
	for _, st := range s.Steps {
		var result any
		var err error
		prefix := func() []uint64 {
			hs, _ := hashesOf(s.Prompts[st.Prompt])
			return hs[:min(st.Blocks, len(hs))]
		}
		switch st.Op {
		case "store":
			err = r.Index().Store(st.Worker, prefix())
		case "remove":
			err = r.Index().Remove(st.Worker, prefix())
		case "load":
			err = r.SetLoad(st.Worker, st.Prefill, st.Decode)
		case "signals":
			err = r.SetSignals(st.PrefillQueue, st.QPS)
		case "match":
			hs, _ := hashesOf(s.Prompts[st.Prompt])
			result, err = r.Index().Match(hs)
		default:
			p := s.Prompts[st.Prompt]
			req := dolphin.Request{Tokens: p.Tokens}
			if p.Text != nil {
				req = dolphin.TextRequest(*p.Text)
			}
			if st.Mode == "hashes" {
				hs, _ := hashesOf(p)
				req = dolphin.Request{BlockHashes: hs}
				if hs == nil {
					req.BlockHashes = []uint64{}
				}
			} else if p.Text == nil && p.Tokens == nil {
				req.Tokens = []uint32{}
			}
			req.OSLHat, req.Turn, req.ContextTokens, req.PromptTokens, req.DecodeWorker = st.OSLHat, st.Turn, dolphin.Float(st.ContextTokens), st.PromptTokens, st.Pin
			switch class := st.OSLClass.(type) {
			case string:
				req.OSLClassName = class
			case float64: // the scenarios' indices are integers
				req.OSLClassIndex = dolphin.Int(int(class))
			}
			if st.Op == "explain" { // the sentence alone: the decision is what "route" compares
				var x dolphin.Explanation
				if x, err = r.Explain(req); err == nil {
					result = map[string]any{"why": x.Why}
				}
				break
			}
			var d dolphin.Decision
			if d, err = r.Route(req); err == nil {
				result = decisionJSON(d)
			}
		}
		if err != nil {
			result = map[string]any{"error": err.Error()}
		}
		steps = append(steps, result)
	}
	return map[string]any{"hashes": hexes, "steps": steps}
}

func main() {
	data, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var scenarios []scenario
	if err := json.Unmarshal(data, &scenarios); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	out := []any{}
	for _, s := range scenarios {
		out = append(out, run(s))
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
