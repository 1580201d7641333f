package duework_test

import (
	"context"
	"fmt"
	"time"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// Two tenants whose own APIs set their limits: acme allows two syncs at once, and bolt a
// burst of three and then one every ten seconds. Route stores the limits; Ready and Claim
// keep to them for every dispatcher that shares the index, and a tenant held back by its
// limits is not ready until a slot frees or its next item is allowed.
func ExampleLimits() {
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	idx := duework.NewMemory()
	keys := map[string][]duework.Key{}
	for _, user := range []string{"acme", "bolt"} {
		tc, _ := tenancy.NewContext(user)
		for _, feed := range []string{"a", "b", "c", "d", "e"} {
			e := duework.Entry{UserID: user, WorkKey: feed, Tier: "warm", DueAt: now.Add(-time.Minute)}
			_ = idx.Schedule(ctx, tc, e)
			keys[user] = append(keys[user], e.Key())
		}
	}
	err := idx.Route(ctx, []duework.Route{
		{UserID: "acme", Group: "pro", Limits: duework.Limits{MaxInFlight: 2}},
		{UserID: "bolt", Group: "pro", Limits: duework.Limits{Every: 10 * time.Second, Burst: 3}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	show := func(at time.Time) {
		page, _ := idx.Ready(ctx, duework.ReadyQuery{Group: "pro", Now: at, Users: 10, PerUser: 10})
		fmt.Printf("%s:", at.Format(time.TimeOnly))
		for _, h := range page.Heads {
			fmt.Printf(" %s may run %d (%d in flight);", h.UserID, len(h.Due), h.InFlight)
		}
		for _, user := range []string{"acme", "bolt"} {
			if st, _ := idx.User(ctx, user, at); st.Turn.After(at) {
				fmt.Printf(" %s waits until %s;", user, st.Turn.Format(time.TimeOnly))
			}
		}
		fmt.Println()
	}
	show(now)

	// Claims of all five keys each take what the limits allow, whoever asks.
	acme, _ := idx.Claim(ctx, keys["acme"], now, now.Add(5*time.Minute))
	bolt, _ := idx.Claim(ctx, keys["bolt"], now, now.Add(5*time.Minute))
	fmt.Println("claimed: acme", len(acme), "bolt", len(bolt))
	show(now)

	// A completion frees acme's slot at once; bolt's next item is allowed at 12:00:10.
	tc, _ := tenancy.NewContext("acme")
	_ = idx.Complete(ctx, tc, acme[0], duework.Entry{UserID: "acme", WorkKey: "a", Tier: "warm", DueAt: now.Add(time.Hour)})
	show(now.Add(10 * time.Second))
	// Output:
	// 12:00:00: acme may run 2 (0 in flight); bolt may run 3 (0 in flight);
	// claimed: acme 2 bolt 3
	// 12:00:00: acme waits until 12:05:00; bolt waits until 12:00:10;
	// 12:00:10: acme may run 1 (1 in flight); bolt may run 1 (3 in flight);
}
