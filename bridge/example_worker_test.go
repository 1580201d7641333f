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

// Items cross a host's own queue in their wire form and run on a Worker where they
// arrive. An item that sat in the queue past its claim is handed back unrun, so it never
// overlaps the entry's next dispatch; a consumer acknowledges every message once Do
// returns.
func ExampleWorker() {
	ctx := context.Background()
	idx := duework.NewMemory()
	watchlist := tenancy.NewMemoryWatchlist()
	b := &bridge.Bridge{Index: idx, Watchlist: watchlist, Pipeline: &seenPipeline{seen: map[string]bool{}}}
	start := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	tc, err := tenancy.NewContext("ana")
	if err != nil {
		panic(err)
	}
	if _, err := b.Watch(ctx, tc, []tenancy.WatchlistEntry{
		{UserID: "ana", Slug: "jobs-board", Tier: "hot"},
		{UserID: "ana", Slug: "news", Tier: "hot"},
	}, start.Add(-time.Hour)); err != nil {
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

	// The dispatching side: claim and encode.
	batch, err := d.Dispatch(ctx, start)
	if err != nil {
		panic(err)
	}
	var queue [][]byte
	for _, it := range batch.Items {
		msg, err := bridge.EncodeItem(it)
		if err != nil {
			panic(err)
		}
		queue = append(queue, msg)
	}

	// The consuming side: decode and run; the second message is delivered two minutes late.
	w, err := bridge.NewWorker(b, bridge.WorkerConfig{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}
	for i, msg := range queue {
		item, err := bridge.DecodeItem(msg)
		if err != nil {
			fmt.Println("drop:", err) // a message no Worker could run
			continue
		}
		rep := w.Do(ctx, item, start.Add(time.Duration(i)*2*time.Minute))
		fmt.Printf("%s: %s, written %v\n", item.Claim.Entry.WorkKey, rep.Status, rep.Written)
	}
	if err := w.Stop(ctx); err != nil {
		panic(err)
	}
	_, err = bridge.DecodeItem([]byte(`{"v":2,"lane":"free","item":{}}`))
	fmt.Println(err)
	// Output:
	// news: hit, written true
	// jobs-board: late, written true
	// duework: invalid input: DecodeItem: unknown version 2 (want 1)
}
