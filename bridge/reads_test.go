package bridge_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/cadence"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// What the Runner reads per item: its own items need no claim check, and their
// watchlist entries are read in one GetMany per cycle when the Watchlist can.

// scriptedBatch is a MemoryWatchlist whose GetMany is getMany.
type scriptedBatch struct {
	*tenancy.MemoryWatchlist
	getMany func(ctx context.Context, lookups []tenancy.Lookup) ([]tenancy.WatchlistEntry, []error, error)
}

func (w scriptedBatch) GetMany(ctx context.Context, lookups []tenancy.Lookup) ([]tenancy.WatchlistEntry, []error, error) {
	return w.getMany(ctx, lookups)
}

// readsWorld is a world of 30 hot sources of four tenants, all due at t0, each found new
// by the pipeline, whose index counts its calls.
func readsWorld(t *testing.T) (*world, *countingIndex, *stubPipeline) {
	t.Helper()
	idx, pipe := newCountingIndex(), newStub()
	w := newWorld(t, worldConfig{idx: idx, pipe: pipe})
	for i := range 30 {
		k := fmt.Sprintf("s%02d", i)
		w.add(t, fmt.Sprintf("u%d", i%4), tenancy.PlanFree, k, "hot", t0)
		pipe.results[k] = hit
	}
	return w, idx, pipe
}

// wantHits fails unless rep ran every item to a hit, each pipeline run with its own
// tenant's entry.
func wantHits(t *testing.T, rep bridge.CycleReport, err error, pipe *stubPipeline, n int) {
	t.Helper()
	if err != nil || rep.Hits != n {
		t.Fatalf("Cycle = %v, %v; want %d hits", itemLines(rep), err, n)
	}
	pipe.mu.Lock()
	defer pipe.mu.Unlock()
	for i, e := range pipe.calls {
		if e.UserID != pipe.users[i] {
			t.Fatalf("the pipeline ran as %s with %+v", pipe.users[i], e)
		}
	}
}

// TestRunnerReadsACycleInOneGetMany: the Runner's items, claimed by its own dispatcher a
// moment ago, have their watchlist entries read in one GetMany for the cycle, and each
// is started once, as it gets a worker. RunDueItem, a Worker of one item, starts its
// claim and reads its entry with one call each.
func TestRunnerReadsACycleInOneGetMany(t *testing.T) {
	w, idx, pipe := readsWorld(t)
	wl := &countingWatchlist{MemoryWatchlist: w.wl}
	w.b.Watchlist = wl
	r := w.runner(t, bridge.RunnerConfig{Workers: 3, FlushItems: 7})
	rep, err := r.Cycle(context.Background(), t0)
	wantHits(t, rep, err, pipe, 30)
	gets, batches := wl.reads()
	if gets != 0 || !slices.Equal(batches, []int{30}) {
		t.Errorf("the cycle read the watchlist with %d Gets and GetManys of %v, want one GetMany of 30", gets, batches)
	}
	if n, m := idx.n("claims started"), idx.n("Get"); n != 30 || m != 0 {
		t.Errorf("the cycle started %d claims and made %d index Gets, want each of 30 started once and no Get", n, m)
	}
	for i := range 30 {
		if e := get(t, idx.Memory, fmt.Sprintf("u%d", i%4), fmt.Sprintf("s%02d", i)); !e.DueAt.Equal(t0.Add(cadence.TierHot.Base)) {
			t.Fatalf("s%02d not completed: %+v", i, e)
		}
	}

	next := t0.Add(cadence.TierHot.Base)
	starts := idx.n("StartClaims")
	if _, err := w.b.RunDueItem(context.Background(), claim(t, idx, "u0", "s00", next), next); err != nil {
		t.Fatal(err)
	}
	gets, batches = wl.reads()
	if n := idx.n("StartClaims") - starts; n != 1 || gets != 0 || len(batches) != 2 {
		t.Errorf("RunDueItem made %d claim starts, %d Gets and %d more GetManys; want one start and one GetMany", n, gets, len(batches)-1)
	}
}

// TestRunnerStartsACycleInOneCall: the items of a cycle that all find a worker at once
// start their claims in one StartClaims; with fewer workers, those that get one at once
// start together, and the rest as workers free.
func TestRunnerStartsACycleInOneCall(t *testing.T) {
	for _, tc := range []struct {
		workers, most int
	}{{30, 1}, {64, 1}, {10, 21}} {
		t.Run(fmt.Sprintf("workers=%d", tc.workers), func(t *testing.T) {
			w, idx, pipe := readsWorld(t)
			r := w.runner(t, bridge.RunnerConfig{Workers: tc.workers})
			rep, err := r.Cycle(context.Background(), t0)
			wantHits(t, rep, err, pipe, 30)
			if n, m := idx.n("StartClaims"), idx.n("claims started"); n > tc.most || m != 30 {
				t.Errorf("the cycle started %d claims in %d StartClaims; want 30 in at most %d", m, n, tc.most)
			}
		})
	}
}

