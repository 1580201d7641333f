// Command daemon is rota as a long-running service, the program to copy when you build
// one. It runs a Runner, which dispatches every Interval and runs the items, beside a
// maintenance Scheduler, which runs the service's upkeep tasks, until SIGINT or SIGTERM,
// and then stops both cleanly: the dispatch under way finishes its claim, items not
// started are handed back, items and tasks in flight finish, and it exits 0 with nothing
// left claimed.
//
//	go run ./examples/daemon                                             # in memory, until Ctrl-C
//	go run ./examples/daemon -for 10s                                    # stop by itself
//	go run ./examples/daemon -db postgres://localhost/app -schema rota   # on PostgreSQL
//	go run ./examples/daemon -dynamodb http://127.0.0.1:8000 -table rota # on DynamoDB (Local)
//	go run ./examples/daemon -http localhost:8080 -actions               # with the inspector's pages
//
// The wiring is the function serve, over the stores of openStores: the plans' lanes and
// limits (bridge.PlanLanes, bridge.PlanLimits), the Dispatcher, the Bridge, the Runner,
// the Scheduler and the inspector, run together by bridge.RunAll, which stops them
// together and, should one fail, stops the others and returns why.
//
// In memory everything lives in the process: one replica, nothing kept across restarts.
// With -db it opens the PostgreSQL schema with postgres.OpenStores (creating and
// migrating it) and keeps the due-work Index, the watch lists, the plans, the maintenance
// lease and the task states there, so several replicas of the daemon — started the same
// way on other machines, or twice on one — share them and split the work. Each cycle's
// reads hold the users they return, so replicas read different users; the lease and the
// task states let one replica at a time run each maintenance task, and -holder (by
// default the host's name and the process ID) tells them apart. Each replica also
// listens for entries scheduled due now by any of them (Index.ListenDue) and then starts
// a cycle at once (Runner.Wake), and its Scheduler vacuums the queues every 30 seconds
// (Index.QueueVacuumTask).
//
// With -dynamodb it keeps the same stores on one DynamoDB table at that endpoint, opened
// (and created on first use) with rotadynamo.OpenStores, and replicas share them the same
// way; there is nothing to listen for, and nothing to vacuum. The credentials and region
// come from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_REGION when they are set (any
// will do for DynamoDB Local).
//
// The daemon registers a "dev" tier that polls a source every 2 seconds after a hit,
// backing off to 20 seconds, so that a short run shows work; a service uses the presets
// or tiers of its own. At start-up it adds a few demo tenants, with their plans and three
// sources each, through Bridge.Watch (-tenants; a service has its own), then syncs every
// tenant on the watch lists with Bridge.SyncAll. The plans and their limits are the
// demo's: a free tenant has at most two items in flight; a plus tenant weighs 2 and a pro
// tenant 4, which multiplies what one cycle may give it (its lane's PerUserLimit, and in
// the pro lane PerUserBurst, the more it may take when the others leave capacity unused).
// The pipeline stands in for a real one: it waits a few milliseconds, as a fetch would,
// and finds something new one time in four; the maintenance task "prune-results" stands
// in for a service's own upkeep.
//
// Logs go to stderr through log/slog: one line per cycle from the Runner, one per poll
// from the Scheduler, and the daemon's own lines at start and stop. With -http it also
// serves the inspector's pages (package inspect) on that address, over the same stores,
// its maintenance page reading the Scheduler's task states; a service mounts them behind
// its own authentication.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/cadence"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	rotadynamo "github.com/rotaworks/rota/dynamodb"
	"github.com/rotaworks/rota/inspect"
	"github.com/rotaworks/rota/maintenance"
	"github.com/rotaworks/rota/postgres"
	"github.com/rotaworks/rota/tenancy"
)

