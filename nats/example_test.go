package rotanats_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	rotanats "github.com/rotaworks/rota/nats"
	"github.com/rotaworks/rota/tenancy"
)

// The wiring of both sides, in one program for the sake of the example: a dispatcher
// feeding the queue and one worker consuming it, each on a NATS connection of its own. In
// a deployment they are separate processes over a shared Index and Watchlist (the
// postgres module's), and there are as many workers as the work needs.
//
// It has no Output comment because it needs a NATS server with JetStream at
// nats.DefaultURL, and an Example cannot skip: go test compiles it but does not run it.
// TestExampleSteps runs the same steps against the test server and checks what they print.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := exampleSteps(ctx, nats.DefaultURL, rotanats.Config{}, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// exampleDispatch is the Dispatcher's configuration, which the worker shares: build it in
// code both processes run.
func exampleDispatch() dispatch.Config {
	return dispatch.Config{
		Lanes:            []dispatch.LaneCapacity{{Lane: "paid", PerUserLimit: 10, PerCycleLimit: 100}, {Lane: "free", PerUserLimit: 2, PerCycleLimit: 50}},
		GlobalBatchLimit: 100,
		ClaimFor:         time.Minute,
		LaneFor:          func(ctx context.Context, userID string) (dispatch.Lane, error) { return "free", nil },
	}
}

// exampleSteps runs a dispatcher and a worker through the NATS server at url, with the
// queue cfg, until ctx ends, and prints each run.
func exampleSteps(ctx context.Context, url string, cfg rotanats.Config, out io.Writer) error {
	idx, wl := duework.NewMemory(), tenancy.NewMemoryWatchlist()

	// The dispatcher: a Dispatcher and a Feeder over a Sink.
	d, err := dispatch.New(idx, exampleDispatch())
	if err != nil {
		return err
	}
	js, closeNC, err := jetStream(url, "dispatcher")
	if err != nil {
		return err
	}
	defer closeNC()
	sink, err := rotanats.NewSink(js, d.Config(), cfg)
	if err != nil {
		return err
	}
	feeder, err := bridge.NewFeeder(d, sink, bridge.FeederConfig{})
	if err != nil {
		return err
	}

	// A worker: a bridge.Worker fed, and stopped, by a Consumer.
	pipeline := bridge.PipelineFunc(func(ctx context.Context, tc tenancy.Context, e tenancy.WatchlistEntry) (bridge.Result, error) {
		fmt.Fprintln(out, "polled", tc.UserID(), e.Slug)
		return bridge.Result{}, nil
	})
	w, err := bridge.NewWorker(&bridge.Bridge{Index: idx, Watchlist: wl, Pipeline: pipeline}, bridge.WorkerConfig{})
	if err != nil {
		return err
	}
	wjs, closeWorkerNC, err := jetStream(url, "worker")
	if err != nil {
		return err
	}
	defer closeWorkerNC()
	consumer, err := rotanats.NewConsumer(wjs, w, exampleDispatch(), cfg)
	if err != nil {
		return err
	}

	tc, err := tenancy.NewContext("ana")
	if err != nil {
		return err
	}
	now := time.Now()
	if err := wl.Add(ctx, tc, tenancy.WatchlistEntry{UserID: "ana", Slug: "jobs-board", Tier: "hot", AddedAt: now}); err != nil {
		return err
	}
	if err := idx.Schedule(ctx, tc, duework.Entry{UserID: "ana", WorkKey: "jobs-board", Tier: "hot", DueAt: now}); err != nil { // due at once
		return err
	}

	done := make(chan error, 1)
	go func() { done <- consumer.Run(ctx) }() // until ctx ends, then the Worker's stop
	return errors.Join(feeder.Run(ctx), <-done)
}

// jetStream connects to the NATS server at url as name.
func jetStream(url, name string) (jetstream.JetStream, func(), error) {
	nc, err := nats.Connect(url, nats.Name(name))
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return js, nc.Close, nil
}

// TestExampleSteps runs Example's steps on a stream of its own.
func TestExampleSteps(t *testing.T) {
	requireNATS(t)
	cfg := freshQueue(t, rotanats.Config{Logger: quiet})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var out strings.Builder
	if err := exampleSteps(ctx, natsURL(), cfg, &out); err != nil {
		t.Fatal(err)
	}
	if want := "polled ana jobs-board\n"; out.String() != want {
		t.Fatalf("Example printed\n%s\nwant\n%s", out.String(), want)
	}
}
