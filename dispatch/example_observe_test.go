package dispatch_test

import (
	"context"
	"fmt"
	"time"

	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// An Observer in the Config hears about every cycle; here it feeds a ShedTracker that
// names a user once it has been shed for three consecutive cycles. The noisy user's
// backlog is deeper than its cap, so it is shed every cycle; the quiet user is served in
// full in the first cycle and never counted.
func ExampleObserver() {
	ctx := context.Background()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	idx := duework.NewMemory()
	for user, n := range map[string]int{"noisy": 50, "quiet": 1} {
		tc, _ := tenancy.NewContext(user)
		for i := range n {
			e := duework.Entry{UserID: user, WorkKey: fmt.Sprintf("feed-%02d", i), Tier: "hot", DueAt: now.Add(-time.Hour)}
			if err := idx.Schedule(ctx, tc, e); err != nil {
				panic(err)
			}
		}
	}

	tracker := dispatch.ShedTracker{Threshold: 3}
	observer := dispatch.ObserverFunc(func(info dispatch.CycleInfo) {
		l := info.Batch.Lanes[0]
		fmt.Printf("%s %s: %d users, %d dispatched, shed %v\n", info.Now.Format("15:04"), l.Lane, l.Users, l.Dispatched, info.Batch.ShedUserIDs)
		for _, u := range tracker.Record(info.Batch.ShedUserIDs) {
			fmt.Printf("  %s has waited %d cycles\n", u, tracker.Streak(u))
		}
	})
	d, err := dispatch.New(idx, dispatch.Config{
		Lanes:            []dispatch.LaneCapacity{{Lane: "free", PerUserLimit: 2, PerCycleLimit: 10}},
		GlobalBatchLimit: 10,
		LaneFor:          func(context.Context, string) (dispatch.Lane, error) { return "free", nil },
		ClaimFor:         time.Hour, // nobody completes a claim in this example
		Observer:         observer,
	})
	if err != nil {
		panic(err)
	}
	for i := range 4 {
		if _, err := d.Dispatch(ctx, now.Add(time.Duration(i)*time.Minute)); err != nil {
			panic(err)
		}
	}
	// Output:
	// 12:00 free: 2 users, 3 dispatched, shed [noisy]
	// 12:01 free: 1 users, 2 dispatched, shed [noisy]
	// 12:02 free: 1 users, 2 dispatched, shed [noisy]
	//   noisy has waited 3 cycles
	// 12:03 free: 1 users, 2 dispatched, shed [noisy]
}
