package maintenance_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/rotaworks/rota/maintenance"
)

// A host driving its own loop: Poll decides, the host runs what was dispatched and
// reports each run with Complete. Summary is gated on the backfill that feeds it; it
// then wins at +30m as a waiter promoted after YieldAfter; verify, gated on reindex,
// runs off the lease beside the heavy winner once reindex has run, and the data-safety
// snapshot, due at +1h, wins outright.
func ExampleScheduler_Poll() {
	ctx := context.Background()
	now := time.Date(2026, 6, 20, 12, 0, 0, 0, time.UTC)
	run := func(context.Context) error { return nil }
	tasks := []maintenance.Task{
		{Name: "rollup", Cadence: 10 * time.Minute, Run: run,
			Gates: []maintenance.Gate{{Producer: "compact"}}},
		{Name: "compact", Cadence: 6 * time.Hour, Run: run},
		{Name: "reindex", Cadence: time.Hour, Run: run},
		{Name: "verify", Class: maintenance.OffLease, Cadence: time.Hour, Run: run,
			Gates: []maintenance.Gate{{Producer: "reindex"}}},
		{Name: "snapshot", Cadence: 24 * time.Hour, DataSafety: true, Run: run},
	}
	store := maintenance.NewMemoryStateStore()
	err := store.Save(ctx, 0,
		maintenance.TaskState{Name: "rollup", LastRunAt: now.Add(-10 * time.Minute)},
		maintenance.TaskState{Name: "reindex", LastRunAt: now.Add(-5 * time.Hour)},
		maintenance.TaskState{Name: "verify", LastRunAt: now.Add(-18 * 24 * time.Hour)},
		maintenance.TaskState{Name: "snapshot", LastRunAt: now.Add(-23 * time.Hour)},
	)
	if err != nil {
		panic(err)
	}
	s, err := maintenance.NewScheduler(tasks, maintenance.Config{
		StateStore: store,
		Holder:     "daemon-a",
		Logger:     slog.New(slog.DiscardHandler), // this example prints its own lines
	})
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
			if err := s.Complete(ctx, c.Task.Name, nil, at.Add(20*time.Minute)); err != nil {
				panic(err)
			}
		}
	}
	// Output:
	// +0s: run compact; rollup deferred (gate, compact); reindex deferred (outranked, compact); verify deferred (gate, reindex); gauge healthy depth 2
	// +30m0s: run rollup; reindex deferred (outranked, rollup); verify deferred (gate, reindex); gauge healthy depth 2
	// +50m0s: run reindex; rollup deferred (outranked, reindex); verify deferred (gate, reindex); gauge healthy depth 1
	// +1h10m0s: run snapshot; run verify; rollup deferred (outranked, snapshot); gauge healthy depth 1
}
