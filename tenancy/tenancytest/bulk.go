package tenancytest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/rotaworks/rota/tenancy"
)

// Rules of Watchlist.AddMany and Watchlist.Tenants.

// entryAt returns tc's entry slug with tier, added at t0 plus i milliseconds.
func entryAt(tc tenancy.Context, slug, tier string, i int) tenancy.WatchlistEntry {
	return tenancy.WatchlistEntry{UserID: tc.UserID(), Slug: slug, Tier: tier, AddedAt: t0.Add(time.Duration(i) * time.Millisecond)}
}

// addMany calls AddMany and fails the rule if it refuses the entries.
func (s *suite[S]) addMany(w tenancy.Watchlist, tc tenancy.Context, es []tenancy.WatchlistEntry) {
	s.t.Helper()
	if err := w.AddMany(bg, tc, es); err != nil {
		s.fatalf("AddMany(%s, %d entries): %v", tc.UserID(), len(es), err)
	}
}

// wantEntries fails unless tc's List is exactly es, in that order.
func (s *suite[S]) wantEntries(w tenancy.Watchlist, tc tenancy.Context, es ...tenancy.WatchlistEntry) {
	s.t.Helper()
	got, err := w.List(bg, tc)
	if err != nil {
		s.errorf("List(%s): %v", tc.UserID(), err)
		return
	}
	if !slices.EqualFunc(got, es, sameEntry) {
		s.errorf("List(%s) = %s, want %s", tc.UserID(), showEntries(got), showEntries(es))
	}
}

func showEntries(es []tenancy.WatchlistEntry) string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = showEntry(e)
	}
	return "[" + strings.Join(out, " ") + "]"
}

// addManyStores: AddMany stores each entry as Add would, replaces the tenant's entries
// under the same slugs, leaves its others and other tenants' alone, and no entries is no
// change.
func addManyStores(s *suite[*watchSubject]) {
	a, b := tenant(s.t, "alice"), tenant(s.t, "bob")
	keep := entryAt(a, "keep", "cold", 1)
	old := entryAt(a, "m", "cold", 2)
	bobs := entryAt(b, "m", "bobs", 3)
	for _, e := range []tenancy.WatchlistEntry{keep, old, bobs} {
		if err := s.x.w.Add(bg, tenant(s.t, e.UserID), e); err != nil {
			s.fatalf("Add(%s): %v", showEntry(e), err)
		}
	}
	batch := []tenancy.WatchlistEntry{
		entryAt(a, "z", "hot", 10),
		{UserID: "alice", Slug: "José/ünïcode", Tier: "my tier", AddedAt: t0.In(time.FixedZone("east", 5*3600)).Add(123456 * time.Microsecond)},
		entryAt(a, "m", "warm", 11), // replaces old
		{UserID: "alice", Slug: "zero", Tier: "hot"},
		entryAt(a, longestID, "hot", 12),
		{UserID: "alice", Slug: "edge", Tier: "hot", AddedAt: time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)},
	}
	s.addMany(s.x.w, a, batch)
	for _, e := range batch {
		s.wantEntry(s.x.w, a, e)
	}
	s.wantEntry(s.x.w, a, keep)
	s.wantEntry(s.x.w, b, bobs)
	before := s.snapshot(a, b)
	for _, es := range [][]tenancy.WatchlistEntry{nil, {}} {
		if err := s.x.w.AddMany(bg, a, es); err != nil {
			s.errorf("AddMany of %d entries (nil: %v) = %v, want nil", len(es), es == nil, err)
		}
	}
	s.unchanged("AddMany of no entries", before, a, b)
	// A batch larger than a page of anything, all stored.
	var many []tenancy.WatchlistEntry
	for i := range 1000 {
		many = append(many, entryAt(b, fmt.Sprintf("bulk%04d", i), "hot", i))
	}
	s.addMany(s.x.w, b, many)
	got, err := s.x.w.List(bg, b)
	if err != nil || len(got) != len(many)+1 {
		s.errorf("after AddMany of %d entries bob holds %d, %v; want %d", len(many), len(got), err, len(many)+1)
	}
	for _, i := range []int{0, 1, 499, 999} {
		s.wantEntry(s.x.w, b, many[i])
	}
}

