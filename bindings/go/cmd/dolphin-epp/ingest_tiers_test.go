package main

import "testing"

// A lower tier's events (vLLM's offloading connector: medium "CPU", often without token ids) are indexed in their
// tier: a block the device stored with its tokens is found again by its engine hash; an engine hash never seen
// with tokens is unmapped; a medium with no tier is not indexed.
func TestIngestLowerTierByEngineHash(t *testing.T) {
	p := newPool(t, "dynamo-isl", []Endpoint{{Address: "d:1", Labels: map[string]string{RoleLabel: "decode"}}})
	g := NewIngest(16, 1000)
	n, err := g.Apply(p.router, "d:1", []KVEvent{
		{Kind: "stored", Hashes: []uint64{1000, 1001}, TokenIDs: seq(0, 32), BlockSize: 16},
		{Kind: "stored", Hashes: []uint64{1000, 1001, 77}, BlockSize: 16, Medium: "cpu"},
		{Kind: "removed", Hashes: []uint64{1000, 1001}, Medium: "GPU"},
		{Kind: "stored", Hashes: []uint64{1000}, BlockSize: 16, Medium: "DISK"},
	})
	if err != nil || n.Stored != 4 || n.Lower != 2 || n.Unmapped != 1 || n.Untiered != 1 {
		t.Fatalf("counts %+v, %v", n, err)
	}
	ours, _ := p.router.Hash(seq(0, 32))
	if m, _ := p.router.Index().Match(ours); m["d:1"] != 2 {
		t.Fatalf("matched %v blocks on CPU, want 2", m)
	}
	if k, _ := p.router.Index().LowerCount("d:1"); k != 2 {
		t.Fatalf("%d blocks on the lower tier only, want 2", k)
	}
}

// -tier-weight-cpu is dolphin serve's tiers.CPU: a number in [0, 1].
func TestTierWeightFlag(t *testing.T) {
	base := []string{"-table", "t", "-endpoints", "e"}
	if c, err := parseFlags(base); err != nil || c.CPUTierWeight != 0.8 {
		t.Fatalf("default: %v, %v", c.CPUTierWeight, err)
	}
	if _, err := parseFlags(append(base, "-tier-weight-cpu", "1.5")); err == nil {
		t.Fatal("-tier-weight-cpu 1.5 accepted")
	}
}

// An unknown tier is refused with Node's message.
func TestStoreTierUnknown(t *testing.T) {
	p := newPool(t, "dynamo-isl", []Endpoint{{Address: "d:1", Labels: map[string]string{RoleLabel: "decode"}}})
	err := p.router.Index().StoreTier("d:1", []uint64{1}, "DISK")
	if err == nil || err.Error() != `router: unknown tier "DISK" (tiers: GPU, CPU)` {
		t.Fatalf("got %v", err)
	}
}
