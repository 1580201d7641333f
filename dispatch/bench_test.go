package dispatch

import (
	"cmp"
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rotaworks/rota/duework"
)

var benchNow = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// benchIndex is a duework.Memory holding users users, each with perUser entries due one
// second apart from an hour before benchNow (user i's first at i nanoseconds past that, so
// turns differ), all routed to lane. It also returns the user IDs.
func benchIndex(b *testing.B, users, perUser int, lane Lane) (*duework.Memory, []string) {
	b.Helper()
	ctx := context.Background()
	idx := duework.NewMemory()
	ids := make([]string, users)
	keys := make([]string, perUser)
	for k := range keys {
		keys[k] = fmt.Sprintf("feed-%d", k)
	}
	entries := make([]duework.Entry, perUser)
	for u := range ids {
		ids[u] = fmt.Sprintf("u%07d", u)
		first := benchNow.Add(-time.Hour + time.Duration(u))
		for k := range entries {
			entries[k] = duework.Entry{UserID: ids[u], WorkKey: keys[k], Tier: "hot", DueAt: first.Add(time.Duration(k) * time.Second)}
		}
		if _, err := idx.ScheduleMissing(ctx, tenant(b, ids[u]), entries); err != nil {
			b.Fatal(err)
		}
	}
	routes := make([]duework.Route, users)
	for u, id := range ids {
		routes[u] = duework.Route{UserID: id, Group: string(lane)}
	}
	if err := idx.Route(ctx, routes); err != nil {
		b.Fatal(err)
	}
	return idx, ids
}

// perItem reports allocations and bytes per dispatched item over the loop that made items,
// from memory statistics read before (by startAllocs) and after it.
type perItem struct{ before runtime.MemStats }

func startAllocs() *perItem {
	p := &perItem{}
	runtime.ReadMemStats(&p.before)
	return p
}

func (p *perItem) report(b *testing.B, items int) {
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if items > 0 {
		b.ReportMetric(float64(after.Mallocs-p.before.Mallocs)/float64(items), "allocs/item")
		b.ReportMetric(float64(after.TotalAlloc-p.before.TotalAlloc)/float64(items), "B/item")
	}
}

// BenchmarkDispatchReadyUsers is one cycle of 1,000 items in one lane, every user with three
// due entries, with 1,000 and with 1,000,000 users ready: the cost must follow the batch,
// not the users. Both indexes are built before either is measured and stay live
// throughout, so both sides run on the same heap. A claim lasts one step of now, so every
// user stays ready: with 1,000 users each cycle serves all of them, with 1,000,000 the
// next 1,000 in turn order, the ones served going to the back.
func BenchmarkDispatchReadyUsers(b *testing.B) {
	const batch, step = 1_000, time.Minute
	sizes := []struct {
		name  string
		users int
	}{{"users=1e3", 1_000}, {"users=1e6", 1_000_000}}
	idxs := make([]*duework.Memory, len(sizes))
	nows := make([]time.Time, len(sizes)) // -count runs a sub-benchmark again on its index
	for i, s := range sizes {
		idxs[i], _ = benchIndex(b, s.users, 3, "free")
		nows[i] = benchNow
	}
	for i, s := range sizes {
		b.Run(s.name, func(b *testing.B) {
			cfg := oneLaneConfig(1, batch, batch)
			cfg.ClaimFor = step // every claim has ended by the next cycle
			d := mustNew(b, idxs[i], cfg)
			now, items := &nows[i], 0
			runtime.GC()
			b.ReportAllocs()
			allocs := startAllocs()
			for b.Loop() {
				*now = now.Add(step)
				bt, err := d.Dispatch(context.Background(), *now)
				if err != nil {
					b.Fatal(err)
				}
				items += len(bt.Items)
			}
			allocs.report(b, items)
			if items != b.N*batch {
				b.Fatalf("%d cycles dispatched %d items, want %d each", b.N, items, batch)
			}
			b.ReportMetric(float64(items)/float64(b.N), "items/op")
		})
	}
	runtime.KeepAlive(idxs)
}

