// Command serverless is rota as it runs on AWS without a server of its own: a schedule
// invokes a dispatch function that claims due work fairly and queues it, one SQS queue per
// lane, and a worker function runs each lane's messages; everything they share lives in
// one DynamoDB table. The handlers are package rotalambda's, over rotadynamo's stores and
// a rotasqs.Sink.
//
// Run locally, it plays AWS's part against two emulators, DynamoDB Local and fauxqs
// (.ci/services starts both on loopback):
//
//	go run ./examples/serverless                  # until Ctrl-C
//	go run ./examples/serverless -for 30s         # stop by itself
//	go run ./examples/serverless -single          # one function: dispatch and run, no queues
//
// A ticker stands in for EventBridge Scheduler: every -every it invokes the dispatch
// function's handler (rotalambda.DispatchHandler) with a scheduled event, one invocation
// at a time as reserved concurrency 1 allows, under the function's timeout. A poller
// stands in for each lane's SQS event source mapping: -concurrency instances of the worker
// function per lane, each receiving up to ten messages, invoking its handler
// (rotalambda.WorkerHandler) under a deadline that stands for the function's timeout, and
// deleting the messages the partial-batch response does not name, as Lambda does with
// ReportBatchItemFailures. With -single one function runs rotalambda.RunHandler on the
// schedule instead, and no queue is used.
//
// Each function instance builds what it needs once, as a Lambda function does at its
// start: its clients, the stores (rotadynamo.OpenStores), the Dispatcher's configuration
// and the plan tables, which every function builds alike, and its Feeder, Worker or
// Runner. At start-up the command seeds a few demo tenants (-tenants): their plans with one
// SetPlans, their sources with one Bridge.WatchAll, each source's tier its plan's
// (bridge.PlanTiers). On SIGINT, SIGTERM or the end of -for it stops the schedule, lets the
// workers empty the queues (for at most -claim, after which every queued claim has ended),
// and exits 0. Nothing is left claimed then but what a failed write leaves until its
// claim ends. The table and queues are named from a random suffix unless -table and
// -prefix name them, and are left in the emulators.
//
// The same binary, deployed as the functions' bootstrap, starts the Lambda runtime instead
// (lambda.Start): ROTA_FUNCTION says which handler (dispatch, worker or run), ROTA_TABLE
// and ROTA_QUEUE_PREFIX where the table and the queues are. README.md lists the resources
// to create.
//
// The pipeline stands in for a real one: it waits 5 to 50 ms and finds something new one
// time in four. Logs go to stderr through log/slog.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
	rotalambda "github.com/rotaworks/rota/lambda"
	rotasqs "github.com/rotaworks/rota/sqs"
)

func main() {
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	slog.SetDefault(logger) // the worker handler logs the messages it drops there
	if os.Getenv("AWS_LAMBDA_RUNTIME_API") != "" {
		if err := startLambda(logger); err != nil {
			logger.Error("serverless: cannot start", "error", err)
			os.Exit(1)
		}
		return
	}
	cfg := flags()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	context.AfterFunc(ctx, stop) // a second signal stops at once
	if err := run(ctx, cfg, logger); err != nil {
		logger.Error("serverless: stopped", "error", err)
		stop()
		os.Exit(1)
	}
}

// config is the command's flags.
type config struct {
	dynamoEndpoint, sqsEndpoint string
	table, prefix               string
	tenants                     int
	every                       time.Duration // the schedule's rate
	claimFor                    time.Duration
	timeout                     time.Duration // the worker function's; 0 means claimFor
	concurrency                 int           // each lane's event source mapping's maximum concurrency
	single                      bool          // one function, RunHandler, no queues
	runFor                      time.Duration // 0: until SIGINT or SIGTERM

	// pipeline, when set, gives each function instance its pipeline (the tests'); nil
	// means poll.
	pipeline func(instance int) bridge.Pipeline
}

