package rotanats_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/cadence"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	rotanats "github.com/rotaworks/rota/nats"
	"github.com/rotaworks/rota/tenancy"
)

// The benchmark's shape: benchUsers tenants with benchSources sources each, every one due
// once per round; benchProcs worker processes of benchSlots slots each, and a Runner with
// as many; every run waits benchRun, as a pipeline waits on the network.
const (
	benchUsers, benchSources = 40, 25
	benchProcs, benchSlots   = 3, 8
	benchRun                 = 2 * time.Millisecond
	onceTier                 = "once" // due again an hour after each run: once per round
)

var benchLanes = []dispatch.LaneCapacity{{Lane: "paid", PerUserLimit: 8, PerCycleLimit: 200}, {Lane: "free tier", PerUserLimit: 8, PerCycleLimit: 200}}

// benchBed is the data both contenders run over and a counter of the runs.
type benchBed struct {
	s       *store
	entries map[string][]duework.Entry // per user, as scheduled for a round
	ran     atomic.Int64
	pipe    bridge.Pipeline
	quiet   *slog.Logger
}

func newBenchBed(b *testing.B) *benchBed {
	bed := &benchBed{s: newStore(b), entries: map[string][]duework.Entry{}, quiet: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if err := bed.s.tiers.Register(onceTier, cadence.Backoff{Base: time.Hour, Max: time.Hour, Factor: 1}); err != nil {
		b.Fatal(err)
	}
	for i := range benchUsers {
		plan := tenancy.PlanFree
		if i%4 == 0 {
			plan = "pro"
		}
		user := fmt.Sprintf("user%02d", i)
		bed.s.watch(user, plan, benchSources)
	}
	bed.pipe = bridge.PipelineFunc(func(ctx context.Context, _ tenancy.Context, _ tenancy.WatchlistEntry) (bridge.Result, error) {
		t := time.NewTimer(benchRun)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		bed.ran.Add(1)
		return bridge.Result{}, nil
	})
	return bed
}

// reschedule makes every source due now, on the once tier, and resets the run counter.
func (bed *benchBed) reschedule(b *testing.B) {
	ctx := context.Background()
	now := time.Now()
	for k := range bed.s.sources {
		e := duework.Entry{UserID: k.UserID, WorkKey: k.WorkKey, Tier: onceTier, DueAt: now}
		if err := bed.s.idx.Schedule(ctx, bed.s.tenants[k.UserID], e); err != nil {
			b.Fatal(err)
		}
	}
	bed.ran.Store(0)
}

// waitAll waits until every source has run once.
func (bed *benchBed) waitAll(b *testing.B) {
	deadline := time.Now().Add(time.Minute)
	for bed.ran.Load() < int64(len(bed.s.sources)) {
		if time.Now().After(deadline) {
			b.Fatalf("after a minute %d of %d sources had run", bed.ran.Load(), len(bed.s.sources))
		}
		time.Sleep(time.Millisecond)
	}
}

// dispatcher returns the benchmark's Dispatcher over the bed's own index.
func (bed *benchBed) dispatcher(b *testing.B, claimFor time.Duration) *dispatch.Dispatcher {
	return bed.dispatcherOn(b, bed.s.idx, claimFor)
}

// dispatcherOn returns the benchmark's Dispatcher over idx.
func (bed *benchBed) dispatcherOn(b *testing.B, idx duework.Index, claimFor time.Duration) *dispatch.Dispatcher {
	laneFor, err := bridge.PlanLanes(bed.s.plans, map[tenancy.PlanID]dispatch.Lane{
		tenancy.PlanFree: "free tier", "plus": "paid", "pro": "paid",
	}, benchLanes)
	if err != nil {
		b.Fatal(err)
	}
	d, err := dispatch.New(idx, dispatch.Config{Lanes: benchLanes, GlobalBatchLimit: 256, LaneFor: laneFor, ClaimFor: claimFor})
	if err != nil {
		b.Fatal(err)
	}
	return d
}

// BenchmarkWorkersThroughNATS runs every source of the bed once per round through
// JetStream — one dispatcher feeding a Sink, three worker processes on connections of
// their own — and then, over the same data, through the in-process bridge.Runner with as
// many worker slots. It reports jobs/s through NATS and nats/in-process, the ratio of the
// two throughputs measured in the same run.
func BenchmarkWorkersThroughNATS(b *testing.B) {
	requireNATS(b)
	bed := newBenchBed(b)
	const claimFor = 30 * time.Second
	cfg := freshQueue(b, rotanats.Config{RunTime: benchRun, MaxAckPending: benchProcs * benchSlots * 4, InHand: benchSlots * 4,
		FetchWait: 100 * time.Millisecond, Logger: bed.quiet})
	d := bed.dispatcher(b, claimFor)
	_, js := connect(b)
	sink, err := rotanats.NewSink(js, d, cfg)
	if err != nil {
		b.Fatal(err)
	}
	var workers sync.WaitGroup
	wctx, stopWorkers := context.WithCancel(context.Background())
	for range benchProcs {
		_, wjs := connect(b)
		idx, wl := bed.s.be.process(b)
		br := &bridge.Bridge{Index: idx, Watchlist: wl, Pipeline: bed.pipe, Tiers: bed.s.tiers}
		w, err := bridge.NewWorker(br, bridge.WorkerConfig{Workers: benchSlots, Logger: bed.quiet})
		if err != nil {
			b.Fatal(err)
		}
		c, err := rotanats.NewConsumer(wjs, w, d.Config(), cfg)
		if err != nil {
			b.Fatal(err)
		}
		workers.Go(func() {
			if err := c.Run(wctx); err != nil {
				b.Error(err)
			}
		})
	}
	defer func() {
		stopWorkers()
		workers.Wait()
	}()
	ridx, rwl := bed.s.be.process(b)
	runner, err := bridge.NewRunner(&bridge.Bridge{Index: ridx, Watchlist: rwl, Pipeline: bed.pipe, Tiers: bed.s.tiers},
		bed.dispatcherOn(b, ridx, claimFor), bridge.RunnerConfig{Interval: 20 * time.Millisecond, Workers: benchProcs * benchSlots, Logger: bed.quiet})
	if err != nil {
		b.Fatal(err)
	}
	feeder, err := bridge.NewFeeder(d, sink, bridge.FeederConfig{Interval: 20 * time.Millisecond, Logger: bed.quiet})
	if err != nil {
		b.Fatal(err)
	}

	var throughNATS, inProcess time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		bed.reschedule(b)
		b.StartTimer()
		start := time.Now()
		ctx, cancel := context.WithCancel(context.Background())
		var fed sync.WaitGroup
		fed.Go(func() {
			if err := feeder.Run(ctx); err != nil {
				b.Error(err)
			}
		})
		bed.waitAll(b)
		throughNATS += time.Since(start)
		b.StopTimer()
		cancel()
		fed.Wait()
		waitStreamEmpty(b, js, cfg.Stream, time.Minute) // every item acknowledged, so its completion written
		b.StartTimer()

		b.StopTimer()
		bed.reschedule(b)
		b.StartTimer()
		start = time.Now()
		ctx, cancel = context.WithCancel(context.Background())
		var ran sync.WaitGroup
		ran.Go(func() {
			if err := runner.Run(ctx); err != nil {
				b.Error(err)
			}
		})
		bed.waitAll(b)
		inProcess += time.Since(start)
		b.StopTimer()
		cancel()
		ran.Wait()
		b.StartTimer()
	}
	jobs := float64(b.N * len(bed.s.sources))
	natsRate, procRate := jobs/throughNATS.Seconds(), jobs/inProcess.Seconds()
	b.ReportMetric(natsRate, "jobs/s")
	b.ReportMetric(natsRate/procRate, "nats/in-process")
}