// namesIndex reports whether err's text holds i as a whole number.
func namesIndex(err error, i int) bool {
	return regexp.MustCompile(fmt.Sprintf(`(^|[^0-9])%d([^0-9]|$)`, i)).MatchString(errText(err))
}

// addManyAllOrNothing: one refused entry anywhere in the batch refuses the call with the
// error Validate gives it, naming its index, and nothing of the batch is written — neither
// the new slugs before and after it nor the replacements of slugs the tenant holds.
func addManyAllOrNothing(s *suite[*watchSubject]) {
	a, before := s.seeded()
	good := func(i int) tenancy.WatchlistEntry {
		if i%2 == 0 {
			return entryAt(a, aIDs[i%len(aIDs)], "replaced", i) // would replace a seeded entry
		}
		return entryAt(a, fmt.Sprintf("new%d", i), "hot", i)
	}
	bads := []struct {
		what  string
		e     tenancy.WatchlistEntry
		err   error
		field string
	}{
		{"a bad slug", tenancy.WatchlistEntry{UserID: "alice", Slug: "bad\x00slug", Tier: "hot", AddedAt: t0}, tenancy.ErrInvalidID, "slug"},
		{"an empty slug", tenancy.WatchlistEntry{UserID: "alice", Tier: "hot", AddedAt: t0}, tenancy.ErrInvalidID, "slug"},
		{"a bad tier", tenancy.WatchlistEntry{UserID: "alice", Slug: "t", Tier: " hot", AddedAt: t0}, tenancy.ErrInvalidID, "tier"},
		{"an AddedAt in year 10000", tenancy.WatchlistEntry{UserID: "alice", Slug: "late", Tier: "hot", AddedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}, tenancy.ErrInvalidID, "AddedAt"},
		{"another user's entry", tenancy.WatchlistEntry{UserID: "bob", Slug: "theirs", Tier: "hot", AddedAt: t0}, tenancy.ErrForbidden, ""},
		{"an entry naming no user", tenancy.WatchlistEntry{Slug: "nobody", Tier: "hot", AddedAt: t0}, tenancy.ErrForbidden, ""},
	}
	for _, bad := range bads {
		for _, n := range []int{1, 2, 5} {
			for _, at := range []int{0, n / 2, n - 1} {
				batch := make([]tenancy.WatchlistEntry, n)
				for i := range batch {
					batch[i] = good(i)
				}
				batch[at] = bad.e
				err := s.x.w.AddMany(bg, a, batch)
				switch {
				case !errors.Is(err, bad.err):
					s.errorf("AddMany of %d entries with %s at index %d = %v, want %v", n, bad.what, at, err, bad.err)
				case !namesIndex(err, at):
					s.errorf("AddMany of %d entries with %s at index %d = %q, want the error to name the index %d", n, bad.what, at, err, at)
				case bad.field != "" && !strings.Contains(err.Error(), bad.field):
					s.errorf("AddMany of %d entries with %s at index %d = %q, want the error to name the %s", n, bad.what, at, err, bad.field)
				}
			}
		}
	}
	// Two bad entries: the call fails on one of them, and still writes nothing.
	batch := []tenancy.WatchlistEntry{good(0), bads[0].e, good(1), bads[4].e}
	if err := s.x.w.AddMany(bg, a, batch); err == nil {
		s.errorf("AddMany with two bad entries = nil, want an error")
	}
	s.unchanged("refused AddMany calls", before, a, tenant(s.t, "bob"))
	if ts, err := s.x.w.Tenants(bg, "", tenancy.MaxTenantsPage); err != nil || !slices.Equal(ts, []string{"alice"}) {
		s.errorf("after refused AddMany calls Tenants = %q, %v; want only alice", ts, err)
	}
}

