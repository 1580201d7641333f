package tenancytest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/rotaworks/rota/tenancy"
)

// Rules a Watchlist and a Repository share: rows stored by ID within a tenant.

// put stores v under id for tc and fails the rule if it cannot.
func put[S keyed](s *suite[S], tc tenancy.Context, id, v string) {
	s.t.Helper()
	if err := s.x.put(bg, tc, id, v); err != nil {
		s.fatalf("storing %s's %q: %v", tc.UserID(), id, err)
	}
}

// wantRow fails unless tc's row id holds v.
func wantRow[S keyed](s *suite[S], tc tenancy.Context, id, v string) {
	s.t.Helper()
	if got, err := s.x.get(bg, tc, id); err != nil || got != v {
		s.errorf("Get(%s, %q) = %q, %v; want %q", tc.UserID(), id, got, err, v)
	}
}

// wantAbsent fails unless Get of tc's row id is ErrNotFound.
func wantAbsent[S keyed](s *suite[S], tc tenancy.Context, id string) {
	s.t.Helper()
	if got, err := s.x.get(bg, tc, id); !errors.Is(err, tenancy.ErrNotFound) {
		s.errorf("Get(%s, %q) = %q, %v; want ErrNotFound", tc.UserID(), id, got, err)
	}
}

// wantList fails unless tc's List returns rows, in that order.
func wantList[S keyed](s *suite[S], tc tenancy.Context, rows ...kv) {
	s.t.Helper()
	got, err := s.x.list(bg, tc)
	if err != nil {
		s.errorf("List(%s): %v", tc.UserID(), err)
		return
	}
	if !slices.Equal(got, rows) {
		s.errorf("List(%s) = %v, want %v", tc.UserID(), got, rows)
	}
}

func getAbsent[S keyed](s *suite[S]) {
	a := tenant(s.t, "alice")
	wantAbsent(s, a, "nothing")
	put(s, a, "x", "hot")
	wantAbsent(s, a, "X")
	wantAbsent(s, a, "x/y")
}

func replaces[S keyed](s *suite[S]) {
	a := tenant(s.t, "alice")
	put(s, a, "x", "hot")
	put(s, a, "x", "cold")
	wantRow(s, a, "x", "cold")
	wantList(s, a, kv{"x", "cold"})
}

func removes[S keyed](s *suite[S]) {
	a := tenant(s.t, "alice")
	put(s, a, "x", "hot")
	put(s, a, "y", "warm")
	if err := s.x.del(bg, a, "x"); err != nil {
		s.fatalf("removing alice's x: %v", err)
	}
	wantAbsent(s, a, "x")
	wantRow(s, a, "y", "warm")
	for _, id := range []string{"x", "never-there"} {
		if err := s.x.del(bg, a, id); !errors.Is(err, tenancy.ErrNotFound) {
			s.errorf("removing alice's missing %q = %v, want ErrNotFound", id, err)
		}
	}
	if err := s.x.del(bg, tenant(s.t, "nobody"), "y"); !errors.Is(err, tenancy.ErrNotFound) {
		s.errorf("removing a row of a tenant with none = %v, want ErrNotFound", err)
	}
	wantList(s, a, kv{"y", "warm"})
}

func listOrder[S keyed](s *suite[S]) {
	a, b := tenant(s.t, "alice"), tenant(s.t, "bob")
	ids := []string{"b", "a", "B", "a/b", "é", "ab", "a b", "a_c", "Z", "e\u0301"}
	var want []kv
	for i, id := range ids {
		v := fmt.Sprintf("v%d", i)
		put(s, a, id, v)
		want = append(want, kv{id, v})
	}
	put(s, b, "a", "bob")
	put(s, b, "zz", "bob")
	sort.Slice(want, func(i, j int) bool { return want[i].id < want[j].id })
	wantList(s, a, want...)
	if err := s.x.scribble(bg, a); err != nil {
		s.fatalf("List(alice): %v", err)
	}
	wantList(s, a, want...) // the slice was the caller's
	wantList(s, tenant(s.t, "carol"))
}