func main() {
	cfg := config{claimFor: time.Minute} // far longer than a poll takes
	flag.StringVar(&cfg.dbURL, "db", "", "PostgreSQL URL; empty keeps everything in memory")
	flag.StringVar(&cfg.schema, "schema", "rota", "PostgreSQL schema, created and migrated if needed (with -db)")
	flag.StringVar(&cfg.dynamoEndpoint, "dynamodb", "", "DynamoDB endpoint, such as http://127.0.0.1:8000; empty uses none")
	flag.StringVar(&cfg.table, "table", "rota", "DynamoDB table, created if needed (with -dynamodb)")
	flag.StringVar(&cfg.holder, "holder", defaultHolder(), "this replica's name on the maintenance lease; replicas sharing -db need distinct ones")
	flag.IntVar(&cfg.tenants, "tenants", 20, "demo tenants to add at start-up, three sources each")
	flag.DurationVar(&cfg.interval, "interval", time.Second, "time between two dispatch cycles")
	flag.IntVar(&cfg.workers, "workers", 8, "items run at once")
	flag.StringVar(&cfg.httpAddr, "http", "", "serve the inspector's pages on this address, such as localhost:8080; empty serves none")
	flag.BoolVar(&cfg.actions, "actions", false, "let the inspector's pages make an entry due now and re-route a tenant (with -http)")
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
	logger.Info("daemon: starting", "store", cfg.store(), "holder", cfg.holder, "tenants", cfg.tenants, "interval", cfg.interval)
	st, err := openStores(ctx, cfg)
	if err == nil {
		err = serve(ctx, cfg, st, logger)
		st.close()
	}
	if err != nil {
		logger.Error("daemon: stopped", "error", err)
		stop()
		os.Exit(1)
	}
	logger.Info("daemon: stopped")
}

// config is the daemon's flags.
type config struct {
	dbURL, schema string
	holder        string // "": maintenance.DefaultHolder
	tenants       int
	interval      time.Duration
	workers       int
	httpAddr      string // "": no inspector pages
	actions       bool
	claimFor      time.Duration

	dynamoEndpoint, table string // "": not on DynamoDB
	// The tests' knobs: the clock of the Runner, the Scheduler and the inspector (nil: the
	// real one), an Observer told about every cycle, and a channel that receives the
	// inspector's URL once it listens.
	clock    bridge.Clock
	observer bridge.Observer
	served   chan<- string
}

// stores are what replicas must share: the due-work Index, the watch lists, the plans,
// the maintenance lease and the task states; and what comes with them: the maintenance
// tasks the stores need, and how to listen for entries scheduled due now.
type stores struct {
	index     duework.Index
	watchlist tenancy.Watchlist
	plans     planStore
	lease     maintenance.Lease
	state     maintenance.StateStore
	tasks     []maintenance.Task
	listen    func(ctx context.Context, wake func()) error
	close     func()
}

// planStore is the Entitlements the daemon also writes its demo tenants' plans to; the
// memory, the PostgreSQL and the DynamoDB Entitlements all have SetPlans.
type planStore interface {
	tenancy.Entitlements
	SetPlans(ctx context.Context, plans map[string]tenancy.PlanID) error
}

// The lanes, the plans that map to them and their limits; every replica must configure
// them alike. Weight scales a tenant's PerUserLimit and PerUserBurst, and its share
// against lighter tenants of its lane.
var (
	lanes = []dispatch.LaneCapacity{ // highest priority first
		{Lane: "pro", PerUserLimit: 10, PerUserBurst: 20, PerCycleLimit: 200},
		{Lane: "plus", PerUserLimit: 5, PerCycleLimit: 100},
		{Lane: "free", PerUserLimit: 2, PerCycleLimit: 100, MinShare: 20},
	}
	planLanes  = map[tenancy.PlanID]dispatch.Lane{"pro": "pro", "plus": "plus", tenancy.PlanFree: "free"}
	planLimits = map[tenancy.PlanID]duework.Limits{"pro": {Weight: 4}, "plus": {Weight: 2}, tenancy.PlanFree: {MaxInFlight: 2}}
)

// devTier is the "dev" tier: seconds, so that a short run shows work.
var devTier = cadence.Backoff{Base: 2 * time.Second, Max: 20 * time.Second, Factor: 2}

