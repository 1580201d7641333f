package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/cadence"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	rotadynamo "github.com/rotaworks/rota/dynamodb"
	rotalambda "github.com/rotaworks/rota/lambda"
	rotasqs "github.com/rotaworks/rota/sqs"
	"github.com/rotaworks/rota/tenancy"
)

// What every function of a deployment builds alike: the Dispatcher's configuration is
// code, not configuration, since the queues take their lanes and ClaimFor from it.
const (
	// defaultClaimFor is dispatch.Config.ClaimFor: how long a dispatched item may wait in
	// its queue and run. The worker function's timeout is as long.
	defaultClaimFor = time.Minute
	// defaultConcurrency is each lane's event source mapping's maximum concurrency.
	defaultConcurrency = 2
	// batchSize is the event source mappings' batch size, and the Worker's slots, so that
	// a batch runs at once.
	batchSize = rotasqs.MaxBatch
	// typicalRun is how long a worker slot typically holds an item, from its receipt to
	// its deletion (rotasqs.Config.RunTime): a batch's pipelines, its writes and the
	// deletion.
	typicalRun = 100 * time.Millisecond
	// dispatchTimeout is the dispatch function's timeout: one Feed round.
	dispatchTimeout = 30 * time.Second
	// runWorkers is the Runner's slots in the single function of -single.
	runWorkers = 8
)

// The plans: each maps to a lane, flow-control limits and a cadence tier.
var (
	lanes = []dispatch.LaneCapacity{ // highest priority first
		{Lane: "pro", PerUserLimit: 10, PerCycleLimit: 200},
		{Lane: "plus", PerUserLimit: 5, PerCycleLimit: 100},
		{Lane: "free", PerUserLimit: 2, PerCycleLimit: 100, MinShare: 20},
	}
	planLanes  = map[tenancy.PlanID]dispatch.Lane{"pro": "pro", "plus": "plus", tenancy.PlanFree: "free"}
	planLimits = map[tenancy.PlanID]duework.Limits{"pro": {Weight: 4}, "plus": {Weight: 2}, tenancy.PlanFree: {MaxInFlight: 2}}
	planTiers  = map[tenancy.PlanID]string{"pro": "dev", "plus": "dev", tenancy.PlanFree: "dev-slow"}
	// The tiers are seconds, so that a short run shows work; a service uses the presets
	// or tiers of its own.
	tiers = map[string]cadence.Backoff{
		"dev":      {Base: time.Second, Max: 2 * time.Second, Factor: 2},
		"dev-slow": {Base: 2 * time.Second, Max: 4 * time.Second, Factor: 2},
	}
)

// deployment is what every function instance reads from its environment: where the table
// and the queues are, and the settings all functions must share.
type deployment struct {
	dynamoEndpoint, sqsEndpoint string // "": AWS's own
	table, prefix               string
	claimFor                    time.Duration
	concurrency                 int
	pipeline                    func(instance int) bridge.Pipeline // nil: poll
	logger                      *slog.Logger
}

// function is one instance of a function: what it builds once, at its start, outside
// its handler.
type function struct {
	stores *rotadynamo.Stores
	sqs    *sqs.Client
	dc     dispatch.Config
	queues rotasqs.Config
	bridge *bridge.Bridge
	logger *slog.Logger
}

// open starts instance number n: its clients, the stores on the table (created when
// missing), the plan tables and the Bridge.
func (e deployment) open(ctx context.Context, n int) (*function, error) {
	opts := awsOptions()
	dy := dynamodb.New(dynamodb.Options{Region: opts.Region, Credentials: opts.Credentials, BaseEndpoint: endpoint(e.dynamoEndpoint)})
	st, err := rotadynamo.OpenStores(ctx, dy, e.table, rotadynamo.StoresConfig{})
	if err != nil {
		return nil, err
	}
	reg := cadence.NewRegistry()
	var errs []error
	for name, p := range tiers {
		errs = append(errs, reg.Register(name, p))
	}
	laneFor, errLanes := bridge.PlanLanes(st.Entitlements, planLanes, lanes)
	limitsFor, errLimits := bridge.PlanLimits(st.Entitlements, planLimits)
	tierFor, errTiers := bridge.PlanTiers(st.Entitlements, planTiers, reg)
	if err := errors.Join(append(errs, errLanes, errLimits, errTiers)...); err != nil {
		return nil, err
	}
	var p bridge.Pipeline = bridge.PipelineFunc(poll)
	if e.pipeline != nil {
		p = e.pipeline(n)
	}
	return &function{
		stores: st,
		sqs:    sqs.New(sqs.Options{Region: opts.Region, Credentials: opts.Credentials, BaseEndpoint: endpoint(e.sqsEndpoint)}),
		dc:     dispatch.Config{Lanes: lanes, GlobalBatchLimit: 300, LaneFor: laneFor, LimitsFor: limitsFor, ClaimFor: e.claimFor},
		queues: rotasqs.Config{Prefix: e.prefix, InFlight: e.concurrency * batchSize, RunTime: typicalRun, Logger: e.logger},
		bridge: &bridge.Bridge{Index: st.Index, Watchlist: st.Watchlist, Pipeline: p, Tiers: reg, TierFor: tierFor},
		logger: e.logger.With("instance", n),
	}, nil
}

