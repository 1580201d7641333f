package bridge_test

import (
	"context"
	"errors"
	"fmt"
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
		{"Bridge.Index", bridge.Bridge{Watchlist: f.wl, Pipeline: f.pipe}},
		{"Bridge.Watchlist", bridge.Bridge{Index: f.idx, Pipeline: f.pipe}},
		{"Bridge.Retry", bridge.Bridge{Index: f.idx, Watchlist: f.wl, Pipeline: f.pipe, Retry: cadence.Backoff{Base: -time.Second}}},
	} {
		_, err := tc.b.SyncWatchlist(context.Background(), mustTC(t, "u1"), t0)
		if !errors.Is(err, bridge.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("Bridge without %s: SyncWatchlist err = %v, want ErrInvalidConfig naming it", tc.field, err)
		}
		_, err = tc.b.RunDueItem(context.Background(), claimless("u1", "a"), t0)
		if !errors.Is(err, bridge.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("Bridge without %s: RunDueItem err = %v, want ErrInvalidConfig naming it", tc.field, err)
		}
	}
	noPipe := bridge.Bridge{Index: f.idx, Watchlist: f.wl}
	if _, err := noPipe.RunDueItem(context.Background(), claimless("u1", "a"), t0); !errors.Is(err, bridge.ErrInvalidConfig) || !strings.Contains(err.Error(), "Bridge.Pipeline") {
		t.Errorf("RunDueItem without a Pipeline: err = %v, want ErrInvalidConfig naming Bridge.Pipeline", err)
	}
}

func TestSyncWatchlistNeedsNoPipeline(t *testing.T) {
	f := newFixture()
	b := &bridge.Bridge{Index: f.idx, Watchlist: f.wl}
	watch(t, f.wl, "u1", "a", "hot")
	if added, err := b.SyncWatchlist(context.Background(), mustTC(t, "u1"), t0); err != nil || added != 1 {
		t.Fatalf("SyncWatchlist without a Pipeline = %d, %v; want 1, nil", added, err)
	}
	get(t, f.idx, "u1", "a")
}

// TestSyncWatchlistIsOneScheduleMissing: a sync is one ScheduleMissing per tenant and no
// per-entry read or write.
func TestSyncWatchlistIsOneScheduleMissing(t *testing.T) {
	idx := newCountingIndex()
	wl := tenancy.NewMemoryWatchlist()
	b := &bridge.Bridge{Index: idx, Watchlist: wl}
	for i := range 50 {
		watch(t, wl, "u1", fmt.Sprintf("s%02d", i), "hot")
	}
	schedule(t, idx.Memory, duework.Entry{UserID: "u1", WorkKey: "s07", Tier: "hot", DueAt: t0.Add(time.Hour)})
	added, err := b.SyncWatchlist(context.Background(), mustTC(t, "u1"), t0)
	if err != nil || added != 49 {
		t.Fatalf("SyncWatchlist = %d, %v; want 49", added, err)
	}
	if got := [...]int{idx.n("ScheduleMissing"), idx.n("Get"), idx.n("Schedule")}; got != [...]int{1, 0, 0} {
		t.Fatalf("calls [ScheduleMissing Get Schedule] = %v, want one ScheduleMissing", got)
	}
}

// racingIndex runs a concurrent sync and dispatch of "a" just before its ScheduleMissing:
// the entry appears, and is claimed, between the sync's list and its write.
type racingIndex struct {
	*duework.Memory
	claim duework.Claim
}

func (x *racingIndex) ScheduleMissing(ctx context.Context, tc tenancy.Context, es []duework.Entry) (int, error) {
	if x.claim.Token == 0 {
		e := duework.Entry{UserID: tc.UserID(), WorkKey: "a", Tier: "hot", DueAt: t0}
		if err := x.Memory.Schedule(ctx, tc, e); err != nil {
			return 0, err
		}
		cs, err := x.Memory.Claim(ctx, []duework.Key{e.Key()}, t0, t0.Add(time.Minute))
		if err != nil || len(cs) != 1 {
			return 0, fmt.Errorf("claim: %v", err)
		}
		x.claim = cs[0]
	}
	return x.Memory.ScheduleMissing(ctx, tc, es)
}

