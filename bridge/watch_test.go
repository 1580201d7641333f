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
	"github.com/rotaworks/rota/internal/vocab"
	"github.com/rotaworks/rota/tenancy"
)

// TestWatchAddsAndSchedulesInOneStep: Watch writes the watchlist entries with one AddMany
// and their due work with one ScheduleMissing, leaving what is already scheduled as it is.
func TestWatchAddsAndSchedulesInOneStep(t *testing.T) {
	idx := newCountingIndex()
	wl := &addCounting{MemoryWatchlist: tenancy.NewMemoryWatchlist()}
	b := &bridge.Bridge{Index: idx, Watchlist: wl}
	tc := mustTC(t, "u1")
	kept := duework.Entry{UserID: "u1", WorkKey: "old", Tier: "hot", DueAt: t0.Add(9 * time.Hour), MissStreak: 4}
	schedule(t, idx.Memory, kept)
	added, err := b.Watch(context.Background(), tc, []tenancy.WatchlistEntry{
		{UserID: "u1", Slug: "a", Tier: "hot"},
		{UserID: "u1", Slug: "b", Tier: "hot", AddedAt: t0.Add(-time.Hour)},
		{UserID: "u1", Slug: "old", Tier: "warm"},
		{UserID: "u1", Slug: "a", Tier: "cold"}, // given twice: the last wins
	}, t0)
	if err != nil || added != 2 {
		t.Fatalf("Watch = %d, %v; want a and b added", added, err)
	}
	if wl.adds != 1 || idx.n("ScheduleMissing") != 1 || idx.n("Schedule") != 0 {
		t.Errorf("%d AddManys, %d ScheduleMissings and %d Schedules, want one of the first two", wl.adds, idx.n("ScheduleMissing"), idx.n("Schedule"))
	}
	list, _ := wl.List(context.Background(), tc)
	want := []tenancy.WatchlistEntry{
		{UserID: "u1", Slug: "a", Tier: "cold", AddedAt: t0},
		{UserID: "u1", Slug: "b", Tier: "hot", AddedAt: t0.Add(-time.Hour)},
		{UserID: "u1", Slug: "old", Tier: "warm", AddedAt: t0},
	}
	if diff := cmp.Diff(want, list); diff != "" {
		t.Errorf("watchlist (-want +got):\n%s", diff)
	}
	if e := get(t, idx.Memory, "u1", "a"); e.Tier != "cold" || e.DueAt.Before(t0) || !e.DueAt.Before(t0.Add(cadence.TierCold.Base)) {
		t.Errorf("a scheduled as %+v, want a cold entry due within its base", e)
	}
	if e := get(t, idx.Memory, "u1", "old"); e != kept {
		t.Errorf("Watch changed an entry already scheduled: %+v, want %+v", e, kept)
	}
}

