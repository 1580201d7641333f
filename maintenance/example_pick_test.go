package maintenance_test

import (
	"fmt"
	"time"

	"github.com/rotaworks/rota/maintenance"
)

// Pick explains itself: a weeks-stale golden-path outranks a summary that just drained,
// and a summary that re-wins every release loses to a waiter promoted after YieldAfter.
func ExamplePick() {
	now := time.Date(2026, 6, 20, 12, 0, 0, 0, time.UTC)
	summary := maintenance.Task{Name: "summary", Cadence: 10 * time.Minute}
	dream := maintenance.Task{Name: "dream", Cadence: time.Hour}
	golden := maintenance.Task{Name: "golden-path", Class: maintenance.OffLease, Cadence: time.Hour}

	sel := maintenance.Pick(maintenance.PickInput{
		Now: now,
		Candidates: []maintenance.Candidate{
			{Task: summary, LastRunAt: now.Add(-45 * time.Minute)},
			{Task: dream, LastRunAt: now.Add(-2 * time.Hour), WaitingSince: now.Add(-40 * time.Minute)},
			{Task: golden, LastRunAt: now.Add(-18 * 24 * time.Hour)},
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
			{Task: summary, LastRunAt: now.Add(-45 * time.Minute)},
			{Task: dream, LastRunAt: now.Add(-2 * time.Hour), WaitingSince: now.Add(-40 * time.Minute)},
		},
	})
	fmt.Println("with promotion:", sel.Winner.Task.Name, "-", sel.Considered[1].Reason)
	// Output:
	// staleness only: golden-path
	//   summary      ratio    4.5  outranked by "golden-path" (greatest staleness ratio)
	//   dream        ratio    2.0  outranked by "golden-path" (greatest staleness ratio)
	//   golden-path  ratio  432.0  won: greatest staleness ratio
	// with promotion: dream - won: waiter promoted after 40m0s
}
