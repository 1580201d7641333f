// Command plans runs rota in memory for an hour of simulated time: three tenants on the
// free, plus and pro plans — the pro one noisy, with forty sources — polled every five
// minutes by a Runner, with a stand-in pipeline that finds something new now and then.
//
// It shows what a plan buys: each plan maps to a lane, a higher lane is served first but
// never gives one tenant more than its per-user limit, and the free lane keeps a reserved
// share of every batch. It prints, per cycle, what each lane dispatched, who was shed, and
// how each source's cadence moved: a hit snaps back to its tier's base interval, a miss
// backs off. Mid-run one tenant adds a source and another removes one. A plan can also buy
// per-tenant limits — an in-flight cap, a rate, a weight — which examples/limits shows.
//
//	go run ./examples/plans
//
// Everything is deterministic: the clock is simulated (the Runner's Cycle takes now), and
// the pipeline's hits come from a seeded hash of tenant, source and time, not from the
// order in which the workers happen to run.
package main

import (
	"bufio"
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/cadence"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "plans:", err)
		os.Exit(1)
	}
}

// The simulation's knobs.
const (
	seed     = 7               // seeds the simulated pipeline's hits
	hitOdds  = 4               // a run finds something new about once in hitOdds
	cycles   = 12              // a dozen cycles…
	every    = 5 * time.Minute // …five simulated minutes apart
	claimFor = 2 * time.Minute
)

// start is the simulated clock's first instant.
var start = time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)

// tenant is one user of the host's product.
type tenant struct {
	user    string
	plan    tenancy.PlanID
	sources []source
}

type source struct{ slug, tier string }

func tenants() []tenant {
	noisy := tenant{user: "noisy", plan: "pro"}
	for i := range 40 {
		noisy.sources = append(noisy.sources, source{fmt.Sprintf("feed%02d", i), "hot"})
	}
	return []tenant{
		{user: "ana", plan: tenancy.PlanFree, sources: []source{{"jobs", "hot"}, {"blog", "hot"}, {"digest", "warm"}}},
		{user: "ben", plan: "plus", sources: []source{{"news", "hot"}, {"forum", "hot"}, {"podcast", "hot"}, {"status", "hot"}}},
		noisy,
	}
}

// simulatedPipeline stands in for the host's fetch-dedupe-score pipeline. Whether a run finds
// something new is drawn from a PCG generator seeded with the seed and a hash of (tenant,
// source, time): deterministic whatever order the Runner's workers run in.
func simulatedPipeline(ctx context.Context, tc tenancy.Context, e tenancy.WatchlistEntry, now time.Time) (bridge.Result, error) {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s\x00%s\x00%d", tc.UserID(), e.Slug, now.Unix())
	rng := rand.New(rand.NewPCG(seed, h.Sum64()))
	res := bridge.Result{Outcomes: []bridge.Outcome{{ID: e.Slug + "/old", Stage: bridge.StageAlreadySeen}}}
	if rng.IntN(hitOdds) == 0 {
		res.Outcomes = append(res.Outcomes, bridge.Outcome{ID: e.Slug + "/new", Stage: "scored"})
	}
	return res, nil
}

// run writes the simulation to w. A bufio.Writer keeps the first write error and returns
// it from Flush, so one check covers every line.
func run(w io.Writer) error {
	out := bufio.NewWriter(w)
	if err := simulate(context.Background(), out); err != nil {
		return err
	}
	return out.Flush()
}

