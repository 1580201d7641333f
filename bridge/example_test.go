package bridge_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/cadence"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// seenPipeline is a host pipeline with a dedupe ledger: a posting is new the first time
// it is fetched and already seen after that. This source only ever has one posting.
type seenPipeline struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (p *seenPipeline) Run(ctx context.Context, tc tenancy.Context, e tenancy.WatchlistEntry) (bridge.Result, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	id := tc.UserID() + "/" + e.Slug + "/posting-1"
	stage := bridge.Stage("scored")
	if p.seen[id] {
		stage = bridge.StageAlreadySeen
	}
	p.seen[id] = true
	return bridge.Result{Outcomes: []bridge.Outcome{{ID: id, Stage: stage}}}, nil
}

// The whole cycle for one tenant and one source on the hot tier: sync schedules it, each
// Runner cycle dispatches it when due, and the cadence snaps to 5 minutes after the hit,
// then backs off after each run that found only what it had already seen. A daemon calls
// r.Run(ctx) instead of the loop of Cycles.
func Example() {
	ctx := context.Background()
	idx := duework.NewMemory()
	watchlist := tenancy.NewMemoryWatchlist()
	plans := tenancy.NewMemoryEntitlements()
	b := &bridge.Bridge{Index: idx, Watchlist: watchlist, Pipeline: &seenPipeline{seen: map[string]bool{}}}

	cfg := dispatch.Config{
		Lanes: []dispatch.LaneCapacity{
			{Lane: "paid", PerUserLimit: 10, PerCycleLimit: 100},
			{Lane: "free", PerUserLimit: 2, PerCycleLimit: 50},
		},
		GlobalBatchLimit: 100,
		ClaimFor:         time.Minute,
	}
	laneFor, err := bridge.PlanLanes(plans, map[tenancy.PlanID]dispatch.Lane{
		tenancy.PlanFree: "free", "plus": "paid", "pro": "paid",
	}, cfg.Lanes)
	if err != nil {
		panic(err)
	}
	cfg.LaneFor = laneFor
	d, err := dispatch.New(idx, cfg)
	if err != nil {
		panic(err)
	}
	r, err := bridge.NewRunner(b, d, bridge.RunnerConfig{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}

	tc, err := tenancy.NewContext("ana")
	if err != nil {
		panic(err)
	}
	start := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	added, err := b.Watch(ctx, tc, []tenancy.WatchlistEntry{{UserID: "ana", Slug: "jobs-board", Tier: "hot"}}, start)
	if err != nil {
		panic(err)
	}
	fmt.Println("sync added", added)

	for i := 1; i <= 8; i++ {
		now := start.Add(time.Duration(i) * 5 * time.Minute)
		rep, err := r.Cycle(ctx, now)
		if err != nil {
			panic(err)
		}
		for _, it := range rep.Items {
			fmt.Printf("%s %s: %s, streak %d, due again %s\n", now.Format("15:04"), it.Item.Lane,
				it.Status, it.Next.MissStreak, it.Next.DueAt.Format("15:04"))
		}
	}
	// Output:
	// sync added 1
	// 09:05 free: hit, streak 0, due again 09:10
	// 09:10 free: miss, streak 1, due again 09:20
	// 09:20 free: miss, streak 2, due again 09:40
	// 09:40 free: miss, streak 3, due again 10:20
}

// SyncWatchlist can be called on every watchlist change: it schedules only what is new
// and never resets a cadence.
func ExampleBridge_SyncWatchlist() {
	ctx := context.Background()
	idx := duework.NewMemory()
	watchlist := tenancy.NewMemoryWatchlist()
	b := &bridge.Bridge{Index: idx, Watchlist: watchlist}
	tc, err := tenancy.NewContext("ben")
	if err != nil {
		panic(err)
	}
	now := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	for _, e := range []tenancy.WatchlistEntry{
		{UserID: "ben", Slug: "news", Tier: "hot"},
		{UserID: "ben", Slug: "forum", Tier: "warm"},
	} {
		if err := watchlist.Add(ctx, tc, e); err != nil {
			panic(err)
		}
	}

	added, err := b.SyncWatchlist(ctx, tc, now)
	fmt.Println("first sync:", added, err)
	added, err = b.SyncWatchlist(ctx, tc, now.Add(time.Minute))
	fmt.Println("again:", added, err)

	if err := watchlist.Add(ctx, tc, tenancy.WatchlistEntry{UserID: "ben", Slug: "blog", Tier: "nightly"}); err != nil {
		panic(err)
	}
	added, err = b.SyncWatchlist(ctx, tc, now)
	fmt.Println("unknown tier:", added, err)

	e, err := idx.Get(ctx, tc, "forum")
	if err != nil {
		panic(err)
	}
	fmt.Println("forum due within the warm base:", e.DueAt.Sub(now) < cadence.TierWarm.Base)
	// Output:
	// first sync: 2 <nil>
	// again: 0 <nil>
	// unknown tier: 0 bridge: sync user "ben" entry "blog": cadence: unknown tier: "nightly"
	// forum due within the warm base: true
}

// A watchlist entry removed before its due work comes up: RunDueItem unschedules the due
// work and returns a nil result and no error.
func ExampleBridge_RunDueItem_removed() {
	ctx := context.Background()
	idx := duework.NewMemory()
	watchlist := tenancy.NewMemoryWatchlist()
	b := &bridge.Bridge{Index: idx, Watchlist: watchlist, Pipeline: &seenPipeline{seen: map[string]bool{}}}
	tc, err := tenancy.NewContext("ana")
	if err != nil {
		panic(err)
	}
	now := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	if err := idx.Schedule(ctx, tc, duework.Entry{UserID: "ana", WorkKey: "old-feed", Tier: "hot", DueAt: now}); err != nil {
		panic(err)
	}
	claims, err := idx.Claim(ctx, []duework.Key{{UserID: "ana", WorkKey: "old-feed"}}, now, now.Add(time.Minute))
	if err != nil {
		panic(err)
	}

	res, err := b.RunDueItem(ctx, dispatch.Item{Claim: claims[0], Lane: "free"}, now)
	fmt.Println(res, err)
	_, err = idx.Get(ctx, tc, "old-feed")
	fmt.Println("still scheduled:", !errors.Is(err, duework.ErrNotFound))
	// Output:
	// <nil> <nil>
	// still scheduled: false
}

// PlanLanes is given the lanes of the dispatch.Config its LaneFor is for, and refuses a
// table that routes a plan to a lane the dispatcher lacks.
func ExamplePlanLanes() {
	lanes := []dispatch.LaneCapacity{
		{Lane: "paid", PerUserLimit: 10, PerCycleLimit: 100},
		{Lane: "free", PerUserLimit: 2, PerCycleLimit: 50},
	}
	_, err := bridge.PlanLanes(tenancy.NewMemoryEntitlements(), map[tenancy.PlanID]dispatch.Lane{
		tenancy.PlanFree: "free", "plus": "paid", "pro": "premium",
	}, lanes)
	fmt.Println(err)
	fmt.Println(errors.Is(err, bridge.ErrInvalidConfig))
	// Output:
	// bridge: invalid config: PlanLanes: plan "pro" maps to lane "premium", which is not one of the configured lanes ["paid" "free"]
	// true
}
