package bridge_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/cadence"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// claimless is an item that was never claimed, for tests that fail before any write.
func claimless(user, slug string) dispatch.Item {
	return dispatch.Item{Claim: duework.Claim{Entry: duework.Entry{UserID: user, WorkKey: slug, Tier: "hot", DueAt: t0}, Token: 1, Until: t0.Add(time.Minute)}}
}

// dueEntry schedules u1's entry slug (tier hot, streak) due at t0 and watches it with
// watchTier.
func (f *fixture) dueEntry(t *testing.T, slug, watchTier string, streak int) duework.Entry {
	t.Helper()
	watch(t, f.wl, "u1", slug, watchTier)
	e := duework.Entry{UserID: "u1", WorkKey: slug, Tier: "hot", DueAt: t0, LastRunAt: t0.Add(-time.Hour), MissStreak: streak}
	schedule(t, f.idx, e)
	return e
}

func TestRunDueItemHitSnapsBack(t *testing.T) {
	f := newFixture()
	f.dueEntry(t, "a", "hot", 3)
	f.pipe.results["a"] = hit
	now := t0.Add(2 * time.Minute)
	res, err := f.b.RunDueItem(context.Background(), claim(t, f.idx, "u1", "a", now), now)
	if err != nil {
		t.Fatal(err)
	}
	if res == nil || !res.FoundNew() {
		t.Fatalf("result = %+v, want the pipeline's hit", res)
	}
	want := duework.Entry{UserID: "u1", WorkKey: "a", Tier: "hot", DueAt: now.Add(cadence.TierHot.Base), LastRunAt: now, MissStreak: 0}
	got := get(t, f.idx, "u1", "a")
	sameAfterRun(t, want, got)
	// The claim ended: the entry is claimable again when it is next due.
	claim(t, f.idx, "u1", "a", got.DueAt)
}

func TestRunDueItemMissBacksOff(t *testing.T) {
	f := newFixture()
	f.dueEntry(t, "a", "hot", 1)
	f.pipe.results["a"] = miss
	now := t0.Add(time.Minute)
	res, err := f.b.RunDueItem(context.Background(), claim(t, f.idx, "u1", "a", now), now)
	if err != nil || res == nil || res.FoundNew() {
		t.Fatalf("RunDueItem = %+v, %v; want the miss", res, err)
	}
	want := duework.Entry{UserID: "u1", WorkKey: "a", Tier: "hot", DueAt: now.Add(cadence.TierHot.NextInterval(2)), LastRunAt: now, MissStreak: 2}
	sameAfterRun(t, want, get(t, f.idx, "u1", "a"))
	if want.DueAt.Sub(now) <= cadence.TierHot.Base {
		t.Fatalf("a miss did not back off beyond the base: %v", want.DueAt.Sub(now))
	}
}

func TestRunDueItemUsesTheWatchlistEntrysOwnTier(t *testing.T) {
	f := newFixture()
	f.dueEntry(t, "a", "cold", 0) // scheduled as hot, now watched as cold
	f.pipe.results["a"] = hit
	if _, err := f.b.RunDueItem(context.Background(), claim(t, f.idx, "u1", "a", t0), t0); err != nil {
		t.Fatal(err)
	}
	got := get(t, f.idx, "u1", "a")
	sameAfterRun(t, duework.Entry{UserID: "u1", WorkKey: "a", Tier: "cold", DueAt: t0.Add(cadence.TierCold.Base), LastRunAt: t0}, got)
	// A host tier works the same way.
	if err := f.b.Tiers.Register("custom", cadence.Backoff{Base: 17 * time.Minute, Max: time.Hour, Factor: 3}); err != nil {
		t.Fatal(err)
	}
	watch(t, f.wl, "u1", "a", "custom")
	f.pipe.results["a"] = miss
	now := got.DueAt
	if _, err := f.b.RunDueItem(context.Background(), claim(t, f.idx, "u1", "a", now), now); err != nil {
		t.Fatal(err)
	}
	sameAfterRun(t, duework.Entry{UserID: "u1", WorkKey: "a", Tier: "custom", DueAt: now.Add(51 * time.Minute), LastRunAt: now, MissStreak: 1}, get(t, f.idx, "u1", "a"))
}

