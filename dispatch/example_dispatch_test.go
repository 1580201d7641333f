package dispatch_test

import (
	"context"
	"fmt"
	"time"

	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// A noisy pro user with a thousand overdue feeds and a quiet free user with one blog share
// a cycle: the pro lane comes first, but its per-user cap leaves the quiet user its turn,
// and the noisy user is named in the shed list, its work still due.
func ExampleDispatcher_Dispatch() {
	ctx := context.Background()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	idx := duework.NewMemory()

	noisy, _ := tenancy.NewContext("noisy")
	for i := range 1000 {
		e := duework.Entry{UserID: "noisy", WorkKey: fmt.Sprintf("feed-%04d", i), Tier: "hot", DueAt: now.Add(-72 * time.Hour)}
		if err := idx.Schedule(ctx, noisy, e); err != nil {
			panic(err)
		}
	}
	quiet, _ := tenancy.NewContext("quiet")
	if err := idx.Schedule(ctx, quiet, duework.Entry{UserID: "quiet", WorkKey: "blog", Tier: "warm", DueAt: now.Add(-time.Minute)}); err != nil {
		panic(err)
	}

	plans := map[string]dispatch.Lane{"noisy": "pro", "quiet": "free"}
	d, err := dispatch.New(idx, dispatch.Config{
		Lanes: []dispatch.LaneCapacity{
			{Lane: "pro", PerUserLimit: 3, PerCycleLimit: 100},
			{Lane: "free", PerUserLimit: 3, PerCycleLimit: 100},
		},
		GlobalBatchLimit: 10,
		LaneFor: func(_ context.Context, userID string) (dispatch.Lane, error) {
			return plans[userID], nil
		},
		ClaimFor: 5 * time.Minute,
	})
	if err != nil {
		panic(err)
	}

	batch, err := d.Dispatch(ctx, now)
	if err != nil {
		panic(err)
	}
	for _, it := range batch.Items {
		fmt.Println(it.Lane, it.Claim.Entry.UserID, it.Claim.Entry.WorkKey, "until", it.Claim.Until.Format("15:04"))
	}
	fmt.Println("shed:", batch.ShedUserIDs)
	for _, l := range batch.Lanes {
		fmt.Printf("%s: %d users, %d dispatched, %d shed\n", l.Lane, l.Users, l.Dispatched, l.Shed)
	}
	// Output:
	// pro noisy feed-0000 until 12:05
	// pro noisy feed-0001 until 12:05
	// pro noisy feed-0002 until 12:05
	// free quiet blog until 12:05
	// shed: [noisy]
	// pro: 1 users, 3 dispatched, 1 shed
	// free: 1 users, 1 dispatched, 0 shed
}
