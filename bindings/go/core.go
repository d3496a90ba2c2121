package dolphin

// The Go ↔ WebAssembly boundary: one core instance (wazero, compiler engine, no cgo) and typed calls over its raw
// exports. The module is compiled once per process and instantiated per Router. Memory never grows after init
// (docs/abi.md), so one byte view over it is taken once; inputs are copied into it, records read from it.

import (
	"context"
	_ "embed"
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"unsafe"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

//go:embed core.wasm
var coreWasm []byte // copied here from build/core.wasm by `npm run build`, never by hand

var (
	compileOnce sync.Once
	wasmRuntime wazero.Runtime
	compiled    wazero.CompiledModule
	compileErr  error
)

// compiledCore compiles the embedded core once per process (tens of ms); instances are cheap.
func compiledCore() (wazero.Runtime, wazero.CompiledModule, error) {
	compileOnce.Do(func() {
		ctx := context.Background()
		wasmRuntime = wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler())
		compiled, compileErr = wasmRuntime.CompileModule(ctx, coreWasm)
	})
	return wasmRuntime, compiled, compileErr
}

// littleEndian: token ids and hashes are copied into the core's (little-endian) memory in one memmove when the host
// is little-endian too, element by element otherwise.
var littleEndian = func() bool { x := uint16(1); return *(*byte)(unsafe.Pointer(&x)) == 1 }()

// core is one instance; not safe for concurrent use (a Router guards it with a mutex).
type core struct {
	ctx      context.Context
	mod      api.Module
	mem      []byte
	fns      map[string]api.Function
	stack    []uint64
	inputPtr uint32
	inputCap uint32
	hashes   uint32
	matched  uint32
	request  uint32
	decision uint32
	scores   uint32
	stdzd    uint32
}

func newCore(maxWorkers, maxInputBytes, indexBlocks int) (*core, error) {
	rt, cm, err := compiledCore()
	if err != nil {
		return nil, fmt.Errorf("dolphin: compiling core.wasm: %w", err)
	}
	ctx := context.Background()
	mod, err := rt.InstantiateModule(ctx, cm, wazero.NewModuleConfig().WithName(""))
	if err != nil {
		return nil, fmt.Errorf("dolphin: instantiating core.wasm: %w", err)
	}
	c := &core{ctx: ctx, mod: mod, fns: map[string]api.Function{}, stack: make([]uint64, 8)}
	if fn := mod.ExportedFunction("abiVersion"); fn == nil {
		return nil, fmt.Errorf(`dolphin: the module does not export "abiVersion" (not a dolphin-routing core?)`)
	}
	c.fns["abiVersion"] = mod.ExportedFunction("abiVersion")
	if v := c.call("abiVersion"); v != abiVersion {
		return nil, fmt.Errorf("dolphin: the core module implements ABI version %d, but this host expects ABI version %d "+
			"(rebuild the core and the host from the same spec/abi.json: npm run build)", v, abiVersion)
	}
	for _, name := range exportNames {
		fn := mod.ExportedFunction(name)
		if fn == nil {
			return nil, fmt.Errorf(`dolphin: the module does not export "%s" (not a dolphin-routing core?)`, name)
		}
		c.fns[name] = fn
	}
	if mod.Memory() == nil {
		return nil, fmt.Errorf(`dolphin: the module does not export "memory" (not a dolphin-routing core?)`)
	}
	if err := c.check(c.call("init", i32(maxWorkers), i32(maxInputBytes), i32(indexBlocks)), "init"); err != nil {
		return nil, err
	}
	mem, ok := mod.Memory().Read(0, mod.Memory().Size())
	if !ok {
		return nil, fmt.Errorf("dolphin: cannot view the core's memory")
	}
	c.mem = mem
	c.inputPtr = uint32(c.call("inputPtr"))
	c.inputCap = uint32(c.call("inputCapacity"))
	c.hashes = uint32(c.call("hashesPtr"))
	c.matched = uint32(c.call("matchedPtr"))
	c.request = uint32(c.call("requestPtr"))
	c.decision = uint32(c.call("decisionPtr"))
	c.scores = uint32(c.call("scoresPtr"))
	c.stdzd = uint32(c.call("standardizedPtr"))
	return c, nil
}

