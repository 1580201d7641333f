// Command quickstart wires rota in memory and runs four cycles on a fixed clock: two
// tenants with two sources each, one on the pro plan and one on the free plan, and a
// pipeline that finds something new on "jobs" only. It prints what each cycle ran.
//
//	go run ./examples/quickstart
//
// A service calls Runner.Run on the real clock instead of Cycle: see examples/daemon.
package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/cadence"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, w io.Writer) error {
	idx := duework.NewMemory()
	watchlist := tenancy.NewMemoryWatchlist()
	plans := tenancy.NewMemoryEntitlements()
	lanes := []dispatch.LaneCapacity{ // highest priority first
		{Lane: "paid", PerUserLimit: 5, PerCycleLimit: 50},
		{Lane: "free", PerUserLimit: 1, PerCycleLimit: 20},
	}
	laneFor, err := bridge.PlanLanes(plans, map[tenancy.PlanID]dispatch.Lane{
		tenancy.PlanFree: "free", "pro": "paid",
	}, lanes)
	if err != nil {
		return err
	}
	d, err := dispatch.New(idx, dispatch.Config{Lanes: lanes, GlobalBatchLimit: 50, LaneFor: laneFor, ClaimFor: time.Minute})
	if err != nil {
		return err
	}
	pipeline := bridge.PipelineFunc(func(ctx context.Context, tc tenancy.Context, e tenancy.WatchlistEntry) (bridge.Result, error) {
		if e.Slug != "jobs" {
			return bridge.Result{}, nil // nothing new: a miss
		}
		return bridge.Result{Outcomes: []bridge.Outcome{{ID: "jobs/42", Stage: "scored"}}}, nil
	})
	b := &bridge.Bridge{Index: idx, Watchlist: watchlist, Pipeline: pipeline, Tiers: cadence.NewRegistry()}
	r, err := bridge.NewRunner(b, d, bridge.RunnerConfig{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}

	start := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	var tenants []tenancy.Context
	for _, user := range []string{"ana", "ben"} {
		tc, err := tenancy.NewContext(user)
		if err != nil {
			return err
		}
		for _, slug := range []string{"jobs", "blog"} {
			if err := watchlist.Add(ctx, tc, tenancy.WatchlistEntry{UserID: user, Slug: slug, Tier: "hot", AddedAt: start}); err != nil {
				return err
			}
		}
		tenants = append(tenants, tc)
	}
	if err := plans.SetPlan(ctx, tenants[0], "pro"); err != nil { // ben stays on the free plan
		return err
	}
	added, err := b.SyncAll(ctx, start) // each source comes due within the hot tier's 5 minutes
	if err != nil {
		return err
	}
	out := bufio.NewWriter(w) // keeps the first write error for Flush
	fmt.Fprintf(out, "%s  scheduled %d sources\n", start.Format("15:04"), added)

	for i := 1; i <= 4; i++ {
		rep, err := r.Cycle(ctx, start.Add(time.Duration(i)*5*time.Minute))
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s  dispatched %d, shed %v\n", rep.Now.Format("15:04"), rep.Dispatched, rep.Shed)
		for _, it := range rep.Items {
			e := it.Item.Claim.Entry
			fmt.Fprintf(out, "       %s lane: %s/%s %s, due again %s\n", it.Item.Lane, e.UserID, e.WorkKey, it.Status, it.Next.DueAt.Format("15:04"))
		}
	}
	return out.Flush()
}
