package dolphin

// Fuzz tests: random table bytes and random route inputs never panic (the core never traps) and fail only with
// this package's errors. `go test` runs the seed corpus; `go test -fuzz FuzzTable` explores further.

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func FuzzTable(f *testing.F) {
	entries, _ := os.ReadDir(filepath.Join(specDir, "tables"))
	for _, e := range entries {
		if filepath.Ext(e.Name()) == ".msgpack" {
			f.Add(fixture(f, e.Name()))
		}
	}
	f.Add([]byte{})
	f.Add([]byte{0xc1})
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := DescribeTable(data)
		var te *TableError
		var ce *Error
		if err != nil && !errors.As(err, &te) && !errors.As(err, &ce) {
			t.Fatalf("unexpected error type %T: %v", err, err)
		}
		if te != nil && te.Field == "" && len(data) > 0 {
			t.Logf("no field for %x: %s", data, te.Message)
		}
	})
}

var fuzzRouter *Router

func FuzzRoute(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4}, uint8(0), int32(1), float64(100), float64(-1), int32(0))
	f.Add(make([]byte, 4096), uint8(1), int32(0), float64(-5), float64(1e9), int32(2))
	f.Add([]byte("héllo wörld, dolphins route requests"), uint8(2), int32(7), float64(0), float64(3), int32(1))
	f.Fuzz(func(t *testing.T, data []byte, mode uint8, turn int32, osl, ctx float64, pin int32) {
		if fuzzRouter == nil {
			fuzzRouter = newRouter(t, "ppd.msgpack")
		}
		r := fuzzRouter
		req := Request{OSLHat: Float(osl), Turn: int(turn), ContextTokens: Float(ctx)}
		switch mode % 3 {
		case 0:
			req.Tokens = make([]uint32, len(data)/4)
			for i := range req.Tokens {
				req.Tokens[i] = binary.LittleEndian.Uint32(data[4*i:])
			}
		case 1:
			req = Request{Text: string(data), text: true, OSLHat: req.OSLHat, Turn: req.Turn, ContextTokens: req.ContextTokens}
		default:
			req.BlockHashes = make([]uint64, len(data)/8)
			for i := range req.BlockHashes {
				req.BlockHashes[i] = binary.LittleEndian.Uint64(data[8*i:])
			}
		}
		if pin%4 != 0 {
			req.DecodeWorker = []string{"", "d0", "d1", "p0"}[pin&3]
		}
		_, err := r.Route(req)
		var re *RequestError
		var ce *Error
		if err != nil && !errors.As(err, &re) && !errors.As(err, &ce) {
			t.Fatalf("unexpected error type %T: %v", err, err)
		}
	})
}
