package indextest

import (
	"errors"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/vocab"
	"github.com/rotaworks/rota/tenancy"
)

// The rules of the calls that act on many entries, or on a claim, at once.

func scheduleMissing(s *suite) {
	ms := s.x
	amy := tenant(s.t, "amy")
	a := entry("amy", "a", 0)
	s.schedule(a)
	c := s.claimOne(key("amy", "a"), at(0), at(10))
	b1, b2 := entry("amy", "b", 1), entry("amy", "b", 2)
	added, err := ms.ScheduleMissing(bg, amy, []duework.Entry{entry("amy", "a", 99), b1, entry("amy", "c", 3), b2})
	if err != nil || added != 2 {
		s.errorf("ScheduleMissing of a (present), b, c and b again = %d, %v; want 2, nil", added, err)
	}
	s.wantEntry("amy", "a", a)
	s.wantEntry("amy", "b", b1)
	s.wantEntry("amy", "c", entry("amy", "c", 3))
	if err := s.complete(c, entry("amy", "a", 50)); err != nil {
		s.errorf("the claim of a present entry did not survive ScheduleMissing: %v", err)
	}
	// Invalid input writes nothing.
	for _, es := range [][]duework.Entry{
		{entry("amy", "d", 0), entry("amy", "", 0)},
		{entry("amy", "d", 0), entry("bo", "e", 0)},
	} {
		if n, err := ms.ScheduleMissing(bg, amy, es); !errors.Is(err, duework.ErrInvalid) || n != 0 {
			s.errorf("ScheduleMissing(%s) = %d, %v; want 0, duework.ErrInvalid", showAll(es), n, err)
		}
	}
	if n, err := ms.ScheduleMissing(bg, tenancy.Context{}, nil); !errors.Is(err, tenancy.ErrNoTenant) || n != 0 {
		s.errorf("ScheduleMissing with the zero Context = %d, %v; want 0, tenancy.ErrNoTenant", n, err)
	}
	s.wantAbsent("amy", "d")
	s.wantAbsent("bo", "e")
	if n, err := ms.ScheduleMissing(bg, amy, nil); err != nil || n != 0 {
		s.errorf("ScheduleMissing of nothing = %d, %v; want 0, nil", n, err)
	}
	// A new user starts in the unrouted group.
	if n, err := ms.ScheduleMissing(bg, tenant(s.t, "bo"), []duework.Entry{entry("bo", "x", -5)}); err != nil || n != 1 {
		s.fatalf("ScheduleMissing for a new user = %d, %v; want 1, nil", n, err)
	}
	s.wantReady("", at(5), "bo", "amy")
}

