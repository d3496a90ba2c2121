package main

// The pool's endpoints, from a file the EPP watches (an edit takes effect without a restart): each endpoint's
// address (ip:port, the name the router, the headers and the metrics give it), its role as llm-d labels it
// (`llm-d.ai/role: prefill | decode | both`; a missing role is "both", llm-d's own default) and its KV-event
// endpoints. YAML or JSON:
//
//	endpoints:
//	  - address: 10.0.0.7:8000
//	    labels: {llm-d.ai/role: decode}
//	    kv_events: tcp://10.0.0.7:5557          # vLLM's kv_events_config.endpoint (precise mode)
//	    kv_events_replay: tcp://10.0.0.7:5558   # its replay_endpoint (optional)

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// RoleLabel is llm-d's pod label naming an engine's role in a disaggregated pool.
const RoleLabel = "llm-d.ai/role"

// Endpoint is one engine of the pool.
type Endpoint struct {
	Address        string            `yaml:"address"`
	Labels         map[string]string `yaml:"labels"`
	KVEvents       string            `yaml:"kv_events"`
	KVEventsReplay string            `yaml:"kv_events_replay"`
}

// Role is the endpoint's role label ("both" when unlabelled).
func (e Endpoint) Role() string {
	if r := e.Labels[RoleLabel]; r != "" {
		return r
	}
	return "both"
}

type endpointsFile struct {
	Endpoints []Endpoint `yaml:"endpoints"`
}

// ParseEndpoints reads an endpoints file's bytes; where names the file in errors.
func ParseEndpoints(data []byte, where string) ([]Endpoint, error) {
	var f endpointsFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && err.Error() != "EOF" {
		return nil, fmt.Errorf("%s: %v", where, err)
	}
	seen := map[string]bool{}
	for i, e := range f.Endpoints {
		at := fmt.Sprintf("%s: endpoints[%d]", where, i)
		host, port, err := net.SplitHostPort(e.Address)
		if err != nil || host == "" {
			return nil, fmt.Errorf("%s.address: expected ip:port, got %q", at, e.Address)
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			return nil, fmt.Errorf("%s.address: port must be 1–65535, got %q", at, port)
		}
		if seen[e.Address] {
			return nil, fmt.Errorf("%s.address: %s is listed twice", at, e.Address)
		}
		seen[e.Address] = true
		switch e.Role() {
		case "prefill", "decode", "both":
		default:
			return nil, fmt.Errorf("%s.labels.%s: expected prefill, decode or both, got %q", at, RoleLabel, e.Role())
		}
		if e.KVEventsReplay != "" && e.KVEvents == "" {
			return nil, fmt.Errorf("%s.kv_events_replay: needs kv_events (it replays what that socket publishes)", at)
		}
	}
	return f.Endpoints, nil
}

// ReadEndpoints reads and checks an endpoints file.
func ReadEndpoints(path string) ([]Endpoint, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("endpoints file: %v", err)
	}
	return ParseEndpoints(data, path)
}