// crossTenant: for every pair, B tries every call on A's rows; each answers exactly as it
// did before A had them, and A's rows stay as they were.
func crossTenant[S keyed](s *suite[S]) {
	for _, p := range tenantPairs {
		x := s.fresh()
		a, b := tenant(s.t, p.a), tenant(s.t, p.b)
		type answers struct{ get, del error }
		absent := map[string]answers{}
		for _, id := range aIDs {
			_, gerr := x.get(bg, b, id)
			absent[id] = answers{gerr, x.del(bg, b, id)}
		}
		ps := &suite[S]{t: s.t, x: x, rule: s.rule, fresh: s.fresh}
		for _, id := range aIDs {
			put(ps, a, id, "secret")
		}
		before := ps.snapshot(a, b)
		for _, id := range aIDs {
			_, gerr := x.get(bg, b, id)
			got := answers{gerr, x.del(bg, b, id)}
			for _, c := range []struct {
				call      string
				got, want error
			}{{"Get", got.get, absent[id].get}, {"Remove", got.del, absent[id].del}} {
				if !errors.Is(c.got, tenancy.ErrNotFound) || errText(c.got) != errText(c.want) {
					s.errorf("%s: B's %s of A's %q = %v; when A had no such row it was %v: the two must be the same ErrNotFound",
						p, c.call, id, c.got, c.want)
				}
			}
			if f, ok := any(x).(forbidder); ok {
				if err := f.addAs(bg, b, p.a, id); !errors.Is(err, tenancy.ErrForbidden) {
					s.errorf("%s: B's Add of an entry naming A, slug %q = %v, want ErrForbidden", p, id, err)
				}
			}
		}
		ps.wantListOf(b)
		ps.unchanged(fmt.Sprintf("%s: B's calls on A's rows", p), before, a, b)
	}
}

// wantListOf fails unless tc's List is empty.
func (s *suite[S]) wantListOf(tc tenancy.Context) {
	s.t.Helper()
	if st := s.snapshot(tc); len(st) != 0 {
		s.errorf("%s holds %v, want nothing", tc.UserID(), st)
	}
}

// forbidder is a keyed subject whose rows name their user: a Watchlist.
type forbidder interface {
	// addAs adds, on behalf of tc, an entry that names user.
	addAs(ctx context.Context, tc tenancy.Context, user, id string) error
}

func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// sharedIDs: for every pair, B stores, reads and removes rows under A's IDs; each touches
// B's row only.
func sharedIDs[S keyed](s *suite[S]) {
	for _, p := range tenantPairs {
		ps := &suite[S]{t: s.t, x: s.fresh(), rule: s.rule, fresh: s.fresh}
		a, b := tenant(s.t, p.a), tenant(s.t, p.b)
		for _, id := range aIDs {
			put(ps, a, id, "a-row")
		}
		before := ps.snapshot(a)
		for _, id := range aIDs {
			put(ps, b, id, "b-row")
			wantRow(ps, b, id, "b-row")
			wantRow(ps, a, id, "a-row")
		}
		ps.unchanged(fmt.Sprintf("%s: B's writes under A's IDs", p), before, a)
		for _, id := range aIDs {
			if err := ps.x.del(bg, b, id); err != nil {
				s.errorf("%s: B removing its own %q: %v", p, id, err)
			}
			wantRow(ps, a, id, "a-row")
		}
		ps.unchanged(fmt.Sprintf("%s: B's removals under A's IDs", p), before, a)
		ps.wantListOf(b)
	}
}

// concurrent: tenants at work at once each end with exactly their own rows.
func concurrent[S keyed](s *suite[S]) {
	users := []string{"u0", "u1", "u2", "u3"}
	var wg sync.WaitGroup
	for _, u := range users {
		tc := tenant(s.t, u)
		wg.Go(func() {
			for i := range 60 {
				id := fmt.Sprintf("row%d", i%10)
				if err := s.x.put(bg, tc, id, u+"-"+id); err != nil {
					s.errorf("%s storing %q: %v", u, id, err)
					return
				}
				if v, err := s.x.get(bg, tc, id); err != nil || v != u+"-"+id {
					s.errorf("%s reading its %q right after storing it = %q, %v", u, id, v, err)
				}
				if _, err := s.x.list(bg, tc); err != nil {
					s.errorf("List(%s): %v", u, err)
				}
			}
		})
	}
	wg.Wait()
	for _, u := range users {
		var want []kv
		for i := range 10 {
			id := fmt.Sprintf("row%d", i)
			want = append(want, kv{id, u + "-" + id})
		}
		wantList(s, tenant(s.t, u), want...)
	}
}
