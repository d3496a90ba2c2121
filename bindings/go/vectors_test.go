package dolphin

// Replays every conformance vector in spec/vectors/ through the Go binding: chained hashes, valid and invalid
// tables, decide cases (the policy alone) and whole-route scenarios, as test/vectors-*.test.ts do for Node.

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const specDir = "../../spec/vectors"

func readJSON(t testing.TB, name string, v any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(specDir, name))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatal(err)
	}
}

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(specDir, "tables", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func lcg(n int, seed uint32) []uint32 {
	out := make([]uint32, n)
	x := seed
	for i := range out {
		x = (x*1103515245 + 12345) & 0x7fffffff
		out[i] = x % 152064
	}
	return out
}

type formula struct {
	Kind  string `json:"kind"`
	N     int    `json:"n"`
	Seed  uint32 `json:"seed"`
	Unit  string `json:"unit"`
	Count int    `json:"count"`
}

type hashCase struct {
	Name          string   `json:"name"`
	Mode          string   `json:"mode"`
	BlockSize     int      `json:"block_size"`
	Model         string   `json:"model"`
	Salt          string   `json:"salt"`
	Tokens        []uint32 `json:"tokens"`
	TokensFormula *formula `json:"tokens_formula"`
	TokensFirst   []uint32 `json:"tokens_first"`
	Text          *string  `json:"text"`
	TextFormula   *formula `json:"text_formula"`
	TextBytes     int      `json:"text_bytes"`
	Hashes        []string `json:"hashes"`
	HashesHead    []string `json:"hashes_head"`
	HashLast      string   `json:"hash_last"`
	HashCount     int      `json:"hash_count"`
}

func TestHashVectors(t *testing.T) {
	var file struct {
		Cases []hashCase `json:"cases"`
	}
	readJSON(t, "hashes.json", &file)
	for _, c := range file.Cases {
		t.Run(c.Name, func(t *testing.T) {
			var got []uint64
			var err error
			if c.Mode == "tokens" {
				tokens := c.Tokens
				if c.TokensFormula != nil {
					tokens = lcg(c.TokensFormula.N, c.TokensFormula.Seed)
				}
				if tokens == nil {
					tokens = []uint32{}
				}
				if c.TokensFirst != nil && !reflect.DeepEqual(tokens[:len(c.TokensFirst)], c.TokensFirst) {
					t.Fatalf("formula expansion: got %v, want %v", tokens[:8], c.TokensFirst)
				}
				got, err = HashBlocks(tokens, c.BlockSize, c.Model, c.Salt)
			} else {
				text := ""
				if c.Text != nil {
					text = *c.Text
				} else {
					text = strings.Repeat(c.TextFormula.Unit, c.TextFormula.Count)
				}
				if len(text) != c.TextBytes {
					t.Fatalf("text bytes: got %d, want %d", len(text), c.TextBytes)
				}
				got, err = HashTextBlocks(text, c.Model, c.Salt)
			}
			if err != nil {
				t.Fatal(err)
			}
			checkHashes(t, c, got)
		})
	}
}

// checkHashes compares block hashes with a case's expected ones (all of them, or the first 4 and the last).
func checkHashes(t *testing.T, c hashCase, got []uint64) {
	t.Helper()
	hexes := make([]string, len(got))
	for i, h := range got {
		hexes[i] = fmt.Sprintf("%016x", h)
	}
	if len(hexes) != c.HashCount {
		t.Fatalf("hash count: got %d, want %d", len(hexes), c.HashCount)
	}
	if c.Hashes != nil && !(len(c.Hashes) == 0 && len(hexes) == 0) && !reflect.DeepEqual(hexes, c.Hashes) {
		t.Fatalf("hashes differ")
	}
	if c.HashesHead != nil && (!reflect.DeepEqual(hexes[:4], c.HashesHead) || hexes[len(hexes)-1] != c.HashLast) {
		t.Fatalf("hash head or last differ")
	}
}

type manifest struct {
	Valid []struct {
		File     string `json:"file"`
		Kind     string `json:"kind"`
		Clusters *int   `json:"clusters"`
		Dims     *int   `json:"dims"`
		Checksum string `json:"checksum"`
	} `json:"valid"`
	Invalid []struct {
		File  string `json:"file"`
		Field string `json:"field"`
	} `json:"invalid"`
}

func TestTableVectors(t *testing.T) {
	var m manifest
	readJSON(t, "tables/manifest.json", &m)
	for _, v := range m.Valid {
		info, err := DescribeTable(fixture(t, v.File))
		if err != nil {
			t.Fatalf("%s: %v", v.File, err)
		}
		deref := func(p *int) int {
			if p == nil {
				return 0
			}
			return *p
		}
		if info.Kind != v.Kind || info.Clusters != deref(v.Clusters) || info.Dims != deref(v.Dims) || info.Checksum != v.Checksum {
			t.Errorf("%s: got %s K=%d D=%d %s", v.File, info.Kind, info.Clusters, info.Dims, info.Checksum)
		}
	}
	for _, v := range m.Invalid {
		_, err := DescribeTable(fixture(t, v.File))
		te, ok := err.(*TableError)
		if !ok {
			t.Fatalf("%s: want a TableError, got %v", v.File, err)
		}
		if te.Field != v.Field || !strings.HasPrefix(te.Error(), "table: "+v.Field+": ") {
			t.Errorf("%s: got field %q: %s", v.File, te.Field, te.Error())
		}
	}
}

type signals struct {
	PrefillQueue float64 `json:"prefill_queue"`
	QPS          float64 `json:"qps"`
}

type decideCase struct {
	Table         string    `json:"table"`
	ISL           float64   `json:"isl"`
	EffP          float64   `json:"eff_P"`
	EffD          float64   `json:"eff_D"`
	OSLHat        float64   `json:"osl_hat"`
	Turn          int       `json:"turn"`
	ContextTokens float64   `json:"context_tokens"`
	Signals       signals   `json:"signals"`
	Standardized  []float64 `json:"standardized"`
	Scores        []float64 `json:"scores"`
	Expected      struct {
		Bit     float64 `json:"bit"`
		Cluster float64 `json:"cluster"`
		Reason  string  `json:"reason"`
	} `json:"expected"`
}

type promptSpec struct {
	Tokens        []uint32  `json:"tokens"`
	TokensFormula []formula `json:"tokens_formula"`
	Text          *string   `json:"text"`
	TextFormula   []formula `json:"text_formula"`
}

func (p promptSpec) input() (tokens []uint32, text string, isText bool) {
	switch {
	case p.Tokens != nil:
		return p.Tokens, "", false
	case p.TokensFormula != nil:
		for _, f := range p.TokensFormula {
			tokens = append(tokens, lcg(f.N, f.Seed)...)
		}
		return tokens, "", false
	case p.Text != nil:
		return nil, *p.Text, true
	}
	for _, f := range p.TextFormula {
		text += strings.Repeat(f.Unit, f.Count)
	}
	return nil, text, true
}

type routeCase struct {
	Name        string             `json:"name"`
	Type        string             `json:"type"`
	Table       string             `json:"table"`
	BlockSize   int                `json:"block_size"`
	Model       string             `json:"model"`
	Salt        string             `json:"salt"`
	LoadScale   float64            `json:"load_scale"`
	TierWeights map[string]float64 `json:"tier_weights"`
	Workers     []struct {
		ID             string `json:"id"`
		Role           string `json:"role"`
		CapacityBlocks int    `json:"capacity_blocks"`
	} `json:"workers"`
	Prompts map[string]promptSpec `json:"prompts"`
	Index   []struct {
		Worker       string `json:"worker"`
		Prompt       string `json:"prompt"`
		PrefixTokens int    `json:"prefix_tokens"`
		PrefixBytes  int    `json:"prefix_bytes"`
		Tier         string `json:"tier"`
		Remove       bool   `json:"remove"`
	} `json:"index"`
	Loads map[string]struct {
		ActivePrefillTokens float64 `json:"active_prefill_tokens"`
		ActiveDecodeTokens  float64 `json:"active_decode_tokens"`
	} `json:"loads"`
	Signals signals `json:"signals"`
	Request struct {
		Prompt        string  `json:"prompt"`
		PromptTokens  int     `json:"prompt_tokens"`
		OSLHat        float64 `json:"osl_hat"`
		Turn          int     `json:"turn"`
		DecodeWorker  string  `json:"decode_worker"`
		ContextTokens float64 `json:"context_tokens"`
	} `json:"request"`
	Expected map[string]any `json:"expected"`
}

type decisionVectors struct {
	Tolerance struct {
		Standardized float64 `json:"standardized"`
		Scores       float64 `json:"scores"`
	} `json:"tolerance"`
	Decide []decideCase `json:"decide"`
	Route  []routeCase  `json:"route"`
}

var small = Options{MaxWorkers: 16, MaxPromptTokens: 1 << 16, IndexBlocks: 1 << 14}

func near(t *testing.T, what string, got, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: length %d, want %d", what, len(got), len(want))
	}
	for i := range want {
		if !(math.Abs(got[i]-want[i]) <= tol*math.Max(1, math.Abs(want[i]))) {
			t.Fatalf("%s[%d]: got %v, want %v", what, i, got[i], want[i])
		}
	}
}

