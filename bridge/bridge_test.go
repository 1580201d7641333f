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
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

func TestResultFoundNew(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    bridge.Result
		want bool
	}{
		{"no outcomes", bridge.Result{}, false},
		{"all already seen", bridge.Result{Outcomes: []bridge.Outcome{{"a", bridge.StageAlreadySeen}, {"b", bridge.StageAlreadySeen}}}, false},
		{"one scored", bridge.Result{Outcomes: []bridge.Outcome{{"a", bridge.StageAlreadySeen}, {"b", "scored"}}}, true},
		{"filtered counts as new", bridge.Result{Outcomes: []bridge.Outcome{{"a", "filtered"}}}, true},
		{"empty stage counts as new", bridge.Result{Outcomes: []bridge.Outcome{{"a", ""}}}, true},
	} {
		if got := tc.r.FoundNew(); got != tc.want {
			t.Errorf("%s: FoundNew() = %v, want %v", tc.name, got, tc.want)
		}
	}
}

type fixture struct {
	idx  duework.Index
	wl   *tenancy.MemoryWatchlist
	pipe *stubPipeline
	b    *bridge.Bridge
}

func newFixture() *fixture {
	f := &fixture{idx: newIndex(), wl: tenancy.NewMemoryWatchlist(), pipe: newStub()}
	f.b = &bridge.Bridge{Index: f.idx, Watchlist: f.wl, Pipeline: f.pipe, Tiers: cadence.NewRegistry()}
	return f
}

func TestSyncWatchlistSchedulesNewEntriesWithinTheirBase(t *testing.T) {
	f := newFixture()
	tiers := map[string]time.Duration{"a": cadence.TierHot.Base, "b": cadence.TierWarm.Base, "c": cadence.TierCold.Base, "d": cadence.DigestWeekly.Base}
	names := map[string]string{"a": "hot", "b": "warm", "c": "cold", "d": "digest_weekly"}
	for slug, tier := range names {
		watch(t, f.wl, "u1", slug, tier)
	}
	added, err := f.b.SyncWatchlist(context.Background(), mustTC(t, "u1"), t0)
	if err != nil || added != 4 {
		t.Fatalf("SyncWatchlist = %d, %v; want 4, nil", added, err)
	}
	for slug, base := range tiers {
		e := get(t, f.idx, "u1", slug)
		if e.DueAt.Before(t0) || !e.DueAt.Before(t0.Add(base)) {
			t.Errorf("%s: DueAt %v not in [now, now+%v)", slug, e.DueAt, base)
		}
		want := duework.Entry{UserID: "u1", WorkKey: slug, Tier: names[slug], DueAt: e.DueAt}
		if diff := cmp.Diff(want, e); diff != "" {
			t.Errorf("%s: new entry (-want +got):\n%s", slug, diff)
		}
	}
}

func TestSyncWatchlistSpreadsABurst(t *testing.T) {
	f := newFixture()
	const n = 200
	for i := range n {
		watch(t, f.wl, "u1", "src-"+string(rune('a'+i%26))+strings.Repeat("x", i/26), "hot")
	}
	added, err := f.b.SyncWatchlist(context.Background(), mustTC(t, "u1"), t0)
	if err != nil || added != n {
		t.Fatalf("SyncWatchlist = %d, %v; want %d, nil", added, err, n)
	}
	// With the whole base interval as the window, a burst must not land in one instant:
	// count the entries per minute of the five-minute hot base.
	perMinute := map[int64]int{}
	list, _ := f.wl.List(context.Background(), mustTC(t, "u1"))
	for _, we := range list {
		e := get(t, f.idx, "u1", we.Slug)
		perMinute[int64(e.DueAt.Sub(t0)/time.Minute)]++
	}
	if len(perMinute) != 5 {
		t.Fatalf("burst of %d spread over %d of 5 minutes: %v", n, len(perMinute), perMinute)
	}
	for m, c := range perMinute {
		if c > n/2 {
			t.Errorf("minute %d holds %d of %d new entries: not spread", m, c, n)
		}
	}
}

