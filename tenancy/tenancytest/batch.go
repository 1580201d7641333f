package tenancytest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rotaworks/rota/tenancy"
)

// Rules of Watchlist.GetMany.

func lk(tc tenancy.Context, slug string) tenancy.Lookup {
	return tenancy.Lookup{Tenant: tc, Slug: slug}
}

// outcome is what GetMany must answer for one lookup: the entry, or an error that wraps
// err, with text when it is not "".
type outcome struct {
	entry tenancy.WatchlistEntry
	err   error
	text  string
}

// getMany calls GetMany and fails unless it answers want, one outcome per lookup in order.
func (s *suite[S]) getMany(g tenancy.Watchlist, what string, lookups []tenancy.Lookup, want []outcome) {
	s.t.Helper()
	es, errs, err := g.GetMany(bg, lookups)
	if err != nil {
		s.fatalf("%s: GetMany: %v", what, err)
	}
	if len(es) != len(lookups) || len(errs) != len(lookups) {
		s.fatalf("%s: GetMany of %d lookups returned %d entries and %d errors", what, len(lookups), len(es), len(errs))
	}
	for i, w := range want {
		l := lookups[i]
		got := fmt.Sprintf("lookup %d (%q, %q) = %s, %v", i, l.Tenant.UserID(), l.Slug, showEntry(es[i]), errs[i])
		switch {
		case w.err == nil && (errs[i] != nil || !sameEntry(es[i], w.entry)):
			s.errorf("%s: %s; want %s", what, got, showEntry(w.entry))
		case w.err != nil && !errors.Is(errs[i], w.err):
			s.errorf("%s: %s; want %v", what, got, w.err)
		case w.err != nil && es[i] != (tenancy.WatchlistEntry{}):
			s.errorf("%s: %s; want the zero entry beside the error", what, got)
		case w.text != "" && errText(errs[i]) != w.text:
			s.errorf("%s: %s; want the error %q", what, got, w.text)
		}
	}
}

// getErr returns Get's error for tc's slug.
func (s *suite[S]) getErr(w tenancy.Watchlist, tc tenancy.Context, slug string) error {
	s.t.Helper()
	_, err := w.Get(bg, tc, slug)
	if err == nil {
		s.fatalf("Get(%s, %q) found an entry; the rule needs it absent", tc.UserID(), slug)
	}
	return err
}

// getManyOutcomes: each lookup is answered as Get answers it under the lookup's own
// Context, in order, whatever the other lookups of the call are.
func getManyOutcomes(s *suite[*watchSubject]) {
	g := s.x.w
	a, b := tenant(s.t, "alice"), tenant(s.t, "bob")
	ax := tenancy.WatchlistEntry{UserID: "alice", Slug: "x", Tier: "hot", AddedAt: t0}
	ay := tenancy.WatchlistEntry{UserID: "alice", Slug: "y", Tier: "cold", AddedAt: t0.Add(1500 * time.Microsecond)}
	bx := tenancy.WatchlistEntry{UserID: "bob", Slug: "x", Tier: "warm", AddedAt: t0.Add(-7 * time.Millisecond)}
	for _, e := range []tenancy.WatchlistEntry{ax, ay, bx} {
		if err := s.x.w.Add(bg, tenant(s.t, e.UserID), e); err != nil {
			s.fatalf("Add(%s): %v", showEntry(e), err)
		}
	}
	before := s.snapshot(a, b)
	bobY := errText(s.getErr(s.x.w, b, "y"))
	aliceNone := errText(s.getErr(s.x.w, a, "none"))
	none := tenancy.Context{}
	lookups := []tenancy.Lookup{
		lk(a, "x"), lk(b, "x"), lk(a, "none"), lk(none, "x"), lk(a, "a\x00b"),
		lk(a, "y"), lk(a, "x"), lk(b, "y"), lk(none, "bad\x00"), lk(b, " x"),
	}
	want := []outcome{
		{entry: ax}, {entry: bx}, {err: tenancy.ErrNotFound, text: aliceNone}, {err: tenancy.ErrNoTenant},
		{err: tenancy.ErrInvalidID}, {entry: ay}, {entry: ax}, {err: tenancy.ErrNotFound, text: bobY},
		{err: tenancy.ErrNoTenant}, {err: tenancy.ErrInvalidID},
	}
	s.getMany(g, "mixed lookups", lookups, want)
	if _, errs, err := g.GetMany(bg, lookups); err == nil && len(errs) > 4 && !strings.Contains(errText(errs[4]), "slug") {
		s.errorf("a bad slug's error %q does not name the slug", errs[4])
	}
	// Reversed, each lookup gets the same answer: outcomes follow lookups, not storage.
	n := len(lookups)
	rl, rw := make([]tenancy.Lookup, n), make([]outcome, n)
	for i := range lookups {
		rl[n-1-i], rw[n-1-i] = lookups[i], want[i]
	}
	s.getMany(g, "the same lookups reversed", rl, rw)
	// Every lookup alone answers as it does among the others.
	for i := range lookups {
		s.getMany(g, fmt.Sprintf("lookup %d alone", i), lookups[i:i+1], want[i:i+1])
	}
	// No lookups, no outcomes.
	if es, errs, err := g.GetMany(bg, nil); err != nil || len(es) != 0 || len(errs) != 0 {
		s.errorf("GetMany(nil) = %d entries, %d errors, %v; want none and no error", len(es), len(errs), err)
	}
	// The slices are the caller's.
	es, _, err := g.GetMany(bg, lookups[:2])
	if err != nil {
		s.fatalf("GetMany: %v", err)
	}
	for i := range es {
		es[i] = tenancy.WatchlistEntry{UserID: "scribbled", Slug: "scribbled"}
	}
	s.getMany(g, "after scribbling over a returned slice", lookups[:2], want[:2])
	s.unchanged("GetMany", before, a, b)
}

