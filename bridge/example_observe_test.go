package bridge_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// A pro tenant with six feeds fills the global batch of two under strict priority, so
// the free tenant's one feed waits. Once it has waited longer than AlarmAfter, the
// noisy-neighbour alarm names the free lane and the wait; when the pro backlog is done
// and the free tenant is served, the alarm ends. A MinShare on the free lane would have
// served it at once. The Observer here prints; a metrics exporter would count.
func ExampleObserver() {
	ctx := context.Background()
	start := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	idx := duework.NewMemory()
	watchlist := tenancy.NewMemoryWatchlist()
	plans := tenancy.NewMemoryEntitlements()
	for user, feeds := range map[string]int{"flood": 6, "ana": 1} {
		tc, err := tenancy.NewContext(user)
		if err != nil {
			panic(err)
		}
		for i := range feeds {
			slug := fmt.Sprintf("feed-%d", i)
			if err := watchlist.Add(ctx, tc, tenancy.WatchlistEntry{UserID: user, Slug: slug, Tier: "hot"}); err != nil {
				panic(err)
			}
			if err := idx.Schedule(ctx, tc, duework.Entry{UserID: user, WorkKey: slug, Tier: "hot", DueAt: start}); err != nil {
				panic(err)
			}
		}
	}
	flood, err := tenancy.NewContext("flood")
	if err != nil {
		panic(err)
	}
	if err := plans.SetPlan(ctx, flood, "pro"); err != nil {
		panic(err)
	}

	cfg := dispatch.Config{
		Lanes: []dispatch.LaneCapacity{
			{Lane: "pro", PerUserLimit: 2, PerCycleLimit: 10},
			{Lane: "free", PerUserLimit: 2, PerCycleLimit: 10},
		},
		GlobalBatchLimit: 2,
		ClaimFor:         time.Minute,
	}
	cfg.LaneFor, err = bridge.PlanLanes(plans, map[tenancy.PlanID]dispatch.Lane{
		tenancy.PlanFree: "free", "plus": "pro", "pro": "pro",
	}, cfg.Lanes)
	if err != nil {
		panic(err)
	}
	d, err := dispatch.New(idx, cfg)
	if err != nil {
		panic(err)
	}
	pipeline := bridge.PipelineFunc(func(context.Context, tenancy.Context, tenancy.WatchlistEntry) (bridge.Result, error) {
		return bridge.Result{}, nil // nothing new
	})
	b := &bridge.Bridge{Index: idx, Watchlist: watchlist, Pipeline: pipeline}
	r, err := bridge.NewRunner(b, d, bridge.RunnerConfig{
		Interval:   time.Minute,
		AlarmAfter: 90 * time.Second,
		Observer:   alarmPrinter{},
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)), // the alarm is a Warn line too
	})
	if err != nil {
		panic(err)
	}
	for i := range 5 {
		if _, err := r.Cycle(ctx, start.Add(time.Duration(i)*time.Minute)); err != nil {
			panic(err)
		}
	}
	// Output:
	// 09:00 dispatched 2
	// 09:01 dispatched 2
	// 09:02 dispatched 2
	//   alarm: lane free kept a user waiting 2m0s
	// 09:03 dispatched 1
	//   recovered: lane free
	// 09:04 dispatched 0
}

// alarmPrinter is a host's Observer: it prints each cycle and its noisy-neighbour alarms.
type alarmPrinter struct{}

func (alarmPrinter) ObserveCycle(rep bridge.CycleReport) {
	fmt.Printf("%s dispatched %d\n", rep.Now.Format("15:04"), rep.Dispatched)
	for _, a := range rep.Alarms {
		fmt.Printf("  alarm: lane %s kept a user waiting %v\n", a.Lane, a.Wait)
	}
	for _, lane := range rep.Recovered {
		fmt.Printf("  recovered: lane %s\n", lane)
	}
}
