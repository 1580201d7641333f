package maintenance_test

import (
	"fmt"
	"time"

	"github.com/rotaworks/rota/maintenance"
)

// Pick explains itself: a weeks-stale verify outranks a rollup that just ran, and a
// rollup that would win every release loses to a waiter promoted after YieldAfter.
func ExamplePick() {
	now := time.Date(2026, 6, 20, 12, 0, 0, 0, time.UTC)
	rollup := maintenance.Task{Name: "rollup", Cadence: 10 * time.Minute}
	reindex := maintenance.Task{Name: "reindex", Cadence: time.Hour}
	verify := maintenance.Task{Name: "verify", Class: maintenance.OffLease, Cadence: time.Hour}

	sel := maintenance.Pick(maintenance.PickInput{
		Now: now,
		Candidates: []maintenance.Candidate{
			{Task: rollup, LastRunAt: now.Add(-45 * time.Minute)},
			{Task: reindex, LastRunAt: now.Add(-2 * time.Hour), WaitingSince: now.Add(-40 * time.Minute)},
			{Task: verify, LastRunAt: now.Add(-18 * 24 * time.Hour)},
		},
	})
	fmt.Println("staleness only:", sel.Winner.Task.Name)
	for _, c := range sel.Considered {
		fmt.Printf("  %-12s ratio %6.1f  %s\n", c.Name, c.Ratio, c.Reason)
	}

	sel = maintenance.Pick(maintenance.PickInput{
		Now:        now,
		YieldAfter: 30 * time.Minute,
		Candidates: []maintenance.Candidate{
			{Task: rollup, LastRunAt: now.Add(-45 * time.Minute)},
			{Task: reindex, LastRunAt: now.Add(-2 * time.Hour), WaitingSince: now.Add(-40 * time.Minute)},
		},
	})
	fmt.Println("with promotion:", sel.Winner.Task.Name, "-", sel.Considered[1].Reason)
	// Output:
	// staleness only: verify
	//   rollup       ratio    4.5  outranked by "verify" (greatest staleness ratio)
	//   reindex      ratio    2.0  outranked by "verify" (greatest staleness ratio)
	//   verify       ratio  432.0  won: greatest staleness ratio
	// with promotion: reindex - won: waiter promoted after 40m0s
}