func TestRunDueItemRemovedEntryIsUnscheduled(t *testing.T) {
	f := newFixture()
	f.dueEntry(t, "a", "hot", 0)
	f.dueEntry(t, "b", "hot", 0)
	if err := f.wl.Remove(context.Background(), mustTC(t, "u1"), "a"); err != nil {
		t.Fatal(err)
	}
	res, err := f.b.RunDueItem(context.Background(), claim(t, f.idx, "u1", "a", t0), t0)
	if res != nil || err != nil {
		t.Fatalf("RunDueItem on a removed entry = %v, %v; want nil, nil", res, err)
	}
	if _, err := f.idx.Get(context.Background(), mustTC(t, "u1"), "a"); !errors.Is(err, duework.ErrNotFound) {
		t.Fatalf("removed entry still scheduled: %v", err)
	}
	if f.pipe.ncalls() != 0 {
		t.Fatalf("pipeline ran for a removed entry")
	}
	get(t, f.idx, "u1", "b") // the neighbour is untouched
}

func TestRunDueItemResolvesWithinTheItemsTenant(t *testing.T) {
	f := newFixture()
	// u2 watches "a"; u1 has a due entry "a" but no longer watches it. u1's item must
	// not run u2's source, nor touch u2's due work.
	watch(t, f.wl, "u2", "a", "hot")
	schedule(t, f.idx, duework.Entry{UserID: "u2", WorkKey: "a", Tier: "hot", DueAt: t0})
	schedule(t, f.idx, duework.Entry{UserID: "u1", WorkKey: "a", Tier: "hot", DueAt: t0})
	res, err := f.b.RunDueItem(context.Background(), claim(t, f.idx, "u1", "a", t0), t0)
	if res != nil || err != nil || f.pipe.ncalls() != 0 {
		t.Fatalf("u1's item ran or failed: %v, %v, %d calls", res, err, f.pipe.ncalls())
	}
	get(t, f.idx, "u2", "a")

	f.pipe.results["a"] = hit
	if _, err := f.b.RunDueItem(context.Background(), claim(t, f.idx, "u2", "a", t0), t0); err != nil {
		t.Fatal(err)
	}
	if len(f.pipe.users) != 1 || f.pipe.users[0] != "u2" || f.pipe.calls[0].UserID != "u2" {
		t.Fatalf("pipeline ran as %v with %+v, want u2's own context and entry", f.pipe.users, f.pipe.calls)
	}
}

// TestRunDueItemPipelineErrorBacksOff: a failed run's entry comes due after the Retry
// policy's interval for its ErrorStreak, counted from the run's end, the ErrorStreak one
// more and the MissStreak unchanged.
func TestRunDueItemPipelineErrorBacksOff(t *testing.T) {
	for _, tc := range []struct {
		name        string
		retry       cadence.Policy
		errorStreak int // before the run
		want        time.Duration
	}{
		{"first failure, default retry", nil, 0, bridge.DefaultRetry.Base},
		{"fourth failure, default retry", nil, 3, 8 * time.Minute},
		{"past the default's most", nil, 40, bridge.DefaultRetry.Max},
		{"own retry policy", cadence.Backoff{Base: 7 * time.Minute, Max: time.Hour, Factor: 2}, 2, 28 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture()
			f.b.Retry = tc.retry
			before := f.dueEntry(t, "a", "cold", 4)
			before.ErrorStreak = tc.errorStreak
			schedule(t, f.idx, before)
			f.pipe.errs["a"] = errBoom
			now := t0.Add(time.Minute)
			res, err := f.b.RunDueItem(context.Background(), claim(t, f.idx, "u1", "a", now), now)
			if !errors.Is(err, errBoom) || res != nil {
				t.Fatalf("RunDueItem = %v, %v; want nil and the pipeline's error", res, err)
			}
			if !strings.Contains(err.Error(), `"a"`) || !strings.Contains(err.Error(), `"u1"`) {
				t.Errorf("error %q does not name the entry", err)
			}
			want := before
			want.DueAt, want.LastRunAt, want.ErrorStreak = now.Add(tc.want), now, tc.errorStreak+1
			got := get(t, f.idx, "u1", "a")
			sameAfterRun(t, want, got)
			// The claim ended, so the retry is dispatched when it comes due.
			claim(t, f.idx, "u1", "a", got.DueAt)
		})
	}
}

func TestRunDueItemPipelinePanicIsRetried(t *testing.T) {
	f := newFixture()
	before := f.dueEntry(t, "a", "hot", 2)
	f.pipe.panics["a"] = true
	_, err := f.b.RunDueItem(context.Background(), claim(t, f.idx, "u1", "a", t0), t0)
	if !errors.Is(err, bridge.ErrPipelinePanic) || !strings.Contains(err.Error(), "boom a") {
		t.Fatalf("err = %v, want ErrPipelinePanic with the panic value", err)
	}
	want := before
	want.DueAt, want.LastRunAt, want.ErrorStreak = t0.Add(bridge.DefaultRetry.Base), t0, 1
	sameAfterRun(t, want, get(t, f.idx, "u1", "a"))
}

