// Command daemon is rota as a long-running service, the program to copy when you build
// one: a Runner on the real clock that dispatches every Interval until SIGINT or SIGTERM,
// then stops cleanly — the dispatch under way finishes its claim, items not started are
// handed back, items in flight finish, and it exits 0 with nothing left claimed.
//
//	go run ./examples/daemon                                       # in memory, until Ctrl-C
//	go run ./examples/daemon -for 10s                              # stop by itself
//	go run ./examples/daemon -db postgres://localhost/app -schema rota   # on PostgreSQL
//
// In memory everything lives in the process: one replica, nothing kept across restarts.
// With -db it opens the PostgreSQL schema (creating and migrating it) and keeps the due-work
// Index, the watch lists and the plans there, so several replicas of the daemon — started
// the same way on other machines, or twice on one — share them and split the work: each
// cycle's reads hold the users they return, so replicas read different users.
//
// The daemon registers a "dev" tier that polls a source every 2 seconds after a hit,
// backing off to 20 seconds, so that a short run shows work; a service uses the presets
// or tiers of its own. It adds a few demo tenants with their sources and plans at start-up
// (-tenants; a service has its own), then syncs every tenant's watch list with
// SyncTenants before it starts the Runner. The pipeline stands in for a real one: it
// waits a few milliseconds, as a fetch would, and finds something new one time in four.
// Logs go to stderr through log/slog: one line per cycle from the Runner, and the
// daemon's own lines at start and stop.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/cadence"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/postgres"
	"github.com/rotaworks/rota/tenancy"
)

func main() {
	var cfg config
	flag.StringVar(&cfg.dbURL, "db", "", "PostgreSQL URL; empty keeps everything in memory")
	flag.StringVar(&cfg.schema, "schema", "rota", "PostgreSQL schema, created and migrated if needed (with -db)")
	flag.IntVar(&cfg.tenants, "tenants", 20, "demo tenants to add at start-up, three sources each")
	flag.DurationVar(&cfg.interval, "interval", time.Second, "time between two dispatch cycles")
	flag.IntVar(&cfg.workers, "workers", bridge.DefaultWorkers, "items run at once")
	runFor := flag.Duration("for", 0, "stop after this long; 0 runs until SIGINT or SIGTERM")
	flag.Parse()

	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *runFor > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *runFor)
		defer cancel()
	}
	if err := run(ctx, cfg, logger); err != nil {
		logger.Error("daemon: stopped", "error", err)
		stop()
		os.Exit(1)
	}
}

// config is the daemon's flags.
type config struct {
	dbURL, schema string
	tenants       int
	interval      time.Duration
	workers       int
	claimFor      time.Duration // zero: defaultClaimFor
}

// defaultClaimFor is how long a dispatched item stays claimed: far longer than a poll takes.
const defaultClaimFor = time.Minute

// run opens the stores, builds the service and runs it until ctx ends.
func run(ctx context.Context, cfg config, logger *slog.Logger) error {
	st, err := openStores(ctx, cfg)
	if err != nil {
		return err
	}
	defer st.close()
	s, err := newService(cfg, st, logger)
	if err != nil {
		return err
	}
	return s.run(ctx)
}

// stores are what replicas must share: the due-work Index, the watch lists and the plans.
type stores struct {
	kind      string // "memory" or "postgres"
	index     duework.Index
	watchlist tenancy.Watchlist
	plans     planStore
	close     func()
}

// planStore is the Entitlements the daemon also writes its demo tenants' plans to; the
// memory and the PostgreSQL Entitlements both have SetPlan.
type planStore interface {
	tenancy.Entitlements
	SetPlan(ctx context.Context, tc tenancy.Context, p tenancy.PlanID) error
}

// openStores opens the stores in memory, or in cfg.schema of the PostgreSQL at cfg.dbURL.
func openStores(ctx context.Context, cfg config) (stores, error) {
	if cfg.dbURL == "" {
		return stores{kind: "memory", index: duework.NewMemory(), watchlist: tenancy.NewMemoryWatchlist(),
			plans: tenancy.NewMemoryEntitlements(), close: func() {}}, nil
	}
	pool, err := postgres.Open(ctx, cfg.dbURL, cfg.schema)
	if err != nil {
		return stores{}, err
	}
	return stores{kind: "postgres", index: postgres.NewIndex(pool), watchlist: postgres.NewWatchlist(pool),
		plans: postgres.NewEntitlements(pool), close: pool.Close}, nil
}

// service is one replica: the stores, a Bridge, a Runner and what its cycles did.
type service struct {
	cfg     config
	stores  stores
	bridge  *bridge.Bridge
	runner  *bridge.Runner
	logger  *slog.Logger
	tenants []tenancy.Context

	mu     sync.Mutex
	ended  map[bridge.ItemStatus]int // items ended, by status
	cycles int
}

