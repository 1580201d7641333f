package rotaotel_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/maintenance"
	"github.com/rotaworks/rota/otel"
	"github.com/rotaworks/rota/tenancy"
)

// One Metrics is the Observer of a Dispatcher, of its Runner and of a maintenance
// Scheduler; the metrics are read back through a manual reader, where a service would
// hand the MeterProvider an exporter's.
//
// Four tenants share a lane that serves one of them a cycle, so the lane keeps someone
// waiting: rota.dispatch.wait is that wait (now − WaitingSince) at the last cycle, and the
// Runner's noisy-neighbour alarm, raised once the wait passes AlarmAfter, counts in
// rota.bridge.alarms. The last tenant's source, due since the start, is as late as it has
// waited: rota.dispatch.lateness (now − OldestDue), and its late-work alarm counts in
// rota.bridge.late_alarms. Meanwhile another daemon holds the maintenance lease, so the
// scheduler's task waits and its gauge turns degraded. No attribute names a tenant.
func ExampleNewMetrics() {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	m, err := rotaotel.NewMetrics(provider)
	if err != nil {
		panic(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	start := time.Date(2026, 6, 20, 12, 0, 0, 0, time.UTC)

	// Dispatch and the Runner.
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
	cfg := dispatch.Config{Lanes: []dispatch.LaneCapacity{{Lane: "standard", PerUserLimit: 1, PerCycleLimit: 1}}, GlobalBatchLimit: 5}
	cfg.LaneFor = func(context.Context, string) (dispatch.Lane, error) { return "standard", nil }
	cfg.ClaimFor, cfg.Observer = time.Minute, m
	d, err := dispatch.New(idx, cfg)
	if err != nil {
		panic(err)
	}
	nothingNew := bridge.PipelineFunc(func(context.Context, tenancy.Context, tenancy.WatchlistEntry) (bridge.Result, error) {
		return bridge.Result{}, nil
	})
	r, err := bridge.NewRunner(&bridge.Bridge{Index: idx, Watchlist: watchlist, Pipeline: nothingNew}, d,
		bridge.RunnerConfig{Interval: time.Minute, AlarmAfter: 90 * time.Second, Observer: m, Logger: quiet})
	if err != nil {
		panic(err)
	}
	for i := range 3 {
		if _, err := r.Cycle(ctx, start.Add(time.Duration(i)*time.Minute)); err != nil {
			panic(err)
		}
	}

	// Maintenance, while another daemon holds the lease.
	lease := maintenance.NewMemoryLease(2 * time.Hour)
	if _, err := lease.Acquire(ctx, "daemon-b", 2*time.Hour, start); err != nil {
		panic(err)
	}
	s, err := maintenance.NewScheduler([]maintenance.Task{
		{Name: "backfill", Cadence: 6 * time.Hour, Run: func(context.Context) error { return nil }},
	}, maintenance.Config{Lease: lease, DegradeAfter: 30 * time.Minute, Observer: m, Logger: quiet})
	if err != nil {
		panic(err)
	}
	for _, step := range []time.Duration{0, 45 * time.Minute} {
		if _, err := s.Poll(ctx, start.Add(step)); err != nil {
			panic(err)
		}
	}

	if err := printMetrics(ctx, reader); err != nil {
		panic(err)
	}
	if err := m.Close(); err != nil {
		panic(err)
	}
	if err := provider.Shutdown(ctx); err != nil {
		panic(err)
	}
	// Output:
	// rota.bridge.alarms{lane=standard} 1
	// rota.bridge.cycles{outcome=ok} 3
	// rota.bridge.items{lane=standard,outcome=miss} 3
	// rota.bridge.late_alarms{lane=standard} 1
	// rota.dispatch.cycles{outcome=ok} 3
	// rota.dispatch.items{lane=standard} 3
	// rota.dispatch.lateness{lane=standard} 120 s
	// rota.dispatch.lost_claims{lane=standard} 0
	// rota.dispatch.users_read{lane=standard} 1
	// rota.dispatch.wait{lane=standard} 120 s
	// rota.maintenance.chain.depth{} 1
	// rota.maintenance.deferrals{reason=lease-held,task=backfill} 2
	// rota.maintenance.lease.held{} 2700 s
	// rota.maintenance.polls{outcome=ok} 2
	// rota.maintenance.posture{posture=degraded} 1
	// rota.maintenance.stalls{} 1
	// rota.maintenance.waiter.age{reason=lease-held,task=backfill} 2700 s
	// rota.maintenance.waiters{} 1
}

// printMetrics collects reader once and prints, sorted, every counter and every non-zero
// gauge, with its attributes, and "s" for seconds. Histograms (the durations) are left
// out: their values depend on the machine.
func printMetrics(ctx context.Context, reader *sdkmetric.ManualReader) error {
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		return err
	}
	var lines []string
	add := func(name, unit string, attrs attribute.Set, v float64, counter bool) {
		if !counter && v == 0 {
			return
		}
		line := fmt.Sprintf("%s{%s} %v", name, attrs.Encoded(attribute.DefaultEncoder()), v)
		if unit == "s" {
			line += " s"
		}
		lines = append(lines, line)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			switch d := mt.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					add(mt.Name, mt.Unit, dp.Attributes, float64(dp.Value), true)
				}
			case metricdata.Gauge[int64]:
				for _, dp := range d.DataPoints {
					add(mt.Name, mt.Unit, dp.Attributes, float64(dp.Value), false)
				}
			case metricdata.Gauge[float64]:
				for _, dp := range d.DataPoints {
					add(mt.Name, mt.Unit, dp.Attributes, dp.Value, false)
				}
			}
		}
	}
	slices.Sort(lines)
	fmt.Print(strings.Join(lines, "\n") + "\n")
	return nil
}