func TestSyncWatchlistIsIdempotent(t *testing.T) {
	f := newFixture()
	ctx := context.Background()
	tc := mustTC(t, "u1")
	watch(t, f.wl, "u1", "a", "hot")
	watch(t, f.wl, "u1", "b", "warm")
	if added, err := f.b.SyncWatchlist(ctx, tc, t0); err != nil || added != 2 {
		t.Fatalf("first sync = %d, %v", added, err)
	}
	snapshot := func() map[string]duework.Entry {
		return map[string]duework.Entry{"a": get(t, f.idx, "u1", "a"), "b": get(t, f.idx, "u1", "b")}
	}
	before := snapshot()
	for _, now := range []time.Time{t0, t0.Add(time.Minute), t0.Add(30 * 24 * time.Hour)} {
		if added, err := f.b.SyncWatchlist(ctx, tc, now); err != nil || added != 0 {
			t.Fatalf("sync again at %v = %d, %v; want 0, nil", now, added, err)
		}
		if diff := cmp.Diff(before, snapshot()); diff != "" {
			t.Fatalf("sync again at %v changed entries (-before +after):\n%s", now, diff)
		}
	}

	// Move a's cadence with a run that misses, and b's with the host's own schedule: sync
	// must leave both exactly as they are.
	f.pipe.results["a"] = miss
	runAt := get(t, f.idx, "u1", "a").DueAt
	if _, err := f.b.RunDueItem(ctx, claim(t, f.idx, "u1", "a", runAt), runAt); err != nil {
		t.Fatal(err)
	}
	schedule(t, f.idx, duework.Entry{UserID: "u1", WorkKey: "b", Tier: "warm", DueAt: t0.Add(99 * time.Hour), MissStreak: 7})
	moved := snapshot()
	if moved["a"].MissStreak != 1 {
		t.Fatalf("a did not back off: %+v", moved["a"])
	}
	if added, err := f.b.SyncWatchlist(ctx, tc, runAt.Add(time.Second)); err != nil || added != 0 {
		t.Fatalf("sync after the cadence moved = %d, %v", added, err)
	}
	if diff := cmp.Diff(moved, snapshot()); diff != "" {
		t.Fatalf("sync reset a moved cadence (-before +after):\n%s", diff)
	}

	// A new watchlist entry is added without touching the others.
	watch(t, f.wl, "u1", "c", "cold")
	if added, err := f.b.SyncWatchlist(ctx, tc, t0); err != nil || added != 1 {
		t.Fatalf("sync after adding c = %d, %v; want 1", added, err)
	}
	after := snapshot()
	if diff := cmp.Diff(moved, after); diff != "" {
		t.Fatalf("adding c changed a or b:\n%s", diff)
	}
}

func TestSyncWatchlistUnknownTierSkipsOnlyThatEntry(t *testing.T) {
	f := newFixture()
	ctx := context.Background()
	tc := mustTC(t, "u1")
	watch(t, f.wl, "u1", "a", "hot")
	watch(t, f.wl, "u1", "b", "nightly")
	watch(t, f.wl, "u1", "c", "warm")
	watch(t, f.wl, "u1", "d", "hourly")
	added, err := f.b.SyncWatchlist(ctx, tc, t0)
	if added != 2 {
		t.Errorf("added = %d, want 2", added)
	}
	if !errors.Is(err, cadence.ErrUnknownTier) {
		t.Fatalf("err = %v, want ErrUnknownTier", err)
	}
	for _, want := range []string{`"b"`, "nightly", `"d"`, "hourly", `"u1"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	get(t, f.idx, "u1", "a")
	get(t, f.idx, "u1", "c")
	if _, err := f.idx.Get(ctx, tc, "b"); !errors.Is(err, duework.ErrNotFound) {
		t.Errorf("b with an unknown tier was scheduled: %v", err)
	}
	// Once the host registers the tiers, syncing again adds what failed.
	if err := f.b.Tiers.Register("nightly", cadence.Backoff{Base: 24 * time.Hour, Max: 48 * time.Hour, Factor: 2}); err != nil {
		t.Fatal(err)
	}
	if err := f.b.Tiers.Register("hourly", cadence.Backoff{Base: time.Hour, Max: time.Hour, Factor: 1}); err != nil {
		t.Fatal(err)
	}
	if added, err := f.b.SyncWatchlist(ctx, tc, t0); err != nil || added != 2 {
		t.Fatalf("sync after registering = %d, %v; want 2, nil", added, err)
	}
}

func TestSyncWatchlistRefusesBadInput(t *testing.T) {
	f := newFixture()
	if _, err := f.b.SyncWatchlist(context.Background(), tenancy.Context{}, t0); !errors.Is(err, tenancy.ErrNoTenant) {
		t.Errorf("zero Context: err = %v, want ErrNoTenant", err)
	}
	for _, tc := range []struct {
		field string
		b     bridge.Bridge
	}{
		{"Index", bridge.Bridge{Watchlist: f.wl, Pipeline: f.pipe}},
		{"Watchlist", bridge.Bridge{Index: f.idx, Pipeline: f.pipe}},
		{"Pipeline", bridge.Bridge{Index: f.idx, Watchlist: f.wl}},
		{"RetryDelay", bridge.Bridge{Index: f.idx, Watchlist: f.wl, Pipeline: f.pipe, RetryDelay: -time.Second}},
	} {
		_, err := tc.b.SyncWatchlist(context.Background(), mustTC(t, "u1"), t0)
		if !errors.Is(err, bridge.ErrInvalidBridge) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("Bridge without %s: SyncWatchlist err = %v, want ErrInvalidBridge naming it", tc.field, err)
		}
		_, err = tc.b.RunDueItem(context.Background(), claimless("u1", "a"), t0)
		if !errors.Is(err, bridge.ErrInvalidBridge) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("Bridge without %s: RunDueItem err = %v, want ErrInvalidBridge naming it", tc.field, err)
		}
	}
}

func TestSyncWatchlistNilTiersUsesPresets(t *testing.T) {
	f := newFixture()
	f.b.Tiers = nil
	watch(t, f.wl, "u1", "a", "cold")
	if added, err := f.b.SyncWatchlist(context.Background(), mustTC(t, "u1"), t0); err != nil || added != 1 {
		t.Fatalf("SyncWatchlist = %d, %v", added, err)
	}
	if e := get(t, f.idx, "u1", "a"); !e.DueAt.Before(t0.Add(cadence.TierCold.Base)) {
		t.Errorf("DueAt %v beyond the cold base", e.DueAt)
	}
}
