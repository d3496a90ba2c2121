package dolphin

// The router's workers: registering and removing them (a removed worker's slot in the core is reused), their
// names by core index, and the loads and cluster-wide signals the worker choice and the policies read.

import "fmt"

// Worker is one engine the router chooses between.
type Worker struct {
	ID             string
	Role           string // "prefill", "decode" or "both"
	CapacityBlocks int    // blocks the index keeps for it; 0: Options.CapacityBlocks
}

// WorkerIDs lists the workers in index order.
func (r *Router) WorkerIDs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := []string{}
	for _, id := range r.ids {
		if id != "" {
			out = append(out, id)
		}
	}
	return out
}

// AddWorker registers a worker.
func (r *Router) AddWorker(w Worker) error {
	if w.ID == "" {
		return &RequestError{"router: worker id must be a non-empty string"}
	}
	role, ok := map[string]int{"prefill": rolePrefill, "decode": roleDecode, "both": roleBoth}[w.Role]
	if !ok {
		return &RequestError{fmt.Sprintf(`router: worker "%s": role must be prefill, decode or both, got %s`, w.ID, w.Role)}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.byID[w.ID]; dup {
		return &RequestError{fmt.Sprintf(`router: worker "%s" already exists`, w.ID)}
	}
	index := len(r.ids)
	if len(r.free) > 0 {
		index = r.free[len(r.free)-1]
	}
	if index >= r.maxWork {
		return &RequestError{fmt.Sprintf("router: more than maxWorkers (%d) workers", r.maxWork)}
	}
	capacity := w.CapacityBlocks
	if capacity == 0 {
		capacity = r.capacity
	}
	if err := r.c.check(r.c.call("setWorker", i32(index), i32(role), i32(capacity)), "setWorker"); err != nil {
		return err
	}
	if index == len(r.ids) {
		r.ids = append(r.ids, w.ID)
	} else {
		r.free = r.free[:len(r.free)-1]
		r.ids[index] = w.ID
	}
	r.byID[w.ID] = index
	return nil
}

// RemoveWorker forgets a worker and its cached blocks.
func (r *Router) RemoveWorker(id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	index, err := r.indexOf(id)
	if err != nil {
		return err
	}
	if err := r.c.check(r.c.call("setWorker", i32(index), 0, 0), "setWorker"); err != nil {
		return err
	}
	delete(r.byID, id)
	r.ids[index] = ""
	r.free = append(r.free, index)
	return nil
}

func (r *Router) indexOf(id string) (int, error) {
	i, ok := r.byID[id]
	if !ok {
		return 0, &RequestError{fmt.Sprintf(`router: unknown worker "%s"`, id)}
	}
	return i, nil
}

// SetLoad reports a worker's active tokens, for the KV-aware worker choice.
func (r *Router) SetLoad(id string, activePrefillTokens, activeDecodeTokens float64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	i, err := r.indexOf(id)
	if err != nil {
		return err
	}
	return r.c.check(r.c.call("setLoad", i32(i), f64(activePrefillTokens), f64(activeDecodeTokens)), "setLoad")
}

// SetSignals reports cluster-wide signals: queued prefill requests and the request rate.
func (r *Router) SetSignals(prefillQueue, qps float64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.c.check(r.c.call("setSignals", f64(prefillQueue), f64(qps)), "setSignals")
}

func (r *Router) name(i int) string {
	if i >= 0 && i < len(r.ids) {
		return r.ids[i]
	}
	return ""
}
