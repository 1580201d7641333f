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

// TestMemoryReadAllocatesItsResultOnly pins that Ready allocates its heads and one array
// for every head's Due entries, and nothing else once its working space has grown: its
// allocations do not grow with the number of heads, nor with a hold. appendReady (the
// dispatcher's read) into a buffer with room allocates nothing. A read that finds no one allocates nothing.
func TestMemoryReadAllocatesItsResultOnly(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	allocs := func(users int, hold time.Duration, heads *[]Head, due *[]Entry) float64 {
		m := NewMemory()
		for u := range users {
			id := "u" + strconv.Itoa(u)
			tc, err := tenancy.NewContext(id)
			if err != nil {
				t.Fatal(err)
			}
			for k := range 3 {
				if err := m.Schedule(ctx, tc, Entry{UserID: id, WorkKey: "k" + strconv.Itoa(k), Tier: "hot", DueAt: t0}); err != nil {
					t.Fatal(err)
				}
			}
		}
		now := t0
		return testing.AllocsPerRun(10, func() {
			now = now.Add(time.Hour) // past the last run's holds
			q := ReadyQuery{Now: now, Users: users, PerUser: 2, Hold: hold}
			var p ReadyPage
			var err error
			if heads != nil {
				*heads, *due = (*heads)[:0], (*due)[:0]
				p, err = m.appendReady(ctx, heads, due, q)
			} else {
				p, err = m.Ready(ctx, q)
			}
			if err != nil || len(p.Heads) != users {
				t.Fatalf("Ready: %d heads, %v; want %d", len(p.Heads), err, users)
			}
		})
	}
	for _, users := range []int{100, 2000} {
		for _, hold := range []time.Duration{0, time.Minute} {
			if got := allocs(users, hold, nil, nil); got != 2 {
				t.Errorf("Ready of %d users with hold %v allocates %v times, want 2", users, hold, got)
			}
			if got := allocs(users, hold, new([]Head), new([]Entry)); got != 0 {
				t.Errorf("appendReady into a buffer with room, of %d users with hold %v, allocates %v times, want 0", users, hold, got)
			}
		}
	}
	m := NewMemory()
	if got := testing.AllocsPerRun(10, func() {
		if p, err := m.Ready(ctx, ReadyQuery{Now: t0, Users: 5, PerUser: 1}); err != nil || p.Heads != nil {
			t.Fatalf("Ready of an empty index = %+v, %v", p, err)
		}
	}); got != 0 {
		t.Errorf("Ready that finds no one allocates %v times, want 0", got)
	}
}

// TestMemoryCompleteManyAllocatesItsOutcomes pins that CompleteMany allocates the slice of
// outcomes and nothing per item that succeeds.
func TestMemoryCompleteManyAllocatesItsOutcomes(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	m := NewMemory()
	var keys []Key
	tcs := map[string]tenancy.Context{}
	for u := range 50 {
		id := "u" + strconv.Itoa(u)
		tc, err := tenancy.NewContext(id)
		if err != nil {
			t.Fatal(err)
		}
		tcs[id] = tc
		for k := range 2 {
			e := Entry{UserID: id, WorkKey: "k" + strconv.Itoa(k), DueAt: t0}
			if err := m.Schedule(ctx, tc, e); err != nil {
				t.Fatal(err)
			}
			keys = append(keys, e.Key())
		}
	}
	done := make([]Done, len(keys))
	now := t0
	got := testing.AllocsPerRun(10, func() {
		now = now.Add(time.Hour)
		cs, err := m.Claim(ctx, keys, now, now.Add(time.Minute))
		if err != nil || len(cs) != len(keys) {
			t.Fatalf("Claim: %d claims, %v", len(cs), err)
		}
		for i, c := range cs {
			done[i] = Done{Tenant: tcs[c.Entry.UserID], Claim: c, Next: c.Entry}
		}
		errs, err := m.CompleteMany(ctx, done)
		if err != nil || len(errs) != len(done) {
			t.Fatalf("CompleteMany: %d outcomes, %v", len(errs), err)
		}
		for i, err := range errs {
			if err != nil {
				t.Fatalf("item %d: %v", i, err)
			}
		}
	})
	// AllocsPerRun counts the whole function: Claim's result is the other allocation.
	if got != 2 {
		t.Errorf("Claim and CompleteMany of %d items allocate %v times, want 2 (one each)", len(done), got)
	}
}
