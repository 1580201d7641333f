package duework_test

import (
	"context"
	"fmt"
	"time"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// A dispatcher's view: one Head per user with due work, in UserID order, however deep a
// user's backlog is.
func ExampleMemory() {
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	idx := duework.NewMemory()

	alice, _ := tenancy.NewContext("alice")
	bob, _ := tenancy.NewContext("bob")
	for i, key := range []string{"feed-c", "feed-a", "feed-b"} {
		_ = idx.Schedule(ctx, alice, duework.Entry{UserID: "alice", WorkKey: key, Tier: "warm", DueAt: now.Add(time.Duration(i-3) * time.Minute)})
	}
	_ = idx.Schedule(ctx, bob, duework.Entry{UserID: "bob", WorkKey: "news", Tier: "hot", DueAt: now.Add(-time.Minute)})
	_ = idx.Schedule(ctx, bob, duework.Entry{UserID: "bob", WorkKey: "digest", Tier: "hot", DueAt: now.Add(time.Hour)})

	heads, _ := idx.DueHeads(ctx, now, 2)
	for _, h := range heads {
		fmt.Printf("%s:", h.UserID)
		for _, e := range h.Due {
			fmt.Printf(" %s (due %v ago)", e.WorkKey, now.Sub(e.DueAt))
		}
		fmt.Printf(" more=%v\n", h.More)
	}

	// Tenant-scoped calls see only their own tenant.
	_, err := idx.Get(ctx, bob, "feed-a")
	fmt.Println("bob asks for alice's feed-a:", err)
	// Output:
	// alice: feed-c (due 3m0s ago) feed-a (due 2m0s ago) more=true
	// bob: news (due 1m0s ago) more=false
	// bob asks for alice's feed-a: duework: Get "feed-a": duework: not found
}
