package duework

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/rotaworks/rota/tenancy"
)

// TestMemoryClaimSizesItsResultOnce pins that Claim allocates its result once, sized at the
// first claim for every key left: a batch of claimable keys costs one allocation, not one per
// doubling, and a call that claims nothing allocates nothing and returns nil.
func TestMemoryClaimSizesItsResultOnce(t *testing.T) {
	ctx := context.Background()
	m := NewMemory()
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	var keys []Key
	for u := range 20 {
		id := "u" + strconv.Itoa(u)
		tc, err := tenancy.NewContext(id)
		if err != nil {
			t.Fatal(err)
		}
		for k := range 5 {
			e := Entry{UserID: id, WorkKey: "k" + strconv.Itoa(k), Tier: "hot", DueAt: t0}
			if err := m.Schedule(ctx, tc, e); err != nil {
				t.Fatal(err)
			}
			keys = append(keys, e.Key())
		}
	}
	// Each run claims every key again: its now is past the previous run's claims.
	now := t0
	got := testing.AllocsPerRun(20, func() {
		now = now.Add(time.Hour)
		cs, err := m.Claim(ctx, keys, now, now.Add(time.Minute))
		if err != nil || len(cs) != len(keys) || cap(cs) != len(keys) {
			t.Fatalf("Claim: %d claims (cap %d), %v; want %d", len(cs), cap(cs), err, len(keys))
		}
	})
	if got != 1 {
		t.Errorf("Claim of %d claimable keys allocates %v times, want 1", len(keys), got)
	}
	// Nothing claimable (all held until now+1min): no allocation, a nil result.
	got = testing.AllocsPerRun(20, func() {
		cs, err := m.Claim(ctx, keys, now, now.Add(time.Second))
		if err != nil || cs != nil {
			t.Fatalf("Claim of held keys = %v, %v; want nil, nil", cs, err)
		}
	})
	if got != 0 {
		t.Errorf("Claim of held keys allocates %v times, want 0", got)
	}
}

// TestMemoryDueHeadsAllocatesAFixedNumberOfTimes pins that DueHeads sizes its slices once —
// the due users counted before they are gathered, every head's Due cut from one backing
// array — so that its allocations do not grow with the number of heads.
func TestMemoryDueHeadsAllocatesAFixedNumberOfTimes(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	allocs := func(users int) float64 {
		m := NewMemory()
		for u := range users {
			id := "u" + strconv.Itoa(u)
			tc, err := tenancy.NewContext(id)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Schedule(ctx, tc, Entry{UserID: id, WorkKey: "k", Tier: "hot", DueAt: t0}); err != nil {
				t.Fatal(err)
			}
		}
		return testing.AllocsPerRun(10, func() {
			hs, err := m.DueHeads(ctx, t0, 1)
			if err != nil || len(hs) != users {
				t.Fatalf("DueHeads: %d heads, %v; want %d", len(hs), err, users)
			}
		})
	}
	// The due users, the heads, their ends, their nodes and one array of entries.
	for _, users := range []int{100, 5000} { // (a very small slice can live on the stack)
		if got := allocs(users); got != 5 {
			t.Errorf("DueHeads over %d users allocates %v times, want 5", users, got)
		}
	}
}