// addManyDuplicates: a slug given twice or more is written once, with the last entry
// given for it.
func addManyDuplicates(s *suite[*watchSubject]) {
	a := tenant(s.t, "alice")
	s.addMany(s.x.w, a, []tenancy.WatchlistEntry{
		entryAt(a, "x", "first", 1), entryAt(a, "y", "only", 2), entryAt(a, "x", "second", 3), entryAt(a, "x", "last", 4),
	})
	s.wantEntries(s.x.w, a, entryAt(a, "x", "last", 4), entryAt(a, "y", "only", 2))
	// Given twice over an entry the tenant holds, the last one given still wins.
	s.addMany(s.x.w, a, []tenancy.WatchlistEntry{entryAt(a, "y", "newer", 5), entryAt(a, "y", "newest", 6), entryAt(a, "x", "again", 7)})
	s.wantEntries(s.x.w, a, entryAt(a, "x", "again", 7), entryAt(a, "y", "newest", 6))
	// The last one wins by its position in the call, not by its AddedAt or its tier.
	s.addMany(s.x.w, a, []tenancy.WatchlistEntry{entryAt(a, "z", "zz", 9), entryAt(a, "z", "aa", 8)})
	s.wantEntry(s.x.w, a, entryAt(a, "z", "aa", 8))
}

// addManyCrossTenant: for every pair, B's AddMany of entries naming A — A's own entries as
// they are, alone or among B's — is ErrForbidden, and neither tenant's entries change.
func addManyCrossTenant(s *suite[*watchSubject]) {
	for _, p := range tenantPairs {
		ps := &suite[*watchSubject]{t: s.t, x: s.fresh(), rule: s.rule, fresh: s.fresh}
		a, b := tenant(s.t, p.a), tenant(s.t, p.b)
		var as []tenancy.WatchlistEntry
		for i, id := range aIDs {
			as = append(as, entryAt(a, id, "secret", i))
		}
		ps.addMany(ps.x.w, a, as)
		before := ps.snapshot(a, b)
		own := []tenancy.WatchlistEntry{entryAt(b, "mine", "hot", 1), entryAt(b, aIDs[1], "hot", 2)}
		for _, batch := range [][]tenancy.WatchlistEntry{
			as,
			as[:1],
			append(slices.Clone(own), as[0]),
			{own[0], as[2], own[1]},
			{as[3], own[0]},
		} {
			if err := ps.x.w.AddMany(bg, b, batch); !errors.Is(err, tenancy.ErrForbidden) {
				s.errorf("%s: B's AddMany of %s = %v, want ErrForbidden", p, showEntries(batch), err)
			}
		}
		ps.unchanged(fmt.Sprintf("%s: B's AddMany of entries naming A", p), before, a, b)
		if ts, err := ps.x.w.Tenants(bg, "", tenancy.MaxTenantsPage); err != nil || !slices.Equal(ts, []string{p.a}) {
			s.errorf("%s: after B's refused AddMany calls Tenants = %q, %v; want only A", p, ts, err)
		}
		// B's own batch under A's slugs is B's alone.
		ps.addMany(ps.x.w, b, own)
		ps.unchanged(fmt.Sprintf("%s: B's AddMany of its own entries", p), before, a)
		ps.wantEntries(ps.x.w, b, own[1], own[0])
	}
}

// escapingIDs are user IDs that a careless store mangles: they need quoting or escaping in
// SQL, LIKE, URLs or JSON, differ only in case or normalisation, or are as long as an ID
// may be. Tenants must return them as they are.
var escapingIDs = []string{
	"a", "a/b", "a_c", "a%", "a%b", "a'b", `a"b`, `a\b`, "a b", "a,b", "a;b", "a.b", "a*", "(a)",
	"Alice", "alice", "jos\u00e9", "jose\u0301", "acme\u00a0corp", "日本語", "😀", "~", longestID,
}

