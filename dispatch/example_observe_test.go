package dispatch_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
)

// waitAlarm is an Observer that warns when a lane keeps a user waiting longer than after.
type waitAlarm struct{ after time.Duration }

func (a waitAlarm) ObserveDispatch(info dispatch.CycleInfo) {
	for _, l := range info.Batch.Lanes {
		if wait := info.Now.Sub(l.WaitingSince); !l.WaitingSince.IsZero() && wait > a.after {
			fmt.Printf("%s: lane %s keeps a user waiting %v\n", info.Now.Format("15:04"), l.Lane, wait)
		}
	}
}

// An Observer hears about every cycle. This one warns when a lane keeps a user waiting
// longer than 90 seconds: now − WaitingSince is the wait of the first user the cycle left
// in the queue, however many users the lane holds.
func ExampleObserver() {
	ctx := context.Background()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	idx := duework.NewMemory()
	for _, user := range []string{"ann", "bob", "cara", "dan"} {
		scheduleFeeds(idx, user, now, "feed")
	}
	d, err := dispatch.New(idx, dispatch.Config{
		Lanes:            []dispatch.LaneCapacity{{Lane: "free", PerUserLimit: 1, PerCycleLimit: 1}},
		GlobalBatchLimit: 10,
		LaneFor:          func(context.Context, string) (dispatch.Lane, error) { return "free", nil },
		ClaimFor:         time.Hour,
		Observer:         waitAlarm{after: 90 * time.Second},
	})
	if err != nil {
		log.Fatal(err)
	}
	for i := range 4 {
		if _, err := d.Dispatch(ctx, now.Add(time.Duration(i)*time.Minute)); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// 12:02: lane free keeps a user waiting 2m0s
}
