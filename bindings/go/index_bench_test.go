package dolphin

import (
	"fmt"
	"testing"
)

// BenchmarkIndexMatch1024Workers: Index().Match of a 20,000-token prompt's 1,250 blocks against 1,024 workers, worker
// w holding the first (w+1)·1,250/1,025 blocks (bench peers' cache state): the core's match and the map of every
// worker it returns.
func BenchmarkIndexMatch1024Workers(b *testing.B) {
	const n = 1024
	ws := make([]Worker, n)
	for i := range ws {
		ws[i] = Worker{ID: fmt.Sprintf("w%d", i), Role: "decode"}
	}
	r, err := Load(fixture(b, "dynamo-isl.msgpack"), Options{Workers: ws, MaxWorkers: n, CapacityBlocks: 1300, IndexBlocks: 1 << 21})
	if err != nil {
		b.Fatal(err)
	}
	hashes, err := HashBlocks(lcg(20_000, 1), 16, "", "")
	if err != nil {
		b.Fatal(err)
	}
	for w := 0; w < n; w++ {
		if err := r.Index().Store(ws[w].ID, hashes[:(w+1)*len(hashes)/(n+1)]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := r.Index().Match(hashes); err != nil {
			b.Fatal(err)
		}
	}
}
