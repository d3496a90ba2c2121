package main

import (
	"os"
	"strings"
	"testing"
)

func TestPickOpenAIBodies(t *testing.T) {
	table, err := os.ReadFile("../../../../spec/vectors/tables/always-remote.msgpack")
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPicker(table, []string{"d0:8000", "d1:8000"}, []string{"p0:8000"})
	if err != nil {
		t.Fatal(err)
	}
	system := strings.Repeat("You are a helpful assistant that answers briefly. ", 20)
	chat := `{"model":"m","messages":[{"role":"system","content":"` + system + `"},{"role":"user","content":"hi"}],"max_tokens":64}`
	first, err := p.Pick([]byte(chat))
	if err != nil {
		t.Fatal(err)
	}
	if first.Path != "remote" || first.Prefill != "p0:8000" || first.Decode == "" {
		t.Fatalf("first pick %+v", first)
	}
	// the same long system prompt again: the decode endpoint that cached it wins (recorded decisions)
	again, _ := p.Pick([]byte(strings.Replace(chat, `"hi"`, `"hello again"`, 1)))
	if again.Decode != first.Decode {
		t.Fatalf("prefix affinity lost: %+v then %+v", first, again)
	}
	if _, err := p.Pick([]byte(`{"model":"m","prompt":"Once upon a time"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Pick([]byte(`not json`)); err == nil {
		t.Fatal("want an error for a body that is not JSON")
	}
}
