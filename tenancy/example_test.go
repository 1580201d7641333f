package tenancy_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/rotaworks/rota/tenancy"
)

// Every call is scoped to one tenant: bob cannot see alice's rows, and asking for one reads
// exactly like asking for a row that does not exist.
func Example() {
	ctx := context.Background()
	alice, err := tenancy.NewContext("alice")
	if err != nil {
		log.Fatal(err)
	}
	bob, err := tenancy.NewContext("bob")
	if err != nil {
		log.Fatal(err)
	}

	notes := tenancy.NewMemoryRepository[string]()
	if err := notes.Put(ctx, alice, "todo", "renew the domain"); err != nil {
		log.Fatal(err)
	}

	v, err := notes.Get(ctx, alice, "todo")
	fmt.Println("alice:", v, err)

	_, err = notes.Get(ctx, bob, "todo")
	fmt.Println("bob:", errors.Is(err, tenancy.ErrNotFound), err)

	_, err = notes.Get(ctx, tenancy.Context{}, "todo")
	fmt.Println("no tenant:", errors.Is(err, tenancy.ErrNoTenant))
	// Output:
	// alice: renew the domain <nil>
	// bob: true tenancy: not found: id "todo"
	// no tenant: true
}

// IDs that look alike but differ are refused rather than made into a second tenant; a host
// normalises what people type (NFC) before it calls NewContext.
func ExampleValidateID() {
	for _, id := range []string{"acme corp", "acme corp ", "acme\u200bcorp", "eve\n"} {
		fmt.Println(tenancy.ValidateID("user ID", id))
	}
	// Output:
	// <nil>
	// tenancy: invalid id: user ID "acme corp " ends with white space U+0020
	// tenancy: invalid id: user ID "acme\u200bcorp" contains format character U+200B
	// tenancy: invalid id: user ID "eve\n" contains control character U+000A
}

// A watch-list entry must name the caller's own user: it is refused, never rewritten.
func ExampleMemoryWatchlist() {
	ctx := context.Background()
	now := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	ana, err := tenancy.NewContext("ana")
	if err != nil {
		log.Fatal(err)
	}
	w := tenancy.NewMemoryWatchlist()

	for _, e := range []tenancy.WatchlistEntry{
		{UserID: "ana", Slug: "jobs", Tier: "hot", AddedAt: now},
		{UserID: "ana", Slug: "blog", Tier: "warm", AddedAt: now},
	} {
		if err := w.Add(ctx, ana, e); err != nil {
			log.Fatal(err)
		}
	}
	err = w.Add(ctx, ana, tenancy.WatchlistEntry{UserID: "ben", Slug: "news", Tier: "hot", AddedAt: now})
	fmt.Println(errors.Is(err, tenancy.ErrForbidden))

	entries, err := w.List(ctx, ana)
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range entries {
		fmt.Println(e.UserID, e.Slug, e.Tier)
	}
	// Output:
	// true
	// ana blog warm
	// ana jobs hot
}

// The plans are the host's: any valid name is one. A tenant never given a plan is on
// PlanFree, "free".
func ExampleMemoryEntitlements() {
	ctx := context.Background()
	ana, err := tenancy.NewContext("ana")
	if err != nil {
		log.Fatal(err)
	}
	ben, err := tenancy.NewContext("ben")
	if err != nil {
		log.Fatal(err)
	}
	plans := tenancy.NewMemoryEntitlements()
	if err := plans.SetPlan(ctx, ben, "enterprise"); err != nil {
		log.Fatal(err)
	}
	fmt.Println(plans.SetPlan(ctx, ana, "team "))

	for _, tc := range []tenancy.Context{ana, ben} {
		p, err := plans.Plan(ctx, tc)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(tc.UserID(), p)
	}
	// Output:
	// tenancy: invalid plan: plan "team " ends with white space U+0020
	// ana free
	// ben enterprise
}

// GetMany reads several tenants' entries in one call, each lookup under its own Context:
// ben's lookup of a slug only ana watches is not found, exactly as ben's Get would be.
func ExampleMemoryWatchlist_GetMany() {
	ctx := context.Background()
	now := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	w := tenancy.NewMemoryWatchlist()
	tcs := map[string]tenancy.Context{}
	for _, e := range []tenancy.WatchlistEntry{
		{UserID: "ana", Slug: "jobs", Tier: "hot", AddedAt: now},
		{UserID: "ben", Slug: "news", Tier: "cold", AddedAt: now},
	} {
		tc, err := tenancy.NewContext(e.UserID)
		if err != nil {
			log.Fatal(err)
		}
		if err := w.Add(ctx, tc, e); err != nil {
			log.Fatal(err)
		}
		tcs[e.UserID] = tc
	}
	ana, ben := tcs["ana"], tcs["ben"]

	lookups := []tenancy.Lookup{
		{Tenant: ana, Slug: "jobs"},
		{Tenant: ben, Slug: "jobs"},
		{Tenant: ben, Slug: "news"},
	}
	entries, errs, err := w.GetMany(ctx, lookups)
	if err != nil {
		log.Fatal(err)
	}
	for i, l := range lookups {
		if errs[i] != nil {
			fmt.Printf("%s %s: %v\n", l.Tenant.UserID(), l.Slug, errs[i])
			continue
		}
		fmt.Printf("%s %s: tier %s\n", l.Tenant.UserID(), l.Slug, entries[i].Tier)
	}
	// Output:
	// ana jobs: tier hot
	// ben jobs: tenancy: not found: slug "jobs"
	// ben news: tier cold
}
