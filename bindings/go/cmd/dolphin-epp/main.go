// Command dolphin-epp is an endpoint picker (EPP) for the Gateway API Inference Extension: an Envoy ext_proc
// server (extproc.go) that routes each OpenAI request with a dolphin-routing table over the pool's engines, in
// precise mode on their KV events (kvfeed.go, ingest.go), through the Go binding (the same core.wasm and tables as
// every other host). docs/gateway.md shows it behind Envoy and on Kubernetes.
//
// Usage:
//
//	dolphin-epp -table table.msgpack -endpoints endpoints.yaml [-grpc-port 9002] [-metrics-port 9090]
//	            [-model NAME] [-block-size 16] [-mode precise|approximate] [-max-inflight N] [-watch 500ms]
//	            [-health-interval 1s] [-loads-until stream|access-log] [-fixed-endpoint HOST:PORT]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	alsv3 "github.com/envoyproxy/go-control-plane/envoy/service/accesslog/v3"
	extproc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	dolphin "github.com/dolphin-routing/dolphin-routing/bindings/go"
)

// Config is what the flags give.
type Config struct {
	Table, Endpoints      string
	Host                  string
	GRPCPort, MetricsPort int
	Model                 string
	BlockSize             int
	Mode                  string
	MaxInflight           int
	DefaultOSLHat         float64
	CPUTierWeight         float64
	Watch, TokenizeWait   time.Duration
	HealthInterval        time.Duration
	LogLevel              string
	Procs                 int
	LoadsUntil            string
	HoldMax               time.Duration
	FixedEndpoint         string
}

func parseFlags(args []string) (Config, error) {
	var c Config
	fs := flag.NewFlagSet("dolphin-epp", flag.ContinueOnError)
	fs.StringVar(&c.Table, "table", "", "routing table file (msgpack: dolphin table / dolphin train output); watched")
	fs.StringVar(&c.Endpoints, "endpoints", "", "endpoints file (YAML or JSON, role labels llm-d.ai/role); watched")
	fs.StringVar(&c.Host, "host", "127.0.0.1", "interface for the gRPC and metrics listeners")
	fs.IntVar(&c.GRPCPort, "grpc-port", 9002, "ext_proc and gRPC health port (0: any free port, printed)")
	fs.IntVar(&c.MetricsPort, "metrics-port", 9090, "Prometheus /metrics port (0: any free port, printed; -1: none)")
	fs.StringVar(&c.Model, "model", "", "served model name: the hash root (as dolphin serve's model) and /tokenize's model")
	fs.IntVar(&c.BlockSize, "block-size", 16, "tokens per KV block (the engines' block size)")
	fs.StringVar(&c.Mode, "mode", "precise", "precise (KV events, /tokenize) or approximate (text prefixes, decisions recorded)")
	fs.IntVar(&c.MaxInflight, "max-inflight", 0, "requests in flight per decode endpoint before the picker sheds (429); 0: no limit")
	fs.Float64Var(&c.DefaultOSLHat, "default-osl-hat", 256, "predicted output tokens for tables that use osl_hat without a model")
	fs.Float64Var(&c.CPUTierWeight, "tier-weight-cpu", 0.8, "what a block held only in the CPU tier (KV events with medium CPU) counts for against a device hit, 0–1 (dolphin serve's tiers.CPU)")
	fs.DurationVar(&c.Watch, "watch", 500*time.Millisecond, "how often the endpoints and table files are checked for edits")
	fs.DurationVar(&c.TokenizeWait, "tokenize-timeout", 2*time.Second, "precise mode: longest wait for an endpoint's /tokenize")
	fs.DurationVar(&c.HealthInterval, "health-interval", time.Second, "how often each endpoint's GET /health is asked (2 failures in a row: out of rotation); 0: never")
	fs.StringVar(&c.LogLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&c.LoadsUntil, "loads-until", "stream", "what ends a request's loads: stream (its ext_proc stream, which Envoy closes once nothing more goes to the picker) or access-log (its entry in Envoy's gRPC access log, sent to this port)")
	fs.DurationVar(&c.HoldMax, "hold-max", 10*time.Minute, "-loads-until access-log: a request's loads end after this long without its access-log entry")
	fs.StringVar(&c.FixedEndpoint, "fixed-endpoint", "", "answer every request with this endpoint (host:port) without parsing its body or calling the core: the ext_proc exchange alone, a baseline for benchmarks (dolphin bench epp), not a picker")
	fs.IntVar(&c.Procs, "procs", 1, "threads running Go code at once (GOMAXPROCS, which overrides it when set); the router is one core behind a lock")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	switch {
	case c.Table == "":
		return c, errors.New("-table is required (a table file, e.g. from dolphin table)")
	case c.Endpoints == "":
		return c, errors.New("-endpoints is required (a YAML or JSON file listing the pool's endpoints)")
	case c.Mode != "precise" && c.Mode != "approximate":
		return c, fmt.Errorf("-mode must be precise or approximate, got %q", c.Mode)
	case c.BlockSize < 1 || c.BlockSize > 4096:
		return c, fmt.Errorf("-block-size must be 1–4096, got %d", c.BlockSize)
	case c.HealthInterval < 0:
		return c, fmt.Errorf("-health-interval must be ≥ 0, got %s", c.HealthInterval)
	case c.LoadsUntil != "stream" && c.LoadsUntil != "access-log":
		return c, fmt.Errorf("-loads-until must be stream or access-log, got %q", c.LoadsUntil)
	case c.HoldMax <= 0:
		return c, fmt.Errorf("-hold-max must be > 0, got %s", c.HoldMax)
	case c.Procs < 1:
		return c, fmt.Errorf("-procs must be ≥ 1, got %d", c.Procs)
	case c.MaxInflight < 0:
		return c, fmt.Errorf("-max-inflight must be ≥ 0, got %d", c.MaxInflight)
	case !(c.CPUTierWeight >= 0 && c.CPUTierWeight <= 1):
		return c, fmt.Errorf("-tier-weight-cpu must be a number in [0, 1], got %v", c.CPUTierWeight)
	}
	return c, nil
}

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if err == flag.ErrHelp {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dolphin-epp:", err)
		os.Exit(2)
	}
	keepSysmonAwake()
	if os.Getenv("GOMAXPROCS") == "" {
		// one thread by default: every pick and KV event goes through the one router's lock anyway, and on a busy
		// machine the hand-offs between threads (gRPC's reader, the stream's worker, its writer) cost more than
		// they save: about 0.07 ms less at p50 in dolphin bench epp than with a thread per core
		runtime.GOMAXPROCS(cfg.Procs)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "dolphin-epp:", err)
		os.Exit(1)
	}
}

