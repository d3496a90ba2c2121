package dolphin

// A router's chained block hashes (its block size and root), and the two core calls they share with
// HashBlocks and HashTextBlocks (index.go).

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
