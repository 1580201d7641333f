package duework_test

import (
	"context"
	"fmt"
	"time"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// An upstream that answers 429 with Retry-After pauses its tenant as a whole: no
// dispatcher sharing the index serves it until the pause ends, and Paused lists it for an
// operator meanwhile. When the pause ends the tenant joins the back of its queue.
func ExampleMemory_Pause() {
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	idx := duework.NewMemory()
	for _, user := range []string{"acme", "globex"} {
		tc, _ := tenancy.NewContext(user)
		_ = idx.Schedule(ctx, tc, duework.Entry{UserID: user, WorkKey: "feed", Tier: "warm", DueAt: now.Add(-time.Hour)})
	}
	acme, _ := tenancy.NewContext("acme")
	if err := idx.Pause(ctx, acme, now.Add(10*time.Minute), "upstream-429"); err != nil {
		fmt.Println(err)
		return
	}
	read := func(at time.Time) {
		page, _ := idx.Ready(ctx, duework.ReadyQuery{Now: at, Users: 10, PerUser: 1})
		fmt.Printf("%s ready:", at.Format(time.TimeOnly))
		for _, h := range page.Heads {
			fmt.Printf(" %s (turn %s)", h.UserID, h.Turn.Format(time.TimeOnly))
		}
		fmt.Println()
	}
	read(now)
	paused, _ := idx.Paused(ctx, now, "", 10)
	for _, p := range paused {
		fmt.Printf("paused: %s until %s for %s\n", p.UserID, p.Until.Format(time.TimeOnly), p.Reason)
	}
	read(now.Add(10 * time.Minute))
	// Output:
	// 12:00:00 ready: globex (turn 11:00:00)
	// paused: acme until 12:10:00 for upstream-429
	// 12:10:00 ready: globex (turn 11:00:00) acme (turn 12:10:00)
}
