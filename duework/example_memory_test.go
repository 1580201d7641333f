package duework_test

import (
	"context"
	"fmt"
	"time"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// A dispatcher's view of one group: the ready users in turn order, each with its first due
// entries, however deep its backlog. A Claim serves a user and sends it to the back.
func ExampleMemory() {
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	idx := duework.NewMemory()
	schedule := func(user, key string, due time.Duration) {
		tc, _ := tenancy.NewContext(user)
		_ = idx.Schedule(ctx, tc, duework.Entry{UserID: user, WorkKey: key, Tier: "warm", DueAt: now.Add(due)})
	}
	schedule("alice", "feed-a", -3*time.Minute)
	schedule("alice", "feed-b", -2*time.Minute)
	schedule("alice", "feed-c", -time.Minute)
	schedule("bob", "news", -time.Minute)
	schedule("carol", "blog", time.Hour) // not due yet

	show := func(at time.Time) {
		page, _ := idx.Ready(ctx, duework.ReadyQuery{Now: at, Users: 10, PerUser: 2})
		for _, h := range page.Heads {
			fmt.Printf("  %s (turn %s):", h.UserID, h.Turn.Format(time.TimeOnly))
			for _, e := range h.Due {
				fmt.Printf(" %s", e.WorkKey)
			}
			fmt.Printf(" more=%v\n", h.More)
		}
	}
	fmt.Println("at 12:00")
	show(now)

	// Serving alice at 12:00 puts her behind bob, whose turn came at 11:59.
	_, _ = idx.Claim(ctx, []duework.Key{{UserID: "alice", WorkKey: "feed-a"}}, now, now.Add(5*time.Minute))
	fmt.Println("after alice is served")
	show(now)
	// Output:
	// at 12:00
	//   alice (turn 11:57:00): feed-a feed-b more=true
	//   bob (turn 11:59:00): news more=false
	// after alice is served
	//   bob (turn 11:59:00): news more=false
	//   alice (turn 12:00:00): feed-b feed-c more=false
}
