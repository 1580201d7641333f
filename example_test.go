package rota_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/cadence"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// The whole library in one place: a noisy tenant watching twenty sources and a quiet one
// watching one share a lane that dispatches four items a cycle. The quiet tenant is served
// in every cycle all the same — its source keeps finding something new, so it stays on the
// 5-minute base interval — while the noisy one takes the rest of the lane and is named as
// shed, its undispatched work still due.
func Example() {
	ctx := context.Background()
	start := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

	idx := duework.NewMemory()
	watchlist := tenancy.NewMemoryWatchlist()
	plans := tenancy.NewMemoryEntitlements()
	// The host's pipeline: here, a source finds something new when its name says so.
	pipeline := bridge.PipelineFunc(func(ctx context.Context, tc tenancy.Context, e tenancy.WatchlistEntry) (bridge.Result, error) {
		stage := bridge.StageAlreadySeen
		if strings.HasSuffix(e.Slug, "-busy") {
			stage = "scored"
		}
		return bridge.Result{Outcomes: []bridge.Outcome{{ID: e.Slug + "/1", Stage: stage}}}, nil
	})
	b := &bridge.Bridge{Index: idx, Watchlist: watchlist, Pipeline: pipeline, Tiers: cadence.NewRegistry()}

	cfg := dispatch.Config{
		Lanes: []dispatch.LaneCapacity{
			{Lane: "paid", PerUserLimit: 10, PerCycleLimit: 100},
			{Lane: "free", PerUserLimit: 4, PerCycleLimit: 4},
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
	r, err := bridge.NewRunner(b, d, bridge.RunnerConfig{Workers: 2, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}

	// Both tenants are on the free plan (no plan set). Their sources come due within the
	// hot tier's base interval (5 minutes), spread by jitter.
	watch := func(user string, slugs ...string) tenancy.Context {
		tc, err := tenancy.NewContext(user)
		if err != nil {
			panic(err)
		}
		for _, s := range slugs {
			if err := watchlist.Add(ctx, tc, tenancy.WatchlistEntry{UserID: user, Slug: s, Tier: "hot", AddedAt: start}); err != nil {
				panic(err)
			}
		}
		return tc
	}
	var feeds []string
	for i := range 20 {
		feeds = append(feeds, fmt.Sprintf("feed%02d", i))
	}
	watch("noisy", feeds...)
	quiet := watch("quiet", "jobs-busy")
	added, err := b.SyncAll(ctx, start)
	if err != nil {
		panic(err)
	}
	fmt.Printf("scheduled %d sources\n", added)

	for i := 1; i <= 4; i++ {
		now := start.Add(time.Duration(i) * 5 * time.Minute)
		rep, err := r.Cycle(ctx, now)
		if err != nil {
			panic(err)
		}
		perUser := map[string]int{}
		for _, it := range rep.Items {
			perUser[it.Item.Claim.Entry.UserID]++
		}
		fmt.Printf("%s: noisy %d, quiet %d, shed %v\n", now.Format("15:04"), perUser["noisy"], perUser["quiet"], rep.Shed)
	}
	e, err := idx.Get(ctx, quiet, "jobs-busy")
	if err != nil {
		panic(err)
	}
	fmt.Printf("quiet's source: streak %d, due again %s\n", e.MissStreak, e.DueAt.Format("15:04"))
	// Output:
	// scheduled 21 sources
	// 09:05: noisy 3, quiet 1, shed [noisy]
	// 09:10: noisy 3, quiet 1, shed [noisy]
	// 09:15: noisy 3, quiet 1, shed [noisy]
	// 09:20: noisy 3, quiet 1, shed [noisy]
	// quiet's source: streak 0, due again 09:25
}