// run serves until ctx ends. It prints one "listening" line per listener (tests and dolphin gateway read them).
func run(ctx context.Context, cfg Config, out *os.File) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		return fmt.Errorf("-log-level: %v", err)
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	table, err := os.ReadFile(cfg.Table)
	if err != nil {
		return fmt.Errorf("-table: %v", err)
	}
	eps, err := ReadEndpoints(cfg.Endpoints)
	if err != nil {
		return err
	}
	precise := cfg.Mode == "precise"
	router, err := dolphin.Load(table, dolphin.Options{BlockSize: cfg.BlockSize, Model: cfg.Model, RecordDecisions: !precise,
		TierWeights: map[string]float64{"CPU": cfg.CPUTierWeight}})
	if err != nil {
		return fmt.Errorf("%s: %v", cfg.Table, err)
	}
	pool := NewPool(router, cfg.BlockSize, 2*31_250, precise, log)
	pool.metrics = NewMetrics(pool.Gauges)
	pool.healthy, pool.client = cfg.HealthInterval, &http.Client{}
	if err := pool.Apply(eps); err != nil {
		return err
	}
	defer pool.Close()
	picker := &Picker{pool: pool, model: cfg.Model, precise: precise, defaultOSLHat: cfg.DefaultOSLHat,
		maxInflight: cfg.MaxInflight, tokenizeWait: cfg.TokenizeWait, client: &http.Client{}}

	done := make(chan struct{})
	defer close(done)
	go watchFile(cfg.Endpoints, cfg.Watch, done, func() {
		eps, err := ReadEndpoints(cfg.Endpoints)
		if err == nil {
			err = pool.Apply(eps)
		}
		if err != nil {
			log.Error("endpoints file not applied: the previous endpoints stay", "error", err.Error())
			return
		}
		pool.metrics.EndpointSwaps.Inc()
		log.Info("endpoints file applied", "endpoints", len(eps))
	})
	go watchFile(cfg.Table, cfg.Watch, done, func() {
		table, err := os.ReadFile(cfg.Table)
		if err == nil {
			err = router.SetTable(table)
		}
		if err != nil {
			log.Error("table file not applied: the previous table stays", "error", err.Error())
			return
		}
		pool.metrics.TableSwaps.Inc()
		t := router.Table()
		log.Info("table swapped", "kind", t.Kind, "checksum", t.Checksum)
	})

	lis, err := net.Listen("tcp", net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.GRPCPort)))
	if err != nil {
		return fmt.Errorf("-grpc-port: %v", err)
	}
	// a pool of stream workers instead of a goroutine per stream: about 0.1 ms less at p50 in dolphin bench epp (noisy)
	srv := grpc.NewServer(grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0))))
	server := &Server{picker: picker, metrics: pool.metrics, fixed: cfg.FixedEndpoint}
	if cfg.LoadsUntil == "access-log" {
		server.requests = NewRequests(cfg.HoldMax, pool.metrics)
		alsv3.RegisterAccessLogServiceServer(srv, server.requests)
	}
	extproc.RegisterExternalProcessorServer(srv, server)
	hs := health.NewServer()
	for _, svc := range []string{"", "liveness", "readiness", "envoy.service.ext_proc.v3.ExternalProcessor"} {
		hs.SetServingStatus(svc, healthpb.HealthCheckResponse_SERVING)
	}
	healthpb.RegisterHealthServer(srv, hs)
	fmt.Fprintf(out, "dolphin-epp: ext_proc listening on %s\n", lis.Addr())
	var metricsSrv *http.Server
	if cfg.MetricsPort >= 0 {
		ml, err := net.Listen("tcp", net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.MetricsPort)))
		if err != nil {
			return fmt.Errorf("-metrics-port: %v", err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(pool.metrics.Registry, promhttp.HandlerOpts{}))
		metricsSrv = &http.Server{Handler: mux}
		go func() { _ = metricsSrv.Serve(ml) }()
		fmt.Fprintf(out, "dolphin-epp: metrics listening on %s\n", ml.Addr())
	}
	t := router.Table()
	if cfg.FixedEndpoint != "" {
		fmt.Fprintf(out, "dolphin-epp: -fixed-endpoint: every request goes to %s, unpicked\n", cfg.FixedEndpoint)
	}
	fmt.Fprintf(out, "dolphin-epp: table %s (%s), %d endpoints (%s), mode %s, loads until %s\n", t.Kind, t.Checksum, len(eps),
		strings.Join(pool.Order(), ", "), cfg.Mode, cfg.LoadsUntil)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	select {
	case <-ctx.Done():
		hs.Shutdown()
		srv.Stop()
		if metricsSrv != nil {
			_ = metricsSrv.Close()
		}
		return nil
	case err := <-errc:
		return err
	}
}
