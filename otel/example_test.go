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

	"github.com/rotaworks/rota/maintenance"
	"github.com/rotaworks/rota/otel"
)

// Wire a Metrics into a maintenance Scheduler (a Dispatcher and a Runner take it the same
// way) and read the metrics back; a service would hand the MeterProvider an exporter's
// reader instead of a manual one.
func ExampleNewMetrics() {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	m, err := rotaotel.NewMetrics(provider)
	if err != nil {
		panic(err)
	}

	now := time.Date(2026, 6, 20, 12, 0, 0, 0, time.UTC)
	lease := maintenance.NewMemoryLease(2 * time.Hour)
	// Another daemon holds the lease from now on.
	if _, err := lease.Acquire(ctx, "daemon-b", 2*time.Hour, now); err != nil {
		panic(err)
	}
	s, err := maintenance.NewScheduler([]maintenance.Task{
		{Name: "backfill", Cadence: 6 * time.Hour, Run: func(context.Context) error { return nil }},
	}, maintenance.Config{Lease: lease, DegradeAfter: 30 * time.Minute, Observer: m, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	for _, step := range []time.Duration{0, 45 * time.Minute} {
		if _, err := s.Poll(ctx, now.Add(step)); err != nil {
			panic(err)
		}
	}

	if err := printMetrics(ctx, reader, "rota.maintenance."); err != nil {
		panic(err)
	}
	if err := m.Close(); err != nil {
		panic(err)
	}
	if err := provider.Shutdown(ctx); err != nil {
		panic(err)
	}
	// Output:
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
// gauge whose name starts with prefix, with its attributes, and "s" for seconds.
// Histograms (the durations) are left out: their values depend on the machine.
func printMetrics(ctx context.Context, reader *sdkmetric.ManualReader, prefix string) error {
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		return err
	}
	var lines []string
	add := func(name, unit string, attrs attribute.Set, v float64, counter bool) {
		if !strings.HasPrefix(name, prefix) || (!counter && v == 0) {
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
	for _, l := range lines {
		fmt.Println(l)
	}
	return nil
}
