package bridge_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// printSink is a queue with room for two items that prints what it is sent.
type printSink struct{}

func (printSink) Room(context.Context) (dispatch.Take, error) { return dispatch.Take{Total: 2}, nil }

func (printSink) Send(_ context.Context, lane dispatch.Lane, items []dispatch.Item) error {
	for _, it := range items {
		fmt.Printf("queued on %s: %s/%s\n", lane, it.Claim.Entry.UserID, it.Claim.Entry.WorkKey)
	}
	return nil
}

// A handler that a scheduler invokes every minute runs one Feed round per invocation: it
// claims no more than the queue has room for, and the rest stays due for the next round.
func ExampleFeeder_Feed() {
	ctx := context.Background()
	idx := duework.NewMemory()
	b := &bridge.Bridge{Index: idx, Watchlist: tenancy.NewMemoryWatchlist()}
	now := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	tc, err := tenancy.NewContext("ana")
	if err != nil {
		panic(err)
	}
	if _, err := b.Watch(ctx, tc, []tenancy.WatchlistEntry{
		{UserID: "ana", Slug: "jobs-board", Tier: "hot"},
		{UserID: "ana", Slug: "news", Tier: "hot"},
		{UserID: "ana", Slug: "prices", Tier: "hot"},
	}, now.Add(-time.Hour)); err != nil {
		panic(err)
	}
	lanes := []dispatch.LaneCapacity{{Lane: "free", PerUserLimit: 5, PerCycleLimit: 50}}
	laneFor, err := bridge.PlanLanes(tenancy.NewMemoryEntitlements(), map[tenancy.PlanID]dispatch.Lane{tenancy.PlanFree: "free"}, lanes)
	if err != nil {
		panic(err)
	}
	d, err := dispatch.New(idx, dispatch.Config{Lanes: lanes, GlobalBatchLimit: 50, LaneFor: laneFor, ClaimFor: time.Minute})
	if err != nil {
		panic(err)
	}
	f, err := bridge.NewFeeder(d, printSink{}, bridge.FeederConfig{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}

	batch, err := f.Feed(ctx, now)
	if err != nil {
		panic(err)
	}
	fmt.Println("dispatched", len(batch.Items), "shed", batch.ShedUserIDs)
	// Output:
	// queued on free: ana/prices
	// queued on free: ana/news
	// dispatched 2 shed [ana]
}
