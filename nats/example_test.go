package rotanats_test

import (
	"context"
	"fmt"
	"log"
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
// postgres module's), and there are as many workers as the work needs. It needs a NATS
// server with JetStream at nats.DefaultURL, so it has no output to check.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	idx, wl := duework.NewMemory(), tenancy.NewMemoryWatchlist()
	lanes := []dispatch.LaneCapacity{{Lane: "paid", PerUserLimit: 10, PerCycleLimit: 100}, {Lane: "free", PerUserLimit: 2, PerCycleLimit: 50}}
	cfg := rotanats.Config{Lanes: []dispatch.Lane{"paid", "free"}, ClaimFor: time.Minute}

	// The dispatcher: a Dispatcher and a Feeder over a Sink.
	d, err := dispatch.New(idx, dispatch.Config{Lanes: lanes, GlobalBatchLimit: 100, ClaimFor: cfg.ClaimFor,
		LaneFor: func(ctx context.Context, userID string) (dispatch.Lane, error) { return "free", nil }})
	if err != nil {
		log.Fatal(err)
	}
	js, closeNC, err := jetStream("dispatcher")
	if err != nil {
		fmt.Println("no NATS server:", err)
		return
	}
	defer closeNC()
	sink, err := rotanats.NewSink(js, cfg)
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
	wjs, closeWorkerNC, err := jetStream("worker")
	if err != nil {
		fmt.Println("no NATS server:", err)
		return
	}
	defer closeWorkerNC()
	consumer, err := rotanats.NewConsumer(wjs, w, cfg)
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

// jetStream connects to the local NATS server as name.
func jetStream(name string) (jetstream.JetStream, func(), error) {
	nc, err := nats.Connect(nats.DefaultURL, nats.Name(name))
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
