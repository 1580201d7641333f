package duework_test

import (
	"fmt"
	"time"

	"github.com/rotaworks/rota/cadence"
	"github.com/rotaworks/rota/duework"
)

// Fail after a run that failed — revoked credentials, say: each failure waits longer, from
// the failure, up to the policy's cap; a run that succeeds ends the streak.
func ExampleFail() {
	retry := cadence.Backoff{Base: time.Minute, Max: 6 * time.Hour, Factor: 2}
	poll := cadence.Backoff{Base: 10 * time.Minute, Max: time.Hour, Factor: 2}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	e := duework.Entry{UserID: "alice", WorkKey: "feed", Tier: "warm", DueAt: now}

	for range 3 {
		e = duework.Fail(e, retry, now)
		fmt.Printf("failed: errors=%d next in %v\n", e.ErrorStreak, e.DueAt.Sub(now))
		now = e.DueAt
	}
	e = duework.Advance(e, poll, true, now)
	fmt.Printf("hit:    errors=%d next in %v\n", e.ErrorStreak, e.DueAt.Sub(now))
	// Output:
	// failed: errors=1 next in 1m0s
	// failed: errors=2 next in 2m0s
	// failed: errors=3 next in 4m0s
	// hit:    errors=0 next in 10m0s
}
