package rotaotel_test

import (
	"context"
	"fmt"
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
	defer provider.Shutdown(ctx)
	m, err := rotaotel.NewMetrics(provider)
	if err != nil {
		panic(err)
	}
	defer m.Close()

	now := time.Date(2026, 6, 20, 12, 0, 0, 0, time.UTC)
	lease := maintenance.NewMemoryLease(2 * time.Hour)
	_, _ = lease.Acquire(ctx, "daemon-b", 2*time.Hour, now) // another daemon holds the lease from now on
	s, err := maintenance.NewScheduler([]maintenance.Task{
		{Name: "backfill", Cadence: 6 * time.Hour, Run: func(context.Context) error { return nil }},
	}, maintenance.Config{Lease: lease, DegradeAfter: 30 * time.Minute, Observer: m})
	if err != nil {
		panic(err)
	}
	for _, step := range []time.Duration{0, 45 * time.Minute} {
		if _, err := s.Poll(ctx, now.Add(step)); err != nil {
			panic(err)
		}
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		panic(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			switch d := mt.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					fmt.Println(mt.Name, dp.Attributes.Encoded(attribute.DefaultEncoder()), dp.Value)
				}
			case metricdata.Gauge[float64]:
				for _, dp := range d.DataPoints {
					fmt.Println(mt.Name, dp.Attributes.Encoded(attribute.DefaultEncoder()), dp.Value, mt.Unit)
				}
			}
		}
	}
	// Unordered output:
	// rota.maintenance.polls outcome=ok 2
	// rota.maintenance.deferrals reason=lease-held,task=backfill 2
	// rota.maintenance.stalls  1
	// rota.maintenance.lease.held  2700 s
	// rota.maintenance.waiter.age reason=lease-held,task=backfill 2700 s
}