func simulate(ctx context.Context, w io.Writer) error {
	idx := duework.NewMemory()
	watchlist := tenancy.NewMemoryWatchlist()
	plans := tenancy.NewMemoryEntitlements()

	// The pipeline reads the simulated clock, as a real one would read the real clock.
	now := start
	pipeline := bridge.PipelineFunc(func(ctx context.Context, tc tenancy.Context, e tenancy.WatchlistEntry) (bridge.Result, error) {
		return simulatedPipeline(ctx, tc, e, now)
	})
	b := &bridge.Bridge{Index: idx, Watchlist: watchlist, Pipeline: pipeline, Tiers: cadence.NewRegistry()}

	// Paying more buys a higher lane, never more than a lane's per-user share: the noisy
	// pro tenant gets at most four items a cycle, and the free lane keeps a reserved share.
	lanes := []dispatch.LaneCapacity{
		{Lane: "pro", PerUserLimit: 4, PerCycleLimit: 8},
		{Lane: "plus", PerUserLimit: 3, PerCycleLimit: 6},
		{Lane: "free", PerUserLimit: 2, PerCycleLimit: 4, MinShare: 2},
	}
	laneFor, err := bridge.PlanLanes(plans, map[tenancy.PlanID]dispatch.Lane{
		tenancy.PlanFree: "free", "plus": "plus", "pro": "pro",
	}, lanes)
	if err != nil {
		return err
	}
	d, err := dispatch.New(idx, dispatch.Config{Lanes: lanes, GlobalBatchLimit: 10, LaneFor: laneFor, ClaimFor: claimFor})
	if err != nil {
		return err
	}
	// The printout below is the log.
	r, err := bridge.NewRunner(b, d, bridge.RunnerConfig{Workers: 4, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}

	fmt.Fprintf(w, "rota plans: %d cycles, %s apart, from %s (simulated)\n", cycles, short(every), start.Format("15:04"))
	fmt.Fprintf(w, "tiers: hot %s, backing off ×2 per miss up to %s; warm %s\n",
		short(cadence.TierHot.Base), short(cadence.TierHot.Max), short(cadence.TierWarm.Base))
	fmt.Fprintf(w, "per item: source, hit or miss×streak, and when it is due again\n\n")

	// Each tenant's watchlist is synced a little before the first cycle: new sources come
	// due spread over their tier's base interval.
	for _, t := range tenants() {
		tc, err := tenancy.NewContext(t.user)
		if err != nil {
			return err
		}
		if err := plans.SetPlan(ctx, tc, t.plan); err != nil {
			return err
		}
		for _, s := range t.sources {
			if err := watchlist.Add(ctx, tc, tenancy.WatchlistEntry{UserID: t.user, Slug: s.slug, Tier: s.tier, AddedAt: start}); err != nil {
				return err
			}
		}
		added, err := b.SyncWatchlist(ctx, tc, start.Add(-every))
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%-5s on %-4s watches %2d sources (sync scheduled %d)\n", t.user, t.plan, len(t.sources), added)
	}
	fmt.Fprintln(w)

	runs, hits, shed := map[string]int{}, map[string]int{}, map[string]int{}
	for i := 1; i <= cycles; i++ {
		switch i {
		case 4: // ana adds a source: syncing again schedules only the new one
			if err := change(ctx, w, b, watchlist, "ana", "careers", true, now); err != nil {
				return err
			}
		case 7: // ben drops one: its due work is unscheduled when it next comes up
			if err := change(ctx, w, b, watchlist, "ben", "podcast", false, now); err != nil {
				return err
			}
		}
		rep, err := r.Cycle(ctx, now)
		if err != nil {
			return err
		}
		printCycle(w, i, rep)
		for _, u := range rep.Shed {
			shed[u]++
		}
		for _, it := range rep.Items {
			runs[it.Item.Claim.Entry.UserID]++
			if it.Status == bridge.StatusHit {
				hits[it.Item.Claim.Entry.UserID]++
			}
		}
		now = now.Add(every)
	}
	fmt.Fprintln(w)
	for _, t := range tenants() {
		fmt.Fprintf(w, "%-5s ran %2d items, %2d of them hits; shed in %2d of %d cycles\n",
			t.user, runs[t.user], hits[t.user], shed[t.user], cycles)
	}
	return nil
}

// change adds or removes a watched source and syncs the tenant's watchlist.
func change(ctx context.Context, w io.Writer, b *bridge.Bridge, wl tenancy.Watchlist, user, slug string, add bool, now time.Time) error {
	tc, err := tenancy.NewContext(user)
	if err != nil {
		return err
	}
	verb := "removes"
	if add {
		verb = "adds"
		err = wl.Add(ctx, tc, tenancy.WatchlistEntry{UserID: user, Slug: slug, Tier: "hot", AddedAt: now})
	} else {
		err = wl.Remove(ctx, tc, slug)
	}
	if err != nil {
		return err
	}
	added, err := b.SyncWatchlist(ctx, tc, now)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s  %s %s %q (sync scheduled %d)\n", now.Format("15:04"), user, verb, slug, added)
	return nil
}

// printCycle prints one cycle: the counts, who was shed, then per lane each user's items
// in dispatch order with how their cadence moved.
func printCycle(w io.Writer, i int, rep bridge.CycleReport) {
	shed := "nobody"
	if len(rep.Shed) > 0 {
		shed = strings.Join(rep.Shed, ", ")
	}
	fmt.Fprintf(w, "%s  cycle %2d: %2d dispatched, %d hits, %2d misses, %d removed; shed: %s\n",
		rep.Now.Format("15:04"), i, rep.Dispatched, rep.Hits, rep.Misses, rep.Removed, shed)
	for _, lane := range rep.Lanes {
		var users []string
		items := map[string][]string{}
		for _, it := range rep.Items {
			if it.Item.Lane != lane.Lane {
				continue
			}
			u := it.Item.Claim.Entry.UserID
			if _, ok := items[u]; !ok {
				users = append(users, u)
			}
			items[u] = append(items[u], describe(it, rep.Now))
		}
		if len(users) == 0 {
			continue
		}
		var parts []string
		for _, u := range users {
			parts = append(parts, u+": "+strings.Join(items[u], ", "))
		}
		fmt.Fprintf(w, "       %-4s %s\n", lane.Lane, strings.Join(parts, "; "))
	}
}

// describe says how one item's cadence moved: "jobs hit +5m", "blog miss×2 +20m".
func describe(it bridge.ItemReport, now time.Time) string {
	slug := it.Item.Claim.Entry.WorkKey
	switch it.Status {
	case bridge.StatusHit:
		return fmt.Sprintf("%s hit +%s", slug, short(it.Next.DueAt.Sub(now)))
	case bridge.StatusMiss:
		return fmt.Sprintf("%s miss×%d +%s", slug, it.Next.MissStreak, short(it.Next.DueAt.Sub(now)))
	default:
		return slug + " " + it.Status.String()
	}
}

// short formats a duration of whole minutes as "5m", "1h" or "1h20m".
func short(d time.Duration) string {
	s := strings.TrimSuffix(d.Round(time.Minute).String(), "0s")
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
