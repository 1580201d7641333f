package rota_test

import (
	"context"
	"fmt"
	"io"
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

	watch := func(user string, slugs ...string) {
		tc, _ := tenancy.NewContext(user)
		for _, s := range slugs {
			_ = watchlist.Add(ctx, tc, tenancy.WatchlistEntry{UserID: user, Slug: s, Tier: cadence.NameHot, AddedAt: start})
		}
		// Entries come due within the tier's base interval (5 minutes), spread by jitter.
		added, _ := b.SyncWatchlist(ctx, tc, start)
		fmt.Printf("%s watches %d sources\n", user, added)
	}
	var noisy []string
	for i := range 20 {
		noisy = append(noisy, fmt.Sprintf("feed%02d", i))
	}
	watch("noisy", noisy...)
	watch("quiet", "jobs-busy")

	laneFor, _ := bridge.PlanLanes(plans, map[tenancy.PlanID]dispatch.Lane{
		tenancy.PlanFree: "free", tenancy.PlanPlus: "paid", tenancy.PlanPro: "paid",
	})
	d, err := dispatch.New(idx, dispatch.Config{
		Lanes: []dispatch.LaneCapacity{
			{Lane: "paid", PerUserLimit: 10, PerCycleLimit: 100},
			{Lane: "free", PerUserLimit: 4, PerCycleLimit: 4},
		},
		GlobalBatchLimit: 100,
		LaneFor:          laneFor,
		ClaimFor:         time.Minute,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	r, _ := bridge.NewRunner(b, d, bridge.RunnerConfig{Workers: 2, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})

	for i := 1; i <= 4; i++ {
		now := start.Add(time.Duration(i) * 5 * time.Minute)
		rep, err := r.Cycle(ctx, now)
		if err != nil {
			fmt.Println(err)
			return
		}
		perUser := map[string]int{}
		for _, it := range rep.Items {
			perUser[it.Item.Claim.Entry.UserID]++
		}
		fmt.Printf("%s: noisy %d, quiet %d, shed %v\n", now.Format("15:04"), perUser["noisy"], perUser["quiet"], rep.Shed)
	}
	tc, _ := tenancy.NewContext("quiet")
	e, _ := idx.Get(ctx, tc, "jobs-busy")
	fmt.Printf("quiet's source: streak %d, due again %s\n", e.MissStreak, e.DueAt.Format("15:04"))
	// Output:
	// noisy watches 20 sources
	// quiet watches 1 sources
	// 09:05: noisy 3, quiet 1, shed [noisy]
	// 09:10: noisy 3, quiet 1, shed [noisy]
	// 09:15: noisy 3, quiet 1, shed [noisy]
	// 09:20: noisy 3, quiet 1, shed [noisy]
	// quiet's source: streak 0, due again 09:25
}
