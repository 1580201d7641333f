package bridge_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/cadence"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// A pro tenant with forty feeds fills the global batch every cycle, so under strict
// priority the free tenant's one feed waits. After three consecutive shed cycles the
// noisy-neighbour alarm names both: the free tenant waiting with nothing dispatched, the
// pro tenant crowding its lane (and shed too: its backlog is deeper than its cap). A
// MinShare on the free lane would cure it. The Observer here prints; the rota/otel module
// has one that exports metrics.
func ExampleObserver() {
	ctx := context.Background()
	start := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	idx := duework.NewMemory()
	watchlist := tenancy.NewMemoryWatchlist()
	plans := tenancy.NewMemoryEntitlements()
	feeds := map[string]int{"flood": 40, "ana": 1}
	for user, n := range feeds {
		tc, _ := tenancy.NewContext(user)
		for i := range n {
			slug := fmt.Sprintf("feed-%02d", i)
			_ = watchlist.Add(ctx, tc, tenancy.WatchlistEntry{UserID: user, Slug: slug, Tier: cadence.NameHot})
			_ = idx.Schedule(ctx, tc, duework.Entry{UserID: user, WorkKey: slug, Tier: cadence.NameHot, DueAt: start})
		}
	}
	flood, _ := tenancy.NewContext("flood")
	_ = plans.SetPlan(ctx, flood, tenancy.PlanPro)

	pipeline := bridge.PipelineFunc(func(context.Context, tenancy.Context, tenancy.WatchlistEntry) (bridge.Result, error) {
		return bridge.Result{}, nil // nothing new
	})
	b := &bridge.Bridge{Index: idx, Watchlist: watchlist, Pipeline: pipeline, Tiers: cadence.NewRegistry()}
	laneFor, _ := bridge.PlanLanes(plans, map[tenancy.PlanID]dispatch.Lane{
		tenancy.PlanFree: "free", tenancy.PlanPlus: "pro", tenancy.PlanPro: "pro",
	})
	d, _ := dispatch.New(idx, dispatch.Config{
		Lanes: []dispatch.LaneCapacity{
			{Lane: "pro", PerUserLimit: 2, PerCycleLimit: 10},
			{Lane: "free", PerUserLimit: 2, PerCycleLimit: 10},
		},
		GlobalBatchLimit: 2, LaneFor: laneFor, ClaimFor: time.Minute,
	})
	observer := bridge.ObserverFunc(func(rep bridge.CycleReport) {
		fmt.Printf("%s dispatched %d, shed %v\n", rep.Now.Format("15:04"), rep.Dispatched, rep.Shed)
		for _, a := range rep.ShedAlarms {
			fmt.Printf("  alarm in lane %s: waiting %v, crowding %v\n", a.Lane, a.Waiting, a.Crowding)
		}
	})
	r, _ := bridge.NewRunner(b, d, bridge.RunnerConfig{
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)), // the alarm is also a Warn line
		Observer:       observer,
		ShedAlarmAfter: 3,
	})
	for i := range 4 {
		if _, err := r.Cycle(ctx, start.Add(time.Duration(i)*time.Minute)); err != nil {
			fmt.Println(err)
			return
		}
	}
	// Output:
	// 09:00 dispatched 2, shed [ana flood]
	// 09:01 dispatched 2, shed [ana flood]
	// 09:02 dispatched 2, shed [ana flood]
	//   alarm in lane pro: waiting [{flood 2}], crowding [{flood 2}]
	//   alarm in lane free: waiting [{ana 0}], crowding []
	// 09:03 dispatched 2, shed [ana flood]
}
