package duework

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/rotaworks/rota/tenancy"
)

// countVisits returns the nodes each kind of tree handed out while f ran (see trace): the
// reads' work, measured without a clock.
func countVisits(t *testing.T, f func()) visits {
	t.Helper()
	var v visits
	trace = &v
	t.Cleanup(func() { trace = nil })
	f()
	trace = nil
	return v
}

var costT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// crowdLimits are limits that let every user of a crowd be read as without them, the
// noisy user's claims in flight included: they cost what they cost, and cut nothing.
var crowdLimits = Limits{MaxInFlight: 100_000, Every: time.Millisecond, Burst: 10}

// crowd returns a Memory whose unrouted group holds users ready users with one entry each
// (due a minute ago, in UserID order) and, first in turn order, user "noisy" with backlog
// entries due and, when claimed, all of them but its last three claimed; plus 1,000 users
// with nothing due. With limited, every user has crowdLimits.
func crowd(t *testing.T, users, backlog int, claimed, limited bool) *Memory {
	t.Helper()
	ctx := context.Background()
	m := NewMemory()
	put := func(user, key string, due time.Time) {
		tc, err := tenancy.NewContext(user)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Schedule(ctx, tc, Entry{UserID: user, WorkKey: key, DueAt: due}); err != nil {
			t.Fatal(err)
		}
	}
	keys := make([]Key, 0, backlog)
	for i := range backlog {
		k := "k" + strconv.Itoa(i)
		put("noisy", k, costT0.Add(-time.Hour-time.Duration(backlog-i)*time.Second))
		keys = append(keys, Key{UserID: "noisy", WorkKey: k})
	}
	if claimed {
		// Claimed at a now before the others are due, so that noisy stays first.
		at := costT0.Add(-time.Hour)
		if _, err := m.Claim(ctx, keys[:backlog-3], at, costT0.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range users {
		put("u"+strconv.Itoa(100_000+i), "k", costT0.Add(-time.Minute))
	}
	for i := range 1000 {
		put("idle"+strconv.Itoa(i), "k", costT0.Add(time.Hour))
	}
	if limited {
		var routes []Route
		for id := range m.users {
			routes = append(routes, Route{UserID: id, Limits: crowdLimits})
		}
		if err := m.Route(ctx, routes); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// crowdCase is one shape of crowd.
type crowdCase struct {
	name             string
	users, backlog   int
	claimed, limited bool
}

// TestReadyCostsWhatItReturns pins Ready's cost without timing anything: reading k users
// visits O(k) users of the group and O(PerUser) entries per user, plus the trees' depth,
// however many users are ready and however deep, or claimed, one user's backlog is; a
// second read, which passes over the first read's held users, visits those too and no
// more. Walking the group would visit 20,000 users, walking the backlog 50,000 entries; the
// bounds allow a few visits per node read and a few times the treaps' expected depth. Every
// user limited, the reads visit no more: a limit costs O(log c) in the user's own claims.
func TestReadyCostsWhatItReturns(t *testing.T) {
	const perUser = 3
	ctx := context.Background()
	for _, c := range []crowdCase{
		{"small", 500, 10, false, false},
		{"many users", 20_000, 10, false, false},
		{"deep backlog", 500, 50_000, false, false},
		{"deep claimed backlog", 500, 50_000, true, false},
		{"deep claimed backlog, limited", 500, 50_000, true, true},
	} {
		m := crowd(t, c.users, c.backlog, c.claimed, c.limited)
		for _, k := range []int{10, 200} {
			q := ReadyQuery{Now: costT0.Add(time.Duration(k) * time.Second), Users: k, PerUser: perUser, Hold: time.Minute}
			var first, second ReadyPage
			v1 := countVisits(t, func() { first, _ = m.Ready(ctx, q) })
			v2 := countVisits(t, func() { second, _ = m.Ready(ctx, q) })
			t.Logf("%s, Users %d: first read %+v, second %+v", c.name, k, v1, v2)
			if len(first.Heads) != k || len(second.Heads) != k || first.Heads[0].UserID != "noisy" || first.Heads[0].More == c.claimed {
				t.Fatalf("%s: reads returned %d and %d heads (first %q, More %v)", c.name, len(first.Heads), len(second.Heads), first.Heads[0].UserID, first.Heads[0].More)
			}
			if b1, b2 := 3*k+100, 5*k+100; v1.users > b1 || v2.users > b2 {
				t.Errorf("%s: Ready of %d visited %d users, then %d past %d held ones; the bounds are %d and %d", c.name, k, v1.users, v2.users, k, b1, b2)
			}
			if bound := 3*k*(perUser+1) + 300; v1.entries > bound || v2.entries > bound {
				t.Errorf("%s: Ready of %d visited %d and %d entries, at most %d per head; the bound is %d", c.name, k, v1.entries, v2.entries, perUser, bound)
			}
		}
	}
}

// TestDueBeforeCostsWhatItReturns: DueBefore's visits do not grow with one user's backlog
// nor with the users that have nothing due: 60 (a few times the treaps' expected depth) per
// entry returned, where about a third of that is typical.
func TestDueBeforeCostsWhatItReturns(t *testing.T) {
	ctx := context.Background()
	for _, c := range []crowdCase{{"small", 20, 10, false, false}, {"deep backlog", 20, 50_000, false, false}} {
		m := crowd(t, c.users, c.backlog, c.claimed, c.limited)
		v := countVisits(t, func() {
			if es, err := m.DueBefore(ctx, costT0, 30); err != nil || len(es) != 30 {
				t.Fatalf("DueBefore: %d entries, %v", len(es), err)
			}
		})
		t.Logf("%s: %+v", c.name, v)
		if all := v.users + v.entries + v.byDue; all > 30*60 {
			t.Errorf("%s: DueBefore(now, 30) visited %d nodes; the bound is %d", c.name, all, 30*60)
		}
	}
}
