package dispatch

import (
	"cmp"
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// The noisy-neighbour benchmark: one cycle with GlobalBatchLimit 10,000 over 10,000 users
// with one due entry each, plus one noisy user whose due backlog is 1,000 or 1,000,000
// entries, older than everyone else's. Every fixture stores the same 1,010,000 entries: the
// small one holds 999,000 not-yet-due entries of a ballast user, so the live heap (and with
// it the garbage collector's work) is alike and only the noisy backlog differs.
const (
	benchUsers    = 10_000
	benchGlobal   = 10_000
	benchStored   = 1_000_000 // noisy backlog + ballast
	benchClaimFor = time.Minute
)

var (
	benchNow   = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	benchLanes = []LaneCapacity{
		{Lane: "pro", PerUserLimit: 2, PerCycleLimit: benchGlobal},
		{Lane: "plus", PerUserLimit: 2, PerCycleLimit: benchGlobal},
		{Lane: "free", PerUserLimit: 2, PerCycleLimit: benchGlobal},
	}
)

// benchFixture returns every stored entry of the fixture with the given noisy backlog, and
// the lane of every user.
func benchFixture(noisy int) ([]duework.Entry, map[string]Lane) {
	all := make([]duework.Entry, 0, benchUsers+benchStored)
	laneOf := make(map[string]Lane, benchUsers+2)
	for u := range benchUsers {
		id := fmt.Sprintf("u%05d", u)
		laneOf[id] = benchLanes[u%len(benchLanes)].Lane
		all = append(all, duework.Entry{UserID: id, WorkKey: "feed", Tier: "hot", DueAt: benchNow.Add(-time.Duration(u) * time.Millisecond)})
	}
	laneOf["noisy"] = "free"
	for i := range noisy {
		all = append(all, duework.Entry{UserID: "noisy", WorkKey: fmt.Sprintf("k%07d", i), Tier: "hot",
			DueAt: benchNow.Add(-1000*time.Hour + time.Duration(i)*time.Millisecond)})
	}
	laneOf["ballast"] = "free"
	for i := range benchStored - noisy {
		all = append(all, duework.Entry{UserID: "ballast", WorkKey: fmt.Sprintf("k%07d", i), Tier: "cold",
			DueAt: benchNow.Add(1000*time.Hour + time.Duration(i)*time.Millisecond)})
	}
	return all, laneOf
}

func benchConfig(laneOf map[string]Lane) Config {
	return Config{
		Lanes:            benchLanes,
		GlobalBatchLimit: benchGlobal,
		LaneFor:          func(_ context.Context, user string) (Lane, error) { return laneOf[user], nil },
		ClaimFor:         benchClaimFor,
	}
}

// BenchmarkDispatchNoisyBacklog compares one cycle with a noisy backlog of 1,000 and of
// 1,000,000 due entries (rule 8: the cost must not follow the backlog), and a baseline that
// works the way the design record's prototype does: look at every stored entry, keep the
// due ones in the ordering contract's order, group them by user and go round by round.
//
// Every Dispatch iteration advances now past the previous claims, so each one dispatches a
// full batch over the same due work; the claims are part of the measured cost.
func BenchmarkDispatchNoisyBacklog(b *testing.B) {
	for _, noisy := range []int{1_000, 1_000_000} {
		// Built once per size; both sub-benchmarks keep it live, so their heaps are alike.
		all, laneOf := benchFixture(noisy)
		b.Run(fmt.Sprintf("backlog=%d/Dispatch", noisy), func(b *testing.B) {
			ctx := context.Background()
			idx := duework.NewMemory()
			tcs := map[string]tenancy.Context{}
			for _, e := range all {
				tc, ok := tcs[e.UserID]
				if !ok {
					tc = tenant(b, e.UserID)
					tcs[e.UserID] = tc
				}
				if err := idx.Schedule(ctx, tc, e); err != nil {
					b.Fatal(err)
				}
			}
			d := mustNew(b, idx, benchConfig(laneOf))
			runtime.GC()
			b.ReportAllocs()
			now, items, shed := benchNow, 0, 0
			for b.Loop() {
				now = now.Add(benchClaimFor + time.Second) // every earlier claim has ended
				batch, err := d.Dispatch(ctx, now)
				if err != nil {
					b.Fatal(err)
				}
				items, shed = len(batch.Items), len(batch.ShedUserIDs)
			}
			if items != benchGlobal {
				b.Fatalf("a cycle dispatched %d items, want %d", items, benchGlobal)
			}
			b.ReportMetric(float64(items), "items/op")
			b.ReportMetric(float64(shed), "shed/op")
		})
		runtime.GC() // drop the index before the baseline runs
		b.Run(fmt.Sprintf("backlog=%d/Baseline", noisy), func(b *testing.B) {
			b.ReportAllocs()
			items := 0
			for b.Loop() {
				items = len(baselineDispatch(all, benchNow, laneOf, benchLanes, benchGlobal))
			}
			if items != benchGlobal {
				b.Fatalf("the baseline dispatched %d items, want %d", items, benchGlobal)
			}
			b.ReportMetric(float64(items), "items/op")
		})
	}
}

// baselineDispatch is the design record's prototype: it scans every stored entry, sorts the
// due ones by (DueAt, UserID, WorkKey), groups them by user in that order, and drains each
// lane round by round under its caps, then applies the global limit in lane order.
func baselineDispatch(all []duework.Entry, now time.Time, laneOf map[string]Lane, lanes []LaneCapacity, global int) []Selected {
	due := make([]duework.Entry, 0, len(all)) // sized once: the baseline pays for no regrowth
	for _, e := range all {
		if !e.DueAt.After(now) {
			due = append(due, e)
		}
	}
	slices.SortFunc(due, func(a, b duework.Entry) int {
		return cmp.Or(a.DueAt.Compare(b.DueAt), cmp.Compare(a.UserID, b.UserID), cmp.Compare(a.WorkKey, b.WorkKey))
	})
	byUser := map[string][]duework.Entry{}
	laneUsers := map[Lane][]string{}
	for _, e := range due {
		if _, seen := byUser[e.UserID]; !seen {
			lane := laneOf[e.UserID]
			laneUsers[lane] = append(laneUsers[lane], e.UserID)
		}
		byUser[e.UserID] = append(byUser[e.UserID], e)
	}
	var out []Selected
	for _, lc := range lanes {
		var order []Selected
		for round := 0; round < lc.PerUserLimit && len(order) < lc.PerCycleLimit; round++ {
			for _, u := range laneUsers[lc.Lane] {
				if len(order) == lc.PerCycleLimit {
					break
				}
				if es := byUser[u]; round < len(es) {
					order = append(order, Selected{Entry: es[round], Lane: lc.Lane})
				}
			}
		}
		out = append(out, order[:min(len(order), global-len(out))]...)
	}
	return out
}