// tenantsPaging: Tenants pages through the users with entries in byte order, after after
// exclusive, up to limit, whether after is a user or lies between two.
func tenantsPaging(s *suite[*watchSubject]) {
	if ts, err := s.x.w.Tenants(bg, "", 10); err != nil || len(ts) != 0 {
		s.errorf("Tenants of an empty watchlist = %q, %v; want none", ts, err)
	}
	for i, u := range escapingIDs {
		tc := tenant(s.t, u)
		// Some by Add, some by AddMany, some with several entries.
		if i%2 == 0 {
			if err := s.x.w.Add(bg, tc, entryAt(tc, "s", "hot", i)); err != nil {
				s.fatalf("Add for %q: %v", u, err)
			}
		} else {
			s.addMany(s.x.w, tc, []tenancy.WatchlistEntry{entryAt(tc, "s", "hot", i), entryAt(tc, "t", "hot", i)})
		}
	}
	want := slices.Clone(escapingIDs)
	slices.Sort(want)
	for _, limit := range []int{1, 2, 3, 7, len(want) - 1, len(want), len(want) + 1, tenancy.MaxTenantsPage} {
		var got []string
		after := ""
		for pages := 0; ; pages++ {
			page, err := s.x.w.Tenants(bg, after, limit)
			if err != nil {
				s.fatalf("Tenants(%q, %d): %v", after, limit, err)
			}
			i, _ := slices.BinarySearch(want, after)
			if after != "" && i < len(want) && want[i] == after {
				i++
			}
			if wantPage := want[i:min(i+limit, len(want))]; !slices.Equal(page, wantPage) {
				s.fatalf("Tenants(%q, %d) = %q, want %q", after, limit, page, wantPage)
			}
			got = append(got, page...)
			if len(page) < limit || pages > len(want) {
				break
			}
			after = page[len(page)-1]
		}
		if !slices.Equal(got, want) {
			s.errorf("paging with limit %d gave %q, want %q", limit, got, want)
		}
	}
	// after need not be a user: a page starts at the first user above it.
	for _, tt := range []struct{ after, first string }{
		{"Z", "a"}, {"a$", "a%"}, {"a !", "a b"}, {"a.c", "a/b"}, {"Alicf", "a"}, {"zzz", "~"}, {"~", longestID}, {"\u00ea", "日本語"}, {"\U0010fffd", ""},
	} {
		page, err := s.x.w.Tenants(bg, tt.after, 1)
		switch {
		case err != nil:
			s.errorf("Tenants(%q, 1): %v", tt.after, err)
		case tt.first == "" && len(page) != 0:
			s.errorf("Tenants(%q, 1) = %q, want none: no user sorts after it", tt.after, page)
		case tt.first != "" && !slices.Equal(page, []string{tt.first}):
			s.errorf("Tenants(%q, 1) = %q, want [%q], the first user above it in byte order", tt.after, page, tt.first)
		}
	}
	// The slice is the caller's.
	page, err := s.x.w.Tenants(bg, "", 3)
	if err != nil {
		s.fatalf("Tenants: %v", err)
	}
	for i := range page {
		page[i] = "scribbled"
	}
	if again, err := s.x.w.Tenants(bg, "", 3); err != nil || !slices.Equal(again, want[:3]) {
		s.errorf("after scribbling over a returned page Tenants = %q, %v; want %q", again, err, want[:3])
	}
}

// tenantsBounds: a limit outside [1, MaxTenantsPage] or an after that is neither "" nor a
// valid ID is ErrInvalidID naming it; a done ctx is an error wrapping ctx.Err(); none
// changes anything.
func tenantsBounds(s *suite[*watchSubject]) {
	a, before := s.seeded()
	for _, limit := range []int{0, -1, tenancy.MaxTenantsPage + 1, math.MinInt, math.MaxInt} {
		ts, err := s.x.w.Tenants(bg, "", limit)
		switch {
		case !errors.Is(err, tenancy.ErrInvalidID):
			s.errorf("Tenants(\"\", %d) = %q, %v; want ErrInvalidID", limit, ts, err)
		case !strings.Contains(err.Error(), "limit"):
			s.errorf("Tenants(\"\", %d) = %q, want the error to name the limit", limit, err)
		}
	}
	for _, b := range badIDs {
		if b.id == "" {
			continue // the first page
		}
		ts, err := s.x.w.Tenants(bg, b.id, 10)
		switch {
		case !errors.Is(err, tenancy.ErrInvalidID):
			s.errorf("Tenants(%s %q, 10) = %q, %v; want ErrInvalidID", b.reason, b.id, ts, err)
		case !strings.Contains(err.Error(), "after"):
			s.errorf("Tenants(%s %q, 10) = %q, want the error to name after", b.reason, b.id, err)
		}
	}
	for _, limit := range []int{1, tenancy.MaxTenantsPage} {
		if ts, err := s.x.w.Tenants(bg, "", limit); err != nil || !slices.Equal(ts, []string{"alice"}) {
			s.errorf("Tenants(\"\", %d) = %q, %v; want [alice]", limit, ts, err)
		}
	}
	if ts, err := s.x.w.Tenants(bg, longestID, 1); err != nil || len(ts) != 0 {
		s.errorf("Tenants after an ID of MaxIDLength bytes = %q, %v; want none and no error", ts, err)
	}
	cancelled, cancel := context.WithCancel(bg)
	cancel()
	expired, cancel2 := context.WithDeadline(bg, t0)
	defer cancel2()
	for _, ctx := range []context.Context{cancelled, expired} {
		if ts, err := s.x.w.Tenants(ctx, "", 10); !errors.Is(err, ctx.Err()) {
			s.errorf("Tenants with a done ctx (%v) = %q, %v; want an error wrapping it", ctx.Err(), ts, err)
		}
	}
	s.unchanged("refused Tenants calls", before, a)
}

