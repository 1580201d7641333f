package maintenance_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/rotaworks/rota/maintenance"
)

// pollPrinter is an Observer that prints each poll: its time since start, the posture,
// the deferrals and, once, the stall.
type pollPrinter struct{ start time.Time }

func (p pollPrinter) ObservePoll(rep maintenance.PollReport) {
	fmt.Printf("+%v %s", rep.Now.Sub(p.start), rep.Result.Gauge.Posture)
	for _, d := range rep.Result.Deferred {
		fmt.Printf(", %s deferred (%s, %s)", d.Task, d.Reason, d.Blocker)
	}
	if rep.TurnedDegraded {
		fmt.Printf(", STALLED: %s has waited %v", rep.Result.Gauge.Waiters[0].Task, rep.Result.Gauge.Waiters[0].Wait)
	}
	fmt.Println()
}

// Another daemon keeps the lease, so the compaction waits; the Observer hears every poll
// and is told once, when the wait passes DegradeAfter, that the chain has stopped
// draining. The rota/otel module has an Observer that exports the same reports as
// metrics.
func ExampleObserver() {
	ctx := context.Background()
	now := time.Date(2026, 6, 20, 12, 0, 0, 0, time.UTC)
	lease := maintenance.NewMemoryLease(2 * time.Hour)
	if _, err := lease.Acquire(ctx, "daemon-b", 2*time.Hour, now); err != nil {
		panic(err)
	}

	s, err := maintenance.NewScheduler([]maintenance.Task{
		{Name: "compact", Cadence: 6 * time.Hour, Run: func(context.Context) error { return nil }},
	}, maintenance.Config{
		Lease:        lease,
		Holder:       "daemon-a",
		DegradeAfter: 30 * time.Minute,
		Observer:     pollPrinter{start: now},
		Logger:       slog.New(slog.DiscardHandler), // the Observer prints instead
	})
	if err != nil {
		panic(err)
	}
	for _, step := range []time.Duration{0, 20 * time.Minute, 40 * time.Minute, time.Hour} {
		if _, err := s.Poll(ctx, now.Add(step)); err != nil {
			panic(err)
		}
	}
	// Output:
	// +0s healthy, compact deferred (lease-held, daemon-b)
	// +20m0s healthy, compact deferred (lease-held, daemon-b)
	// +40m0s degraded, compact deferred (lease-held, daemon-b), STALLED: compact has waited 40m0s
	// +1h0m0s degraded, compact deferred (lease-held, daemon-b)
}