// getManyCrossTenant: for every pair, one call holds both tenants' lookups of A's slugs;
// B's answer exactly as they did before A had those entries, A's are A's own, and B's own
// entry under one of A's slugs is B's.
func getManyCrossTenant(s *suite[*watchSubject]) {
	for _, p := range tenantPairs {
		ps := &suite[*watchSubject]{t: s.t, x: s.fresh(), rule: s.rule, fresh: s.fresh}
		g := ps.x.w
		a, b := tenant(s.t, p.a), tenant(s.t, p.b)
		absent := map[string]string{}
		for _, id := range aIDs {
			absent[id] = errText(ps.getErr(ps.x.w, b, id))
		}
		var lookups []tenancy.Lookup
		var want []outcome
		for i, id := range aIDs {
			e := tenancy.WatchlistEntry{UserID: p.a, Slug: id, Tier: "secret", AddedAt: t0.Add(time.Duration(i+1) * time.Millisecond)}
			if err := ps.x.w.Add(bg, a, e); err != nil {
				s.fatalf("%s: Add(%s): %v", p, showEntry(e), err)
			}
			lookups = append(lookups, lk(b, id), lk(a, id))
			want = append(want, outcome{err: tenancy.ErrNotFound, text: absent[id]}, outcome{entry: e})
		}
		before := ps.snapshot(a, b)
		ps.getMany(g, fmt.Sprintf("%s: B's and A's lookups of A's slugs", p), lookups, want)
		ps.unchanged(fmt.Sprintf("%s: GetMany", p), before, a, b)
		// B watches one of A's slugs too: each lookup reads its own tenant's entry.
		own := tenancy.WatchlistEntry{UserID: p.b, Slug: aIDs[1], Tier: "bs-own", AddedAt: t0}
		if err := ps.x.w.Add(bg, b, own); err != nil {
			s.fatalf("%s: Add(%s): %v", p, showEntry(own), err)
		}
		want[2] = outcome{entry: own}
		ps.getMany(g, fmt.Sprintf("%s: with B's own entry under A's slug %q", p, aIDs[1]), lookups, want)
	}
}

// getManyDoneContext: a done ctx fails the call as a whole, whatever its lookups.
func getManyDoneContext(s *suite[*watchSubject]) {
	g := s.x.w
	a, before := s.seeded()
	cancelled, cancel := context.WithCancel(bg)
	cancel()
	expired, cancel2 := context.WithDeadline(bg, t0)
	defer cancel2()
	for _, ctx := range []context.Context{cancelled, expired} {
		for _, lookups := range [][]tenancy.Lookup{{lk(a, aIDs[0])}, {lk(a, "none"), lk(tenancy.Context{}, "x"), lk(a, "")}} {
			es, errs, err := g.GetMany(ctx, lookups)
			if !errors.Is(err, ctx.Err()) || es != nil || errs != nil {
				s.errorf("GetMany with a done ctx (%v) of %d lookups = %d entries, %d errors, %v; want only an error wrapping %v",
					ctx.Err(), len(lookups), len(es), len(errs), err, ctx.Err())
			}
		}
	}
	s.unchanged("GetMany with a done ctx", before, a)
}