// TestRunnerReadsNothingForItemsItHandsBack: a cycle whose context has ended hands its
// items back unstarted and reads no watchlist entry for them.
func TestRunnerReadsNothingForItemsItHandsBack(t *testing.T) {
	w, _, pipe := readsWorld(t)
	wl := &countingWatchlist{MemoryWatchlist: w.wl}
	w.b.Watchlist = wl
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rep, _ := w.runner(t, bridge.RunnerConfig{}).Cycle(ctx, t0)
	if rep.Dispatched != 30 || rep.Released != 30 || pipe.ncalls() != 0 {
		t.Fatalf("cycle on an ended context: %d dispatched, %d released, %d run; want all 30 handed back", rep.Dispatched, rep.Released, pipe.ncalls())
	}
	if gets, batches := wl.reads(); gets != 0 || len(batches) != 0 {
		t.Errorf("%d Gets and GetManys of %v for items handed back, want none", gets, batches)
	}
}

// TestRunnerRemovesOnlyUnderItsClaim: a source its cycle's GetMany found gone is
// unscheduled under the item's claim (UnscheduleClaimed), so an entry the host rescheduled
// after the dispatch (ending the claim) is left as the host wrote it.
func TestRunnerRemovesOnlyUnderItsClaim(t *testing.T) {
	{
		idx, pipe := newCountingIndex(), newStub()
		w := newWorld(t, worldConfig{idx: idx, pipe: pipe})
		for _, k := range []string{"gone", "kept", "replaced"} {
			w.add(t, "u1", tenancy.PlanFree, k, "hot", t0)
			pipe.results[k] = hit
		}
		for _, k := range []string{"gone", "replaced"} {
			if err := w.wl.Remove(context.Background(), mustTC(t, "u1"), k); err != nil {
				t.Fatal(err)
			}
		}
		hosts := duework.Entry{UserID: "u1", WorkKey: "replaced", Tier: "warm", DueAt: t0.Add(5 * cadence.TierWarm.Base), MissStreak: 2}
		idx.beforeUnschedule = func(c duework.Claim) {
			if c.Entry.WorkKey == "replaced" {
				schedule(t, idx.Memory, hosts) // the host, after the item started
			}
		}
		wl := &countingWatchlist{MemoryWatchlist: w.wl}
		w.b.Watchlist = wl
		rep, _ := w.runner(t, bridge.RunnerConfig{Workers: 2}).Cycle(context.Background(), t0)
		got := strings.Join(itemLines(rep), " ")
		if want := "free:u1/gone=removed free:u1/kept=hit free:u1/replaced=lost_claim"; got != want {
			t.Fatalf("cycle: %s, want %s", got, want)
		}
		if _, err := idx.Memory.Get(context.Background(), mustTC(t, "u1"), "gone"); err == nil {
			t.Errorf("the gone source is still scheduled")
		}
		if diff := cmp.Diff(hosts, get(t, idx.Memory, "u1", "replaced")); diff != "" {
			t.Errorf("the removal wrote over the host's entry (-want +got):\n%s", diff)
		}
		if _, batches := wl.reads(); len(batches) != 1 {
			t.Errorf("GetManys of %v, want one", batches)
		}
		if idx.n("UnscheduleClaimed") != 2 {
			t.Errorf("%d UnscheduleClaimed, want one per gone source", idx.n("UnscheduleClaimed"))
		}
		if pipe.ncalls() != 1 {
			t.Errorf("%d pipeline runs, want kept's alone", pipe.ncalls())
		}
	}
}

