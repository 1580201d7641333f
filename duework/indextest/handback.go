package indextest

import (
	"time"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// The rules of the calls that hand back many claims at once.

func withToken(c duework.Claim, token uint64) duework.Claim { c.Token = token; return c }

func withUntil(c duework.Claim, until time.Time) duework.Claim { c.Until = until; return c }

func unclaim(s *suite) {
	a := duework.Entry{UserID: "amy", WorkKey: "a", Tier: "hot", DueAt: at(-5), LastRunAt: at(-60), MissStreak: 2}
	s.schedule(a, entry("amy", "b", 0), entry("amy", "c", 0), entry("bo", "x", 0))
	ca := s.claimOne(key("amy", "a"), at(0), at(100))
	cb := s.claimOne(key("amy", "b"), at(0), at(100))
	cx := s.claimOne(key("bo", "x"), at(0), at(100))
	amy := tenant(s.t, "amy")
	items := []duework.Unclaim{
		{Tenant: amy, Claim: ca},
		{Tenant: amy, Claim: ca}, // handed back already
		{Tenant: amy, Claim: withToken(cb, cb.Token+1000)},
		{Tenant: tenancy.Context{}, Claim: cx},
		{Tenant: tenant(s.t, "mallory"), Claim: cx},
	}
	errs, err := s.x.Unclaim(bg, items)
	s.wantOutcomes("Unclaim", errs, err, []error{nil, duework.ErrClaimLost, duework.ErrClaimLost, tenancy.ErrNoTenant, duework.ErrInvalid})
	// a is exactly as it was and visible at once, though its claim ran to t0+100s; b and
	// bo's x, whose items failed, are still claimed.
	s.wantEntry("amy", "a", a)
	s.wantDue(at(1), key("amy", "a"), key("amy", "c"))
	if err := s.complete(ca, entry("amy", "a", 50)); err == nil {
		s.errorf("Complete of a handed-back claim: nil, want duework.ErrClaimLost")
	}
	s.wantOutcomesOf("StartClaims of b, whose hand-back named a made-up token", s.start(cb), []error{nil})
	again := s.claimOne(key("amy", "a"), at(1), at(2))
	if again.Token == ca.Token {
		s.errorf("the claim after a hand-back reused token %d", ca.Token)
	}
	// A replaced or completed claim cannot be handed back; the current one can.
	later := s.claimOne(key("amy", "a"), at(2), at(3))
	if err := s.complete(cb, entry("amy", "b", 70)); err != nil {
		s.fatalf("Complete: %v", err)
	}
	s.wantOutcomesOf("Unclaim of a replaced, a completed and a current claim", s.unclaim(again, cb, later),
		[]error{duework.ErrClaimLost, duework.ErrClaimLost, nil})
	s.wantEntry("amy", "a", a)
	s.wantEntry("amy", "b", entry("amy", "b", 70))
	errs, err = s.x.Unclaim(bg, nil)
	s.wantOutcomes("Unclaim of nothing", errs, err, nil)
}

// wantOutcomesOf is wantOutcomes for outcomes already checked to be one per item.
func (s *suite) wantOutcomesOf(call string, errs, want []error) {
	s.t.Helper()
	s.wantOutcomes(call, errs, nil, want)
}

func unclaimFreesSlot(s *suite) {
	s.schedule(entry("amy", "a", -5), entry("amy", "b", -4), entry("bo", "x", 0))
	s.limit("amy", "", duework.Limits{MaxInFlight: 1})
	ca := s.claimOne(key("amy", "a"), at(0), at(100))
	s.wantReady("", at(0), "bo")
	if cs := s.claim(at(0), at(100), key("amy", "b")); len(cs) != 0 {
		s.fatalf("Claim of b with amy's one slot in flight got %s", showClaims(cs))
	}
	s.wantOutcomesOf("Unclaim", s.unclaim(ca), []error{nil})
	if st := s.user("amy", at(0)); st.InFlight != 0 {
		s.errorf("amy's in-flight count after the hand-back = %d, want 0", st.InFlight)
	}
	s.wantHead("", at(0), 5, "amy", []string{"a"}, true, 0)
	s.claimOne(key("amy", "b"), at(0), at(100))
}

func unclaimRefundsNoRate(s *suite) {
	s.schedule(entry("amy", "a", -5), entry("amy", "b", -5), entry("amy", "c", -5))
	s.limit("amy", "", duework.Limits{Every: 10 * time.Second, Burst: 2})
	cs := s.claim(at(0), at(100), keysOfUser("amy", "a", "b", "c")...)
	if len(cs) != 2 {
		s.fatalf("Claim of three keys with a burst of 2 got %s", showClaims(cs))
	}
	s.wantOutcomesOf("Unclaim", s.unclaim(cs...), []error{nil, nil})
	// The mark is t0+20s: the next item is allowed at t0+10s, as if nothing was handed back.
	s.wantReady("", at(10).Add(-time.Microsecond))
	if got := s.claim(at(5), at(100), key("amy", "a")); len(got) != 0 {
		s.errorf("Claim at t0+5s after two items at t0 (Every 10s, Burst 2) and their hand-back got %s", showClaims(got))
	}
	s.wantHead("", at(10), 5, "amy", []string{"a"}, true, 0)
}

func unclaimKeepsPlace(s *suite) {
	s.schedule(entry("amy", "a", -10), entry("amy", "b", -10), entry("bo", "x", -5))
	for _, k := range []string{"c1", "c2", "c3"} {
		s.schedule(entry("cy", k, -20))
	}
	s.limit("cy", "", duework.Limits{Weight: 4})
	ca := s.claimOne(key("amy", "a"), at(0), at(100))
	// cy, of weight 4 and Turn t0-20s, served one item at t0: its pass is t0-15s.
	cc := s.claimOne(key("cy", "c1"), at(0), at(100))
	s.wantReady("", at(0), "cy", "bo", "amy")
	s.wantOutcomesOf("Unclaim", s.unclaim(ca, cc), []error{nil, nil})
	s.wantReady("", at(0), "cy", "bo", "amy")
	s.wantTurn("", at(0), "amy", at(0), at(0))
	s.wantTurn("", at(0), "cy", at(-15), at(0))
}
