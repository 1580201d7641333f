package duework_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// A worker that cannot start an item hands its claim back: the entry is due again at once,
// exactly as it was, and the tenant's in-flight slot is free, while its place in the queue
// stays as the claim left it. A claim handed back is no longer current.
func ExampleMemory_Unclaim() {
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	idx := duework.NewMemory()
	acme, _ := tenancy.NewContext("acme")
	_ = idx.Schedule(ctx, acme, duework.Entry{UserID: "acme", WorkKey: "feed", Tier: "warm", DueAt: now})
	_ = idx.Route(ctx, []duework.Route{{UserID: "acme", Limits: duework.Limits{MaxInFlight: 1}}})
	claims, _ := idx.Claim(ctx, []duework.Key{{UserID: "acme", WorkKey: "feed"}}, now, now.Add(5*time.Minute))
	due, _ := idx.DueBefore(ctx, now, 10)
	fmt.Println("claimed:", len(claims), "due while claimed:", len(due))

	errs, err := idx.Unclaim(ctx, []duework.Unclaim{{Tenant: acme, Claim: claims[0]}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("handed back:", errs[0])
	due, _ = idx.DueBefore(ctx, now, 10)
	st, _ := idx.User(ctx, "acme", now)
	fmt.Println("due again:", len(due), "in flight:", st.InFlight, "last served:", st.LastServed.Format(time.TimeOnly))

	errs, _ = idx.Unclaim(ctx, []duework.Unclaim{{Tenant: acme, Claim: claims[0]}})
	fmt.Println("handed back twice:", errors.Is(errs[0], duework.ErrClaimLost))
	// Output:
	// claimed: 1 due while claimed: 0
	// handed back: <nil>
	// due again: 1 in flight: 0 last served: 12:00:00
	// handed back twice: true
}
