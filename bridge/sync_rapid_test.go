package bridge_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/cadence"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
	"pgregory.net/rapid"
)

// TestSyncWatchlistProperties interleaves watchlist changes, syncs and runs at random and
// checks every sync against a simple model: entries that existed are untouched, every
// watched source with a known tier is scheduled, new ones within their tier's base, the
// count is the number of new entries, and an unknown tier is an error exactly when a new
// source has one.
func TestSyncWatchlistProperties(t *testing.T) {
	tiers := []string{"hot", "warm", "cold", "nightly"}
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		idx := duework.NewMemory()
		wl := tenancy.NewMemoryWatchlist()
		reg := cadence.NewRegistry()
		b := &bridge.Bridge{Index: idx, Watchlist: wl, Pipeline: newStub(), Tiers: reg}
		tc, _ := tenancy.NewContext("u1")
		now := t0
		watched := map[string]string{} // slug → tier

		snapshot := func() map[string]duework.Entry {
			due, err := idx.DueBefore(ctx, now.Add(1000*24*time.Hour), 1000)
			if err != nil {
				rt.Fatal(err)
			}
			out := map[string]duework.Entry{}
			for _, e := range due {
				out[e.WorkKey] = e
			}
			return out
		}

		for step := range rapid.IntRange(1, 40).Draw(rt, "steps") {
			now = now.Add(time.Duration(rapid.IntRange(0, 120).Draw(rt, "advance minutes")) * time.Minute)
			slug := fmt.Sprintf("s%d", rapid.IntRange(0, 5).Draw(rt, "slug"))
			switch rapid.IntRange(0, 3).Draw(rt, "op") {
			case 0:
				tier := rapid.SampledFrom(tiers).Draw(rt, "tier")
				if err := wl.Add(ctx, tc, tenancy.WatchlistEntry{UserID: "u1", Slug: slug, Tier: tier}); err != nil {
					rt.Fatal(err)
				}
				watched[slug] = tier
			case 1:
				if _, ok := watched[slug]; ok {
					if err := wl.Remove(ctx, tc, slug); err != nil {
						rt.Fatal(err)
					}
					delete(watched, slug)
				}
			case 2:
				before := snapshot()
				added, err := b.SyncWatchlist(ctx, tc, now)
				after := snapshot()
				wantAdded, wantUnknown := 0, false
				for s, tier := range watched {
					if _, ok := before[s]; ok {
						continue
					}
					if tier == "nightly" {
						wantUnknown = true
						if _, ok := after[s]; ok {
							rt.Fatalf("step %d: %s with an unknown tier was scheduled", step, s)
						}
						continue
					}
					wantAdded++
					e, ok := after[s]
					if !ok {
						rt.Fatalf("step %d: watched %s not scheduled", step, s)
					}
					p, _ := reg.Lookup(tier)
					if e.Tier != tier || e.MissStreak != 0 || e.DueAt.Before(now) || !e.DueAt.Before(now.Add(p.NextInterval(0))) {
						rt.Fatalf("step %d: new entry %+v at %v", step, e, now)
					}
				}
				for s, e := range before {
					if after[s] != e {
						rt.Fatalf("step %d: sync changed %s: %+v → %+v", step, s, e, after[s])
					}
				}
				if len(after) != len(before)+added || added != wantAdded {
					rt.Fatalf("step %d: added %d, want %d; %d → %d entries", step, added, wantAdded, len(before), len(after))
				}
				if got := errors.Is(err, cadence.ErrUnknownTier); got != wantUnknown || (err != nil && !got) {
					rt.Fatalf("step %d: err = %v, want unknown tier: %v", step, err, wantUnknown)
				}
			case 3: // run whatever is due, hit or miss, to move cadences
				b.Pipeline = bridge.PipelineFunc(func(context.Context, tenancy.Context, tenancy.WatchlistEntry) (bridge.Result, error) {
					if rapid.Bool().Draw(rt, "hit") {
						return hit, nil
					}
					return miss, nil
				})
				due, err := idx.DueBefore(ctx, now, 10)
				if err != nil {
					rt.Fatal(err)
				}
				for _, e := range due {
					cs, err := idx.Claim(ctx, []duework.Key{e.Key()}, now, now.Add(time.Minute))
					if err != nil || len(cs) != 1 {
						rt.Fatalf("claim %v: %v", e.Key(), err)
					}
					_, _ = b.RunDueItem(ctx, dispatch.Item{Claim: cs[0]}, now)
				}
			}
		}
	})
}
