package dolphin

// The prefix index (fed by KV events in precise mode, or by the router's own decisions) and stand-alone hashing.

import (
	"fmt"
	"runtime"
	"strings"
)

// Index is a router's prefix index: which blocks each worker holds.
type Index struct{ r *Router }

// Index returns the router's prefix index.
func (r *Router) Index() *Index { return &r.index }

func (x *Index) op(export, worker string, hashes []uint64, tier ...int) error {
	r := x.r
	r.mu.Lock()
	defer r.mu.Unlock()
	i, err := r.indexOf(worker)
	if err != nil {
		return err
	}
	if err := r.c.writeU64s(hashes, export); err != nil {
		return err
	}
	args := []uint64{i32(i), i32(len(hashes))}
	for _, t := range tier { // the tier exports' third argument
		args = append(args, i32(t))
	}
	return r.c.check(r.c.call(export, args...), export)
}

// Store records that the worker holds these block hashes (a KV event's BlockStored), in prompt order, on the
// device.
func (x *Index) Store(worker string, hashes []uint64) error {
	return x.op("indexStore", worker, hashes)
}

// Remove records that the worker no longer holds these hashes on the device (BlockRemoved).
func (x *Index) Remove(worker string, hashes []uint64) error {
	return x.op("indexRemove", worker, hashes)
}

// StoreTier is Store in a cache tier by name ("GPU", the device; "CPU", a lower tier: a KV event's medium).
func (x *Index) StoreTier(worker string, hashes []uint64, tier string) error {
	return x.tierOp("indexStoreTier", worker, hashes, tier)
}

// RemoveTier is Remove from a cache tier by name; a block no tier holds is forgotten.
func (x *Index) RemoveTier(worker string, hashes []uint64, tier string) error {
	return x.tierOp("indexRemoveTier", worker, hashes, tier)
}

func (x *Index) tierOp(export, worker string, hashes []uint64, tier string) error {
	code, ok := tiers[tier]
	if !ok {
		return fmt.Errorf("router: unknown tier %q (tiers: %s)", tier, tierNames())
	}
	return x.op(export, worker, hashes, code)
}

// LowerCount is the number of blocks the worker holds in a lower tier only.
func (x *Index) LowerCount(worker string) (int, error) { return x.count("indexLowerCount", worker) }

// tierNames lists the core's tiers in code order, for messages.
func tierNames() string {
	names := make([]string, len(tiers))
	for name, code := range tiers {
		names[code] = name
	}
	return strings.Join(names, ", ")
}

// setTierWeights sets each named lower tier's weight (Options.TierWeights).
func (c *core) setTierWeights(weights map[string]float64) error {
	for name, w := range weights {
		code, ok := tiers[name]
		if !ok {
			return fmt.Errorf("router: TierWeights: unknown tier %q (tiers: %s)", name, tierNames())
		}
		if err := c.check(c.call("setTierWeight", i32(code), f64(w)), "setTierWeight"); err != nil {
			return err
		}
	}
	return nil
}

// Clear forgets what the worker holds; "" clears every worker (AllBlocksCleared).
func (x *Index) Clear(worker string) error {
	r := x.r
	r.mu.Lock()
	defer r.mu.Unlock()
	i := -1
	if worker != "" {
		var err error
		if i, err = r.indexOf(worker); err != nil {
			return err
		}
	}
	return r.c.check(r.c.call("indexClear", i32(i)), "indexClear")
}

// Count is the number of blocks the worker holds.
func (x *Index) Count(worker string) (int, error) { return x.count("indexCount", worker) }

// count is a per-worker count export's answer.
func (x *Index) count(export, worker string) (int, error) {
	r := x.r
	r.mu.Lock()
	defer r.mu.Unlock()
	i, err := r.indexOf(worker)
	if err != nil {
		return 0, err
	}
	return int(r.c.call(export, i32(i))), nil
}

// Match is the longest cached prefix (in blocks) of these hashes on every worker.
func (x *Index) Match(hashes []uint64) (map[string]int, error) {
	r := x.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.c.writeU64s(hashes, "match"); err != nil {
		return nil, err
	}
	if _, err := r.c.checkCount(r.c.call("match", i32(len(hashes)), 0), "match"); err != nil {
		return nil, err
	}
	matched := r.c.u32s(r.c.matched, int(r.c.call("workerSpanNow")))
	// sized for every worker at once: growing it one bucket split at a time was most of a 1,024-worker match
	out := make(map[string]int, len(r.ids))
	for i, id := range r.ids {
		if id != "" {
			out[id] = 0
			if i < len(matched) {
				out[id] = int(matched[i])
			}
		}
	}
	return out, nil
}

// hashCores keeps idle core instances for the stand-alone hash functions: they hold no state between calls (block
// size and root are set on every call), so unlike a Router's instance they can be handed out freely, and goroutines
// hashing at once each get one instead of queueing on one. A bounded free list rather than a sync.Pool: a pool
// empties at every GC and an instance costs a module instantiation and init (milliseconds) to rebuild.
var hashCores = make(chan *core, runtime.GOMAXPROCS(0))

func getHashCore() (*core, error) {
	select {
	case c := <-hashCores:
		return c, nil
	default:
		return newCore(1, 4<<20, 16)
	}
}

func putHashCore(c *core) {
	select {
	case hashCores <- c:
	default:
		c.close() // more idle instances than processors: let this one go
	}
}

func withHashCore(blockSize int, scheme, seed, model, salt string, f func(c *core) ([]uint64, error)) ([]uint64, error) {
	c, err := getHashCore()
	if err != nil {
		return nil, err
	}
	defer putHashCore(c)
	if err := c.check(c.call("setBlockSize", i32(blockSize)), "setBlockSize"); err != nil {
		return nil, err
	}
	if err := c.setScheme(scheme, seed, model, salt); err != nil {
		return nil, err
	}
	return f(c)
}

// HashBlocks returns the chained block hashes of token ids (blockSize tokens a block) under the root
// xxh64(model ‖ "\0" ‖ salt), or the empty root when both are "".
func HashBlocks(tokens []uint32, blockSize int, model, salt string) ([]uint64, error) {
	return withHashCore(blockSize, "", "", model, salt, func(c *core) ([]uint64, error) { return c.hashTokens(tokens) })
}

// HashBlocksLlmd returns llm-d's block hashes of token ids (llm-d-kv-cache v0.9.0's cbor-fnv TokenProcessor, bit for
// bit): blockSize tokens a block, from the root of hashSeed (vLLM's PYTHONHASHSEED) and the model name.
func HashBlocksLlmd(tokens []uint32, blockSize int, hashSeed, model string) ([]uint64, error) {
	return withHashCore(blockSize, "llm-d-cbor-fnv", hashSeed, model, "", func(c *core) ([]uint64, error) {
		return c.hashTokens(tokens)
	})
}

// HashTextBlocks returns the chained 64-byte block hashes of a text prompt (UTF-8) under the same root.
func HashTextBlocks(text string, model, salt string) ([]uint64, error) {
	return withHashCore(16, "", "", model, salt, func(c *core) ([]uint64, error) { return c.hashText([]byte(text)) })
}

// TierOfMedium is the cache tier a KV event's medium names (case-insensitive): "" is the device ("GPU"), as vLLM
// publishes its own cache; ok is false for a medium the core has no tier for (such events are not indexed).
func TierOfMedium(medium string) (tier string, ok bool) {
	if medium == "" {
		return "GPU", true
	}
	tier = strings.ToUpper(medium)
	_, ok = tiers[tier]
	return tier, ok
}