// tenantsMembership: Tenants lists exactly the users that hold at least one entry now.
func tenantsMembership(s *suite[*watchSubject]) {
	want := func(what string, users ...string) {
		s.t.Helper()
		ts, err := s.x.w.Tenants(bg, "", tenancy.MaxTenantsPage)
		if err != nil {
			s.fatalf("%s: Tenants: %v", what, err)
		}
		if !slices.Equal(ts, users) && (len(ts) != 0 || len(users) != 0) {
			s.errorf("%s: Tenants = %q, want %q", what, ts, users)
		}
	}
	a, b, c := tenant(s.t, "alice"), tenant(s.t, "bob"), tenant(s.t, "carol")
	want("empty")
	if err := s.x.w.Add(bg, a, entryAt(a, "x", "hot", 1)); err != nil {
		s.fatalf("Add: %v", err)
	}
	s.addMany(s.x.w, b, []tenancy.WatchlistEntry{entryAt(b, "x", "hot", 1), entryAt(b, "y", "hot", 2)})
	want("alice by Add, bob by AddMany", "alice", "bob")
	// Refused writes, reads and removals of nothing add no one.
	_ = s.x.w.Add(bg, c, entryAt(a, "x", "hot", 1))
	_ = s.x.w.Add(bg, c, tenancy.WatchlistEntry{UserID: "carol", Slug: "x", Tier: "bad\n"})
	_ = s.x.w.AddMany(bg, c, []tenancy.WatchlistEntry{entryAt(c, "x", "hot", 1), entryAt(b, "x", "hot", 2)})
	_ = s.x.w.AddMany(bg, c, nil)
	_, _ = s.x.w.Get(bg, c, "x")
	_, _ = s.x.w.List(bg, c)
	_ = s.x.w.Remove(bg, c, "x")
	_, _, _ = s.x.w.GetMany(bg, []tenancy.Lookup{lk(c, "x")})
	want("after carol's refused writes and reads", "alice", "bob")
	// A user stays while it holds an entry and disappears with its last.
	if err := s.x.w.Remove(bg, b, "x"); err != nil {
		s.fatalf("Remove: %v", err)
	}
	want("bob with one entry left", "alice", "bob")
	if err := s.x.w.Remove(bg, b, "y"); err != nil {
		s.fatalf("Remove: %v", err)
	}
	want("bob's last entry removed", "alice")
	if ts, err := s.x.w.Tenants(bg, "alice", 10); err != nil || len(ts) != 0 {
		s.errorf("Tenants after alice with bob gone = %q, %v; want none", ts, err)
	}
	s.addMany(s.x.w, b, []tenancy.WatchlistEntry{entryAt(b, "z", "hot", 3)})
	want("bob back", "alice", "bob")
	if err := s.x.w.Remove(bg, a, "x"); err != nil {
		s.fatalf("Remove: %v", err)
	}
	if err := s.x.w.Remove(bg, b, "z"); err != nil {
		s.fatalf("Remove: %v", err)
	}
	want("every entry removed")
}

