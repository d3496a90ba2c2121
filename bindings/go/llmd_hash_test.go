package dolphin

// Replays spec/vectors/hashes-cbor-fnv.json (llm-d-kv-cache v0.9.0's cbor-fnv block hashes) through HashBlocksLlmd
// and a Router with HashScheme "llm-d-cbor-fnv", as test/vectors-hash-cbor-fnv.test.ts does for Node.

import (
	"strings"
	"testing"
)

// cborFnvCase is a hashes.json case (its mode and salt unused) with llm-d's hash seed.
type cborFnvCase struct {
	hashCase
	HashSeed string `json:"hash_seed"`
}

func TestCborFnvVectors(t *testing.T) {
	var file struct {
		Scheme string        `json:"scheme"`
		Cases  []cborFnvCase `json:"cases"`
	}
	readJSON(t, "hashes-cbor-fnv.json", &file)
	if file.Scheme != "llm-d-cbor-fnv" {
		t.Fatalf("scheme %q", file.Scheme)
	}
	for _, c := range file.Cases {
		t.Run(c.Name, func(t *testing.T) {
			tokens := c.Tokens
			if c.TokensFormula != nil {
				tokens = lcg(c.TokensFormula.N, c.TokensFormula.Seed)
			}
			got, err := HashBlocksLlmd(tokens, c.BlockSize, c.HashSeed, c.Model)
			if err != nil {
				t.Fatal(err)
			}
			checkHashes(t, c.hashCase, got)
			r, err := Load(fixture(t, "dynamo-isl.msgpack"), Options{
				Workers: []Worker{{ID: "d", Role: "decode"}}, BlockSize: c.BlockSize, Model: c.Model,
				HashScheme: "llm-d-cbor-fnv", HashSeed: c.HashSeed, MaxWorkers: 1, IndexBlocks: 16, CapacityBlocks: 16,
			})
			if err != nil {
				t.Fatal(err)
			}
			got, err = r.Hash(tokens)
			if err != nil {
				t.Fatal(err)
			}
			checkHashes(t, c.hashCase, got)
		})
	}
}

func TestCborFnvRefusals(t *testing.T) {
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{HashScheme: "llm-d-cbor-fnv", Salt: "s"}, "no cache salt"},
		{Options{HashSeed: "42"}, "only the llm-d-cbor-fnv"},
		{Options{HashScheme: "fnv"}, "hashScheme must be"},
	} {
		tc.opts.Workers = []Worker{{ID: "d", Role: "decode"}}
		if _, err := Load(fixture(t, "dynamo-isl.msgpack"), tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, want an error containing %q", tc.opts, err, tc.want)
		}
	}
	r, err := Load(fixture(t, "dynamo-isl.msgpack"), Options{Workers: []Worker{{ID: "d", Role: "decode"}}, HashScheme: "llm-d-cbor-fnv"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.HashText(strings.Repeat("x", 200)); err == nil || !strings.Contains(err.Error(), "text mode needs") {
		t.Errorf("HashText under llm-d-cbor-fnv: got %v", err)
	}
}
