package rotaotel_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/cadence"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/otel"
	"github.com/rotaworks/rota/tenancy"
)

// fixture is a whole in-memory deployment whose Dispatcher and Runner report to one
// Metrics.
type fixture struct {
	runner  *bridge.Runner
	tenants []string
}

// newFixture builds it: a noisy pro tenant with ten sources (more than its cap) that its
// plan lets run one at a time, whose fourth source's upstream pushes back; three quiet free
// tenants in a lane that serves one a cycle, the last with a source that has failed four
// times and fails again; and a tenant on a plan no lane serves.
func newFixture(t *testing.T, m *rotaotel.Metrics) *fixture {
	t.Helper()
	ctx := context.Background()
	idx := duework.NewMemory()
	wl := tenancy.NewMemoryWatchlist()
	plans := tenancy.NewMemoryEntitlements()
	f := &fixture{}
	add := func(user string, plan tenancy.PlanID, sources, errorStreak int) {
		f.tenants = append(f.tenants, user)
		tc, err := tenancy.NewContext(user)
		if err != nil {
			t.Fatal(err)
		}
		if err := plans.SetPlan(ctx, tc, plan); err != nil {
			t.Fatal(err)
		}
		for i := range sources {
			slug := fmt.Sprintf("src-%02d", i)
			if err := wl.Add(ctx, tc, tenancy.WatchlistEntry{UserID: user, Slug: slug, Tier: "hot", AddedAt: t0}); err != nil {
				t.Fatal(err)
			}
			e := duework.Entry{UserID: user, WorkKey: slug, Tier: "hot", DueAt: t0.Add(-time.Duration(sources-i) * time.Second), ErrorStreak: errorStreak}
			if err := idx.Schedule(ctx, tc, e); err != nil {
				t.Fatal(err)
			}
		}
	}
	add("noisy-tenant-7", "pro", 10, 0)
	add("quiet-1", tenancy.PlanFree, 1, 0)
	add("quiet-2", tenancy.PlanFree, 1, 0)
	add("quiet-3", tenancy.PlanFree, 1, bridge.DefaultAlarmAfterErrors-1)
	add("nolane-9", "plus", 1, 0)

	lanes := []dispatch.LaneCapacity{
		{Lane: "pro", PerUserLimit: 2, PerCycleLimit: 10},
		{Lane: "free", PerUserLimit: 1, PerCycleLimit: 1},
	}
	// The plus plan has no lane: its tenant is unrouted.
	laneFor, err := bridge.PlanLanes(plans, map[tenancy.PlanID]dispatch.Lane{tenancy.PlanFree: "free", "pro": "pro"}, lanes)
	if err != nil {
		t.Fatal(err)
	}
	limitsFor, err := bridge.PlanLimits(plans, map[tenancy.PlanID]duework.Limits{tenancy.PlanFree: {}, "plus": {}, "pro": {MaxInFlight: 1}})
	if err != nil {
		t.Fatal(err)
	}
	d, err := dispatch.New(idx, dispatch.Config{Lanes: lanes, GlobalBatchLimit: 10, LaneFor: laneFor, LimitsFor: limitsFor, ClaimFor: time.Minute, Observer: m})
	if err != nil {
		t.Fatal(err)
	}
	pipe := bridge.PipelineFunc(func(_ context.Context, _ tenancy.Context, we tenancy.WatchlistEntry) (bridge.Result, error) {
		switch {
		case we.UserID == "noisy-tenant-7" && we.Slug == "src-03":
			return bridge.Result{}, &bridge.Pushback{After: time.Hour, Reason: "upstream-429", Err: errors.New("429 Too Many Requests")}
		case we.UserID == "quiet-3":
			return bridge.Result{}, errors.New("401 Unauthorized")
		}
		return bridge.Result{Outcomes: []bridge.Outcome{{ID: "p", Stage: "scored"}}}, nil
	})
	b := &bridge.Bridge{Index: idx, Watchlist: wl, Pipeline: pipe, Tiers: cadence.NewRegistry()}
	f.runner, err = bridge.NewRunner(b, d, bridge.RunnerConfig{
		Workers: 2, Observer: m, AlarmAfter: 30 * time.Second,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	return f
}
