// Command workers runs rota's items on worker processes through NATS JetStream: one
// dispatcher process claims due work fairly and queues it, one subject per lane, and any
// number of worker processes run it, all over one PostgreSQL schema.
//
//	nats-server -js &                                                  # 127.0.0.1:4222
//	go run ./examples/workers -role dispatcher -db postgres://localhost/app &
//	go run ./examples/workers -role worker -db postgres://localhost/app &   # as many as you like
//	go run ./examples/workers -role worker -db postgres://localhost/app &
//
// Both roles build the same dispatch.Config, from which the queue takes its lanes and
// ClaimFor, and the same plan tables: each plan has a lane, flow-control limits and a
// cadence tier (bridge.PlanLanes, PlanLimits, PlanTiers). The dispatcher seeds a few demo
// tenants — their plans with one SetPlans, their sources with one Bridge.WatchAll
// (-tenants) — and feeds a rotanats.Sink through a bridge.Feeder until SIGINT or SIGTERM;
// with -http it also serves the operator's pages (package inspect). Each worker runs a rotanats.Consumer over a bridge.Worker on a
// NATS connection of its own; on SIGINT or SIGTERM it stops pulling, hands back what
// waits for a slot, finishes and acknowledges what runs, writes its last completions and
// exits 0. Stop the dispatcher first: what is still queued when the last worker stops
// stays claimed until its claim ends, and is then dispatched again. A worker started with
// another -claim or -subject than the dispatcher's refuses to start.
//
// Kill a worker (kill -9) and nothing is lost: its items' claims end, the messages it
// held come back to the others and are dropped unrun, and the dispatcher claims the
// entries again. Stop every worker and the dispatcher stops claiming once the lanes are
// full. Sources are on "dev" tiers (due 2 seconds after a hit for the paid plans, 4 for
// the free one, backing off tenfold), and the pipeline stands in for a real one: it waits 5 to 50 ms and finds something new one
// time in four. Logs go to stderr through log/slog; each worker's last line counts its
// runs.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/cadence"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/inspect"
	rotanats "github.com/rotaworks/rota/nats"
	"github.com/rotaworks/rota/postgres"
	"github.com/rotaworks/rota/tenancy"
)

func main() {
	var cfg config
	flag.StringVar(&cfg.role, "role", "", `"dispatcher" or "worker"`)
	flag.StringVar(&cfg.dbURL, "db", "", "PostgreSQL URL (required)")
	flag.StringVar(&cfg.schema, "schema", "rota", "PostgreSQL schema, created and migrated if needed")
	flag.StringVar(&cfg.natsURL, "nats", nats.DefaultURL, "NATS server URL")
	flag.StringVar(&cfg.stream, "stream", rotanats.DefaultStream, "JetStream stream name")
	flag.StringVar(&cfg.subject, "subject", rotanats.DefaultSubject, "the lane subjects' prefix")
	flag.IntVar(&cfg.tenants, "tenants", 20, "demo tenants the dispatcher adds at start-up, three sources each")
	flag.IntVar(&cfg.slots, "slots", 8, "items a worker runs at once")
	flag.DurationVar(&cfg.claimFor, "claim", time.Minute, "how long a dispatched item stays claimed")
	flag.StringVar(&cfg.httpAddr, "http", "", "the dispatcher serves the operator's pages on this address, such as localhost:8080")
	flag.Parse()

	logger := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("role", cfg.role, "pid", os.Getpid())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, logger); err != nil {
		logger.Error("workers: stopped", "error", err)
		stop()
		os.Exit(1)
	}
}

// config is the command's flags.
type config struct {
	role, dbURL, schema string
	natsURL, stream     string
	subject, httpAddr   string
	tenants, slots      int
	claimFor            time.Duration
}

// The plans: each maps to a lane, flow-control limits and a cadence tier. Both roles
// build the same tables.
var (
	lanes = []dispatch.LaneCapacity{ // highest priority first
		{Lane: "pro", PerUserLimit: 10, PerCycleLimit: 200},
		{Lane: "plus", PerUserLimit: 5, PerCycleLimit: 100},
		{Lane: "free", PerUserLimit: 2, PerCycleLimit: 100, MinShare: 20},
	}
	planLanes  = map[tenancy.PlanID]dispatch.Lane{"pro": "pro", "plus": "plus", tenancy.PlanFree: "free"}
	planLimits = map[tenancy.PlanID]duework.Limits{"pro": {Weight: 4}, "plus": {Weight: 2}, tenancy.PlanFree: {MaxInFlight: 2}}
	planTiers  = map[tenancy.PlanID]string{"pro": "dev", "plus": "dev", tenancy.PlanFree: "dev-slow"}
)