func TestSyncWatchlistNeverReplacesAnEntryThatAppearsMeanwhile(t *testing.T) {
	idx := &racingIndex{Memory: duework.NewMemory()}
	wl := tenancy.NewMemoryWatchlist()
	b := &bridge.Bridge{Index: idx, Watchlist: wl}
	watch(t, wl, "u1", "a", "hot")
	watch(t, wl, "u1", "b", "hot")
	tc := mustTC(t, "u1")
	added, err := b.SyncWatchlist(context.Background(), tc, t0)
	if err != nil || added != 1 {
		t.Fatalf("SyncWatchlist = %d, %v; want 1 (b), nil", added, err)
	}
	// The claim taken meanwhile still holds: its run completes.
	next := idx.claim.Entry
	next.DueAt = t0.Add(time.Hour)
	if err := idx.Memory.Complete(context.Background(), tc, idx.claim, next); err != nil {
		t.Fatalf("the sync ended a claim it raced with: %v", err)
	}
}

// invalidBatchIndex refuses a ScheduleMissing holding the entry "bad" as a whole, as the
// contract says an Index does with invalid input.
type invalidBatchIndex struct{ *duework.Memory }

func (x invalidBatchIndex) ScheduleMissing(ctx context.Context, tc tenancy.Context, es []duework.Entry) (int, error) {
	for _, e := range es {
		if e.WorkKey == "bad" {
			return 0, fmt.Errorf("%w: entry %q", duework.ErrInvalid, e.WorkKey)
		}
	}
	return x.Memory.ScheduleMissing(ctx, tc, es)
}

func TestSyncWatchlistSyncsAroundAnInvalidEntry(t *testing.T) {
	idx := invalidBatchIndex{duework.NewMemory()}
	wl := tenancy.NewMemoryWatchlist()
	b := &bridge.Bridge{Index: idx, Watchlist: wl}
	for _, s := range []string{"a", "bad", "c"} {
		watch(t, wl, "u1", s, "hot")
	}
	added, err := b.SyncWatchlist(context.Background(), mustTC(t, "u1"), t0)
	if added != 2 || !errors.Is(err, duework.ErrInvalid) || !strings.Contains(err.Error(), `"bad"`) {
		t.Fatalf("SyncWatchlist = %d, %v; want a and c added and the error naming bad", added, err)
	}
	get(t, idx.Memory, "u1", "a")
	get(t, idx.Memory, "u1", "c")
}

// TestSyncAllSyncsAroundATenantsError: a tenant whose sync fails does not stop the
// others; its error is returned, joined, and an ended ctx stops the sync.
func TestSyncAllSyncsAroundATenantsError(t *testing.T) {
	f := newFixture()
	f.b.Pipeline = nil
	watch(t, f.wl, "ann", "a1", "hot")
	watch(t, f.wl, "ann", "a2", "warm")
	watch(t, f.wl, "bob", "b1", "nightly") // an unknown tier
	watch(t, f.wl, "cat", "c1", "cold")
	added, err := f.b.SyncAll(context.Background(), t0)
	if added != 3 || !errors.Is(err, cadence.ErrUnknownTier) || !strings.Contains(err.Error(), `"bob"`) {
		t.Fatalf("SyncAll = %d, %v; want 3 added and bob's error", added, err)
	}
	for _, k := range []duework.Key{{UserID: "ann", WorkKey: "a1"}, {UserID: "ann", WorkKey: "a2"}, {UserID: "cat", WorkKey: "c1"}} {
		get(t, f.idx, k.UserID, k.WorkKey)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if added, err := f.b.SyncAll(ctx, t0); added != 0 || !errors.Is(err, context.Canceled) {
		t.Fatalf("SyncAll with an ended ctx = %d, %v; want 0 and ctx's error", added, err)
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