// close frees the instance's memory.
func (c *core) close() { _ = c.mod.Close(c.ctx) }

func i32(v int) uint64     { return api.EncodeI32(int32(v)) }
func f64(v float64) uint64 { return api.EncodeF64(v) }

// call runs an export with encoded parameters and returns its i32 result (CallWithStack: no allocation a call).
func (c *core) call(name string, params ...uint64) int32 {
	fn := c.fns[name]
	n := copy(c.stack, params)
	if err := fn.CallWithStack(c.ctx, c.stack[:max(n, 1)]); err != nil {
		// the core never traps on bad input (docs/abi.md); a trap is a bug in the core, not the caller's input
		panic(fmt.Sprintf("dolphin: core.wasm trapped in %s: %v", name, err))
	}
	return int32(uint32(c.stack[0]))
}

// callF64 runs an export returning f64.
func (c *core) callF64(name string) float64 {
	if err := c.fns[name].CallWithStack(c.ctx, c.stack[:1]); err != nil {
		panic(fmt.Sprintf("dolphin: core.wasm trapped in %s: %v", name, err))
	}
	return api.DecodeF64(c.stack[0])
}

func (c *core) check(rc int32, context string) error {
	if rc == 0 {
		return nil
	}
	return newCoreError(int(rc), c.callF64("errorDetail"), context)
}

// checkCount: exports that return a count return −code on failure.
func (c *core) checkCount(n int32, context string) (int, error) {
	if n < 0 {
		return 0, c.check(-n, context)
	}
	return int(n), nil
}

func (c *core) fits(n int, what string) error {
	if n > int(c.inputCap) {
		return newCoreError(CodeInputTooLarge, float64(n), fmt.Sprintf("%s (%d bytes > %d)", what, n, c.inputCap))
	}
	return nil
}

func (c *core) writeBytes(b []byte, what string) error {
	if err := c.fits(len(b), what); err != nil {
		return err
	}
	copy(c.mem[c.inputPtr:], b)
	return nil
}

func (c *core) writeU32s(v []uint32, what string) error {
	if err := c.fits(4*len(v), what); err != nil {
		return err
	}
	dst := c.mem[c.inputPtr : int(c.inputPtr)+4*len(v)]
	if littleEndian && len(v) > 0 {
		copy(dst, unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v)))
		return nil
	}
	for i, t := range v {
		binary.LittleEndian.PutUint32(dst[4*i:], t)
	}
	return nil
}

func (c *core) writeU64s(v []uint64, what string) error {
	if err := c.fits(8*len(v), what); err != nil {
		return err
	}
	dst := c.mem[c.inputPtr : int(c.inputPtr)+8*len(v)]
	if littleEndian && len(v) > 0 {
		copy(dst, unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 8*len(v)))
		return nil
	}
	for i, h := range v {
		binary.LittleEndian.PutUint64(dst[8*i:], h)
	}
	return nil
}

func (c *core) setF64(ptr uint32, slot int, v float64) {
	binary.LittleEndian.PutUint64(c.mem[ptr+uint32(8*slot):], math.Float64bits(v))
}

func (c *core) f64At(ptr uint32, slot int) float64 {
	return math.Float64frombits(binary.LittleEndian.Uint64(c.mem[ptr+uint32(8*slot):]))
}

func (c *core) f64s(ptr uint32, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = c.f64At(ptr, i)
	}
	return out
}

func (c *core) u64s(ptr uint32, n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = binary.LittleEndian.Uint64(c.mem[ptr+uint32(8*i):])
	}
	return out
}

func (c *core) u32s(ptr uint32, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(c.mem[ptr+uint32(4*i):])
	}
	return out
}