func TestRunDueItemCancelledPipelineStillRecordsTheRetry(t *testing.T) {
	f := newFixture()
	before := f.dueEntry(t, "a", "hot", 2)
	ctx, cancel := context.WithCancel(context.Background())
	f.b.Pipeline = bridge.PipelineFunc(func(ctx context.Context, tc tenancy.Context, e tenancy.WatchlistEntry) (bridge.Result, error) {
		cancel() // the host shuts down mid-run
		return bridge.Result{}, ctx.Err()
	})
	_, err := f.b.RunDueItem(ctx, claim(t, f.idx, "u1", "a", t0), t0)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	want := before
	want.DueAt, want.LastRunAt, want.ErrorStreak = t0.Add(bridge.DefaultRetry.Base), t0, 1
	sameAfterRun(t, want, get(t, f.idx, "u1", "a"))
}

func TestRunDueItemUnknownTierIsRetriedNotLost(t *testing.T) {
	f := newFixture()
	f.b.Retry = cadence.Backoff{Base: 3 * time.Minute, Max: time.Hour, Factor: 2}
	before := f.dueEntry(t, "a", "nightly", 2)
	f.pipe.results["a"] = hit
	res, err := f.b.RunDueItem(context.Background(), claim(t, f.idx, "u1", "a", t0), t0)
	if !errors.Is(err, cadence.ErrUnknownTier) || res != nil {
		t.Fatalf("RunDueItem = %v, %v; want ErrUnknownTier", res, err)
	}
	if !strings.Contains(err.Error(), "nightly") || !strings.Contains(err.Error(), `"a"`) {
		t.Errorf("error %q does not name the entry and tier", err)
	}
	if f.pipe.ncalls() != 0 {
		t.Errorf("pipeline ran although its result could not be applied")
	}
	want := before
	want.DueAt, want.LastRunAt, want.ErrorStreak = t0.Add(3*time.Minute), t0, 1
	sameAfterRun(t, want, get(t, f.idx, "u1", "a"))
}

func TestRunDueItemLostClaimWritesNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"after a hit", nil},
		{"after a pipeline error", errBoom},
	} {
		t.Run(tc.name, func(t *testing.T) {
			{
				f := newFixture()
				f.dueEntry(t, "a", "hot", 0)
				// The host reschedules the entry while the item runs: its change wins.
				hosts := duework.Entry{UserID: "u1", WorkKey: "a", Tier: "warm", DueAt: t0.Add(42 * time.Hour), MissStreak: 5}
				f.b.Pipeline = bridge.PipelineFunc(func(context.Context, tenancy.Context, tenancy.WatchlistEntry) (bridge.Result, error) {
					schedule(t, f.idx, hosts)
					return hit, tc.err
				})
				_, err := f.b.RunDueItem(context.Background(), claim(t, f.idx, "u1", "a", t0), t0.Add(time.Minute))
				if !errors.Is(err, duework.ErrClaimLost) {
					t.Fatalf("err = %v, want ErrClaimLost", err)
				}
				if tc.err != nil && !errors.Is(err, tc.err) {
					t.Fatalf("err = %v, want the pipeline's error too", err)
				}
				if diff := cmp.Diff(hosts, get(t, f.idx, "u1", "a")); diff != "" {
					t.Fatalf("a lost claim wrote over the host's entry (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// TestRunDueItemRefusesAForgedItem: an item that was never claimed — or whose claim was
// replaced — runs nothing and writes nothing, whether the victim's entry is watched (its
// pipeline would run) or not (its entry would be removed), even when it copies the
// stored entry exactly: the token is checked.
func TestRunDueItemRefusesAForgedItem(t *testing.T) {
	for _, watched := range []bool{true, false} {
		for _, exact := range []bool{true, false} {
			f := newFixture()
			victim := duework.Entry{UserID: "victim", WorkKey: "feed", Tier: "hot", DueAt: t0, MissStreak: 3}
			schedule(t, f.idx, victim)
			if watched {
				watch(t, f.wl, "victim", "feed", "hot")
			}
			forged := victim
			if !exact {
				forged.MissStreak = 0 // what a forger would guess
			}
			item := dispatch.Item{Claim: duework.Claim{Entry: forged, Token: 7, Until: t0.Add(time.Hour)}, Lane: "free"}
			res, err := f.b.RunDueItem(context.Background(), item, t0)
			if res != nil || !errors.Is(err, duework.ErrClaimLost) || f.pipe.ncalls() != 0 {
				t.Fatalf("watched=%v exact=%v: forged item: %v, %v, %d pipeline runs; want ErrClaimLost and nothing run", watched, exact, res, err, f.pipe.ncalls())
			}
			if diff := cmp.Diff(victim, get(t, f.idx, "victim", "feed")); diff != "" {
				t.Fatalf("watched=%v exact=%v: the forged item changed the victim's entry (-want +got):\n%s", watched, exact, diff)
			}
		}
	}
}

// reschedulingWatchlist answers that every entry is gone, after the host rescheduled it in
// the index (which ends the running item's claim).
type reschedulingWatchlist struct {
	tenancy.Watchlist
	t     *testing.T
	idx   duework.Index
	entry duework.Entry
}

func (w reschedulingWatchlist) GetMany(ctx context.Context, lookups []tenancy.Lookup) ([]tenancy.WatchlistEntry, []error, error) {
	schedule(w.t, w.idx, w.entry)
	errs := make([]error, len(lookups))
	for i := range errs {
		errs[i] = tenancy.ErrNotFound
	}
	return make([]tenancy.WatchlistEntry, len(lookups)), errs, nil
}

// TestRunDueItemRemovesOnlyUnderItsClaim: an item whose claim was replaced after it was
// checked does not remove the entry that replaced it.
func TestRunDueItemRemovesOnlyUnderItsClaim(t *testing.T) {
	f := newFixture()
	f.dueEntry(t, "a", "hot", 0)
	hosts := duework.Entry{UserID: "u1", WorkKey: "a", Tier: "warm", DueAt: t0.Add(time.Hour)}
	f.b.Watchlist = reschedulingWatchlist{Watchlist: f.wl, t: t, idx: f.idx, entry: hosts}
	res, err := f.b.RunDueItem(context.Background(), claim(t, f.idx, "u1", "a", t0), t0)
	if res != nil || !errors.Is(err, duework.ErrClaimLost) {
		t.Fatalf("RunDueItem = %v, %v; want ErrClaimLost", res, err)
	}
	if diff := cmp.Diff(hosts, get(t, f.idx, "u1", "a")); diff != "" {
		t.Fatalf("the stale item removed or changed the host's entry (-want +got):\n%s", diff)
	}
}

// readdingIndex plays the host just before the entry of a removed source is unscheduled:
// the source is watched again and the tenant synced. The sync finds the entry still
// scheduled (claimed by the running item) and adds nothing.
type readdingIndex struct {
	duework.Index
	t     *testing.T
	f     *fixture
	added int
}

func (x *readdingIndex) readd(tc tenancy.Context, workKey string) {
	watch(x.t, x.f.wl, tc.UserID(), workKey, "warm")
	n, err := x.f.b.SyncWatchlist(context.Background(), tc, t0)
	if err != nil {
		x.t.Fatal(err)
	}
	x.added += n
}

func (x *readdingIndex) UnscheduleClaimed(ctx context.Context, tc tenancy.Context, c duework.Claim) error {
	x.readd(tc, c.Entry.WorkKey)
	return x.Index.UnscheduleClaimed(ctx, tc, c)
}

// TestRunDueItemRemovedAndReAddedStaysScheduled: a source removed and watched again while
// its item runs ends up scheduled, with its new tier, never watched and unpolled.
func TestRunDueItemRemovedAndReAddedStaysScheduled(t *testing.T) {
	{
		f := newFixture()
		x := &readdingIndex{Index: f.idx, t: t, f: f}
		f.b.Index = x
		f.dueEntry(t, "a", "hot", 0)
		if err := f.wl.Remove(context.Background(), mustTC(t, "u1"), "a"); err != nil {
			t.Fatal(err)
		}
		res, err := f.b.RunDueItem(context.Background(), claim(t, f.idx, "u1", "a", t0), t0)
		if res != nil || err != nil || x.added != 0 {
			t.Fatalf("RunDueItem = %v, %v (the racing sync added %d); want nil, nil and a sync that added nothing", res, err, x.added)
		}
		e, err := f.idx.Get(context.Background(), mustTC(t, "u1"), "a")
		if err != nil {
			t.Fatalf("the re-added source is watched but no longer scheduled: %v", err)
		}
		if e.Tier != "warm" || e.DueAt.Before(t0) || !e.DueAt.Before(t0.Add(cadence.TierWarm.Base)) {
			t.Fatalf("re-added entry %+v, want a new warm entry as a sync makes it", e)
		}
	}
}

func TestRunDueItemRefusesAnInvalidUser(t *testing.T) {
	f := newFixture()
	_, err := f.b.RunDueItem(context.Background(), claimless("", "a"), t0)
	if !errors.Is(err, tenancy.ErrInvalidID) {
		t.Fatalf("err = %v, want ErrInvalidID", err)
	}
}