// TestRunnerRetriesEveryItemWhenGetManyFails: a GetMany that fails as a whole is reported
// in one Warn line, and every item of its cycle is retried unrun.
func TestRunnerRetriesEveryItemWhenGetManyFails(t *testing.T) {
	w, _, pipe := readsWorld(t)
	w.b.Watchlist = scriptedBatch{MemoryWatchlist: w.wl, getMany: func(context.Context, []tenancy.Lookup) ([]tenancy.WatchlistEntry, []error, error) {
		return nil, nil, errBoom
	}}
	rep, err := w.runner(t, bridge.RunnerConfig{Workers: 3}).Cycle(context.Background(), t0)
	if !errors.Is(err, errBoom) || rep.Errors != 30 || pipe.ncalls() != 0 {
		t.Fatalf("Cycle = %v, %v with %d runs; want every item failed unrun", itemLines(rep), err, pipe.ncalls())
	}
	for i := range 30 {
		if e := get(t, w.idx, fmt.Sprintf("u%d", i%4), fmt.Sprintf("s%02d", i)); !e.DueAt.Equal(t0.Add(bridge.DefaultRetry.Base)) {
			t.Fatalf("s%02d not retried: %+v", i, e)
		}
	}
	if logs := w.logs.String(); strings.Count(logs, `level=WARN msg="rota: watchlist read failed" items=30 error=boom`) != 1 {
		t.Errorf("want one Warn line for the failed GetMany:\n%s", logs)
	}
}

// TestRunnerNeverRunsAnItemWithAnotherTenantsEntry: a GetMany that answers lookups with
// the wrong entries (here, in reverse order) fails those items, which are retried; no
// pipeline runs with an entry that is not its item's.
func TestRunnerNeverRunsAnItemWithAnotherTenantsEntry(t *testing.T) {
	pipe := newStub()
	w := newWorld(t, worldConfig{pipe: pipe})
	w.add(t, "u1", tenancy.PlanFree, "a", "hot", t0)
	w.add(t, "u2", tenancy.PlanFree, "b", "hot", t0)
	w.b.Watchlist = scriptedBatch{MemoryWatchlist: w.wl, getMany: func(ctx context.Context, lookups []tenancy.Lookup) ([]tenancy.WatchlistEntry, []error, error) {
		es, errs, err := w.wl.GetMany(ctx, lookups)
		slices.Reverse(es)
		return es, errs, err
	}}
	rep, _ := w.runner(t, bridge.RunnerConfig{}).Cycle(context.Background(), t0)
	if rep.Errors != 2 || pipe.ncalls() != 0 {
		t.Fatalf("cycle: %v with %d pipeline runs, want both items failed and none run", itemLines(rep), pipe.ncalls())
	}
	for _, it := range rep.Items {
		if !strings.Contains(fmt.Sprint(it.Err), "GetMany answered") {
			t.Errorf("item error %v does not say the read answered wrongly", it.Err)
		}
	}
	for _, k := range []duework.Key{{UserID: "u1", WorkKey: "a"}, {UserID: "u2", WorkKey: "b"}} {
		if e := get(t, w.idx, k.UserID, k.WorkKey); !e.DueAt.Equal(t0.Add(bridge.DefaultRetry.Base)) {
			t.Errorf("%v not retried: %+v", k, e)
		}
	}
}

// TestRunnerSeesARemovalAfterItsReadAtTheNextDispatch: a source removed after its
// cycle's GetMany read it still runs once with the entry read; the next dispatch of it
// finds it gone and unschedules it.
func TestRunnerSeesARemovalAfterItsReadAtTheNextDispatch(t *testing.T) {
	pipe := newStub()
	pipe.results["a"] = hit
	w := newWorld(t, worldConfig{pipe: pipe})
	w.add(t, "u1", tenancy.PlanFree, "a", "hot", t0)
	w.b.Watchlist = scriptedBatch{MemoryWatchlist: w.wl, getMany: func(ctx context.Context, lookups []tenancy.Lookup) ([]tenancy.WatchlistEntry, []error, error) {
		es, errs, err := w.wl.GetMany(ctx, lookups)
		for _, l := range lookups {
			_ = w.wl.Remove(ctx, l.Tenant, l.Slug) // the tenant removes it right after the read
		}
		return es, errs, err
	}}
	r := w.runner(t, bridge.RunnerConfig{})
	rep, err := r.Cycle(context.Background(), t0)
	if err != nil || rep.Hits != 1 {
		t.Fatalf("first cycle: %v, %v; want the item run with the entry it read", itemLines(rep), err)
	}
	next := t0.Add(cadence.TierHot.Base)
	rep, err = r.Cycle(context.Background(), next)
	if err != nil || rep.Removed != 1 || pipe.ncalls() != 1 {
		t.Fatalf("next cycle: %v, %v, %d pipeline runs; want the source removed, run once in all", itemLines(rep), err, pipe.ncalls())
	}
	if _, err := w.idx.Get(context.Background(), mustTC(t, "u1"), "a"); err == nil {
		t.Fatal("the removed source is still scheduled")
	}
}
