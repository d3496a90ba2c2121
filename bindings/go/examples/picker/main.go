package main

// Usage: picker -table table.msgpack -decode d0:8000,d1:8000 -prefill p0:8000 [-listen :9002]
// Without -listen it reads one OpenAI request body on stdin and prints the pick as JSON. With -listen it serves
// POST /pick (the body is the OpenAI request) and answers the pick as JSON, with the prefill endpoint also in the
// x-prefiller-host-port header, as llm-d's picker sets it.

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strings"
)

func main() {
	tablePath := flag.String("table", "", "table file (msgpack), e.g. from dolphin learn")
	decode := flag.String("decode", "", "decode endpoints, comma-separated host:port")
	prefill := flag.String("prefill", "", "prefill endpoints, comma-separated host:port")
	listen := flag.String("listen", "", "serve POST /pick on this address instead of reading stdin")
	flag.Parse()
	table, err := os.ReadFile(*tablePath)
	if err != nil {
		log.Fatalf("picker: -table: %v", err)
	}
	split := func(s string) []string {
		if s == "" {
			return nil
		}
		return strings.Split(s, ",")
	}
	p, err := NewPicker(table, split(*decode), split(*prefill))
	if err != nil {
		log.Fatalf("picker: %v", err)
	}
	if *listen == "" {
		body, err := io.ReadAll(os.Stdin)
		if err != nil {
			log.Fatal(err)
		}
		pick, err := p.Pick(body)
		if err != nil {
			log.Fatal(err)
		}
		out, _ := json.Marshal(pick)
		fmt.Println(string(out))
		return
	}
	http.HandleFunc("/pick", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		pick, err := p.Pick(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if pick.Prefill != "" {
			w.Header().Set("x-prefiller-host-port", pick.Prefill)
		}
		w.Header().Set("content-type", "application/json")
		_ = json.NewEncoder(w).Encode(pick)
	})
	log.Printf("picker: serving POST /pick on %s", *listen)
	log.Fatal(http.ListenAndServe(*listen, nil))
}
