package rotaotel_test

import (
	"context"
	"log/slog"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/otel"
	"github.com/rotaworks/rota/tenancy"
)

// One Metrics set as the Dispatcher's and the Runner's Observer. Four tenants share a lane
// that serves one of them a cycle, so the lane keeps someone waiting: rota.dispatch.wait
// is that wait (now − WaitingSince) at the last cycle, and the Runner's noisy-neighbour
// alarm, raised once the wait passes AlarmAfter, is counted in rota.bridge.alarms. The
// attributes name lanes and outcomes, never a tenant.
func ExampleMetrics_lanes() {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	m, err := rotaotel.NewMetrics(provider)
	if err != nil {
		panic(err)
	}

	start := time.Date(2026, 6, 20, 12, 0, 0, 0, time.UTC)
	idx := duework.NewMemory()
	watchlist := tenancy.NewMemoryWatchlist()
	for _, user := range []string{"ann", "bob", "cai", "dee"} {
		tc, err := tenancy.NewContext(user)
		if err != nil {
			panic(err)
		}
		if err := watchlist.Add(ctx, tc, tenancy.WatchlistEntry{UserID: user, Slug: "feed", Tier: "hot"}); err != nil {
			panic(err)
		}
		if err := idx.Schedule(ctx, tc, duework.Entry{UserID: user, WorkKey: "feed", Tier: "hot", DueAt: start}); err != nil {
			panic(err)
		}
	}
	d, err := dispatch.New(idx, dispatch.Config{
		Lanes:            []dispatch.LaneCapacity{{Lane: "free", PerUserLimit: 1, PerCycleLimit: 1}},
		GlobalBatchLimit: 10,
		LaneFor:          func(context.Context, string) (dispatch.Lane, error) { return "free", nil },
		ClaimFor:         time.Minute,
		Observer:         m,
	})
	if err != nil {
		panic(err)
	}
	pipeline := bridge.PipelineFunc(func(context.Context, tenancy.Context, tenancy.WatchlistEntry) (bridge.Result, error) {
		return bridge.Result{}, nil
	})
	r, err := bridge.NewRunner(&bridge.Bridge{Index: idx, Watchlist: watchlist, Pipeline: pipeline}, d, bridge.RunnerConfig{
		Interval:   time.Minute,
		AlarmAfter: 90 * time.Second,
		Observer:   m,
		Logger:     slog.New(slog.DiscardHandler),
	})
	if err != nil {
		panic(err)
	}
	for i := range 3 {
		if _, err := r.Cycle(ctx, start.Add(time.Duration(i)*time.Minute)); err != nil {
			panic(err)
		}
	}

	if err := printMetrics(ctx, reader, "rota."); err != nil {
		panic(err)
	}
	if err := m.Close(); err != nil {
		panic(err)
	}
	if err := provider.Shutdown(ctx); err != nil {
		panic(err)
	}
	// Output:
	// rota.bridge.alarms{lane=free} 1
	// rota.bridge.cycles{outcome=ok} 3
	// rota.bridge.items{lane=free,outcome=miss} 3
	// rota.dispatch.cycles{outcome=ok} 3
	// rota.dispatch.items{lane=free} 3
	// rota.dispatch.lost_claims{lane=free} 0
	// rota.dispatch.users_read{lane=free} 1
	// rota.dispatch.wait{lane=free} 120 s
}