func claimGuard(s *suite) {
	g := s.x
	amy, mal := tenant(s.t, "amy"), tenant(s.t, "mallory")
	s.schedule(entry("amy", "a", 0), entry("amy", "b", 0), entry("amy", "c", 0))
	c := s.claimOne(key("amy", "a"), at(0), at(10))
	lost := duework.ErrClaimLost
	forged, onB := c, c
	forged.Token++
	onB.Entry = entry("amy", "b", 0)
	// A claim with a made-up token or of another entry is not current, nor, to StartClaims,
	// one with an Until other than the claim's: each is refused and changes nothing.
	s.wantOutcomesOf("StartClaims with a made-up token, a later Until than the claim's, and b with a's token",
		s.start(forged, withUntil(c, at(60)), onB), []error{lost, lost, lost})
	wantLost := func(what string, err error) {
		s.t.Helper()
		if !errors.Is(err, lost) {
			s.errorf("%s: %v, want duework.ErrClaimLost", what, err)
		}
	}
	wantLost("UnscheduleClaimed with a made-up token", g.UnscheduleClaimed(bg, amy, forged))
	wantLost("UnscheduleClaimed of unclaimed b with a's token", g.UnscheduleClaimed(bg, amy, onB))
	s.wantOutcomesOf("Unclaim with a made-up token, and of b with a's token", s.unclaim(forged, onB), []error{lost, lost})
	// Another tenant's Context never passes, whatever the call.
	if errs, err := g.StartClaims(bg, []duework.Unclaim{{Tenant: mal, Claim: c}}); err != nil || len(errs) != 1 || errs[0] == nil {
		s.errorf("StartClaims of amy's claim under mallory's Context = %v, %v; want an error for the item", errs, err)
	}
	if err := g.UnscheduleClaimed(bg, mal, c); err == nil {
		s.errorf("UnscheduleClaimed of amy's claim under mallory's Context: nil, want an error")
	}
	if errs, err := g.Unclaim(bg, []duework.Unclaim{{Tenant: mal, Claim: c}}); err != nil || len(errs) != 1 || errs[0] == nil {
		s.errorf("Unclaim of amy's claim under mallory's Context = %v, %v; want an error for the item", errs, err)
	}
	s.wantEntry("amy", "a", entry("amy", "a", 0))
	s.wantEntry("amy", "b", entry("amy", "b", 0))
	s.wantDue(at(5), key("amy", "b"), key("amy", "c"))
	// Past Until, read due at a later now, the claim is still current, and unstarted after
	// all those refusals, until another replaces it.
	s.wantDue(at(20), key("amy", "a"), key("amy", "b"), key("amy", "c"))
	s.wantOutcomesOf("StartClaims of the current claim past its Until", s.start(c), []error{nil})
	c2 := s.claimOne(key("amy", "a"), at(20), at(30))
	s.wantOutcomesOf("StartClaims of a replaced claim", s.start(c), []error{lost})
	wantLost("UnscheduleClaimed of a replaced claim", g.UnscheduleClaimed(bg, amy, c))
	s.wantOutcomesOf("Unclaim of a replaced claim", s.unclaim(c), []error{lost})
	s.wantEntry("amy", "a", entry("amy", "a", 0))
	// A completed claim is not current either.
	cc := s.claimOne(key("amy", "c"), at(20), at(30))
	if err := s.complete(cc, entry("amy", "c", 100)); err != nil {
		s.fatalf("Complete: %v", err)
	}
	s.wantOutcomesOf("StartClaims of a completed claim", s.start(cc), []error{lost})
	wantLost("UnscheduleClaimed of a completed claim", g.UnscheduleClaimed(bg, amy, cc))
	s.wantEntry("amy", "c", entry("amy", "c", 100))
	// UnscheduleClaimed of the current claim removes the entry and ends the claim.
	if err := g.UnscheduleClaimed(bg, amy, c2); err != nil {
		s.errorf("UnscheduleClaimed of the current claim: %v, want nil", err)
	}
	s.wantAbsent("amy", "a")
	s.wantOutcomesOf("StartClaims after UnscheduleClaimed", s.start(c2), []error{lost})
	wantLost("Complete after UnscheduleClaimed", s.complete(c2, entry("amy", "a", 50)))
	s.wantAbsent("amy", "a")
}

// wantOutcomes fails unless each of errs wraps the matching sentinel of want (nil: nil).
func (s *suite) wantOutcomes(call string, errs []error, err error, want []error) {
	s.t.Helper()
	if err != nil || len(errs) != len(want) {
		s.fatalf("%s: %d outcomes, %v; want %d, nil", call, len(errs), err, len(want))
	}
	for i := range want {
		if (want[i] == nil) != (errs[i] == nil) || !errors.Is(errs[i], want[i]) {
			s.errorf("%s: item %d's outcome is %v, want %v", call, i, errs[i], want[i])
		}
	}
}