// The noisy-neighbour benchmark: one cycle with GlobalBatchLimit 10,000 over 10,000 users
// with one due entry each in three lanes, plus one noisy user whose due backlog is 1,000 or
// 1,000,000 entries, older than everyone else's. Both fixtures store the same 1,010,000
// entries (the small one holds 999,000 not-yet-due entries of a ballast user), are built
// before either is measured and stay live throughout, so only the noisy backlog differs.
const (
	noisyUsers    = 10_000
	noisyGlobal   = 10_000
	noisyStored   = 1_000_000 // noisy backlog + ballast
	noisyClaimFor = time.Minute
)

var noisyLanes = []LaneCapacity{
	{Lane: "pro", PerUserLimit: 2, PerCycleLimit: noisyGlobal},
	{Lane: "plus", PerUserLimit: 2, PerCycleLimit: noisyGlobal},
	{Lane: "free", PerUserLimit: 2, PerCycleLimit: noisyGlobal},
}

// noisyFixture returns every stored entry of the fixture with the given noisy backlog, and
// the lane of every user.
func noisyFixture(noisy int) ([]duework.Entry, map[string]Lane) {
	all := make([]duework.Entry, 0, noisyUsers+noisyStored)
	laneOf := make(map[string]Lane, noisyUsers+2)
	for u := range noisyUsers {
		id := fmt.Sprintf("u%05d", u)
		laneOf[id] = noisyLanes[u%len(noisyLanes)].Lane
		all = append(all, duework.Entry{UserID: id, WorkKey: "feed", Tier: "hot", DueAt: benchNow.Add(-time.Duration(u) * time.Millisecond)})
	}
	laneOf["noisy"] = "free"
	for i := range noisy {
		all = append(all, duework.Entry{UserID: "noisy", WorkKey: fmt.Sprintf("k%07d", i), Tier: "hot",
			DueAt: benchNow.Add(-1000*time.Hour + time.Duration(i)*time.Millisecond)})
	}
	laneOf["ballast"] = "free"
	for i := range noisyStored - noisy {
		all = append(all, duework.Entry{UserID: "ballast", WorkKey: fmt.Sprintf("k%07d", i), Tier: "cold",
			DueAt: benchNow.Add(1000*time.Hour + time.Duration(i)*time.Millisecond)})
	}
	return all, laneOf
}

// loadNoisy stores all in a new Memory and routes every user to its lane.
func loadNoisy(b *testing.B, all []duework.Entry, laneOf map[string]Lane) *duework.Memory {
	ctx := context.Background()
	idx := duework.NewMemory()
	for start := 0; start < len(all); {
		end := start
		for end < len(all) && all[end].UserID == all[start].UserID {
			end++
		}
		if _, err := idx.ScheduleMissing(ctx, tenant(b, all[start].UserID), all[start:end]); err != nil {
			b.Fatal(err)
		}
		start = end
	}
	routes := make([]duework.Route, 0, len(laneOf))
	for u, lane := range laneOf {
		routes = append(routes, duework.Route{UserID: u, Group: string(lane)})
	}
	if err := idx.Route(ctx, routes); err != nil {
		b.Fatal(err)
	}
	return idx
}

