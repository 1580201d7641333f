package dispatch_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
)

// dan waits behind ann and bob in the free lane, which serves one user a cycle. When he
// upgrades, Reroute moves him to the pro lane at once, keeping his place in time, and the
// next cycle serves him there.
func ExampleDispatcher_Reroute() {
	ctx := context.Background()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	idx := duework.NewMemory()
	scheduleFeeds(idx, "ann", now.Add(-3*time.Minute), "feed")
	scheduleFeeds(idx, "bob", now.Add(-2*time.Minute), "feed")
	scheduleFeeds(idx, "dan", now.Add(-1*time.Minute), "feed")

	plans := map[string]dispatch.Lane{"ann": "free", "bob": "free", "dan": "free"}
	d, err := dispatch.New(idx, dispatch.Config{
		Lanes: []dispatch.LaneCapacity{
			{Lane: "pro", PerUserLimit: 1, PerCycleLimit: 10},
			{Lane: "free", PerUserLimit: 1, PerCycleLimit: 1},
		},
		GlobalBatchLimit: 10,
		LaneFor:          func(_ context.Context, user string) (dispatch.Lane, error) { return plans[user], nil },
		ClaimFor:         5 * time.Minute,
	})
	if err != nil {
		log.Fatal(err)
	}
	batch, err := d.Dispatch(ctx, now)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("12:00", items(batch))

	plans["dan"] = "pro" // the host's plan store changed
	if err := d.Reroute(ctx, "dan"); err != nil {
		log.Fatal(err)
	}
	batch, err = d.Dispatch(ctx, now.Add(time.Minute))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("12:01", items(batch))
	// Output:
	// 12:00 free:ann/feed
	// 12:01 pro:dan/feed free:bob/feed
}