// awsOptions are the region and credentials of every client: AWS_REGION and the
// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN that Lambda sets for a
// function's role, or any value for the emulators.
func awsOptions() aws.Config {
	region, key, secret := os.Getenv("AWS_REGION"), os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")
	if region == "" {
		region = localRegion
	}
	if key == "" {
		key, secret = "local", "local"
	}
	return aws.Config{Region: region, Credentials: credentials.NewStaticCredentialsProvider(key, secret, os.Getenv("AWS_SESSION_TOKEN"))}
}

// The account and region the emulators stand for.
const localAccount, localRegion = "000000000000", "us-east-1"

// endpoint is a client's BaseEndpoint: nil, AWS's own, for "".
func endpoint(url string) *string {
	if url == "" {
		return nil
	}
	return aws.String(url)
}

// dispatchHandler is the dispatch function's handler: one Feed round per invocation, into
// the lane queues.
func (f *function) dispatchHandler() (func(context.Context, events.EventBridgeEvent) error, error) {
	d, err := dispatch.New(f.stores.Index, f.dc)
	if err != nil {
		return nil, err
	}
	sink, err := rotasqs.NewSink(f.sqs, f.dc, f.queues)
	if err != nil {
		return nil, err
	}
	feeder, err := bridge.NewFeeder(d, sink, bridge.FeederConfig{Logger: f.logger})
	if err != nil {
		return nil, err
	}
	return rotalambda.DispatchHandler(feeder), nil
}

// workerHandler is the worker function's handler, over a Worker with a slot for each
// message of a batch. The Worker is returned too, for a local stop.
func (f *function) workerHandler() (func(context.Context, events.SQSEvent) (events.SQSEventResponse, error), *bridge.Worker, error) {
	w, err := bridge.NewWorker(f.bridge, bridge.WorkerConfig{Workers: batchSize, Logger: f.logger})
	if err != nil {
		return nil, nil, err
	}
	return rotalambda.WorkerHandler(w), w, nil
}

// runHandler is the handler of the one function of a small service: one Runner cycle per
// invocation, dispatch and runs together.
func (f *function) runHandler() (func(context.Context, events.EventBridgeEvent) error, error) {
	d, err := dispatch.New(f.stores.Index, f.dc)
	if err != nil {
		return nil, err
	}
	r, err := bridge.NewRunner(f.bridge, d, bridge.RunnerConfig{Workers: runWorkers, Logger: f.logger})
	if err != nil {
		return nil, err
	}
	return rotalambda.RunHandler(r), nil
}

// startLambda is the deployed function: it builds the handler ROTA_FUNCTION names over
// ROTA_TABLE and ROTA_QUEUE_PREFIX and serves invocations until Lambda ends the instance.
func startLambda(logger *slog.Logger) error {
	e := deployment{table: os.Getenv("ROTA_TABLE"), prefix: os.Getenv("ROTA_QUEUE_PREFIX"), claimFor: defaultClaimFor,
		concurrency: defaultConcurrency, logger: logger}
	f, err := e.open(context.Background(), 0)
	if err != nil {
		return err
	}
	var handler any
	switch name := os.Getenv("ROTA_FUNCTION"); name {
	case "dispatch":
		handler, err = f.dispatchHandler()
	case "worker":
		handler, _, err = f.workerHandler()
	case "run":
		handler, err = f.runHandler()
	default:
		return fmt.Errorf("serverless: ROTA_FUNCTION must be dispatch, worker or run, got %q", name)
	}
	if err != nil {
		return err
	}
	lambda.Start(handler)
	return nil
}

// demoPlans are the demo tenants' plans in turn: tenant-01 on pro, tenant-02 on plus,
// tenant-03 on free, tenant-04 on pro again, and so on.
var demoPlans = []tenancy.PlanID{"pro", "plus", tenancy.PlanFree}

// demoSources are the slugs every demo tenant watches.
var demoSources = []string{"jobs", "news", "blog"}

// demoTenant is the ID of the i-th demo tenant, from 0: tenant-01, tenant-02, …
func demoTenant(i int) string { return fmt.Sprintf("tenant-%02d", i+1) }

// seed gives n demo tenants their plans with one SetPlans and watches their sources with
// one Bridge.WatchAll, each source on its plan's tier. Seeding again changes nothing.
func seed(ctx context.Context, f *function, n int) error {
	plans := map[string]tenancy.PlanID{}
	var sources []tenancy.WatchlistEntry
	for i := range n {
		plans[demoTenant(i)] = demoPlans[i%len(demoPlans)]
		for _, slug := range demoSources {
			sources = append(sources, tenancy.WatchlistEntry{UserID: demoTenant(i), Slug: slug})
		}
	}
	if err := f.stores.Entitlements.SetPlans(ctx, plans); err != nil {
		return fmt.Errorf("serverless: plans: %w", err)
	}
	if _, err := f.bridge.WatchAll(ctx, sources, time.Now()); err != nil {
		return fmt.Errorf("serverless: watch: %w", err)
	}
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
