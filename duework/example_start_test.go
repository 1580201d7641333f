package duework_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// A worker starts an item only once StartClaims returned nil for its claim. A second copy
// of the item — a queue's redelivery, a duplicate — gets ErrClaimStarted and is dropped
// unrun, and a claim that ran cannot be handed back: it is completed.
func ExampleMemory_StartClaims() {
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	idx := duework.NewMemory()
	acme, _ := tenancy.NewContext("acme")
	_ = idx.Schedule(ctx, acme, duework.Entry{UserID: "acme", WorkKey: "feed", Tier: "warm", DueAt: now})
	claims, _ := idx.Claim(ctx, []duework.Key{{UserID: "acme", WorkKey: "feed"}}, now, now.Add(5*time.Minute))
	item := duework.Unclaim{Tenant: acme, Claim: claims[0]}

	errs, err := idx.StartClaims(ctx, []duework.Unclaim{item, item}) // the item and a copy
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("first copy starts:", errs[0] == nil)
	fmt.Println("second copy is a duplicate:", errors.Is(errs[1], duework.ErrClaimStarted))
	errs, _ = idx.Unclaim(ctx, []duework.Unclaim{item})
	fmt.Println("hand-back refused:", errors.Is(errs[0], duework.ErrClaimStarted))
	fmt.Println("completed:", idx.Complete(ctx, acme, claims[0], claims[0].Entry))
	// Output:
	// first copy starts: true
	// second copy is a duplicate: true
	// hand-back refused: true
	// completed: <nil>
}
