package maintenance_test

import (
	"context"
	"fmt"
	"time"

	"github.com/rotaworks/rota/maintenance"
)

// A host driving its own loop: Poll decides, the host runs what was dispatched and
// reports each run with Complete. Summary is gated on the backfill that feeds it; it
// then wins at +30m as a waiter promoted after YieldAfter; golden-path, gated on dream,
// runs off the lease beside the heavy winner once dream has run, and the data-safety
// backup, due at +1h, wins outright.
func ExampleScheduler_Poll() {
	ctx := context.Background()
	now := time.Date(2026, 6, 20, 12, 0, 0, 0, time.UTC)
	run := func(context.Context) error { return nil }
	tasks := []maintenance.Task{
		{Name: "summary", Cadence: 10 * time.Minute, Run: run,
			Gates: []maintenance.Gate{{Producer: "memory-summary-backfill"}}},
		{Name: "memory-summary-backfill", Cadence: 6 * time.Hour, Run: run},
		{Name: "dream", Cadence: time.Hour, Run: run},
		{Name: "golden-path", Class: maintenance.OffLease, Cadence: time.Hour, Run: run,
			Gates: []maintenance.Gate{{Producer: "dream"}}},
		{Name: "backup", Cadence: 24 * time.Hour, DataSafety: true, Run: run},
	}
	store := maintenance.NewMemoryStateStore()
	_ = store.Save(ctx, 0,
		maintenance.TaskState{Name: "summary", LastRunAt: now.Add(-10 * time.Minute)},
		maintenance.TaskState{Name: "dream", LastRunAt: now.Add(-5 * time.Hour)},
		maintenance.TaskState{Name: "golden-path", LastRunAt: now.Add(-18 * 24 * time.Hour)},
		maintenance.TaskState{Name: "backup", LastRunAt: now.Add(-23 * time.Hour)},
	)
	s, err := maintenance.NewScheduler(tasks, maintenance.Config{StateStore: store, Holder: "daemon-a"})
	if err != nil {
		panic(err)
	}
	for _, step := range []time.Duration{0, 30 * time.Minute, 50 * time.Minute, 70 * time.Minute} {
		at := now.Add(step)
		res, err := s.Poll(ctx, at)
		if err != nil {
			panic(err)
		}
		fmt.Printf("+%v: ", step)
		for _, c := range res.Dispatched() {
			fmt.Printf("run %s; ", c.Task.Name)
		}
		for _, d := range res.Deferred {
			fmt.Printf("%s deferred (%s, %s); ", d.Task, d.Reason, d.Blocker)
		}
		fmt.Println("gauge", res.Gauge.Posture, "depth", res.Gauge.ChainDepth)
		for _, c := range res.Dispatched() {
			_ = s.Complete(ctx, c.Task.Name, nil, at.Add(20*time.Minute))
		}
	}
	// Output:
	// +0s: run memory-summary-backfill; summary deferred (gate, memory-summary-backfill); dream deferred (outranked, memory-summary-backfill); golden-path deferred (gate, dream); gauge healthy depth 2
	// +30m0s: run summary; dream deferred (outranked, summary); golden-path deferred (gate, dream); gauge healthy depth 2
	// +50m0s: run dream; summary deferred (outranked, dream); golden-path deferred (gate, dream); gauge healthy depth 1
	// +1h10m0s: run backup; run golden-path; summary deferred (outranked, backup); gauge healthy depth 1
}