// flags reads the command line.
func flags() config {
	suffix := randomSuffix()
	var cfg config
	flag.StringVar(&cfg.dynamoEndpoint, "dynamodb", "http://127.0.0.1:8000", "DynamoDB endpoint (DynamoDB Local)")
	flag.StringVar(&cfg.sqsEndpoint, "sqs", "http://127.0.0.1:4566", "SQS endpoint (fauxqs)")
	flag.StringVar(&cfg.table, "table", "rota-serverless-"+suffix, "DynamoDB table, created if missing")
	flag.StringVar(&cfg.prefix, "prefix", "rota-sl-"+suffix+"-", "the lane queues' name prefix; the queues are created if missing")
	flag.IntVar(&cfg.tenants, "tenants", 12, "demo tenants to seed, three sources each")
	flag.DurationVar(&cfg.every, "every", time.Second, "the schedule's rate (EventBridge Scheduler's is at least a minute)")
	flag.DurationVar(&cfg.claimFor, "claim", defaultClaimFor, "how long a dispatched item stays claimed (dispatch.Config.ClaimFor)")
	flag.DurationVar(&cfg.timeout, "timeout", 0, "the worker function's timeout; 0 means -claim")
	flag.IntVar(&cfg.concurrency, "concurrency", defaultConcurrency, "worker function instances per lane (each mapping's maximum concurrency)")
	flag.BoolVar(&cfg.single, "single", false, "run one function that dispatches and runs (RunHandler), without queues")
	flag.DurationVar(&cfg.runFor, "for", 0, "stop after this long; 0 runs until SIGINT or SIGTERM")
	flag.Parse()
	return cfg
}

// randomSuffix is 8 hex digits, which tell one run's table and queues from another's.
func randomSuffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// validate reports every flag that cannot work.
func (cfg config) validate() error {
	var errs []error
	if cfg.dynamoEndpoint == "" || cfg.sqsEndpoint == "" {
		errs = append(errs, errors.New("serverless: -dynamodb and -sqs must name the emulators' endpoints"))
	}
	if cfg.tenants < 1 {
		errs = append(errs, fmt.Errorf("serverless: -tenants must be at least 1, got %d", cfg.tenants))
	}
	if cfg.every < 10*time.Millisecond {
		errs = append(errs, fmt.Errorf("serverless: -every must be at least 10ms, got %v", cfg.every))
	}
	if cfg.timeout < 0 || cfg.runFor < 0 {
		errs = append(errs, fmt.Errorf("serverless: -timeout and -for must not be negative, got %v and %v", cfg.timeout, cfg.runFor))
	}
	if visibility := cfg.claimFor + dispatch.DefaultMaxClockSkew + rotasqs.VisibilitySlack; cfg.timeout > visibility {
		errs = append(errs, fmt.Errorf("serverless: -timeout must be at most the queues' visibility timeout, %v for -claim %v, "+
			"as Lambda requires of a function an SQS queue invokes; got %v", visibility, cfg.claimFor, cfg.timeout))
	}
	if cfg.concurrency < 1 {
		errs = append(errs, fmt.Errorf("serverless: -concurrency must be at least 1, got %d", cfg.concurrency))
	}
	return errors.Join(errs...) // the table, the prefix and -claim are checked by what uses them
}

// run plays AWS's part until ctx ends or cfg.runFor has passed, then stops cleanly: the
// schedule first, then the workers once the queues are empty.
func run(ctx context.Context, cfg config, logger *slog.Logger) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	if cfg.timeout == 0 {
		cfg.timeout = cfg.claimFor
	}
	if cfg.runFor > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.runFor)
		defer cancel()
	}
	e := deployment{dynamoEndpoint: cfg.dynamoEndpoint, sqsEndpoint: cfg.sqsEndpoint, table: cfg.table, prefix: cfg.prefix,
		claimFor: cfg.claimFor, concurrency: cfg.concurrency, pipeline: cfg.pipeline, logger: logger}
	// The first instance opens (and creates) the table before the others open it.
	first, err := e.open(ctx, 0)
	if err != nil {
		return err
	}
	if err := seed(ctx, first, cfg.tenants); err != nil {
		return err
	}
	logger.Info("serverless: started", "table", cfg.table, "queue_prefix", cfg.prefix, "tenants", cfg.tenants, "single", cfg.single)
	if cfg.single {
		return runSingle(ctx, cfg, first, logger)
	}
	return runQueues(ctx, cfg, e, first, logger)
}

