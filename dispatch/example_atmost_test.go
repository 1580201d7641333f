package dispatch_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
)

// A feeder hands items to a queue whose consumers can start three more now, and none from
// the free lane: DispatchAtMost claims no more, by the same fair rules. The free lane only
// reports how long it keeps someone waiting, and its work stays due, unclaimed, for the
// next cycle.
func ExampleDispatcher_DispatchAtMost() {
	ctx := context.Background()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	idx := duework.NewMemory()
	scheduleFeeds(idx, "acme", now.Add(-10*time.Minute), "blog", "news", "shop")
	scheduleFeeds(idx, "bolt", now.Add(-9*time.Minute), "blog", "news")
	scheduleFeeds(idx, "ivy", now.Add(-30*time.Minute), "blog")

	plans := map[string]dispatch.Lane{"acme": "pro", "bolt": "pro", "ivy": "free"}
	d, err := dispatch.New(idx, dispatch.Config{
		Lanes: []dispatch.LaneCapacity{
			{Lane: "pro", PerUserLimit: 2, PerCycleLimit: 10},
			{Lane: "free", PerUserLimit: 1, PerCycleLimit: 10},
		},
		GlobalBatchLimit: 20,
		LaneFor:          func(_ context.Context, user string) (dispatch.Lane, error) { return plans[user], nil },
		ClaimFor:         5 * time.Minute,
	})
	if err != nil {
		log.Fatal(err)
	}
	batch, err := d.DispatchAtMost(ctx, now, dispatch.Take{Total: 3, PerLane: map[dispatch.Lane]int{"free": 0}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(items(batch))
	free := batch.Lanes[1]
	fmt.Printf("free: %d dispatched, waiting since %s, oldest due %s\n",
		free.Dispatched, free.WaitingSince.Format("15:04"), free.OldestDue.Format("15:04"))
	// Output:
	// pro:acme/blog pro:bolt/blog pro:acme/news
	// free: 0 dispatched, waiting since 11:30, oldest due 11:30
}
