package main

// One pick: the OpenAI body as the router reads it (the token ids a completions request gave; else, in precise
// mode, the token ids an endpoint's /tokenize gives for it, as dolphin serve asks; else its text), one route call,
// and the endpoints it names, restricted to the gateway's subset hint when it gives one.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	dolphin "github.com/dolphin-routing/dolphin-routing/bindings/go"
)

// Pick is the picker's answer for one request.
type Pick struct {
	Decode   string // the destination endpoint
	Prefill  string // the prefill endpoint on the remote path; "" on the local path
	Decision dolphin.Decision
	// Hashes are the prompt's block hashes when it was routed on token ids in precise mode (the engines publish
	// them in their KV events: prefill.go waits for them); nil otherwise.
	Hashes []uint64
	Chat   bool // a chat completion
}

func isChat(path string) bool { return strings.HasPrefix(path, "/v1/chat/completions") }

// PickError is a pick that ends in an immediate response (status: 400, 429 or 503).
type PickError struct {
	Status int
	Msg    string
}

func (e *PickError) Error() string { return e.Msg }

type openAIBody struct {
	Prompt        json.RawMessage   `json:"prompt"`
	Messages      []json.RawMessage `json:"messages"`
	MaxTokens     *float64          `json:"max_tokens"`
	MaxCompletion *float64          `json:"max_completion_tokens"`
}

// Picker picks endpoints for request bodies.
type Picker struct {
	pool          *Pool
	model         string
	precise       bool
	defaultOSLHat float64
	maxInflight   int // per decode endpoint; 0: no limit
	tokenizeWait  time.Duration
	client        *http.Client
}

// Pick routes one request body; path is the request's (:path), "" when Envoy did not send the headers (then a
// body with messages is a chat completion); subset (nil: none) is the hint.
func (pk *Picker) Pick(ctx context.Context, body []byte, path string, subset []string) (Pick, error) {
	var b openAIBody
	var err error
	if err = json.Unmarshal(body, &b); err != nil {
		return Pick{}, &PickError{400, "request body: not a JSON object: " + err.Error()}
	}
	chat := isChat(path) || (path == "" && b.Messages != nil)
	req := dolphin.Request{}
	toks, ok := givenTokens(b.Prompt)
	if !ok || chat {
		toks = nil
		if pk.precise {
			toks = pk.tokenize(ctx, body, chat)
		}
	}
	var hashes []uint64
	switch {
	case toks != nil && pk.precise:
		// hashed once: the router routes on the hashes, and the prefill holds wait for the engines to store them
		if hashes, err = pk.pool.router.Hash(toks); err != nil {
			return Pick{}, &PickError{400, "prompt: " + err.Error()}
		}
		req = dolphin.Request{BlockHashes: hashes, PromptTokens: len(toks)}
	case toks != nil:
		req.Tokens = toks
	default:
		req = dolphin.TextRequest(promptText(b, chat))
	}
	maxTokens := 0.0
	if b.MaxTokens != nil && *b.MaxTokens > 0 {
		maxTokens = *b.MaxTokens
	} else if b.MaxCompletion != nil && *b.MaxCompletion > 0 {
		maxTokens = *b.MaxCompletion
	}
	req.MaxTokens = maxTokens
	t := pk.pool.router.Table()
	if !t.OSLModel && slices.Contains(t.Features, "osl_hat") {
		osl := pk.defaultOSLHat
		if maxTokens > 0 {
			osl = min(osl, maxTokens)
		}
		req.OSLHat = dolphin.Float(osl)
	}
	if chat {
		req.Turn = max(1, userTurns(b.Messages))
	}
	roles := pk.pool.Roles()
	if subset != nil {
		eligible := 0
		for _, a := range subset {
			if r, ok := roles[a]; ok && r != "prefill" {
				eligible++
			}
		}
		if eligible == 0 {
			return Pick{}, &PickError{503, "no endpoint of the subset hint is a ready decode endpoint"}
		}
	}
	d, err := pk.pool.router.Route(req)
	if err != nil {
		var ce *dolphin.Error
		if errors.As(err, &ce) && ce.Name == "NO_DECODE_WORKER" {
			return Pick{}, &PickError{503, "no decode endpoint is ready"}
		}
		return Pick{}, err
	}
	if subset != nil && !slices.Contains(subset, d.DecodeWorker) {
		if d, err = pk.reroute(req, subset, roles); err != nil {
			return Pick{}, err
		}
	}
	if pk.maxInflight > 0 && pk.pool.Inflight(d.DecodeWorker) >= pk.maxInflight {
		return Pick{}, &PickError{429, fmt.Sprintf("decode endpoint %s has %d requests in flight (the limit)", d.DecodeWorker, pk.maxInflight)}
	}
	p := Pick{Decode: d.DecodeWorker, Decision: d, Hashes: hashes, Chat: chat}
	if d.Path == "remote" {
		p.Prefill = d.PrefillWorker
	}
	return p, nil
}

// reroute pins the decode worker to the subset's endpoint holding the longest prefix of the prompt (the first in
// the hint's order on a tie): the core chooses among all workers, and the hint narrows that choice.
func (pk *Picker) reroute(req dolphin.Request, subset []string, roles map[string]string) (dolphin.Decision, error) {
	hashes := req.BlockHashes
	var err error
	if hashes == nil && req.Tokens != nil {
		hashes, err = pk.pool.router.Hash(req.Tokens)
	} else if hashes == nil {
		hashes, err = pk.pool.router.HashText(req.Text)
	}
	if err != nil {
		return dolphin.Decision{}, err
	}
	matched, err := pk.pool.router.Index().Match(hashes)
	if err != nil {
		return dolphin.Decision{}, err
	}
	best, bestN := "", -1
	for _, a := range subset {
		if r, ok := roles[a]; ok && r != "prefill" && matched[a] > bestN {
			best, bestN = a, matched[a]
		}
	}
	req.DecodeWorker = best
	return pk.pool.router.Route(req)
}

