package main

import "encoding/json"

func eventsOne(raw json.RawMessage, at string) (any, error) {
	return nil, badRequest{at + ": events are not implemented yet"}
}

func benchRun(input []byte) (any, error) {
	return nil, badRequest{"request.op: bench is not implemented yet"}
}
