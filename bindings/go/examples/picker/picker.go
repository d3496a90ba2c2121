// Package main is an endpoint-picker-style scorer, as llm-d's inference scheduler plugins and the Gateway API
// Inference Extension's endpoint picker do: it reads an OpenAI request body (/v1/completions or
// /v1/chat/completions), routes it with a dolphin-routing table, and answers with the decode endpoint and, when the
// request should prefill remotely, the prefill endpoint (llm-d's picker sets the latter as the
// x-prefiller-host-port header). Prefixes are hashed as text (64-byte blocks, the approximate prefix scheme), so no
// tokenizer is needed, and each decision is recorded in the router's index (no KV events here).
package main

import (
	"encoding/json"
	"fmt"
	"strings"

	dolphin "github.com/dolphin-routing/dolphin-routing/bindings/go"
)

// Pick is the picker's answer for one request.
type Pick struct {
	Decode  string `json:"decode"`
	Prefill string `json:"prefill,omitempty"` // "" when the request prefills on the decode endpoint
	Path    string `json:"path"`
	Reason  string `json:"reason"`
}

// Picker holds one router over the pool's endpoints.
type Picker struct{ router *dolphin.Router }

// NewPicker builds a picker from a table file and the pool's endpoints (host:port).
func NewPicker(table []byte, decode, prefill []string) (*Picker, error) {
	workers := []dolphin.Worker{}
	for _, d := range decode {
		workers = append(workers, dolphin.Worker{ID: d, Role: "decode"})
	}
	for _, p := range prefill {
		workers = append(workers, dolphin.Worker{ID: p, Role: "prefill"})
	}
	r, err := dolphin.Load(table, dolphin.Options{Workers: workers, RecordDecisions: true})
	if err != nil {
		return nil, err
	}
	return &Picker{r}, nil
}

// openAIRequest is the part of an OpenAI body the picker reads.
type openAIRequest struct {
	Model    string          `json:"model"`
	Prompt   json.RawMessage `json:"prompt"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	MaxTokens           float64 `json:"max_tokens"`
	MaxCompletionTokens float64 `json:"max_completion_tokens"`
}

// promptText is the text whose prefix the engines cache: the prompt, or the chat messages in order.
func promptText(body []byte) (string, float64, error) {
	var req openAIRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return "", 0, fmt.Errorf("picker: the body is not an OpenAI request: %w", err)
	}
	maxTokens := req.MaxTokens
	if req.MaxCompletionTokens > 0 {
		maxTokens = req.MaxCompletionTokens
	}
	if len(req.Prompt) > 0 {
		var s string
		if json.Unmarshal(req.Prompt, &s) == nil {
			return s, maxTokens, nil
		}
		return string(req.Prompt), maxTokens, nil // token arrays or batches: hash their JSON text
	}
	var b strings.Builder
	for _, m := range req.Messages {
		var s string
		if json.Unmarshal(m.Content, &s) != nil {
			s = string(m.Content) // structured content parts
		}
		b.WriteString(m.Role)
		b.WriteString(": ")
		b.WriteString(s)
		b.WriteString("\n")
	}
	if b.Len() == 0 {
		return "", 0, fmt.Errorf("picker: the body has neither prompt nor messages")
	}
	return b.String(), maxTokens, nil
}

// Pick routes one OpenAI request body. The output length is the table's own prediction when it has an
// output-length model, else max_tokens when given (a fair upper bound), else 256.
func (p *Picker) Pick(body []byte) (Pick, error) {
	text, maxTokens, err := promptText(body)
	if err != nil {
		return Pick{}, err
	}
	req := dolphin.TextRequest(text)
	req.MaxTokens = maxTokens
	if !p.router.Table().OSLModel {
		osl := 256.0
		if maxTokens > 0 {
			osl = maxTokens
		}
		req.OSLHat = dolphin.Float(osl)
	}
	d, err := p.router.Route(req)
	if err != nil {
		return Pick{}, err
	}
	out := Pick{Decode: d.DecodeWorker, Path: d.Path, Reason: d.Reason}
	if d.Path == "remote" {
		out.Prefill = d.PrefillWorker
	}
	return out, nil
}
