package dispatch_test

import (
	"fmt"
	"time"

	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
)

// Weights and bursts, in Select alone. The heads are what each lane's Ready returns: up
// to max(PerUserLimit, PerUserBurst) × weight due feeds per user, More when there are
// others. In the pro lane acme, of weight 2, has a fair part of two items (PerUserLimit
// 1 × 2) and bolt of one; the lane has no burst, so that is all they get. In the free lane
// ivy is alone with ten feeds due: PerUserBurst 4 lets her have four while the lane has
// room, instead of PerUserLimit's one.
func ExampleSelect_weightsAndBursts() {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	head := func(user string, weight, feeds, read int) duework.Head {
		h := duework.Head{UserID: user, Turn: now.Add(-time.Minute), Limits: duework.Limits{Weight: weight}}
		for i := range min(feeds, read*max(weight, 1)) {
			h.Due = append(h.Due, duework.Entry{UserID: user, WorkKey: fmt.Sprintf("feed-%d", i), Tier: "hot", DueAt: now.Add(-time.Minute)})
		}
		h.More = feeds > len(h.Due)
		return h
	}
	sel := dispatch.Select(dispatch.SelectInput{
		Heads:  []duework.Head{head("acme", 2, 3, 1), head("bolt", 1, 3, 1), head("ivy", 1, 10, 4)},
		LaneOf: map[string]dispatch.Lane{"acme": "pro", "bolt": "pro", "ivy": "free"},
		Lanes: []dispatch.LaneCapacity{
			{Lane: "pro", PerUserLimit: 1, PerCycleLimit: 10},
			{Lane: "free", PerUserLimit: 1, PerUserBurst: 4, PerCycleLimit: 10},
		},
		GlobalBatchLimit: 20,
	})
	for _, it := range sel.Items {
		fmt.Println(it.Lane, it.Entry.UserID, it.Entry.WorkKey)
	}
	fmt.Println("shed:", sel.ShedUserIDs)
	// Output:
	// pro acme feed-0
	// pro bolt feed-0
	// pro acme feed-1
	// free ivy feed-0
	// free ivy feed-1
	// free ivy feed-2
	// free ivy feed-3
	// shed: [acme bolt ivy]
}