func TestDecideVectors(t *testing.T) {
	var v decisionVectors
	readJSON(t, "decisions.json", &v)
	routers := map[string]*Router{}
	for i, c := range v.Decide {
		r := routers[c.Table]
		if r == nil {
			var err error
			if r, err = Load(fixture(t, c.Table), small); err != nil {
				t.Fatal(err)
			}
			routers[c.Table] = r
		}
		if err := r.SetSignals(c.Signals.PrefillQueue, c.Signals.QPS); err != nil {
			t.Fatal(err)
		}
		core := r.c
		if err := core.check(core.call("decideFeatures", f64(c.ISL), f64(c.EffP), f64(c.EffD), f64(c.OSLHat), i32(c.Turn), f64(c.ContextTokens)), "decide"); err != nil {
			t.Fatalf("#%d: %v", i, err)
		}
		at := func(s int) float64 { return core.f64At(core.decision, s) }
		reason := reasonNames[int(at(dReason))]
		if at(dBit) != c.Expected.Bit || at(dCluster) != c.Expected.Cluster || reason != c.Expected.Reason || at(dPath) != c.Expected.Bit {
			t.Fatalf("#%d %s: got bit %v cluster %v reason %s", i, c.Table, at(dBit), at(dCluster), reason)
		}
		if at(dIsl) != c.ISL || at(dEffP) != c.EffP || at(dEffD) != c.EffD || at(dOslHat) != c.OSLHat {
			t.Fatalf("#%d: features differ", i)
		}
		if c.Scores != nil {
			near(t, "standardized", core.f64s(core.stdzd, len(c.Standardized)), c.Standardized, v.Tolerance.Standardized)
			near(t, "scores", core.f64s(core.scores, len(c.Scores)), c.Scores, v.Tolerance.Scores)
			near(t, "score", []float64{at(dScore)}, []float64{c.Scores[int(c.Expected.Cluster)]}, v.Tolerance.Scores)
		}
	}
}

