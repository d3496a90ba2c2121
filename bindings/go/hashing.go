package dolphin

import "fmt"

// A router's chained block hashes (its block size, scheme and root), and the core calls they share with
// HashBlocks, HashBlocksLlmd and HashTextBlocks (index.go).

// Hash returns the chained block hashes of token ids under this router's block size and root.
func (r *Router) Hash(tokens []uint32) ([]uint64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.c.hashTokens(tokens)
}

// HashText returns the chained 64-byte block hashes of a text prompt under this router's root.
func (r *Router) HashText(text string) ([]uint64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.c.hashText([]byte(text))
}

// setScheme selects the block-hash scheme ("" is xxh64-chain) and its root: model ‖ "\0" ‖ salt for the xxh64
// chain (the empty root when both are ""), llm-d's h_0 of the hash seed and model for llm-d-cbor-fnv.
func (c *core) setScheme(scheme, seed, model, salt string) error {
	if scheme == "" {
		scheme = "xxh64-chain"
	}
	code, known := hashSchemes[scheme]
	switch {
	case !known:
		return &RequestError{fmt.Sprintf("router: hashScheme must be xxh64-chain or llm-d-cbor-fnv, got %q", scheme)}
	case code == hashSchemes["xxh64-chain"] && seed != "":
		return &RequestError{"router: hashSeed: only the llm-d-cbor-fnv hash scheme has one"}
	case code == hashSchemes["llm-d-cbor-fnv"] && salt != "":
		return &RequestError{"router: salt: the llm-d-cbor-fnv hash scheme has no cache salt (use hashSeed)"}
	case code == hashSchemes["xxh64-chain"]:
		root := ""
		if model != "" || salt != "" {
			root = model + "\x00" + salt
		}
		if err := c.writeBytes([]byte(root), "setRoot"); err != nil {
			return err
		}
		return c.check(c.call("setRoot", i32(len(root))), "setRoot")
	}
	if err := c.writeBytes([]byte(seed+model), "setHashScheme"); err != nil {
		return err
	}
	return c.check(c.call("setHashScheme", i32(code), i32(len(seed)), i32(len(model))), "setHashScheme")
}

func (c *core) hashTokens(tokens []uint32) ([]uint64, error) {
	if err := c.writeU32s(tokens, "hashTokens"); err != nil {
		return nil, err
	}
	n, err := c.checkCount(c.call("hashTokens", i32(len(tokens))), "hashTokens")
	if err != nil {
		return nil, err
	}
	return c.u64s(c.hashes, n), nil
}

func (c *core) hashText(text []byte) ([]uint64, error) {
	if err := c.writeBytes(text, "hashText"); err != nil {
		return nil, err
	}
	n, err := c.checkCount(c.call("hashText", i32(len(text))), "hashText")
	if err != nil {
		return nil, err
	}
	return c.u64s(c.hashes, n), nil
}
