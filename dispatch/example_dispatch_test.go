package dispatch_test

import (
	"context"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// scheduleFeeds schedules one entry per feed for user, due at due.
func scheduleFeeds(idx duework.Index, user string, due time.Time, feeds ...string) {
	tc, err := tenancy.NewContext(user)
	if err != nil {
		log.Fatal(err)
	}
	for _, feed := range feeds {
		if err := idx.Schedule(context.Background(), tc, duework.Entry{UserID: user, WorkKey: feed, Tier: "hot", DueAt: due}); err != nil {
			log.Fatal(err)
		}
	}
}

// items renders a batch's items as lane:user/feed.
func items(b dispatch.Batch) string {
	var out []string
	for _, it := range b.Items {
		out = append(out, fmt.Sprintf("%s:%s/%s", it.Lane, it.Claim.Entry.UserID, it.Claim.Entry.WorkKey))
	}
	return strings.Join(out, " ")
}

// Three tenants share the free lane, which hands out two items a cycle. The first cycle
// routes them all to it (their lane comes from LaneFor). Each cycle serves
// the two users at the front of the queue and sends them to the back, so cara, left
// waiting by the first cycle, goes first in the second. Nobody completes a claim here, so a
// user whose feeds are all claimed drops out of the queue until its claims end.
func ExampleDispatcher_Dispatch() {
	ctx := context.Background()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	idx := duework.NewMemory()
	scheduleFeeds(idx, "ann", now.Add(-60*time.Minute), "blog", "news")
	scheduleFeeds(idx, "bob", now.Add(-59*time.Minute), "blog", "news")
	scheduleFeeds(idx, "cara", now.Add(-58*time.Minute), "blog", "news")

	d, err := dispatch.New(idx, dispatch.Config{
		Lanes:            []dispatch.LaneCapacity{{Lane: "free", PerUserLimit: 1, PerCycleLimit: 2}},
		GlobalBatchLimit: 10,
		LaneFor:          func(context.Context, string) (dispatch.Lane, error) { return "free", nil },
		ClaimFor:         5 * time.Minute,
	})
	if err != nil {
		log.Fatal(err)
	}
	for cycle := range 3 {
		at := now.Add(time.Duration(cycle) * time.Minute)
		batch, err := d.Dispatch(ctx, at)
		if err != nil {
			log.Fatal(err)
		}
		waiting := "nobody waits"
		if since := batch.Lanes[0].WaitingSince; !since.IsZero() {
			waiting = "someone waits since " + since.Format("15:04")
		}
		fmt.Printf("%s %s; %s\n", at.Format("15:04"), items(batch), waiting)
	}
	// Output:
	// 12:00 free:ann/blog free:bob/blog; someone waits since 11:02
	// 12:01 free:cara/blog free:ann/news; someone waits since 12:00
	// 12:02 free:bob/news free:cara/news; nobody waits
}