// openStores opens the stores in memory, or in cfg.schema of the PostgreSQL at cfg.dbURL.
// In memory the Scheduler makes its own lease, and there are no notifications to hear.
func openStores(ctx context.Context, cfg config) (stores, error) {
	if cfg.dynamoEndpoint != "" {
		return openDynamoDB(ctx, cfg)
	}
	if cfg.dbURL == "" {
		return stores{index: duework.NewMemory(), watchlist: tenancy.NewMemoryWatchlist(), plans: tenancy.NewMemoryEntitlements(),
			state: maintenance.NewMemoryStateStore(), listen: func(context.Context, func()) error { return nil }, close: func() {}}, nil
	}
	pg, err := postgres.OpenStores(ctx, cfg.dbURL, cfg.schema, postgres.StoresConfig{})
	if err != nil {
		return stores{}, err
	}
	return stores{index: pg.Index, watchlist: pg.Watchlist, plans: pg.Entitlements, lease: pg.Lease, state: pg.StateStore,
		tasks: []maintenance.Task{pg.Index.QueueVacuumTask(30 * time.Second)}, listen: pg.Index.ListenDue, close: pg.Close}, nil
}

// openDynamoDB opens the stores on cfg.table at cfg.dynamoEndpoint.
func openDynamoDB(ctx context.Context, cfg config) (stores, error) {
	region, key, secret := os.Getenv("AWS_REGION"), os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")
	if region == "" {
		region = "us-east-1"
	}
	if key == "" {
		key, secret = "local", "local"
	}
	client := dynamodb.New(dynamodb.Options{Region: region, BaseEndpoint: &cfg.dynamoEndpoint,
		Credentials: credentials.NewStaticCredentialsProvider(key, secret, os.Getenv("AWS_SESSION_TOKEN"))})
	dy, err := rotadynamo.OpenStores(ctx, client, cfg.table, rotadynamo.StoresConfig{})
	if err != nil {
		return stores{}, err
	}
	return stores{index: dy.Index, watchlist: dy.Watchlist, plans: dy.Entitlements, lease: dy.Lease, state: dy.StateStore,
		listen: func(context.Context, func()) error { return nil }, close: func() {}}, nil
}

// serve wires one replica over st and runs it until ctx ends: the Runner, the Scheduler,
// the listener that wakes the Runner, and the inspector's pages, under one context. It
// returns nil after a clean stop.
func serve(ctx context.Context, cfg config, st stores, logger *slog.Logger) error {
	tiers := cadence.NewRegistry()
	laneFor, errLanes := bridge.PlanLanes(st.plans, planLanes, lanes)
	limitsFor, errLimits := bridge.PlanLimits(st.plans, planLimits)
	d, errDispatch := dispatch.New(st.index, dispatch.Config{Lanes: lanes, GlobalBatchLimit: 300, LaneFor: laneFor, LimitsFor: limitsFor,
		ClaimFor: cfg.claimFor})
	b := &bridge.Bridge{Index: st.index, Watchlist: st.watchlist, Pipeline: bridge.PipelineFunc(poll), Tiers: tiers}
	insp, errInsp := inspect.New(inspect.Config{Index: st.index, Lanes: lanes, Dispatcher: d, StateStore: st.state, Clock: cfg.clock,
		Logger: logger, Actions: cfg.actions})
	runner, errRunner := bridge.NewRunner(b, d, bridge.RunnerConfig{Interval: cfg.interval, Workers: cfg.workers, Clock: cfg.clock,
		Logger: logger, Observer: bridge.Observers(insp, cfg.observer)})
	sched, errSched := maintenance.NewScheduler(append(st.tasks, pruneTask), maintenance.Config{Lease: st.lease, StateStore: st.state,
		Holder: cfg.holder, PollInterval: 10 * time.Second, Clock: cfg.clock, Logger: logger, Observer: insp})
	// Each constructor refuses what it cannot use (a nil from one that failed), naming it.
	if err := errors.Join(tiers.Register("dev", devTier), errLanes, errLimits, errDispatch, errInsp, errRunner, errSched); err != nil {
		return err
	}
	if err := addDemoTenants(ctx, cfg, b, st.plans); err != nil {
		return err
	}
	if _, err := b.SyncAll(ctx, cfg.now()); err != nil {
		return fmt.Errorf("daemon: sync: %w", err)
	}
	listen := func(ctx context.Context) error { return st.listen(ctx, runner.Wake) }
	pages, err := serveInspector(cfg, insp, logger)
	if err != nil {
		return err
	}
	runs := []func(context.Context) error{runner.Run, sched.Run, listen}
	if pages != nil {
		runs = append(runs, pages)
	}
	return bridge.RunAll(ctx, runs...)
}