// givenTokens is a completions prompt given as token ids (or a one-element list of them).
func givenTokens(raw json.RawMessage) ([]uint32, bool) {
	var toks []uint32
	if json.Unmarshal(raw, &toks) == nil && len(toks) > 0 {
		return toks, true
	}
	var nested [][]uint32
	if json.Unmarshal(raw, &nested) == nil && len(nested) > 0 && len(nested[0]) > 0 {
		return nested[0], true
	}
	return nil, false
}

// promptText is the text the router hashes: a completions prompt (its first element when a list), or the chat
// messages as dolphin serve renders them (src/serve/proxy/openai.ts chatText: "role\ncontent\n" each).
func promptText(b openAIBody, chat bool) string {
	if !chat {
		var s string
		if json.Unmarshal(b.Prompt, &s) == nil {
			return s
		}
		var list []string
		if json.Unmarshal(b.Prompt, &list) == nil && len(list) > 0 {
			return list[0]
		}
		return ""
	}
	var sb strings.Builder
	for _, raw := range b.Messages {
		var m struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		}
		_ = json.Unmarshal(raw, &m)
		sb.WriteString(m.Role + "\n" + contentText(m.Content) + "\n")
	}
	return sb.String()
}

func contentText(raw json.RawMessage) string {
	var s string
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []json.RawMessage
	if json.Unmarshal(raw, &parts) == nil {
		out := make([]string, len(parts))
		for i, p := range parts {
			var t struct {
				Type string  `json:"type"`
				Text *string `json:"text"`
			}
			if json.Unmarshal(p, &t) == nil && t.Type == "text" && t.Text != nil {
				out[i] = *t.Text
			} else {
				out[i] = string(compact(p))
			}
		}
		return strings.Join(out, "\n")
	}
	return string(compact(raw))
}

func compact(raw json.RawMessage) []byte {
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return raw
	}
	return buf.Bytes()
}

func userTurns(messages []json.RawMessage) int {
	n := 0
	for _, raw := range messages {
		var m struct {
			Role string `json:"role"`
		}
		if json.Unmarshal(raw, &m) == nil && m.Role == "user" {
			n++
		}
	}
	return n
}

// tokenizeKeys are the chat-request keys that change the prompt vLLM's /tokenize renders (as routing.ts sends).
var tokenizeKeys = []string{"add_generation_prompt", "continue_final_message", "add_special_tokens", "chat_template", "chat_template_kwargs", "tools"}

// tokenize asks an endpoint's /tokenize (vLLM's) for the prompt's token ids; nil when it fails (routed on text).
func (pk *Picker) tokenize(ctx context.Context, body []byte, chat bool) []uint32 {
	addr := pk.pool.Tokenizer()
	if addr == "" {
		return nil
	}
	var full map[string]json.RawMessage
	if json.Unmarshal(body, &full) != nil {
		return nil
	}
	payload := map[string]json.RawMessage{}
	model, _ := json.Marshal(pk.model)
	payload["model"] = model
	if chat {
		payload["messages"] = full["messages"]
		for _, k := range tokenizeKeys {
			if v, ok := full[k]; ok {
				payload[k] = v
			}
		}
	} else {
		prompt := full["prompt"]
		var list []json.RawMessage
		if json.Unmarshal(prompt, &list) == nil && len(list) > 0 {
			prompt = list[0]
		}
		payload["prompt"] = prompt
		if v, ok := full["add_special_tokens"]; ok {
			payload["add_special_tokens"] = v
		}
	}
	data, _ := json.Marshal(payload)
	ctx, cancel := context.WithTimeout(ctx, pk.tokenizeWait)
	defer cancel()
	hreq, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/tokenize", bytes.NewReader(data))
	hreq.Header.Set("content-type", "application/json")
	res, err := pk.client.Do(hreq)
	var out struct {
		Tokens []uint32 `json:"tokens"`
	}
	if err == nil {
		defer res.Body.Close()
		if res.StatusCode != 200 {
			err = fmt.Errorf("/tokenize answered %d", res.StatusCode)
		} else if err = json.NewDecoder(res.Body).Decode(&out); err == nil && out.Tokens == nil {
			err = errors.New("/tokenize answered without a tokens array")
		}
	}
	if err != nil {
		pk.pool.metrics.TokenizeFailures.WithLabelValues(addr).Inc()
		pk.pool.log.Warn("tokenize failed, routing on text", "worker", addr, "error", err.Error())
		return nil
	}
	return out.Tokens
}

// PickAny is the pick for a request without a body (a GET): the first decode endpoint in rotation, in file order, that
// the subset hint allows.
func (pk *Picker) PickAny(subset []string) (Pick, error) {
	roles := pk.pool.Roles()
	for _, a := range pk.pool.Order() {
		if r, up := roles[a]; up && r != "prefill" && (subset == nil || slices.Contains(subset, a)) {
			return Pick{Decode: a, Decision: dolphin.Decision{Path: "local", DecodeWorker: a}}, nil
		}
	}
	return Pick{}, &PickError{503, "no decode endpoint is ready"}
}