func addAllStores(s *suite[*watchSubject]) {
	a, b, c := tenant(s.t, "alice"), tenant(s.t, "bob"), tenant(s.t, "carol")
	keep := entryAt(a, "keep", "cold", 1)
	s.addMany(s.x.w, a, []tenancy.WatchlistEntry{keep, entryAt(a, "m", "cold", 2)})
	batch := []tenancy.WatchlistEntry{
		entryAt(a, "m", "warm", 10), // replaces alice's m
		entryAt(b, "m", "bobs", 11), // bob's own m, beside alice's
		entryAt(c, "x", "first", 12),
		{UserID: "carol", Slug: "José/ünïcode", Tier: "my tier", AddedAt: t0.Add(123456 * time.Microsecond)},
		entryAt(c, "x", "last", 13), // given twice: the last wins
	}
	if err := s.x.w.AddAll(bg, batch); err != nil {
		s.fatalf("AddAll: %v", err)
	}
	s.wantEntries(s.x.w, a, keep, entryAt(a, "m", "warm", 10))
	s.wantEntries(s.x.w, b, entryAt(b, "m", "bobs", 11))
	s.wantEntries(s.x.w, c, batch[3], entryAt(c, "x", "last", 13))
	before := s.snapshot(a, b, c)
	for _, es := range [][]tenancy.WatchlistEntry{nil, {}} {
		if err := s.x.w.AddAll(bg, es); err != nil {
			s.errorf("AddAll of %d entries (nil: %v) = %v, want nil", len(es), es == nil, err)
		}
	}
	s.unchanged("AddAll of no entries", before, a, b, c)
	// Many tenants in one call, all stored.
	var many []tenancy.WatchlistEntry
	for i := range 500 {
		many = append(many, tenancy.WatchlistEntry{UserID: fmt.Sprintf("seed%03d", i), Slug: "s", Tier: "hot", AddedAt: t0})
	}
	if err := s.x.w.AddAll(bg, many); err != nil {
		s.fatalf("AddAll of %d tenants: %v", len(many), err)
	}
	if ids, err := s.x.w.Tenants(bg, "seed", 1000); err != nil || len(ids) != len(many) {
		s.errorf("after AddAll of %d tenants, Tenants lists %d of them, %v", len(many), len(ids), err)
	}
}

func addAllAllOrNothing(s *suite[*watchSubject]) {
	a, before := s.seeded()
	b := tenant(s.t, "bob")
	bads := []struct {
		what, field string
		e           tenancy.WatchlistEntry
	}{
		{"an entry naming no user", "user", tenancy.WatchlistEntry{Slug: "nobody", Tier: "hot", AddedAt: t0}},
		{"a bad user ID", "user", tenancy.WatchlistEntry{UserID: "bad\nuser", Slug: "s", Tier: "hot", AddedAt: t0}},
		{"a bad slug", "slug", tenancy.WatchlistEntry{UserID: "bob", Slug: "bad\x00slug", Tier: "hot", AddedAt: t0}},
		{"a bad tier", "tier", tenancy.WatchlistEntry{UserID: "bob", Slug: "t", Tier: " hot", AddedAt: t0}},
		{"an AddedAt in year 10000", "AddedAt", tenancy.WatchlistEntry{UserID: "bob", Slug: "late", Tier: "hot", AddedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}},
	}
	for _, bad := range bads {
		for _, at := range []int{0, 2, 4} {
			batch := []tenancy.WatchlistEntry{entryAt(a, "n0", "hot", 0), entryAt(b, "n1", "hot", 1), entryAt(a, aIDs[0], "replaced", 2),
				entryAt(b, "n3", "hot", 3), entryAt(a, "n4", "hot", 4)}
			batch[at] = bad.e
			err := s.x.w.AddAll(bg, batch)
			switch {
			case !errors.Is(err, tenancy.ErrInvalidID):
				s.errorf("AddAll with %s at index %d = %v, want ErrInvalidID", bad.what, at, err)
			case !namesIndex(err, at):
				s.errorf("AddAll with %s at index %d = %q, want the error to name the index %d", bad.what, at, err, at)
			case !strings.Contains(err.Error(), bad.field):
				s.errorf("AddAll with %s at index %d = %q, want the error to name the %s", bad.what, at, err, bad.field)
			}
		}
	}
	s.unchanged("a refused AddAll", before, a, b)
}
