package gie

// The plugins with GIE v1.5.0's own types: a scheduling cycle as GIE's scheduler runs it (the handler picks
// profiles until it picks none, each profile runs its filter), through the plugin registry's factories.

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	dolphin "github.com/dolphin-routing/dolphin-routing/bindings/go"
	fwkdl "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/interface/datalayer"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/interface/plugin"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/interface/scheduling"
)

var tablePath = filepath.Join("..", "..", "..", "spec", "vectors", "tables", "dynamo-isl.msgpack")

// profile is a scheduler profile whose only plugin is one filter (GIE's profiles fail when nothing is left).
type profile struct{ f scheduling.Filter }

func (p profile) Run(ctx context.Context, req *scheduling.LLMRequest, cs *scheduling.CycleState, eps []scheduling.Endpoint) (*scheduling.ProfileRunResult, error) {
	left := p.f.Filter(ctx, cs, req, eps)
	if len(left) == 0 {
		return nil, errors.New("no endpoint left")
	}
	return &scheduling.ProfileRunResult{TargetEndpoints: left}, nil
}

func endpoint(addr, role string) scheduling.Endpoint {
	return scheduling.NewEndpoint(&fwkdl.EndpointMetadata{Address: addr, Port: "8000", Labels: map[string]string{RoleLabel: role}}, fwkdl.NewMetrics(), nil)
}

var pool = []scheduling.Endpoint{endpoint("10.0.0.1", "prefill"), endpoint("10.0.0.2", "decode"), endpoint("10.0.0.3", "decode")}

func build(t *testing.T, decider string) (scheduling.ProfileHandler, map[string]scheduling.SchedulerProfile) {
	t.Helper()
	Register()
	params, _ := json.Marshal(Params{TableFile: tablePath, Model: "m", Decider: decider})
	mk := func(typ string) plugin.Plugin {
		p, err := plugin.Registry[typ](typ, params, nil)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	return mk(ProfileHandlerType).(scheduling.ProfileHandler), map[string]scheduling.SchedulerProfile{
		DecodeProfile:  profile{mk(DecodeFilterType).(scheduling.Filter)},
		PrefillProfile: profile{mk(PrefillFilterType).(scheduling.Filter)},
	}
}

// cycle runs one scheduling cycle as GIE's scheduler does.
func cycle(t *testing.T, h scheduling.ProfileHandler, profiles map[string]scheduling.SchedulerProfile, req *scheduling.LLMRequest, eps []scheduling.Endpoint) (*scheduling.SchedulingResult, error) {
	t.Helper()
	cs := scheduling.NewCycleState()
	results := map[string]*scheduling.ProfileRunResult{}
	for i := 0; i < 5; i++ {
		picked := h.Pick(context.Background(), cs, req, profiles, results)
		if len(picked) == 0 {
			break
		}
		for name, p := range picked {
			r, _ := p.Run(context.Background(), req, cs, eps)
			results[name] = r
		}
	}
	return h.ProcessResults(context.Background(), cs, req, results)
}

func completion(id, text string) *scheduling.LLMRequest {
	return &scheduling.LLMRequest{RequestId: id, Body: &scheduling.LLMRequestBody{Completions: &scheduling.CompletionsRequest{Prompt: scheduling.Prompt{Raw: text}}}}
}

func targets(r *scheduling.SchedulingResult, profile string) string {
	if r.ProfileResults[profile] == nil {
		return ""
	}
	return Name(r.ProfileResults[profile].TargetEndpoints[0])
}

// The same decisions as the Go binding's Router fed the same requests: a long new prompt prefills on the prefill
// endpoint and decodes elsewhere; the same prompt again stays local where its decision recorded it.
func TestCycleDecidesAsTheRouter(t *testing.T) {
	h, profiles := build(t, t.Name())
	table, _ := os.ReadFile(tablePath)
	ref, err := dolphin.Load(table, dolphin.Options{Model: "m", RecordDecisions: true, Workers: []dolphin.Worker{
		{ID: "10.0.0.1:8000", Role: "prefill"}, {ID: "10.0.0.2:8000", Role: "decode"}, {ID: "10.0.0.3:8000", Role: "decode"}}})
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("the quick brown fox jumps over the lazy dog ", 400)
	paths := []string{}
	for i, text := range []string{long, long, "hello", long + "and more", strings.Repeat("x y ", 3000)} {
		res, err := cycle(t, h, profiles, completion(string(rune('a'+i)), text), pool)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := ref.Route(dolphin.TextRequest(text))
		if res.PrimaryProfileName != DecodeProfile || targets(res, DecodeProfile) != want.DecodeWorker {
			t.Fatalf("request %d: decode %q, the router says %q", i, targets(res, DecodeProfile), want.DecodeWorker)
		}
		wantPrefill := ""
		if want.Path == "remote" {
			wantPrefill = want.PrefillWorker
		}
		if targets(res, PrefillProfile) != wantPrefill {
			t.Fatalf("request %d: prefill %q, the router says %q (%s)", i, targets(res, PrefillProfile), wantPrefill, want.Path)
		}
		paths = append(paths, want.Path)
	}
	if paths[0] != "remote" || paths[1] != "local" {
		t.Fatalf("paths %v: want the long prompt remote, then local", paths)
	}
}

func TestNoDecodeEndpointFailsTheCycle(t *testing.T) {
	h, profiles := build(t, t.Name())
	if _, err := cycle(t, h, profiles, completion("r", "hi"), pool[:1]); err == nil || !strings.Contains(err.Error(), "no endpoint") {
		t.Fatalf("got %v", err)
	}
}

func TestFactoryErrorsNameTheParameter(t *testing.T) {
	Register()
	for params, want := range map[string]string{
		`{"decider": "none-yet"}`:                              `dolphin-decode-filter "f": parameters: tableFile is required`,
		`{"decider": "missing", "tableFile": "/nope.msgpack"}`: `parameters.tableFile: open /nope.msgpack`,
		`{"decider": 3}`:                                       `parameters: json: cannot unmarshal number`,
	} {
		if _, err := plugin.Registry[DecodeFilterType]("f", json.RawMessage(params), nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", params, err, want)
		}
	}
}