// now is the time on cfg's clock.
func (cfg config) now() time.Time {
	if cfg.clock != nil {
		return cfg.clock.Now()
	}
	return time.Now()
}

// store names where cfg keeps the stores, for the log.
func (cfg config) store() string {
	if cfg.dynamoEndpoint != "" {
		return "dynamodb table " + cfg.table
	}
	if cfg.dbURL == "" {
		return "memory"
	}
	return "postgres schema " + cfg.schema
}

// defaultHolder is -holder's default: the host's name and the process's ID, which tell
// the replicas of a fleet apart.
func defaultHolder() string {
	host, err := os.Hostname()
	if err != nil {
		host = "daemon"
	}
	return fmt.Sprintf("%s/%d", host, os.Getpid())
}

// demoPlans are the demo tenants' plans: tenant-01 is on pro, tenant-02 on plus,
// tenant-03 on free, tenant-04 on pro again, and so on.
var demoPlans = []tenancy.PlanID{"pro", "plus", tenancy.PlanFree}

// demoTenant is the ID of the i-th demo tenant, from 0: tenant-01, tenant-02, …
func demoTenant(i int) string { return fmt.Sprintf("tenant-%02d", i+1) }

// demoSources are the slugs every demo tenant watches.
var demoSources = []string{"jobs", "news", "blog"}

// addDemoTenants gives the demo tenants their plans and watches their sources on the dev
// tier through b: one SetPlans and one WatchAll. Adding is idempotent, so replicas may all
// do it.
func addDemoTenants(ctx context.Context, cfg config, b *bridge.Bridge, plans planStore) error {
	seed := map[string]tenancy.PlanID{}
	var sources []tenancy.WatchlistEntry
	for i := range cfg.tenants {
		seed[demoTenant(i)] = demoPlans[i%len(demoPlans)]
		for _, slug := range demoSources {
			sources = append(sources, tenancy.WatchlistEntry{UserID: demoTenant(i), Slug: slug, Tier: "dev"})
		}
	}
	if err := plans.SetPlans(ctx, seed); err != nil {
		return fmt.Errorf("daemon: plans: %w", err)
	}
	if _, err := b.WatchAll(ctx, sources, cfg.now()); err != nil {
		return fmt.Errorf("daemon: watch: %w", err)
	}
	return nil
}

// poll stands in for the host's pipeline: fetch the source, drop what was already seen,
// score the rest. It takes 5 to 50 ms and finds something new one time in four; it stops
// when ctx ends, as a real fetch must.
func poll(ctx context.Context, tc tenancy.Context, e tenancy.WatchlistEntry) (bridge.Result, error) {
	if err := pause(ctx, 5, 50); err != nil {
		return bridge.Result{}, err
	}
	if rand.IntN(4) != 0 {
		return bridge.Result{}, nil
	}
	return bridge.Result{Outcomes: []bridge.Outcome{{ID: e.Slug + "/" + time.Now().Format(time.RFC3339Nano), Stage: "scored"}}}, nil
}

// pruneTask stands in for a service's own upkeep, such as deleting the results it no
// longer keeps: every minute, off the heavy lease, it works for 10 to 50 ms.
var pruneTask = maintenance.Task{Name: "prune-results", Class: maintenance.OffLease, Cadence: time.Minute,
	Run: func(ctx context.Context) error { return pause(ctx, 10, 50) }}

// pause waits between lo and hi milliseconds, as I/O would, or until ctx ends.
func pause(ctx context.Context, lo, hi int) error {
	t := time.NewTimer(time.Duration(lo+rand.IntN(hi-lo+1)) * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}
