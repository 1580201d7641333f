package rotalambda_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	rotalambda "github.com/rotaworks/rota/lambda"
	"github.com/rotaworks/rota/tenancy"
)

// queue stands in for the lane queues between the two functions: it has room for ten
// messages and holds what it is sent as an SQS event would deliver it.
type queue struct{ event events.SQSEvent }

func (q *queue) Room(context.Context) (dispatch.Take, error) {
	return dispatch.Take{Total: 10 - len(q.event.Records)}, nil
}

func (q *queue) Send(_ context.Context, lane dispatch.Lane, items []dispatch.Item) error {
	for _, it := range items {
		body, err := bridge.EncodeItem(it)
		if err != nil {
			return err
		}
		id := fmt.Sprintf("m%d", len(q.event.Records)+1)
		q.event.Records = append(q.event.Records, events.SQSMessage{MessageId: id, Body: string(body)})
	}
	return nil
}

// Two functions: one dispatches on a schedule into the lane queues, the other runs what a
// queue delivers. Each handler is a plain function, called here as Lambda would call it;
// in a deployment each main calls lambda.Start with its handler.
func Example() {
	ctx := context.Background()
	idx, wl := duework.NewMemory(), tenancy.NewMemoryWatchlist()
	lanes := []dispatch.LaneCapacity{{Lane: "free", PerUserLimit: 5, PerCycleLimit: 50}}
	d, err := dispatch.New(idx, dispatch.Config{Lanes: lanes, GlobalBatchLimit: 50, ClaimFor: time.Minute,
		LaneFor: func(context.Context, string) (dispatch.Lane, error) { return "free", nil }})
	if err != nil {
		panic(err)
	}
	pipeline := bridge.PipelineFunc(func(ctx context.Context, tc tenancy.Context, e tenancy.WatchlistEntry) (bridge.Result, error) {
		fmt.Println("polled", tc.UserID(), e.Slug)
		return bridge.Result{}, nil
	})
	b := &bridge.Bridge{Index: idx, Watchlist: wl, Pipeline: pipeline}
	tc, err := tenancy.NewContext("ana")
	if err != nil {
		panic(err)
	}
	if _, err := b.Watch(ctx, tc, []tenancy.WatchlistEntry{{UserID: "ana", Slug: "jobs-board", Tier: "hot"}}, time.Now().Add(-time.Hour)); err != nil {
		panic(err)
	}
	quiet := slog.New(slog.DiscardHandler)

	// The dispatching function.
	q := &queue{}
	feeder, err := bridge.NewFeeder(d, q, bridge.FeederConfig{Logger: quiet})
	if err != nil {
		panic(err)
	}
	dispatchHandler := rotalambda.DispatchHandler(feeder) // lambda.Start(dispatchHandler)
	if err := dispatchHandler(ctx, events.EventBridgeEvent{}); err != nil {
		panic(err)
	}
	fmt.Println("queued", len(q.event.Records))

	// The worker function.
	w, err := bridge.NewWorker(b, bridge.WorkerConfig{Logger: quiet})
	if err != nil {
		panic(err)
	}
	workerHandler := rotalambda.WorkerHandler(w) // lambda.Start(workerHandler)
	resp, err := workerHandler(ctx, q.event)
	if err != nil {
		panic(err)
	}
	fmt.Println("to deliver again:", len(resp.BatchItemFailures))
	// Output:
	// queued 1
	// polled ana jobs-board
	// to deliver again: 0
}
