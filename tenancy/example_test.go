package tenancy_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rotaworks/rota/tenancy"
)

// Every call is scoped to one tenant: bob cannot see alice's rows, and asking for one reads
// exactly like asking for a row that does not exist.
func Example() {
	ctx := context.Background()
	alice, _ := tenancy.NewContext("alice")
	bob, _ := tenancy.NewContext("bob")

	notes := tenancy.NewMemoryRepository[string]()
	_ = notes.Put(ctx, alice, "todo", "renew the domain")

	v, err := notes.Get(ctx, alice, "todo")
	fmt.Println("alice:", v, err)

	_, err = notes.Get(ctx, bob, "todo")
	fmt.Println("bob:", errors.Is(err, tenancy.ErrNotFound), err)

	_, err = notes.Get(ctx, tenancy.Context{}, "todo")
	fmt.Println("no tenant:", errors.Is(err, tenancy.ErrNoTenant))

	_, err = tenancy.NewContext("eve\n")
	fmt.Println(err)
	// Output:
	// alice: renew the domain <nil>
	// bob: true tenancy: not found: id "todo"
	// no tenant: true
	// tenancy: invalid id: user ID "eve\n" contains control character U+000A
}

// A watch-list entry must name the caller's own user: it is refused, never rewritten.
func ExampleMemoryWatchlist() {
	ctx := context.Background()
	now := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	ana, _ := tenancy.NewContext("ana")
	w := tenancy.NewMemoryWatchlist()

	_ = w.Add(ctx, ana, tenancy.WatchlistEntry{UserID: "ana", Slug: "jobs", Tier: "hot", AddedAt: now})
	_ = w.Add(ctx, ana, tenancy.WatchlistEntry{UserID: "ana", Slug: "blog", Tier: "warm", AddedAt: now})
	err := w.Add(ctx, ana, tenancy.WatchlistEntry{UserID: "ben", Slug: "news", Tier: "hot", AddedAt: now})
	fmt.Println(errors.Is(err, tenancy.ErrForbidden))

	entries, _ := w.List(ctx, ana)
	for _, e := range entries {
		fmt.Println(e.UserID, e.Slug, e.Tier)
	}
	// Output:
	// true
	// ana blog warm
	// ana jobs hot
}

// A tenant never given a plan is on the free plan.
func ExampleMemoryEntitlements() {
	ctx := context.Background()
	ana, _ := tenancy.NewContext("ana")
	ben, _ := tenancy.NewContext("ben")
	plans := tenancy.NewMemoryEntitlements()
	_ = plans.SetPlan(ctx, ben, tenancy.PlanPro)

	for _, tc := range []tenancy.Context{ana, ben} {
		p, _ := plans.Plan(ctx, tc)
		fmt.Println(tc.UserID(), p)
	}
	// Output:
	// ana free
	// ben pro
}
