// Package gie is dolphin-routing's decision as Gateway API Inference Extension (v1.5.0) scheduling plugins, for users
// who build their own endpoint picker on GIE's framework: a profile handler choosing the decode profile and, when
// the core routes the request remotely, the prefill profile (ProfileHandlerType), and two filters those profiles
// run (DecodeFilterType, PrefillFilterType), which keep only the endpoint the core chose. One Decider (the Go
// binding's Router over the same core.wasm and tables) makes one decision per request, in the decode profile's
// filter, and leaves it in the cycle state for the prefill filter and the handler.
//
// The endpoints' roles are llm-d's pod labels (llm-d.ai/role: prefill, decode or both; missing: both); an endpoint
// is named "address:port", as the picker protocol names destinations. The prefix index is fed by the decisions
// (approximate mode: a plugin sees no KV events; dolphin-epp is the precise picker). Parameters, in the EPP's
// plugin configuration: {"tableFile": "/etc/dolphin/table.msgpack", "model": "...", "blockSize": 16, "decider":
// "dolphin"}; plugins naming the same decider share it.
package gie

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"

	dolphin "github.com/dolphin-routing/dolphin-routing/bindings/go"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/interface/plugin"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/interface/scheduling"
)

const (
	ProfileHandlerType = "dolphin-pd-profile-handler"
	DecodeFilterType   = "dolphin-decode-filter"
	PrefillFilterType  = "dolphin-prefill-filter"
	// DecodeProfile and PrefillProfile are the scheduler profiles' names the handler expects.
	DecodeProfile  = "decode"
	PrefillProfile = "prefill"
	RoleLabel      = "llm-d.ai/role"
	decisionKey    = plugin.StateKey("dolphin-routing/decision")
)

// Params are a plugin's parameters.
type Params struct {
	TableFile string `json:"tableFile"`
	Model     string `json:"model"`
	BlockSize int    `json:"blockSize"`
	Decider   string `json:"decider"`
}

// Decider routes requests with one table over the endpoints it is shown.
type Decider struct {
	mu     sync.Mutex
	router *dolphin.Router
	roles  map[string]string // endpoint → role, as registered in the router
}

// NewDecider loads a table for a decider.
func NewDecider(table []byte, model string, blockSize int) (*Decider, error) {
	r, err := dolphin.Load(table, dolphin.Options{Model: model, BlockSize: blockSize, RecordDecisions: true})
	if err != nil {
		return nil, err
	}
	return &Decider{router: r, roles: map[string]string{}}, nil
}

// Name is an endpoint's name in the router and in the picker protocol: "address:port".
func Name(e scheduling.Endpoint) string {
	m := e.GetMetadata()
	return m.Address + ":" + m.Port
}

func role(e scheduling.Endpoint) string {
	if r := e.GetMetadata().Labels[RoleLabel]; r != "" {
		return r
	}
	return "both"
}

// sync makes the router's workers the endpoints shown (new ones added, changed roles replaced; endpoints not shown
// stay, with their index, as GIE's prefix plugin keeps its LRU).
func (d *Decider) sync(endpoints []scheduling.Endpoint) error {
	for _, e := range endpoints {
		name, r := Name(e), role(e)
		if had, ok := d.roles[name]; ok && had == r {
			continue
		} else if ok {
			if err := d.router.RemoveWorker(name); err != nil {
				return err
			}
		}
		if err := d.router.AddWorker(dolphin.Worker{ID: name, Role: r}); err != nil {
			return err
		}
		d.roles[name] = r
	}
	return nil
}

// Decide routes one request over the endpoints (their token ids when the request carries them, else its text).
func (d *Decider) Decide(req *scheduling.LLMRequest, endpoints []scheduling.Endpoint) (dolphin.Decision, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.sync(endpoints); err != nil {
		return dolphin.Decision{}, err
	}
	r := dolphin.Request{}
	if req.TokenizedPrompt != nil && len(req.TokenizedPrompt.TokenIDs) > 0 {
		r.Tokens = req.TokenizedPrompt.TokenIDs
	} else {
		text := ""
		if req.Body != nil {
			text = req.Body.PromptText()
		}
		r = dolphin.TextRequest(text)
	}
	return d.router.Route(r)
}

var (
	decidersMu sync.Mutex
	deciders   = map[string]*Decider{}
)

// deciderFor is the decider the parameters name, made on first use.
func deciderFor(raw json.RawMessage) (*Decider, error) {
	var p Params
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, fmt.Errorf("parameters: %v", err)
		}
	}
	if p.Decider == "" {
		p.Decider = "dolphin"
	}
	decidersMu.Lock()
	defer decidersMu.Unlock()
	if d := deciders[p.Decider]; d != nil {
		return d, nil
	}
	if p.TableFile == "" {
		return nil, fmt.Errorf("parameters: tableFile is required (the first plugin naming decider %q loads it)", p.Decider)
	}
	table, err := os.ReadFile(p.TableFile)
	if err != nil {
		return nil, fmt.Errorf("parameters.tableFile: %v", err)
	}
	d, err := NewDecider(table, p.Model, p.BlockSize)
	if err != nil {
		return nil, fmt.Errorf("parameters.tableFile %s: %v", p.TableFile, err)
	}
	deciders[p.Decider] = d
	return d, nil
}

