package duework_test

import (
	"fmt"
	"time"

	"github.com/rotaworks/rota/cadence"
	"github.com/rotaworks/rota/duework"
)

// Advance after a run: misses back off, a hit snaps back, and the next DueAt always counts
// from the run, not from the old DueAt — a source that was due a day ago runs once.
func ExampleAdvance() {
	p := cadence.Backoff{Base: 10 * time.Minute, Max: time.Hour, Factor: 2}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	e := duework.Entry{UserID: "alice", WorkKey: "feed", Tier: "warm", DueAt: now.Add(-24 * time.Hour)}

	for _, hit := range []bool{false, false, false, true} {
		e = duework.Advance(e, p, hit, now)
		fmt.Printf("hit=%-5v streak=%d next in %v\n", hit, e.MissStreak, e.DueAt.Sub(now))
		now = e.DueAt
	}
	// Output:
	// hit=false streak=1 next in 20m0s
	// hit=false streak=2 next in 40m0s
	// hit=false streak=3 next in 1h0m0s
	// hit=true  streak=0 next in 10m0s
}
