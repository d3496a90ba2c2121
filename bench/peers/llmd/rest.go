package main

func benchRun(input []byte) (any, error) {
	return nil, badRequest{"request.op: bench is not implemented yet"}
}
