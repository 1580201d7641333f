package fleettest

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
	"github.com/rotaworks/rota/tenancy"
)

// The shape of the benchmarks that run a queue against the in-process bridge.Runner:
// BenchUsers tenants with BenchSources sources each, every one due once per round;
// BenchProcs worker processes of BenchSlots slots each, and a Runner with as many; every
// run waits BenchRun, as a pipeline waits on the network.
const (
	BenchUsers, BenchSources = 40, 25
	BenchProcs, BenchSlots   = 3, 8
	BenchRun                 = 2 * time.Millisecond
)

// onceTier is due again an hour after each run: once per round.
const onceTier = "once"

// BenchLanes are the lanes of [BenchBed.DispatchConfig].
var BenchLanes = []dispatch.LaneCapacity{{Lane: "paid", PerUserLimit: 8, PerCycleLimit: 200}, {Lane: "free tier", PerUserLimit: 8, PerCycleLimit: 200}}

// BenchBed is the data both contenders of a queue's benchmark run over — a [Store] whose
// tenants watch the benchmark's sources — a pipeline that waits BenchRun, and a count of
// its runs.
type BenchBed struct {
	Store    *Store
	Pipeline bridge.Pipeline // give it to every contender's Bridge
	ran      atomic.Int64
}

// NewBenchBed has BenchUsers tenants of s, a quarter of them on plan "pro" and the rest
// free, watch BenchSources sources each.
func NewBenchBed(b *testing.B, s *Store) *BenchBed {
	bed := &BenchBed{Store: s}
	if err := s.Tiers.Register(onceTier, cadence.Backoff{Base: time.Hour, Max: time.Hour, Factor: 1}); err != nil {
		b.Fatal(err)
	}
	for i := range BenchUsers {
		plan := tenancy.PlanFree
		if i%4 == 0 {
			plan = "pro"
		}
		s.Watch(fmt.Sprintf("user%02d", i), plan, BenchSources)
	}
	bed.Pipeline = bridge.PipelineFunc(func(ctx context.Context, _ tenancy.Context, _ tenancy.WatchlistEntry) (bridge.Result, error) {
		t := time.NewTimer(BenchRun)
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

// DispatchConfig is the benchmark's dispatch configuration: BenchLanes, users routed by
// plan, claims of claimFor, a global batch of 256.
func (bed *BenchBed) DispatchConfig(b *testing.B, claimFor time.Duration) dispatch.Config {
	laneFor, err := bridge.PlanLanes(bed.Store.Plans, map[tenancy.PlanID]dispatch.Lane{
		tenancy.PlanFree: "free tier", "plus": "paid", "pro": "paid",
	}, BenchLanes)
	if err != nil {
		b.Fatal(err)
	}
	return dispatch.Config{Lanes: BenchLanes, GlobalBatchLimit: 256, LaneFor: laneFor, ClaimFor: claimFor}
}

// Round makes every source due, runs run until each has run once and returns how long
// that took; then it stops run and calls settle, off the clock.
func (bed *BenchBed) Round(b *testing.B, run func(context.Context) error, settle func()) time.Duration {
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

// Background calls run — a consumer's Run — in a goroutine under a context that ends
// with tb's test: tb's cleanup ends it, waits for run to return and fails tb if it
// returned an error.
func Background(tb testing.TB, run func(context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	var done sync.WaitGroup
	done.Go(func() {
		if err := run(ctx); err != nil {
			tb.Error(err)
		}
	})
	tb.Cleanup(func() {
		cancel()
		done.Wait()
	})
}

// reschedule makes every source due now, on the once tier, and resets the run counter.
func (bed *BenchBed) reschedule(b *testing.B) {
	ctx := context.Background()
	now := time.Now()
	for k := range bed.Store.Sources {
		e := duework.Entry{UserID: k.UserID, WorkKey: k.WorkKey, Tier: onceTier, DueAt: now}
		if err := bed.Store.Index.Schedule(ctx, bed.Store.Tenants[k.UserID], e); err != nil {
			b.Fatal(err)
		}
	}
	bed.ran.Store(0)
}

// waitAll waits until every source has run once, for at most a minute.
func (bed *BenchBed) waitAll(b *testing.B) {
	deadline := time.Now().Add(time.Minute)
	for bed.ran.Load() < int64(len(bed.Store.Sources)) {
		if time.Now().After(deadline) {
			b.Fatalf("after a minute %d of %d sources had run", bed.ran.Load(), len(bed.Store.Sources))
		}
		time.Sleep(time.Millisecond)
	}
}