// run connects to PostgreSQL and NATS and plays cfg.role until ctx ends: the dispatcher
// feeds the queue (and serves the operator's page with -http), a worker runs what it
// takes from the queue.
func run(ctx context.Context, cfg config, logger *slog.Logger) error {
	if cfg.role != "dispatcher" && cfg.role != "worker" {
		return fmt.Errorf("workers: -role must be dispatcher or worker, got %q", cfg.role)
	}
	if cfg.dbURL == "" {
		return errors.New("workers: -db is required: the dispatcher and the workers share one PostgreSQL schema")
	}
	st, err := postgres.OpenStores(ctx, cfg.dbURL, cfg.schema, postgres.StoresConfig{})
	if err != nil {
		return err
	}
	defer st.Close()
	nc, err := nats.Connect(cfg.natsURL, nats.Name("rota "+cfg.role), nats.MaxReconnects(-1))
	if err != nil {
		return fmt.Errorf("workers: connect to NATS at %s: %w", cfg.natsURL, err)
	}
	defer nc.Close()
	js, errJS := jetstream.New(nc)
	tiers := cadence.NewRegistry()
	errTiers := errors.Join(tiers.Register("dev", cadence.Backoff{Base: 2 * time.Second, Max: 20 * time.Second, Factor: 2}),
		tiers.Register("dev-slow", cadence.Backoff{Base: 4 * time.Second, Max: 40 * time.Second, Factor: 2}))
	laneFor, errLanes := bridge.PlanLanes(st.Entitlements, planLanes, lanes)
	limitsFor, errLimits := bridge.PlanLimits(st.Entitlements, planLimits)
	tierFor, errTierFor := bridge.PlanTiers(st.Entitlements, planTiers, tiers)
	// Both roles build the Dispatcher's configuration: the queue takes its lanes and ClaimFor.
	dc := dispatch.Config{Lanes: lanes, GlobalBatchLimit: 300, LaneFor: laneFor, LimitsFor: limitsFor, ClaimFor: cfg.claimFor}
	q := rotanats.Config{Stream: cfg.stream, Subject: cfg.subject, Logger: logger}
	b := &bridge.Bridge{Index: st.Index, Watchlist: st.Watchlist, Pipeline: bridge.PipelineFunc(poll), Tiers: tiers, TierFor: tierFor}
	if err := errors.Join(errJS, errTiers, errLanes, errLimits, errTierFor); err != nil {
		return err
	}
	if cfg.role == "worker" {
		var runs atomic.Int64 // for the last log line
		b.Pipeline = bridge.PipelineFunc(func(ctx context.Context, tc tenancy.Context, e tenancy.WatchlistEntry) (bridge.Result, error) {
			runs.Add(1)
			return poll(ctx, tc, e)
		})
		w, errW := bridge.NewWorker(b, bridge.WorkerConfig{Workers: cfg.slots, Logger: logger})
		c, errC := rotanats.NewConsumer(js, w, dc, q)
		if err := errors.Join(errW, errC); err != nil {
			return err
		}
		err := c.Run(ctx) // until ctx ends, then the Worker's stop within ShutdownTimeout
		logger.Info("workers: stopped", "runs", runs.Load())
		return err
	}
	if err := addDemoTenants(ctx, b, st.Entitlements, cfg.tenants, logger); err != nil {
		return err
	}
	d, err := dispatch.New(st.Index, dc)
	if err != nil {
		return err
	}
	sink, errSink := rotanats.NewSink(js, dc, q)
	feeder, errFeeder := bridge.NewFeeder(d, sink, bridge.FeederConfig{Interval: 100 * time.Millisecond, Logger: logger})
	insp, errInsp := inspect.New(inspect.Config{Index: st.Index, Lanes: lanes, Dispatcher: d, StateStore: st.StateStore, Logger: logger})
	if err := errors.Join(errSink, errFeeder, errInsp); err != nil {
		return err
	}
	runs := []func(context.Context) error{feeder.Run}
	if cfg.httpAddr != "" {
		runs = append(runs, bridge.Serve(&http.Server{Addr: cfg.httpAddr, Handler: insp, ReadHeaderTimeout: 10 * time.Second}, nil))
	}
	return bridge.RunAll(ctx, runs...)
}

// addDemoTenants puts tenant-01 … tenant-NN on the pro, plus and free plans in turn, each
// watching three sources, their tier their plan's: one SetPlans, one WatchAll. Adding is
// idempotent.
func addDemoTenants(ctx context.Context, b *bridge.Bridge, plans *postgres.Entitlements, n int, logger *slog.Logger) error {
	ps, seed := []tenancy.PlanID{"pro", "plus", tenancy.PlanFree}, map[string]tenancy.PlanID{}
	var sources []tenancy.WatchlistEntry
	for i := range n {
		user := fmt.Sprintf("tenant-%02d", i+1)
		seed[user] = ps[i%len(ps)]
		for _, slug := range []string{"jobs", "news", "blog"} {
			sources = append(sources, tenancy.WatchlistEntry{UserID: user, Slug: slug})
		}
	}
	if err := plans.SetPlans(ctx, seed); err != nil {
		return fmt.Errorf("workers: plans: %w", err)
	}
	if _, err := b.WatchAll(ctx, sources, time.Now()); err != nil {
		return fmt.Errorf("workers: watch: %w", err)
	}
	logger.Info("workers: demo tenants added", "tenants", n)
	return nil
}

// poll stands in for the host's pipeline: it takes 5 to 50 ms and finds something new
// one time in four; it stops when ctx ends, as a real fetch must.
func poll(ctx context.Context, _ tenancy.Context, e tenancy.WatchlistEntry) (bridge.Result, error) {
	fetch := time.NewTimer(time.Duration(5+rand.IntN(46)) * time.Millisecond)
	defer fetch.Stop()
	select {
	case <-ctx.Done():
		return bridge.Result{}, context.Cause(ctx)
	case <-fetch.C:
	}
	if rand.IntN(4) != 0 {
		return bridge.Result{}, nil
	}
	return bridge.Result{Outcomes: []bridge.Outcome{{ID: e.Slug + "/" + time.Now().Format(time.RFC3339Nano), Stage: "scored"}}}, nil
}