// The lanes and the plans that map to them; every replica must configure them alike.
var (
	lanes = []dispatch.LaneCapacity{ // highest priority first
		{Lane: "pro", PerUserLimit: 10, PerCycleLimit: 200},
		{Lane: "plus", PerUserLimit: 5, PerCycleLimit: 100},
		{Lane: "free", PerUserLimit: 2, PerCycleLimit: 100, MinShare: 20},
	}
	planLanes = map[tenancy.PlanID]dispatch.Lane{tenancy.PlanPro: "pro", tenancy.PlanPlus: "plus", tenancy.PlanFree: "free"}
)

// devTier is the "dev" tier: seconds, so that a short run shows work.
var devTier = cadence.Backoff{Base: 2 * time.Second, Max: 20 * time.Second, Factor: 2}

// newService wires one replica over st.
func newService(cfg config, st stores, logger *slog.Logger) (*service, error) {
	tiers := cadence.NewRegistry()
	if err := tiers.Register("dev", devTier); err != nil {
		return nil, err
	}
	laneFor, err := bridge.PlanLanes(st.plans, planLanes, lanes)
	if err != nil {
		return nil, err
	}
	claimFor := cfg.claimFor
	if claimFor == 0 {
		claimFor = defaultClaimFor
	}
	d, err := dispatch.New(st.index, dispatch.Config{Lanes: lanes, GlobalBatchLimit: 300, LaneFor: laneFor, ClaimFor: claimFor})
	if err != nil {
		return nil, err
	}
	s := &service{cfg: cfg, stores: st, logger: logger, ended: map[bridge.ItemStatus]int{}}
	s.bridge = &bridge.Bridge{Index: st.index, Watchlist: st.watchlist, Pipeline: bridge.PipelineFunc(poll), Tiers: tiers, RetryDelay: 5 * time.Second}
	s.runner, err = bridge.NewRunner(s.bridge, d, bridge.RunnerConfig{
		Interval: cfg.interval,
		Workers:  cfg.workers,
		Logger:   logger,
		Observer: bridge.ObserverFunc(s.count),
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// count adds one cycle's items to the service's totals.
func (s *service) count(rep bridge.CycleReport) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cycles++
	for _, it := range rep.Items {
		s.ended[it.Status]++
	}
}

// totals returns the cycles run and the items ended, by status.
func (s *service) totals() (cycles int, ended map[bridge.ItemStatus]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cycles, maps.Clone(s.ended)
}

// run adds the demo tenants, syncs every tenant's watch list, and runs the Runner until
// ctx ends. It returns nil after a clean stop.
func (s *service) run(ctx context.Context) error {
	s.logger.Info("daemon: starting", "store", s.stores.kind, "schema", s.schemaName(), "tenants", s.cfg.tenants, "interval", s.cfg.interval)
	if err := s.addDemoTenants(ctx); err != nil {
		return err
	}
	// A service syncs every tenant it serves at start-up: new sources get due work,
	// scheduled ones are left as they are, so every replica may do it.
	added, err := s.bridge.SyncTenants(ctx, s.tenants, time.Now())
	if err != nil {
		return fmt.Errorf("daemon: sync: %w", err)
	}
	s.logger.Info("daemon: synced", "tenants", len(s.tenants), "added", added)
	if err := s.runner.Run(ctx); err != nil {
		return err
	}
	cycles, ended := s.totals()
	s.logger.Info("daemon: stopped", "cycles", cycles, "hits", ended[bridge.StatusHit], "misses", ended[bridge.StatusMiss],
		"errors", ended[bridge.StatusError], "released", ended[bridge.StatusReleased], "late", ended[bridge.StatusLate])
	return nil
}

func (s *service) schemaName() string {
	if s.stores.kind == "memory" {
		return ""
	}
	return s.cfg.schema
}

// addDemoTenants puts tenant-01 … tenant-NN on the pro, plus and free plans in turn, each
// watching three sources on the dev tier. Adding is idempotent, so replicas may all do it.
func (s *service) addDemoTenants(ctx context.Context) error {
	plans := []tenancy.PlanID{tenancy.PlanPro, tenancy.PlanPlus, tenancy.PlanFree}
	for i := range s.cfg.tenants {
		user := fmt.Sprintf("tenant-%02d", i+1)
		tc, err := tenancy.NewContext(user)
		if err != nil {
			return err
		}
		if err := s.stores.plans.SetPlan(ctx, tc, plans[i%len(plans)]); err != nil {
			return fmt.Errorf("daemon: plan of %s: %w", user, err)
		}
		for _, slug := range []string{"jobs", "news", "blog"} {
			e := tenancy.WatchlistEntry{UserID: user, Slug: slug, Tier: "dev", AddedAt: time.Now().UTC()}
			if err := s.stores.watchlist.Add(ctx, tc, e); err != nil {
				return fmt.Errorf("daemon: watch %s/%s: %w", user, slug, err)
			}
		}
		s.tenants = append(s.tenants, tc)
	}
	return nil
}

// poll stands in for the host's pipeline: fetch the source, drop what was already seen,
// score the rest. It takes 5 to 50 ms and finds something new one time in four; it stops
// when ctx ends, as a real fetch must.
func poll(ctx context.Context, tc tenancy.Context, e tenancy.WatchlistEntry) (bridge.Result, error) {
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