// runSingle schedules the one function that dispatches and runs (RunHandler) until ctx
// ends.
func runSingle(ctx context.Context, cfg config, f *function, logger *slog.Logger) error {
	handler, err := f.runHandler()
	if err != nil {
		return err
	}
	// Above ClaimFor, as RunHandler asks: the claims, not the invocation, end the runs.
	schedule(ctx, cfg.every, cfg.claimFor+rotalambda.Reserve, handler, logger.With("function", "run"))
	logger.Info("serverless: stopped")
	return nil
}

// runQueues runs the dispatch function on the schedule and each lane's worker instances
// on its queue until ctx ends; then it stops the schedule and lets the workers empty the
// queues, for at most ClaimFor.
func runQueues(ctx context.Context, cfg config, e deployment, dispatcher *function, logger *slog.Logger) error {
	dispatch, err := dispatcher.dispatchHandler()
	if err != nil {
		return err
	}
	maps, err := openMappings(ctx, cfg, e)
	if err != nil {
		return err
	}
	polling, stopPolling := context.WithCancel(context.WithoutCancel(ctx))
	defer stopPolling()
	scheduled := make(chan struct{}) // closed once the schedule has stopped
	var wg sync.WaitGroup
	for _, m := range maps {
		wg.Go(func() { m.run(polling, scheduled) })
	}
	schedule(ctx, cfg.every, dispatchTimeout, dispatch, logger.With("function", "dispatch"))
	close(scheduled)
	logger.Info("serverless: schedule stopped, emptying the queues")
	drain := time.AfterFunc(cfg.claimFor, stopPolling) // every claim still queued has ended by then
	wg.Wait()
	drain.Stop()
	var errs []error
	for _, m := range maps {
		errs = append(errs, m.stop())
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	logger.Info("serverless: stopped")
	return nil
}

// openMappings opens cfg.concurrency worker function instances per lane, each with the
// event source mapping that invokes it.
func openMappings(ctx context.Context, cfg config, e deployment) ([]*mapping, error) {
	var maps []*mapping
	for _, lc := range lanes {
		for range cfg.concurrency {
			f, err := e.open(ctx, len(maps)+1)
			if err != nil {
				return nil, err
			}
			m, err := newMapping(f, lc.Lane, cfg.timeout, e.logger)
			if err != nil {
				return nil, err
			}
			maps = append(maps, m)
		}
	}
	return maps, nil
}

// schedule stands in for EventBridge Scheduler and a function of reserved concurrency 1:
// at once and then every interval until ctx ends, it invokes handler with a scheduled
// event under a deadline timeout away, one invocation at a time: a tick that comes during
// one waits for it to end, and any more are dropped. A failed invocation is logged and not
// retried: the next tick covers it. The stop does not cut an invocation short (Lambda
// does not end one because its schedule was disabled); schedule returns once it has
// returned.
func schedule(ctx context.Context, interval, timeout time.Duration, handler func(context.Context, events.EventBridgeEvent) error, logger *slog.Logger) {
	ticks := time.NewTicker(interval)
	defer ticks.Stop()
	for n := 1; ctx.Err() == nil; n++ {
		now := time.Now()
		ev := events.EventBridgeEvent{Version: "0", ID: fmt.Sprintf("tick-%d", n), DetailType: "Scheduled Event", Source: "aws.scheduler",
			AccountID: localAccount, Time: now, Region: localRegion, Resources: []string{"arn:aws:scheduler:" + localRegion + ":" + localAccount + ":schedule/default/rota"},
			Detail: []byte("{}")}
		inv, cancel := context.WithDeadline(context.WithoutCancel(ctx), now.Add(timeout))
		if err := handler(inv, ev); err != nil {
			logger.Warn("serverless: invocation failed", "event_id", ev.ID, "error", err)
		}
		cancel()
		select {
		case <-ctx.Done():
		case <-ticks.C:
		}
	}
}
