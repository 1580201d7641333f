package rotasqs_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/cadence"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	rotasqs "github.com/rotaworks/rota/sqs"
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
	s    *store
	ran  atomic.Int64
	pipe bridge.Pipeline
}

func newBenchBed(b *testing.B) *benchBed {
	bed := &benchBed{s: newStore(b)}
	if err := bed.s.tiers.Register(onceTier, cadence.Backoff{Base: time.Hour, Max: time.Hour, Factor: 1}); err != nil {
		b.Fatal(err)
	}
	for i := range benchUsers {
		plan := tenancy.PlanFree
		if i%4 == 0 {
			plan = "pro"
		}
		bed.s.watch(fmt.Sprintf("user%02d", i), plan, benchSources)
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

// dispatchConfig is the benchmark's Dispatcher configuration.
func (bed *benchBed) dispatchConfig(b *testing.B, claimFor time.Duration) dispatch.Config {
	laneFor, err := bridge.PlanLanes(bed.s.plans, map[tenancy.PlanID]dispatch.Lane{
		tenancy.PlanFree: "free tier", "plus": "paid", "pro": "paid",
	}, benchLanes)
	if err != nil {
		b.Fatal(err)
	}
	return dispatch.Config{Lanes: benchLanes, GlobalBatchLimit: 256, LaneFor: laneFor, ClaimFor: claimFor}
}

// waitEmpty waits until every lane's queue holds nothing: every item deleted, so its
// completion written.
func waitQueuesEmpty(b *testing.B, cfg rotasqs.Config) {
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		held := 0
		for _, lc := range benchLanes {
			n, err := readDepth(cfg.QueueName(lc.Lane))
			if err != nil {
				b.Fatal(err)
			}
			held += n[0] + n[1] + n[2]
		}
		if held == 0 {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("the queues still hold %d messages after a minute", held)
		}
	}
}

// BenchmarkWorkersThroughSQS runs every source of the bed once per round through the lane
// queues — one dispatcher feeding a Sink, three worker processes with SQS clients of their
// own — and then, over the same data, through the in-process bridge.Runner with as many
// worker slots; both over one in-memory index, so that the difference is the queue's. It
// reports jobs/s through SQS and sqs/in-process, the ratio of the two throughputs measured
// in the same run.
func BenchmarkWorkersThroughSQS(b *testing.B) {
	bed := newBenchBed(b)
	const claimFor = 30 * time.Second
	dc := bed.dispatchConfig(b, claimFor)
	cfg := fresh(b, rotasqs.Config{InFlight: benchProcs * benchSlots, RunTime: benchRun, InHand: benchSlots * 2, WaitTime: time.Second, Logger: quiet})
	sink, err := rotasqs.NewSink(client(), dc, cfg)
	if err != nil {
		b.Fatal(err)
	}
	var workers sync.WaitGroup
	wctx, stopWorkers := context.WithCancel(context.Background())
	bws := make([]*bridge.Worker, benchProcs)
	for i := range benchProcs {
		br := &bridge.Bridge{Index: bed.s.idx, Watchlist: bed.s.wl, Pipeline: bed.pipe, Tiers: bed.s.tiers}
		bws[i], err = bridge.NewWorker(br, bridge.WorkerConfig{Workers: benchSlots, ClaimMargin: 2 * time.Second, Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		c, err := rotasqs.NewConsumer(client(), bws[i], dc, cfg)
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
		for _, w := range bws {
			_ = w.Stop(context.Background())
		}
	}()
	d, err := dispatch.New(bed.s.idx, dc)
	if err != nil {
		b.Fatal(err)
	}
	runner, err := bridge.NewRunner(&bridge.Bridge{Index: bed.s.idx, Watchlist: bed.s.wl, Pipeline: bed.pipe, Tiers: bed.s.tiers},
		d, bridge.RunnerConfig{Interval: 20 * time.Millisecond, Workers: benchProcs * benchSlots, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	feeder, err := bridge.NewFeeder(d, sink, bridge.FeederConfig{Interval: 20 * time.Millisecond, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}

	var throughSQS, inProcess time.Duration
	b.ResetTimer()
	for range b.N {
		throughSQS += bed.round(b, feeder.Run, func() { waitQueuesEmpty(b, cfg) })
		inProcess += bed.round(b, runner.Run, func() {})
	}
	jobs := float64(b.N * len(bed.s.sources))
	sqsRate, procRate := jobs/throughSQS.Seconds(), jobs/inProcess.Seconds()
	b.ReportMetric(sqsRate, "jobs/s")
	b.ReportMetric(sqsRate/procRate, "sqs/in-process")
}

// round makes every source due, runs run until each has run once and returns how long
// that took; then it stops run and calls settle, off the clock.
func (bed *benchBed) round(b *testing.B, run func(context.Context) error, settle func()) time.Duration {
	b.StopTimer()
	bed.reschedule(b)
	b.StartTimer()
	start := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	var done sync.WaitGroup
	done.Go(func() {
		if err := run(ctx); err != nil {
			b.Error(err)
		}
	})
	bed.waitAll(b)
	took := time.Since(start)
	b.StopTimer()
	cancel()
	done.Wait()
	settle()
	b.StartTimer()
	return took
}