// decisionState carries the request's decision in the cycle state.
type decisionState struct{ d dolphin.Decision }

func (s *decisionState) Clone() plugin.StateData { c := *s; return &c }

// DecisionOf is the decision the decode filter made in this cycle.
func DecisionOf(cs *scheduling.CycleState) (dolphin.Decision, bool) {
	s, err := scheduling.ReadCycleStateKey[*decisionState](cs, decisionKey)
	if err != nil {
		return dolphin.Decision{}, false
	}
	return s.d, true
}

// ---- the plugins --------------------------------------------------------------------------------------------

// DecodeFilter routes the request and keeps the decode endpoint the core chose.
type DecodeFilter struct {
	name    string
	decider *Decider
}

// PrefillFilter keeps the prefill endpoint of the cycle's decision (none on the local path).
type PrefillFilter struct{ name string }

// ProfileHandler runs the decode profile, then the prefill profile when the decision is remote.
type ProfileHandler struct{ name string }

var (
	_ scheduling.Filter         = (*DecodeFilter)(nil)
	_ scheduling.Filter         = (*PrefillFilter)(nil)
	_ scheduling.ProfileHandler = (*ProfileHandler)(nil)
)

func (f *DecodeFilter) TypedName() plugin.TypedName {
	return plugin.TypedName{Type: DecodeFilterType, Name: f.name}
}
func (f *PrefillFilter) TypedName() plugin.TypedName {
	return plugin.TypedName{Type: PrefillFilterType, Name: f.name}
}
func (h *ProfileHandler) TypedName() plugin.TypedName {
	return plugin.TypedName{Type: ProfileHandlerType, Name: h.name}
}

// Filter keeps the decode endpoint the core chose among them (nothing when routing fails, e.g. no decode endpoint).
func (f *DecodeFilter) Filter(_ context.Context, cs *scheduling.CycleState, req *scheduling.LLMRequest, eps []scheduling.Endpoint) []scheduling.Endpoint {
	d, err := f.decider.Decide(req, eps)
	if err != nil {
		return nil
	}
	cs.Write(decisionKey, &decisionState{d})
	return only(eps, d.DecodeWorker)
}

// Filter keeps the decision's prefill endpoint.
func (f *PrefillFilter) Filter(_ context.Context, cs *scheduling.CycleState, _ *scheduling.LLMRequest, eps []scheduling.Endpoint) []scheduling.Endpoint {
	d, ok := DecisionOf(cs)
	if !ok || d.Path != "remote" {
		return nil
	}
	return only(eps, d.PrefillWorker)
}

func only(eps []scheduling.Endpoint, name string) []scheduling.Endpoint {
	for _, e := range eps {
		if Name(e) == name {
			return []scheduling.Endpoint{e}
		}
	}
	return nil
}

// Pick runs the decode profile first, then the prefill profile when the decision says remote.
func (h *ProfileHandler) Pick(_ context.Context, cs *scheduling.CycleState, _ *scheduling.LLMRequest,
	profiles map[string]scheduling.SchedulerProfile, results map[string]*scheduling.ProfileRunResult) map[string]scheduling.SchedulerProfile {
	if _, ran := results[DecodeProfile]; !ran {
		if p, ok := profiles[DecodeProfile]; ok {
			return map[string]scheduling.SchedulerProfile{DecodeProfile: p}
		}
		return nil
	}
	if _, ran := results[PrefillProfile]; ran {
		return nil
	}
	if d, ok := DecisionOf(cs); ok && d.Path == "remote" {
		if p, ok := profiles[PrefillProfile]; ok {
			return map[string]scheduling.SchedulerProfile{PrefillProfile: p}
		}
	}
	return nil
}

// ProcessResults makes the decode profile primary; a failed decode run is an error.
func (h *ProfileHandler) ProcessResults(_ context.Context, _ *scheduling.CycleState, _ *scheduling.LLMRequest,
	results map[string]*scheduling.ProfileRunResult) (*scheduling.SchedulingResult, error) {
	if r := results[DecodeProfile]; r == nil || len(r.TargetEndpoints) == 0 {
		return nil, errors.New("dolphin: the decode profile found no endpoint")
	}
	return &scheduling.SchedulingResult{ProfileResults: results, PrimaryProfileName: DecodeProfile}, nil
}

// Register adds the three plugins to GIE's plugin registry (call it before the EPP loads its configuration).
func Register() {
	plugin.Register(DecodeFilterType, func(name string, params json.RawMessage, _ plugin.Handle) (plugin.Plugin, error) {
		d, err := deciderFor(params)
		if err != nil {
			return nil, fmt.Errorf("%s %q: %v", DecodeFilterType, name, err)
		}
		return &DecodeFilter{name: name, decider: d}, nil
	})
	plugin.Register(PrefillFilterType, func(name string, _ json.RawMessage, _ plugin.Handle) (plugin.Plugin, error) {
		return &PrefillFilter{name: name}, nil
	})
	plugin.Register(ProfileHandlerType, func(name string, _ json.RawMessage, _ plugin.Handle) (plugin.Plugin, error) {
		return &ProfileHandler{name: name}, nil
	})
}
