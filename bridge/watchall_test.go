package bridge_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/cadence"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// allCounting counts the AddAll calls of the MemoryWatchlist it wraps.
type allCounting struct {
	*tenancy.MemoryWatchlist
	mu   sync.Mutex
	alls int
}

func (w *allCounting) AddAll(ctx context.Context, es []tenancy.WatchlistEntry) error {
	w.mu.Lock()
	w.alls++
	w.mu.Unlock()
	return w.MemoryWatchlist.AddAll(ctx, es)
}

// TestWatchAllSeedsManyTenantsInOneWatchlistCall: a thousand tenants' sources, their
// tiers from their plans, are watched with one AddAll and scheduled with one
// ScheduleMissing per tenant.
func TestWatchAllSeedsManyTenantsInOneWatchlistCall(t *testing.T) {
	idx := newCountingIndex()
	wl := &allCounting{MemoryWatchlist: tenancy.NewMemoryWatchlist()}
	plans := tenancy.NewMemoryEntitlements()
	seed := map[string]tenancy.PlanID{}
	var entries []tenancy.WatchlistEntry
	for i := range 1000 {
		user := fmt.Sprintf("t%04d", i)
		seed[user] = []tenancy.PlanID{"pro", tenancy.PlanFree}[i%2]
		for s := range 3 {
			entries = append(entries, tenancy.WatchlistEntry{UserID: user, Slug: fmt.Sprintf("s%d", s)})
		}
	}
	entries = append(entries, tenancy.WatchlistEntry{UserID: "t0000", Slug: "s0", Tier: "warm"}) // the last wins
	if err := plans.SetPlans(context.Background(), seed); err != nil {
		t.Fatal(err)
	}
	tierFor, err := bridge.PlanTiers(plans, map[tenancy.PlanID]string{"pro": "hot", tenancy.PlanFree: "cold"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := &bridge.Bridge{Index: idx, Watchlist: wl, TierFor: tierFor}
	added, err := b.WatchAll(context.Background(), entries, t0)
	if err != nil || added != 3000 {
		t.Fatalf("WatchAll = %d, %v; want 3000 added", added, err)
	}
	if wl.alls != 1 || idx.n("ScheduleMissing") != 1000 {
		t.Errorf("%d AddAlls and %d ScheduleMissings, want one and one per tenant", wl.alls, idx.n("ScheduleMissing"))
	}
	for user, want := range map[string]string{"t0001": "cold", "t0002": "hot"} {
		if e := get(t, idx.Memory, user, "s1"); e.Tier != want {
			t.Errorf("%s/s1 scheduled as %+v, want its plan's tier %s", user, e, want)
		}
	}
	if e := get(t, idx.Memory, "t0000", "s0"); e.Tier != "warm" {
		t.Errorf("t0000/s0 given twice: %+v, want the last one's tier", e)
	}
}

// TestWatchAllRefusesAtOnce: one refused entry — an invalid user, an unknown tier —
// refuses the call, naming it, and nothing is written.
func TestWatchAllRefusesAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		bad  tenancy.WatchlistEntry
		is   error
		says string
	}{
		{"invalid user", tenancy.WatchlistEntry{UserID: "bad\nuser", Slug: "x", Tier: "hot"}, tenancy.ErrInvalidID, "entries[1]"},
		{"no user", tenancy.WatchlistEntry{Slug: "x", Tier: "hot"}, tenancy.ErrInvalidID, "entries[1]"},
		{"unknown tier", tenancy.WatchlistEntry{UserID: "u2", Slug: "x", Tier: "nightly"}, cadence.ErrUnknownTier, "nightly"},
		{"no tier and no TierFor", tenancy.WatchlistEntry{UserID: "u2", Slug: "x"}, tenancy.ErrInvalidID, "tier"},
	} {
		idx, wl := duework.NewMemory(), tenancy.NewMemoryWatchlist()
		b := &bridge.Bridge{Index: idx, Watchlist: wl}
		entries := []tenancy.WatchlistEntry{{UserID: "u1", Slug: "a", Tier: "hot"}, tc.bad, {UserID: "u3", Slug: "c", Tier: "cold"}}
		added, err := b.WatchAll(context.Background(), entries, t0)
		if added != 0 || !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: WatchAll = %d, %v; want %v naming %s", tc.name, added, err, tc.is, tc.says)
		}
		if ids, _ := wl.Tenants(context.Background(), "", 10); len(ids) != 0 {
			t.Errorf("%s: the watchlist holds %v", tc.name, ids)
		}
	}
}

// TestWatchAllWhoseScheduleFailsForATenantNamesIt: the tenants whose ScheduleMissing
// fails are named; the others are scheduled, and a later sync schedules the rest.
func TestWatchAllWhoseScheduleFailsForATenantNamesIt(t *testing.T) {
	idx := &failingFor{Index: duework.NewMemory(), user: "u2"}
	wl := tenancy.NewMemoryWatchlist()
	b := &bridge.Bridge{Index: idx, Watchlist: wl}
	entries := []tenancy.WatchlistEntry{{UserID: "u1", Slug: "a", Tier: "hot"}, {UserID: "u2", Slug: "b", Tier: "hot"}, {UserID: "u3", Slug: "c", Tier: "hot"}}
	added, err := b.WatchAll(context.Background(), entries, t0)
	if added != 2 || !errors.Is(err, errBoom) || !strings.Contains(err.Error(), `"u2"`) {
		t.Fatalf("WatchAll = %d, %v; want u1's and u3's added and u2 named", added, err)
	}
	idx.user = ""
	if n, err := b.SyncAll(context.Background(), t0); n != 1 || err != nil {
		t.Fatalf("SyncAll after = %d, %v; want u2's entry added", n, err)
	}
}

// failingFor is an Index whose ScheduleMissing fails for one user.
type failingFor struct {
	duework.Index
	user string
}

func (f *failingFor) ScheduleMissing(ctx context.Context, tc tenancy.Context, es []duework.Entry) (int, error) {
	if tc.UserID() == f.user {
		return 0, errBoom
	}
	return f.Index.ScheduleMissing(ctx, tc, es)
}
