package duework_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rotaworks/rota/cadence"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// A claim's life: hidden while held, completed with Advance, and — when a worker dies —
// due again at Until by itself, after which the dead worker's late Complete is refused.
func ExampleMemory_Claim() {
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	hourly := cadence.Backoff{Base: time.Hour, Max: 8 * time.Hour, Factor: 2}
	idx := duework.NewMemory()
	alice, _ := tenancy.NewContext("alice")
	_ = idx.Schedule(ctx, alice, duework.Entry{UserID: "alice", WorkKey: "feed", Tier: "warm", DueAt: now})
	key := []duework.Key{{UserID: "alice", WorkKey: "feed"}}

	// A worker claims the entry for five minutes and completes it after a hit.
	claims, _ := idx.Claim(ctx, key, now, now.Add(5*time.Minute))
	due, _ := idx.DueBefore(ctx, now, 10)
	fmt.Println("claimed:", len(claims), "still due while held:", len(due))
	done := now.Add(time.Minute)
	_ = idx.Complete(ctx, alice, claims[0], duework.Advance(claims[0].Entry, hourly, true, done))
	e, _ := idx.Get(ctx, alice, "feed")
	fmt.Println("next due:", e.DueAt.Format(time.TimeOnly))

	// The next worker claims it and dies; at Until the entry is due again.
	next := e.DueAt
	lost, _ := idx.Claim(ctx, key, next, next.Add(5*time.Minute))
	due, _ = idx.DueBefore(ctx, next.Add(5*time.Minute), 10)
	fmt.Println("due again at Until:", len(due))
	retry, _ := idx.Claim(ctx, key, next.Add(5*time.Minute), next.Add(10*time.Minute))
	err := idx.Complete(ctx, alice, lost[0], duework.Advance(lost[0].Entry, hourly, false, next.Add(6*time.Minute)))
	fmt.Println("the dead worker's late Complete:", errors.Is(err, duework.ErrClaimLost))
	fmt.Println("the retry's Complete:", idx.Complete(ctx, alice, retry[0], duework.Advance(retry[0].Entry, hourly, false, next.Add(6*time.Minute))))
	// Output:
	// claimed: 1 still due while held: 0
	// next due: 13:01:00
	// due again at Until: 1
	// the dead worker's late Complete: true
	// the retry's Complete: <nil>
}
