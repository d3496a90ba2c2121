package main

// Prometheus metrics, under dolphin serve's names where they mean the same (src/serve/proxy/metrics.ts), plus the
// EPP's own: picks by answer and the time a pick takes.

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics are the EPP's counters and gauges, in their own registry.
type Metrics struct {
	Registry         *prometheus.Registry
	Requests         *prometheus.CounterVec // dolphin_requests_total{endpoint, route, status}
	Decisions        *prometheus.CounterVec // dolphin_decisions_total{path, reason}
	PromptTokens     *prometheus.CounterVec // dolphin_prompt_tokens_total{path}
	Shed             *prometheus.CounterVec // dolphin_shed_total{reason}
	TokenizeFailures *prometheus.CounterVec // dolphin_tokenize_failures_total{worker}
	KVEvents         *prometheus.CounterVec // dolphin_kv_events_total{kind, source, worker}
	KVEventErrors    *prometheus.CounterVec // dolphin_kv_event_errors_total{worker}
	KVUnmapped       *prometheus.CounterVec // dolphin_kv_blocks_unmapped_total{worker}
	KVGaps           *prometheus.CounterVec // dolphin_kv_sequence_gaps_total{worker}
	KVRestarts       *prometheus.CounterVec // dolphin_kv_engine_restarts_total{worker}
	KVReplays        *prometheus.CounterVec // dolphin_kv_replays_total{worker, reason, outcome}
	KVReplayed       *prometheus.CounterVec // dolphin_kv_replayed_batches_total{worker}
	TableSwaps       prometheus.Counter     // dolphin_table_swaps_total
	EndpointSwaps    prometheus.Counter     // dolphin_epp_endpoint_reloads_total
	PickSeconds      prometheus.Histogram   // dolphin_epp_pick_seconds
	PrefillReleases  *prometheus.CounterVec // dolphin_epp_prefill_releases_total{signal}
	HoldTimeouts     prometheus.Counter     // dolphin_epp_hold_timeouts_total
}

func counterVec(r *prometheus.Registry, name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	r.MustRegister(c)
	return c
}

func counter(r *prometheus.Registry, name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	r.MustRegister(c)
	return c
}

// NewMetrics registers the EPP's metrics; gauges reads the pool when scraped.
func NewMetrics(pool func() PoolGauges) *Metrics {
	r := prometheus.NewRegistry()
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := &Metrics{
		Registry:         r,
		Requests:         counterVec(r, "dolphin_requests_total", "Requests answered by the picker, by endpoint, status code and route (local, remote, none)", "endpoint", "route", "status"),
		Decisions:        counterVec(r, "dolphin_decisions_total", "Routing decisions by path and reason", "path", "reason"),
		PromptTokens:     counterVec(r, "dolphin_prompt_tokens_total", "Prompt tokens routed (isl), by path", "path"),
		Shed:             counterVec(r, "dolphin_shed_total", "Requests the picker answered 429: every eligible decode endpoint at its in-flight limit", "reason"),
		TokenizeFailures: counterVec(r, "dolphin_tokenize_failures_total", "Precise mode: /tokenize failures (the request was routed on its text)", "worker"),
		KVEvents:         counterVec(r, "dolphin_kv_events_total", "KV events applied to the index, by worker, source and kind", "kind", "source", "worker"),
		KVEventErrors:    counterVec(r, "dolphin_kv_event_errors_total", "KV event batches that did not decode", "worker"),
		KVUnmapped:       counterVec(r, "dolphin_kv_blocks_unmapped_total", "Stored blocks skipped: parent unknown to the index or a different block size", "worker"),
		KVGaps:           counterVec(r, "dolphin_kv_sequence_gaps_total", "ZMQ event batches missed (sequence gaps), by worker", "worker"),
		KVRestarts:       counterVec(r, "dolphin_kv_engine_restarts_total", "Workers whose event sequence started over (an engine restart): their index was reset", "worker"),
		KVReplays:        counterVec(r, "dolphin_kv_replays_total", "KV event replays asked of the engines' replay sockets, by worker, reason (subscribe, gap, restart) and outcome (ok, partial, failed)", "worker", "reason", "outcome"),
		KVReplayed:       counterVec(r, "dolphin_kv_replayed_batches_total", "KV event batches applied from replays, by worker", "worker"),
		TableSwaps:       counter(r, "dolphin_table_swaps_total", "Routing tables swapped in (the table file changed)"),
		EndpointSwaps:    counter(r, "dolphin_epp_endpoint_reloads_total", "Endpoint files applied after an edit"),
		PrefillReleases:  counterVec(r, "dolphin_epp_prefill_releases_total", "Requests' prefill loads ended, by what ended them: kv_events (the engine stored the prompt's last cacheable block), response_headers, request_end (its access-log entry), stream_end (its ext_proc stream, or -hold-max), nothing_to_wait (no block left to compute: nothing held)", "signal"),
		HoldTimeouts:     counter(r, "dolphin_epp_hold_timeouts_total", "Requests whose loads no access-log entry ended within -hold-max (-loads-until access-log: is the gateway logging to the picker?)"),
		PickSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "dolphin_epp_pick_seconds", Help: "Time from the request body's end to the pick (tokenize included)",
			Buckets: []float64{25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 50e-3},
		}),
	}
	r.MustRegister(m.PickSeconds)
	r.MustRegister(&poolCollector{read: pool})
	return m
}

// PoolGauges are read from the pool when scraped.
type PoolGauges struct {
	Inflight  int
	Workers   map[[2]string]int // {role, state} → count
	Index     map[string]int    // worker → blocks
	PerWorker map[string]int    // worker → requests in flight
	Checksum  string
	Kind      string
}

type poolCollector struct{ read func() PoolGauges }

var (
	inflightDesc  = prometheus.NewDesc("dolphin_inflight_requests", "Inference requests in flight", nil, nil)
	workersDesc   = prometheus.NewDesc("dolphin_workers", "Workers by role and state", []string{"role", "state"}, nil)
	indexDesc     = prometheus.NewDesc("dolphin_index_blocks", "Blocks in the router's index, by worker", []string{"worker"}, nil)
	perWorkerDesc = prometheus.NewDesc("dolphin_worker_inflight_requests", "Requests picked for each worker and not yet done", []string{"worker"}, nil)
	tableDesc     = prometheus.NewDesc("dolphin_table_info", "The routing table in use", []string{"checksum", "kind"}, nil)
)

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{inflightDesc, workersDesc, indexDesc, perWorkerDesc, tableDesc} {
		ch <- d
	}
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	g := c.read()
	ch <- prometheus.MustNewConstMetric(inflightDesc, prometheus.GaugeValue, float64(g.Inflight))
	for _, role := range []string{"prefill", "decode", "both"} {
		for _, state := range []string{"healthy", "down"} {
			ch <- prometheus.MustNewConstMetric(workersDesc, prometheus.GaugeValue, float64(g.Workers[[2]string{role, state}]), role, state)
		}
	}
	for w, n := range g.Index {
		ch <- prometheus.MustNewConstMetric(indexDesc, prometheus.GaugeValue, float64(n), w)
	}
	for w, n := range g.PerWorker {
		ch <- prometheus.MustNewConstMetric(perWorkerDesc, prometheus.GaugeValue, float64(n), w)
	}
	ch <- prometheus.MustNewConstMetric(tableDesc, prometheus.GaugeValue, 1, g.Checksum, g.Kind)
}
