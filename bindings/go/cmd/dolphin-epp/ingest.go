package main

// vLLM's KV events into the router's index, by the same rules as dolphin serve (src/router/kv-events.ts decodes,
// src/serve/proxy/kv-ingest.ts maps): an EventBatch `[ts, events, data_parallel_rank?]` (or a map), each event a
// tagged array or a map with "type"; block hashes are 64-bit ints (signed or not) or bytes (their last 8 bytes,
// big-endian). Each event goes to its medium's cache tier (dolphin.TierOfMedium; an unknown medium is not indexed). vLLM's own hashes are not the
// router's: a BlockStored with token ids is rehashed under the router's scheme (by the core: this file hashes
// nothing itself) and the engine → router pairs are remembered so a later BlockRemoved finds its blocks; when the
// rehash of a parentless run equals the engine's hashes (an engine hashing as the router does, like the emulated
// worker), the engine's hashes are used as they come from then on.

import (
	"bytes"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// KVEvent is one decoded event.
type KVEvent struct {
	Kind      string   // "stored", "removed" or "cleared"
	Hashes    []uint64 // the engine's block hashes
	Parent    *uint64  // BlockStored's parent_block_hash
	TokenIDs  []uint32 // BlockStored's token ids
	BlockSize int
	Medium    string // "" when not given
}

var (
	storedFields  = []string{"block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium"}
	removedFields = []string{"block_hashes", "medium"}
)

// DecodeEventBatch decodes one batch payload (the last ZMQ frame). It never panics: every problem is an error
// naming where it is.
func DecodeEventBatch(payload []byte) ([]KVEvent, error) {
	// not the "loose" decoding: it turns bin into string, and a string hash is an error where bytes are not
	raw, err := msgpack.NewDecoder(bytes.NewReader(payload)).DecodeInterface()
	if err != nil {
		return nil, fmt.Errorf("kv event: (payload): not msgpack: %v", err)
	}
	var events any
	switch b := raw.(type) {
	case []any:
		if len(b) < 2 {
			return nil, fmt.Errorf("kv event: (payload): expected [ts, events, ...], got %d items", len(b))
		}
		events = b[1]
	case map[string]any:
		events = b["events"]
	default:
		return nil, fmt.Errorf("kv event: (payload): expected an EventBatch (array or map), got %T", raw)
	}
	list, ok := events.([]any)
	if !ok {
		return nil, fmt.Errorf("kv event: events: expected an array, got %T", events)
	}
	out := make([]KVEvent, 0, len(list))
	for i, e := range list {
		ev, err := decodeEvent(e, fmt.Sprintf("events[%d]", i))
		if err != nil {
			return nil, err
		}
		out = append(out, ev)
	}
	return out, nil
}

// eventFields reads an event given as a tagged array or a map with a "type" (or "tag") key.
func eventFields(e any, where string) (string, func(names []string, name string) any, error) {
	switch v := e.(type) {
	case []any:
		tag, ok := firstString(v)
		if !ok {
			return "", nil, fmt.Errorf("kv event: %s: expected the event's type name first", where)
		}
		return tag, func(names []string, name string) any {
			for i, n := range names {
				if n == name && i+1 < len(v) {
					return v[i+1]
				}
			}
			return nil
		}, nil
	case map[string]any:
		tag, ok := v["type"].(string)
		if !ok {
			tag, ok = v["tag"].(string)
		}
		if !ok {
			return "", nil, fmt.Errorf(`kv event: %s: expected a "type" key naming the event`, where)
		}
		return tag, func(_ []string, name string) any { return v[name] }, nil
	}
	return "", nil, fmt.Errorf("kv event: %s: expected an event (array or map), got %T", where, e)
}

func firstString(v []any) (string, bool) {
	if len(v) == 0 {
		return "", false
	}
	s, ok := v[0].(string)
	return s, ok
}

func decodeEvent(e any, where string) (KVEvent, error) {
	tag, get, err := eventFields(e, where)
	if err != nil {
		return KVEvent{}, err
	}
	switch tag {
	case "BlockStored":
		ev := KVEvent{Kind: "stored"}
		if ev.Hashes, err = hashList(get(storedFields, "block_hashes"), where+".block_hashes"); err != nil {
			return ev, err
		}
		if p := get(storedFields, "parent_block_hash"); p != nil {
			h, err := hash64(p, where+".parent_block_hash")
			if err != nil {
				return ev, err
			}
			ev.Parent = &h
		}
		if t := get(storedFields, "token_ids"); t != nil {
			list, ok := t.([]any)
			if !ok {
				return ev, fmt.Errorf("kv event: %s.token_ids: expected an array of token ids", where)
			}
			ev.TokenIDs = make([]uint32, len(list))
			for i, x := range list {
				n, ok := integer(x)
				if !ok || n < 0 || n > 0xffffffff {
					return ev, fmt.Errorf("kv event: %s.token_ids: expected an array of token ids", where)
				}
				ev.TokenIDs[i] = uint32(n)
			}
		}
		n, ok := integer(get(storedFields, "block_size"))
		if !ok || n < 1 {
			return ev, fmt.Errorf("kv event: %s.block_size: expected a positive integer, got %v", where, get(storedFields, "block_size"))
		}
		ev.BlockSize = int(n)
		ev.Medium, err = optionalString(get(storedFields, "medium"), where+".medium")
		return ev, err
	case "BlockRemoved":
		ev := KVEvent{Kind: "removed"}
		if ev.Hashes, err = hashList(get(removedFields, "block_hashes"), where+".block_hashes"); err != nil {
			return ev, err
		}
		ev.Medium, err = optionalString(get(removedFields, "medium"), where+".medium")
		return ev, err
	case "AllBlocksCleared":
		return KVEvent{Kind: "cleared"}, nil
	}
	return KVEvent{}, fmt.Errorf("kv event: %s: unknown event type %q", where, tag)
}

// wide is any msgpack integer as 64 bits (signed says how to read u); ok false for anything else.
func wide(v any) (u uint64, signed, ok bool) {
	switch n := v.(type) {
	case int8:
		return uint64(n), true, true
	case int16:
		return uint64(n), true, true
	case int32:
		return uint64(n), true, true
	case int64:
		return uint64(n), true, true
	case uint8:
		return uint64(n), false, true
	case uint16:
		return uint64(n), false, true
	case uint32:
		return uint64(n), false, true
	case uint64:
		return n, false, true
	}
	return 0, false, false
}

func integer(v any) (int64, bool) {
	u, signed, ok := wide(v)
	if !ok || (!signed && u > 1<<63-1) {
		return 0, false
	}
	return int64(u), true
}

func hash64(v any, where string) (uint64, error) {
	if u, _, ok := wide(v); ok {
		return u, nil // a signed hash names the same 64 bits
	}
	switch h := v.(type) {
	case []byte:
		if len(h) == 0 {
			return 0, fmt.Errorf("kv event: %s: empty bytes hash", where)
		}
		var x uint64
		for _, b := range h[max(0, len(h)-8):] {
			x = x<<8 | uint64(b)
		}
		return x, nil
	}
	return 0, fmt.Errorf("kv event: %s: expected an integer or bytes block hash, got %T", where, v)
}

func hashList(v any, where string) ([]uint64, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("kv event: %s: expected an array of block hashes, got %T", where, v)
	}
	out := make([]uint64, len(list))
	for i, x := range list {
		h, err := hash64(x, fmt.Sprintf("%s[%d]", where, i))
		if err != nil {
			return nil, err
		}
		out[i] = h
	}
	return out, nil
}

func optionalString(v any, where string) (string, error) {
	if v == nil {
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("kv event: %s: expected a string or nil, got %T", where, v)
	}
	return s, nil
}