// decisionJSON is a decision in the vectors' shape (null for "none"), for comparisons with expected values.
func decisionJSON(d Decision) map[string]any {
	var prefill, cluster, loadP any
	if d.PrefillWorker != "" {
		prefill = d.PrefillWorker
	}
	if d.Load.Prefill >= 0 {
		loadP = d.Load.Prefill
	}
	if d.Cluster >= 0 {
		cluster = float64(d.Cluster)
	}
	return map[string]any{
		"path": d.Path, "bit": float64(d.Bit), "reason": d.Reason, "decode_worker": d.DecodeWorker,
		"prefill_worker": prefill, "cluster": cluster,
		"features":       map[string]any{"isl": d.Features.ISL, "eff_P": d.Features.EffP, "eff_D": d.Features.EffD, "osl_hat": d.Features.OSLHat},
		"matched_blocks": map[string]any{"decode": float64(d.MatchedBlocks.Decode), "prefill": float64(d.MatchedBlocks.Prefill)},
		"blocks":         float64(d.Blocks),
		"cost":           map[string]any{"decode": d.Cost.Decode, "prefill": d.Cost.Prefill},
		"load":           map[string]any{"prefill": loadP, "decode": d.Load.Decode},
	}
}

func TestRouteVectors(t *testing.T) {
	var v decisionVectors
	readJSON(t, "decisions.json", &v)
	for _, c := range v.Route {
		t.Run(c.Type+": "+c.Name, func(t *testing.T) {
			opts := small
			opts.BlockSize, opts.Model, opts.Salt, opts.LoadScale = c.BlockSize, c.Model, c.Salt, c.LoadScale
			opts.TierWeights = c.TierWeights
			for _, w := range c.Workers {
				opts.Workers = append(opts.Workers, Worker{w.ID, w.Role, w.CapacityBlocks})
			}
			r, err := Load(fixture(t, c.Table), opts)
			if err != nil {
				t.Fatal(err)
			}
			for _, op := range c.Index {
				tokens, text, isText := c.Prompts[op.Prompt].input()
				var hashes []uint64
				if isText {
					hashes, err = r.HashText(text[:op.PrefixBytes])
				} else {
					hashes, err = r.Hash(tokens[:op.PrefixTokens])
				}
				tier := op.Tier
				if tier == "" {
					tier = "GPU"
				}
				if err == nil && op.Remove {
					err = r.Index().RemoveTier(op.Worker, hashes, tier)
				} else if err == nil {
					err = r.Index().StoreTier(op.Worker, hashes, tier)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			for id, l := range c.Loads {
				if err := r.SetLoad(id, l.ActivePrefillTokens, l.ActiveDecodeTokens); err != nil {
					t.Fatal(err)
				}
			}
			if err := r.SetSignals(c.Signals.PrefillQueue, c.Signals.QPS); err != nil {
				t.Fatal(err)
			}
			q := c.Request
			tokens, text, isText := c.Prompts[q.Prompt].input()
			req := Request{Tokens: tokens, PromptTokens: q.PromptTokens, OSLHat: Float(q.OSLHat), Turn: q.Turn,
				DecodeWorker: q.DecodeWorker, ContextTokens: Float(q.ContextTokens)}
			if isText {
				req = TextRequest(text)
				req.PromptTokens, req.OSLHat, req.Turn, req.DecodeWorker, req.ContextTokens = q.PromptTokens, Float(q.OSLHat), q.Turn, q.DecodeWorker, Float(q.ContextTokens)
			}
			d, err := r.Route(req)
			if err != nil {
				t.Fatal(err)
			}
			if got := decisionJSON(d); !reflect.DeepEqual(got, c.Expected) {
				t.Fatalf("got %v\nwant %v", got, c.Expected)
			}
		})
	}
}
