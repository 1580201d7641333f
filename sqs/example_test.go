package rotasqs_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	rotasqs "github.com/rotaworks/rota/sqs"
	"github.com/rotaworks/rota/tenancy"
)

// The wiring of both sides, in one program for the sake of the example: a dispatcher
// feeding the lane queues and one worker consuming them, each with an SQS client of its
// own. In a deployment they are separate processes over a shared Index and Watchlist, and
// there are as many workers as the work needs. It needs an SQS endpoint (here a local
// emulator), so it has no output to check.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	idx, wl := duework.NewMemory(), tenancy.NewMemoryWatchlist()
	dc := dispatch.Config{
		Lanes:            []dispatch.LaneCapacity{{Lane: "paid", PerUserLimit: 10, PerCycleLimit: 100}, {Lane: "free", PerUserLimit: 2, PerCycleLimit: 50}},
		GlobalBatchLimit: 100,
		LaneFor:          func(ctx context.Context, userID string) (dispatch.Lane, error) { return "free", nil },
		ClaimFor:         time.Minute,
	}
	cfg := rotasqs.Config{InFlight: 8}

	// The dispatcher: a Dispatcher and a Feeder over a Sink.
	d, err := dispatch.New(idx, dc)
	if err != nil {
		log.Fatal(err)
	}
	sink, err := rotasqs.NewSink(newClient(), dc, cfg)
	if err != nil {
		log.Fatal(err)
	}
	feeder, err := bridge.NewFeeder(d, sink, bridge.FeederConfig{})
	if err != nil {
		log.Fatal(err)
	}

	// A worker: a bridge.Worker fed by a Consumer.
	pipeline := bridge.PipelineFunc(func(ctx context.Context, tc tenancy.Context, e tenancy.WatchlistEntry) (bridge.Result, error) {
		fmt.Println("polled", tc.UserID(), e.Slug)
		return bridge.Result{}, nil
	})
	w, err := bridge.NewWorker(&bridge.Bridge{Index: idx, Watchlist: wl, Pipeline: pipeline}, bridge.WorkerConfig{})
	if err != nil {
		log.Fatal(err)
	}
	consumer, err := rotasqs.NewConsumer(newClient(), w, dc, cfg)
	if err != nil {
		log.Fatal(err)
	}

	tc, err := tenancy.NewContext("ana")
	if err != nil {
		log.Fatal(err)
	}
	b := &bridge.Bridge{Index: idx, Watchlist: wl}
	if _, err := b.Watch(ctx, tc, []tenancy.WatchlistEntry{{UserID: "ana", Slug: "jobs-board", Tier: "hot", AddedAt: time.Now()}}, time.Now()); err != nil {
		log.Fatal(err)
	}

	done := make(chan error, 1)
	go func() { done <- consumer.Run(ctx) }()
	if err := feeder.Run(ctx); err != nil {
		log.Fatal(err)
	}
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	stop, cancelStop := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelStop()
	if err := w.Stop(stop); err != nil {
		log.Fatal(err)
	}
}

// newClient returns an SQS client of a local emulator; on AWS, build it from
// config.LoadDefaultConfig instead.
func newClient() *sqs.Client {
	return sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String("http://127.0.0.1:4566"),
		Credentials: credentials.NewStaticCredentialsProvider("local", "local", "")})
}

// Each lane has a queue of its own under the prefix, and each tenant a message group, so
// that SQS fair queues keep one tenant's backlog from delaying the others'.
func ExampleConfig_QueueName() {
	cfg := rotasqs.Config{Prefix: "jobs-"}
	for _, lane := range []dispatch.Lane{"paid", "free tier"} {
		fmt.Println(cfg.QueueName(lane))
	}
	fmt.Println(rotasqs.GroupID("tenant-42"))
	// Output:
	// jobs-paid
	// jobs-free_20tier
	// tenant-42
}
