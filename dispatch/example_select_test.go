package dispatch_test

import (
	"fmt"
	"time"

	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
)

// Select needs no index: it takes the heads the lanes' reads return. The noisy user stands
// first in the queue and has more due work than its head holds (More); the quiet user
// still gets an item before the noisy one gets a second.
func ExampleSelect() {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	entry := func(user, key string, ago time.Duration) duework.Entry {
		return duework.Entry{UserID: user, WorkKey: key, Tier: "hot", DueAt: now.Add(-ago)}
	}
	sel := dispatch.Select(dispatch.SelectInput{
		Heads: []duework.Head{
			{UserID: "noisy", Turn: now.Add(-72 * time.Hour), Due: []duework.Entry{
				entry("noisy", "feed-1", 72*time.Hour), entry("noisy", "feed-2", 71*time.Hour), entry("noisy", "feed-3", 70*time.Hour),
			}, More: true},
			{UserID: "quiet", Turn: now.Add(-time.Minute), Due: []duework.Entry{entry("quiet", "blog", time.Minute)}},
		},
		LaneOf: map[string]dispatch.Lane{"noisy": "free", "quiet": "free"},
		Lanes: []dispatch.LaneCapacity{
			{Lane: "pro", PerUserLimit: 3, PerCycleLimit: 100},
			{Lane: "free", PerUserLimit: 3, PerCycleLimit: 3},
		},
		GlobalBatchLimit: 100,
	})
	for _, it := range sel.Items {
		fmt.Println(it.Lane, it.Entry.UserID, it.Entry.WorkKey)
	}
	fmt.Println("shed:", sel.ShedUserIDs)
	// Output:
	// free noisy feed-1
	// free quiet blog
	// free noisy feed-2
	// shed: [noisy]
}