// TestWatchRefusesAtOnce: an unknown tier, an entry the watchlist refuses or a now out of
// range writes nothing, and the error names every bad entry.
func TestWatchRefusesAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries []tenancy.WatchlistEntry
		now     time.Time
		is      error
		says    []string
	}{
		{"unknown tiers", []tenancy.WatchlistEntry{{UserID: "u1", Slug: "a", Tier: "hot"}, {UserID: "u1", Slug: "b", Tier: "nightly"}, {UserID: "u1", Slug: "c", Tier: "hourly"}},
			t0, cadence.ErrUnknownTier, []string{`"b"`, "nightly", `"c"`, "hourly"}},
		{"another tenant's entry", []tenancy.WatchlistEntry{{UserID: "u1", Slug: "a", Tier: "hot"}, {UserID: "u2", Slug: "b", Tier: "hot"}},
			t0, tenancy.ErrForbidden, []string{"entries[1]"}},
		{"bad slug", []tenancy.WatchlistEntry{{UserID: "u1", Slug: " a", Tier: "hot"}}, t0, tenancy.ErrInvalidID, []string{"entries[0]"}},
		{"now beyond 9999", []tenancy.WatchlistEntry{{UserID: "u1", Slug: "a", Tier: "hot"}}, vocab.MaxTime, duework.ErrInvalid, []string{`"a"`}},
	} {
		idx := duework.NewMemory()
		wl := tenancy.NewMemoryWatchlist()
		b := &bridge.Bridge{Index: idx, Watchlist: wl}
		added, err := b.Watch(context.Background(), mustTC(t, "u1"), tc.entries, tc.now)
		if added != 0 || !errors.Is(err, tc.is) {
			t.Errorf("%s: Watch = %d, %v; want %v", tc.name, added, err, tc.is)
			continue
		}
		for _, s := range tc.says {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: error %q does not name %s", tc.name, err, s)
			}
		}
		if list, _ := wl.List(context.Background(), mustTC(t, "u1")); len(list) != 0 {
			t.Errorf("%s: the watchlist holds %v", tc.name, list)
		}
		if due, _ := idx.DueBefore(context.Background(), vocab.MaxTime, 10); len(due) != 0 {
			t.Errorf("%s: the index holds %v", tc.name, due)
		}
	}
	b := &bridge.Bridge{Index: duework.NewMemory(), Watchlist: tenancy.NewMemoryWatchlist()}
	if _, err := b.Watch(context.Background(), tenancy.Context{}, nil, t0); !errors.Is(err, tenancy.ErrNoTenant) {
		t.Errorf("zero Context: %v, want ErrNoTenant", err)
	}
}

// TestWatchWhoseScheduleFailsIsSyncedLater: a ScheduleMissing that fails after the
// watchlist was written says so, and the next SyncWatchlist schedules the entries.
func TestWatchWhoseScheduleFailsIsSyncedLater(t *testing.T) {
	fi := newFaulty()
	fi.at = fault{n: 1, method: "ScheduleMissing"}
	wl := tenancy.NewMemoryWatchlist()
	b := &bridge.Bridge{Index: fi, Watchlist: wl}
	tc := mustTC(t, "u1")
	_, err := b.Watch(context.Background(), tc, []tenancy.WatchlistEntry{{UserID: "u1", Slug: "a", Tier: "hot"}}, t0)
	if len(injectedIn(err)) != 1 || !strings.Contains(err.Error(), "SyncWatchlist schedules them") {
		t.Fatalf("Watch = %v, want the injected failure and what to do", err)
	}
	if added, err := b.SyncWatchlist(context.Background(), tc, t0); err != nil || added != 1 {
		t.Fatalf("SyncWatchlist = %d, %v; want a scheduled", added, err)
	}
}

// addCounting counts a MemoryWatchlist's AddMany calls, and can list tenants wrongly.
type addCounting struct {
	*tenancy.MemoryWatchlist
	adds    int
	pages   int
	tenants func(after string, limit int) ([]string, error)
}

func (w *addCounting) AddMany(ctx context.Context, tc tenancy.Context, es []tenancy.WatchlistEntry) error {
	w.adds++
	return w.MemoryWatchlist.AddMany(ctx, tc, es)
}

func (w *addCounting) Tenants(ctx context.Context, after string, limit int) ([]string, error) {
	w.pages++
	if w.tenants != nil {
		return w.tenants(after, limit)
	}
	return w.MemoryWatchlist.Tenants(ctx, after, limit)
}