func completeMany(s *suite) {
	s.schedule(entry("amy", "a", 0), entry("amy", "b", 0), entry("amy", "s", 0), entry("bo", "x", 0), entry("bo", "y", 0))
	stale := s.claimOne(key("amy", "s"), at(0), at(5))
	cs := s.claim(at(5), at(60), key("amy", "a"), key("amy", "b"), key("amy", "s"), key("bo", "x"), key("bo", "y"))
	if len(cs) != 5 {
		s.fatalf("Claim of five visible entries got %s", showClaims(cs))
	}
	ca, cb, cx, cy := cs[0], cs[1], cs[3], cs[4]
	amy, bo := tenant(s.t, "amy"), tenant(s.t, "bo")
	far := entry("amy", "b", 0)
	far.DueAt = vocab.MaxTime.AddDate(1, 0, 0)
	done := []duework.Done{
		{Tenant: amy, Claim: ca, Next: entry("amy", "a", 100)},               // good
		{Tenant: amy, Claim: stale, Next: entry("amy", "s", 100)},            // lost
		{Tenant: amy, Claim: cb, Next: entry("amy", "", 100)},                // invalid
		{Tenant: amy, Claim: cb, Next: far},                                  // invalid
		{Tenant: bo, Claim: cx, Next: entry("bo", "x", 100)},                 // good
		{Tenant: amy, Claim: ca, Next: entry("amy", "a", 200)},               // repeated
		{Tenant: tenancy.Context{}, Claim: cy, Next: entry("bo", "y", 100)},  // no tenant
		{Tenant: tenant(s.t, "mal"), Claim: cy, Next: entry("bo", "y", 100)}, // not mal's
		{Tenant: amy, Claim: cb, Next: entry("amy", "b", 100)},               // good
	}
	errs, err := s.x.CompleteMany(bg, done)
	s.wantOutcomes("CompleteMany", errs, err, []error{nil, duework.ErrClaimLost, duework.ErrInvalid,
		duework.ErrInvalid, nil, duework.ErrClaimLost, tenancy.ErrNoTenant, duework.ErrInvalid, nil})
	s.wantEntry("amy", "a", entry("amy", "a", 100))
	s.wantEntry("amy", "b", entry("amy", "b", 100))
	s.wantEntry("bo", "x", entry("bo", "x", 100))
	s.wantEntry("amy", "s", entry("amy", "s", 0))
	s.wantEntry("bo", "y", entry("bo", "y", 0))
	// The items that failed left their claims as they were.
	if err := s.complete(cs[2], entry("amy", "s", 100)); err != nil {
		s.errorf("Complete of s's current claim after CompleteMany: %v", err)
	}
	if err := s.complete(cy, entry("bo", "y", 100)); err != nil {
		s.errorf("Complete of bo's y after CompleteMany: %v", err)
	}
	errs, err = s.x.CompleteMany(bg, nil)
	s.wantOutcomes("CompleteMany of nothing", errs, err, nil)
}

func completeManyRetry(s *suite) {
	s.schedule(entry("amy", "a", 0), entry("amy", "b", 0), entry("bo", "x", 0))
	cs := s.claim(at(0), at(60), key("amy", "a"), key("amy", "b"), key("bo", "x"))
	if len(cs) != 3 {
		s.fatalf("Claim of three visible entries got %s", showClaims(cs))
	}
	done := make([]duework.Done, len(cs))
	for i, c := range cs {
		done[i] = duework.Done{Tenant: tenant(s.t, c.Entry.UserID), Claim: c, Next: entry(c.Entry.UserID, c.Entry.WorkKey, 100)}
	}
	// A write of the first item alone, as a batch cut short would leave it; then the retry
	// of the whole batch, with a different next for it.
	if err := s.complete(cs[0], entry("amy", "a", 50)); err != nil {
		s.fatalf("Complete: %v", err)
	}
	errs, err := s.x.CompleteMany(bg, done)
	s.wantOutcomes("CompleteMany after the first item was written", errs, err, []error{duework.ErrClaimLost, nil, nil})
	s.wantEntry("amy", "a", entry("amy", "a", 50))
	for i := range done {
		done[i].Next.DueAt = at(300)
	}
	errs, err = s.x.CompleteMany(bg, done)
	s.wantOutcomes("CompleteMany retried in whole", errs, err, []error{duework.ErrClaimLost, duework.ErrClaimLost, duework.ErrClaimLost})
	s.wantEntry("amy", "b", entry("amy", "b", 100))
	s.wantEntry("bo", "x", entry("bo", "x", 100))
	s.wantDue(at(60), key("amy", "a"))
	s.wantDue(at(200), key("amy", "a"), key("amy", "b"), key("bo", "x"))
}