// BenchmarkDispatchNoisyBacklog compares one cycle with a noisy backlog of 1,000 and of
// 1,000,000 due entries (the cost must not follow the backlog), and a baseline that
// dispatches by scanning: look at every stored entry, keep the due ones in the ordering
// contract's order, group them by user and go round by round.
//
// Every Dispatch iteration advances now past the previous claims, so each one dispatches a
// full batch over the same due work; the claims are part of the measured cost.
func BenchmarkDispatchNoisyBacklog(b *testing.B) {
	type fixture struct {
		noisy  int
		all    []duework.Entry
		laneOf map[string]Lane
		idx    *duework.Memory
		now    time.Time // the last cycle's: -count runs a sub-benchmark again on its index
	}
	fixtures := []*fixture{{noisy: 1_000, now: benchNow}, {noisy: 1_000_000, now: benchNow}}
	for _, f := range fixtures {
		f.all, f.laneOf = noisyFixture(f.noisy)
		f.idx = loadNoisy(b, f.all, f.laneOf)
	}
	for _, f := range fixtures {
		b.Run(fmt.Sprintf("backlog=%d/Dispatch", f.noisy), func(b *testing.B) {
			d := mustNew(b, f.idx, Config{Lanes: noisyLanes, GlobalBatchLimit: noisyGlobal, LaneFor: laneMap(f.laneOf), ClaimFor: noisyClaimFor})
			items, shed := 0, 0
			runtime.GC()
			b.ReportAllocs()
			allocs := startAllocs()
			for b.Loop() {
				f.now = f.now.Add(noisyClaimFor + time.Second) // every earlier claim has ended
				batch, err := d.Dispatch(context.Background(), f.now)
				if err != nil {
					b.Fatal(err)
				}
				if len(batch.Items) != noisyGlobal {
					b.Fatalf("a cycle dispatched %d items, want %d", len(batch.Items), noisyGlobal)
				}
				items, shed = items+len(batch.Items), len(batch.ShedUserIDs)
			}
			allocs.report(b, items)
			b.ReportMetric(float64(items)/float64(b.N), "items/op")
			b.ReportMetric(float64(shed), "shed/op")
		})
		b.Run(fmt.Sprintf("backlog=%d/Baseline", f.noisy), func(b *testing.B) {
			runtime.GC()
			b.ReportAllocs()
			items := 0
			for b.Loop() {
				items = len(baselineDispatch(f.all, benchNow, f.laneOf, noisyLanes, noisyGlobal))
			}
			if items != noisyGlobal {
				b.Fatalf("the baseline dispatched %d items, want %d", items, noisyGlobal)
			}
			b.ReportMetric(float64(items), "items/op")
		})
	}
	runtime.KeepAlive(fixtures)
}

// baselineDispatch dispatches by scanning: it reads every stored entry, sorts the
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

// BenchmarkDispatchers runs 1, 2 and 4 Dispatchers over one Memory, each cycling at the
// same instants from its own goroutine: one op is one round, every dispatcher's cycle of up
// to 1,000 items at one now. It reports the items all of them dispatched per round and the
// claims they lost to each other. 100,000 users with three due entries each stay ready (a
// claim lasts one round), so every dispatcher has a full batch to read.
func BenchmarkDispatchers(b *testing.B) {
	const batch, users, step = 1_000, 100_000, time.Minute
	idx, _ := benchIndex(b, users, 3, "free")
	now := benchNow
	for _, k := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("dispatchers=%d", k), func(b *testing.B) {
			cfg := oneLaneConfig(1, batch, batch)
			cfg.ClaimFor = step
			ds := make([]*Dispatcher, k)
			for i := range ds {
				ds[i] = mustNew(b, idx, cfg)
			}
			items, lost := 0, 0
			batches := make([]Batch, k)
			runtime.GC()
			b.ReportAllocs()
			allocs := startAllocs()
			for b.Loop() {
				now = now.Add(step)
				var start, done sync.WaitGroup
				start.Add(1)
				for i, d := range ds {
					done.Go(func() {
						start.Wait()
						var err error
						if batches[i], err = d.Dispatch(context.Background(), now); err != nil {
							b.Error(err)
						}
					})
				}
				start.Done()
				done.Wait()
				for _, bt := range batches {
					items += len(bt.Items)
					lost += bt.Lanes[0].LostClaims
				}
			}
			allocs.report(b, items)
			b.ReportMetric(float64(items)/float64(b.N), "items/round")
			b.ReportMetric(float64(lost)/float64(b.N), "lost/op")
		})
	}
}