// TestSyncAllSyncsEveryTenantOfTheWatchlist: SyncAll pages through Watchlist.Tenants and
// syncs each tenant it lists, whatever the number.
func TestSyncAllSyncsEveryTenantOfTheWatchlist(t *testing.T) {
	idx := duework.NewMemory()
	wl := &addCounting{MemoryWatchlist: tenancy.NewMemoryWatchlist()}
	b := &bridge.Bridge{Index: idx, Watchlist: wl}
	const tenants = 2500
	for u := range tenants {
		user := fmt.Sprintf("t%05d", u)
		tier := "hot"
		if u == 1234 {
			tier = "nightly" // an unknown tier: that entry fails, the rest syncs
		}
		watch(t, wl.MemoryWatchlist, user, "feed", tier)
	}
	schedule(t, idx, duework.Entry{UserID: "t00007", WorkKey: "feed", Tier: "hot", DueAt: t0.Add(time.Hour)})
	added, err := b.SyncAll(context.Background(), t0)
	if added != tenants-2 || !errors.Is(err, cadence.ErrUnknownTier) || !strings.Contains(err.Error(), `"t01234"`) {
		t.Fatalf("SyncAll = %d, %v; want every tenant's feed but t00007's and t01234's added, and t01234's error", added, err)
	}
	if wl.pages != 3 {
		t.Errorf("%d Tenants calls for %d tenants, want 3 pages", wl.pages, tenants)
	}
	get(t, idx, "t02499", "feed")
	if e := get(t, idx, "t00007", "feed"); !e.DueAt.Equal(t0.Add(time.Hour)) {
		t.Errorf("SyncAll reset a scheduled entry: %+v", e)
	}

	wl.tenants = func(string, int) ([]string, error) { return nil, errBoom }
	if _, err := b.SyncAll(context.Background(), t0); !errors.Is(err, errBoom) {
		t.Errorf("a failing Tenants: %v, want its error", err)
	}
	wl.tenants = nil
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if added, err := b.SyncAll(ctx, t0); added != 0 || !errors.Is(err, context.Canceled) {
		t.Errorf("SyncAll on an ended ctx = %d, %v; want ctx's error", added, err)
	}
	if _, err := (&bridge.Bridge{Index: idx}).SyncAll(context.Background(), t0); !errors.Is(err, bridge.ErrInvalidConfig) {
		t.Errorf("a Bridge without a Watchlist: %v, want ErrInvalidConfig", err)
	}
}

// TestWatchGivesEntriesWithoutATierTheirTenantsTier: with a TierFor, an entry that names
// no tier gets its tenant's, asked once per call; one that names its tier keeps it. A
// failing TierFor writes nothing.
func TestWatchGivesEntriesWithoutATierTheirTenantsTier(t *testing.T) {
	idx := newCountingIndex()
	wl := tenancy.NewMemoryWatchlist()
	asked := 0
	b := &bridge.Bridge{Index: idx, Watchlist: wl, TierFor: func(_ context.Context, tc tenancy.Context) (string, error) {
		asked++
		if tc.UserID() == "broken" {
			return "", errBoom
		}
		return "cold", nil
	}}
	tc := mustTC(t, "u1")
	if _, err := b.Watch(context.Background(), tc, []tenancy.WatchlistEntry{
		{UserID: "u1", Slug: "a"}, {UserID: "u1", Slug: "b"}, {UserID: "u1", Slug: "c", Tier: "hot"},
	}, t0); err != nil {
		t.Fatal(err)
	}
	list, _ := wl.List(context.Background(), tc)
	tiers := map[string]string{}
	for _, we := range list {
		tiers[we.Slug] = we.Tier
	}
	if diff := cmp.Diff(map[string]string{"a": "cold", "b": "cold", "c": "hot"}, tiers); diff != "" || asked != 1 {
		t.Errorf("tiers (-want +got):\n%s\nTierFor asked %d times, want once", diff, asked)
	}
	if e := get(t, idx.Memory, "u1", "a"); e.Tier != "cold" {
		t.Errorf("a scheduled as %+v, want the cold tier", e)
	}
	broken := mustTC(t, "broken")
	if _, err := b.Watch(context.Background(), broken, []tenancy.WatchlistEntry{{UserID: "broken", Slug: "a"}}, t0); !errors.Is(err, errBoom) {
		t.Errorf("Watch with a failing TierFor = %v, want its error", err)
	}
	if list, _ := wl.List(context.Background(), broken); len(list) != 0 {
		t.Errorf("a failing TierFor wrote %v", list)
	}
}
