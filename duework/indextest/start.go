package indextest

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// The rules of starting claims: each claim runs at most once.

// start starts each claim under its own user's Context and returns the outcomes, failing
// the rule unless the call as a whole succeeds with one outcome per claim.
func (s *suite) start(cs ...duework.Claim) []error {
	s.t.Helper()
	items := make([]duework.Unclaim, len(cs))
	for i, c := range cs {
		items[i] = duework.Unclaim{Tenant: tenant(s.t, c.Entry.UserID), Claim: c}
	}
	errs, err := s.x.StartClaims(bg, items)
	if err != nil || len(errs) != len(cs) {
		s.fatalf("StartClaims of %d claims: %d outcomes, %v", len(cs), len(errs), err)
	}
	return errs
}

func startClaims(s *suite) {
	s.schedule(entry("amy", "a", 0), entry("amy", "b", 0), entry("amy", "c", 0), entry("amy", "d", 0), entry("bo", "x", 0))
	ca := s.claimOne(key("amy", "a"), at(0), at(10))
	cb := s.claimOne(key("amy", "b"), at(0), at(10))
	stale := s.claimOne(key("amy", "c"), at(0), at(5))
	cc := s.claimOne(key("amy", "c"), at(5), at(20))
	cd := s.claimOne(key("amy", "d"), at(0), at(10))
	cx := s.claimOne(key("bo", "x"), at(0), at(10))
	if err := s.complete(cd, entry("amy", "d", 100)); err != nil {
		s.fatalf("Complete: %v", err)
	}
	forged, noKey := ca, ca
	forged.Token += 1000
	noKey.Entry.WorkKey = ""
	amy, bo := tenant(s.t, "amy"), tenant(s.t, "bo")
	items := []duework.Unclaim{
		{Tenant: amy, Claim: ca},                      // current
		{Tenant: amy, Claim: ca},                      // the same claim again in the call
		{Tenant: amy, Claim: stale},                   // replaced by a later claim
		{Tenant: amy, Claim: cd},                      // completed
		{Tenant: amy, Claim: forged},                  // never made
		{Tenant: amy, Claim: withUntil(cb, at(60))},   // a later Until than the claim's
		{Tenant: amy, Claim: withToken(cb, cx.Token)}, // another entry's token
		{Tenant: tenant(s.t, "mallory"), Claim: cx},   // not mallory's
		{Tenant: tenancy.Context{}, Claim: cx},        // no tenant
		{Tenant: amy, Claim: noKey},                   // no work key
		{Tenant: bo, Claim: cx},                       // current
		{Tenant: amy, Claim: cc},                      // current
	}
	lost, started, inv := duework.ErrClaimLost, duework.ErrClaimStarted, duework.ErrInvalid
	errs, err := s.x.StartClaims(bg, items)
	s.wantOutcomes("StartClaims", errs, err, []error{nil, started, lost, lost, lost, lost, lost, inv, tenancy.ErrNoTenant, inv, nil, nil})
	errs, err = s.x.StartClaims(bg, items)
	s.wantOutcomes("StartClaims again", errs, err, []error{started, started, lost, lost, lost, lost, lost, inv, tenancy.ErrNoTenant, inv, started, started})
	// b's claim was named only with a forged Until and another's token: it is not started.
	s.wantOutcomesOf("StartClaims of b", s.start(cb), []error{nil})
	errs, err = s.x.StartClaims(bg, nil)
	s.wantOutcomes("StartClaims of nothing", errs, err, nil)
	// It wrote nothing else: the entries are as they were, claimed as they were.
	s.wantEntry("amy", "a", entry("amy", "a", 0))
	s.wantDue(at(9))
	s.wantDue(at(15), key("amy", "a"), key("amy", "b"), key("bo", "x"))
	if st := s.user("amy", at(0)); st.InFlight != 3 {
		s.errorf("amy's in-flight count after StartClaims = %d, want 3 (a, b and c)", st.InFlight)
	}
}

func startedPerClaim(s *suite) {
	s.schedule(entry("amy", "a", 0))
	c1 := s.claimOne(key("amy", "a"), at(0), at(10))
	s.wantOutcomesOf("StartClaims of the first claim", s.start(c1), []error{nil})
	// Past its Until the claim is still current, and still started, until another
	// replaces it; the next claim of the entry starts unstarted.
	s.wantOutcomesOf("StartClaims of the first claim past its Until", s.start(c1), []error{duework.ErrClaimStarted})
	c2 := s.claimOne(key("amy", "a"), at(10), at(20))
	s.wantOutcomesOf("StartClaims of the replaced and the new claim", s.start(c1, c2), []error{duework.ErrClaimLost, nil})
	// Schedule ends the claim, started or not: the host's change wins.
	s.schedule(entry("amy", "a", 5))
	s.wantOutcomesOf("StartClaims after Schedule replaced the entry", s.start(c2), []error{duework.ErrClaimLost})
	c3 := s.claimOne(key("amy", "a"), at(20), at(30))
	s.unschedule("amy", "a")
	s.wantOutcomesOf("StartClaims after Unschedule", s.start(c3), []error{duework.ErrClaimLost})
}

func startClaimsRetry(s *suite) {
	s.schedule(entry("amy", "a", 0), entry("amy", "b", 0), entry("bo", "x", 0))
	cs := s.claim(at(0), at(60), key("amy", "a"), key("amy", "b"), key("bo", "x"))
	if len(cs) != 3 {
		s.fatalf("Claim of three visible entries got %s", showClaims(cs))
	}
	// The first item alone, as a batch cut short would leave it; then the whole batch.
	s.wantOutcomesOf("StartClaims of the first", s.start(cs[0]), []error{nil})
	s.wantOutcomesOf("StartClaims retried after the first was started", s.start(cs...), []error{duework.ErrClaimStarted, nil, nil})
	s.wantOutcomesOf("StartClaims retried in whole", s.start(cs...), []error{duework.ErrClaimStarted, duework.ErrClaimStarted, duework.ErrClaimStarted})
}

func startedTakesCompletion(s *suite) {
	s.schedule(entry("amy", "a", -5), entry("amy", "b", -5), entry("amy", "c", -5), entry("amy", "d", -5))
	cs := s.claim(at(0), at(100), keysOfUser("amy", "a", "b", "c", "d")...)
	if len(cs) != 4 {
		s.fatalf("Claim of four visible entries got %s", showClaims(cs))
	}
	s.wantOutcomesOf("StartClaims of a, b and c", s.start(cs[:3]...), []error{nil, nil, nil})
	// Unclaim refuses a started claim and writes nothing: it ran, so it is completed.
	s.wantOutcomesOf("Unclaim of started a and unstarted d", s.unclaim(cs[0], cs[3]), []error{duework.ErrClaimStarted, nil})
	s.wantDue(at(1), key("amy", "d"))
	if st := s.user("amy", at(1)); st.InFlight != 3 {
		s.errorf("amy's in-flight count after a refused hand-back = %d, want 3", st.InFlight)
	}
	// Complete, CompleteMany and UnscheduleClaimed take a started claim as any other.
	if err := s.complete(cs[0], entry("amy", "a", 50)); err != nil {
		s.errorf("Complete of a started claim: %v, want nil", err)
	}
	errs, err := s.x.CompleteMany(bg, []duework.Done{{Tenant: tenant(s.t, "amy"), Claim: cs[1], Next: entry("amy", "b", 60)}})
	s.wantOutcomes("CompleteMany of a started claim", errs, err, []error{nil})
	if err := s.x.UnscheduleClaimed(bg, tenant(s.t, "amy"), cs[2]); err != nil {
		s.errorf("UnscheduleClaimed of a started claim: %v, want nil", err)
	}
	s.wantEntry("amy", "a", entry("amy", "a", 50))
	s.wantEntry("amy", "b", entry("amy", "b", 60))
	s.wantAbsent("amy", "c")
}

// parallelStarters starts one claim from many goroutines at once, and then many claims
// from workers that each start all of them in their own order and batches, and checks that
// each claim was started exactly once.
func parallelStarters(s *suite) {
	const starters = 8
	s.schedule(entry("amy", "a", 0))
	c := s.claimOne(key("amy", "a"), at(0), at(10))
	outcomes := make([]error, starters)
	var wg sync.WaitGroup
	for i := range starters {
		wg.Go(func() {
			errs, err := s.x.StartClaims(bg, []duework.Unclaim{{Tenant: tenant(s.t, "amy"), Claim: c}})
			if err != nil || len(errs) != 1 {
				outcomes[i] = errors.Join(errors.New("the call failed"), err)
				return
			}
			outcomes[i] = errs[0]
		})
	}
	wg.Wait()
	s.wantStartedOnce("one claim", outcomes)

	var all []duework.Unclaim
	for u := range 4 {
		for k := range 5 {
			e := entry(fmt.Sprintf("u%d", u), fmt.Sprintf("k%d", k), 0)
			s.schedule(e)
			c := s.claimOne(e.Key(), at(0), at(10))
			all = append(all, duework.Unclaim{Tenant: tenant(s.t, e.UserID), Claim: c})
		}
	}
	got := make([][]error, starters) // got[w][i]: worker w's outcome for all[i]
	for w := range starters {
		wg.Go(func() {
			got[w] = make([]error, len(all))
			order := slices.Concat(all[w*3%len(all):], all[:w*3%len(all)])
			for start := 0; start < len(order); start += 3 {
				batch := order[start:min(start+3, len(order))]
				errs, err := s.x.StartClaims(bg, batch)
				for j := range batch {
					i := (w*3 + start + j) % len(all)
					if err != nil || len(errs) != len(batch) {
						got[w][i] = errors.Join(errors.New("the call failed"), err)
						continue
					}
					got[w][i] = errs[j]
				}
			}
		})
	}
	wg.Wait()
	for i, c := range all {
		var each []error
		for w := range starters {
			each = append(each, got[w][i])
		}
		s.wantStartedOnce(fmt.Sprintf("claim of %v", c.Claim.Entry.Key()), each)
	}
}

// wantStartedOnce fails unless exactly one of outcomes is nil and the rest ErrClaimStarted.
func (s *suite) wantStartedOnce(what string, outcomes []error) {
	s.t.Helper()
	started := 0
	for _, err := range outcomes {
		switch {
		case err == nil:
			started++
		case !errors.Is(err, duework.ErrClaimStarted):
			s.errorf("%s, started by %d workers at once: an outcome is %v, want nil or duework.ErrClaimStarted", what, len(outcomes), err)
		}
	}
	if started != 1 {
		s.errorf("%s, started by %d workers at once, was started %d times, want exactly once", what, len(outcomes), started)
	}
}

func errorStreakRoundTrip(s *suite) {
	a := duework.Entry{UserID: "amy", WorkKey: "a", Tier: "hot", DueAt: at(-5), LastRunAt: at(-60), MissStreak: 2, ErrorStreak: 3}
	b := duework.Entry{UserID: "amy", WorkKey: "b", Tier: "hot", DueAt: at(-4), ErrorStreak: 4}
	s.schedule(a)
	if n, err := s.x.ScheduleMissing(bg, tenant(s.t, "amy"), []duework.Entry{b}); err != nil || n != 1 {
		s.fatalf("ScheduleMissing(%s) = %d, %v; want 1, nil", show(b), n, err)
	}
	s.wantEntry("amy", "a", a)
	s.wantEntry("amy", "b", b)
	if got := s.dueBefore(at(0), 10); !sameEntries(got, []duework.Entry{a, b}) {
		s.errorf("DueBefore = %s, want %s", showAll(got), showAll([]duework.Entry{a, b}))
	}
	if p := s.ready(duework.ReadyQuery{Now: at(0), Users: 5, PerUser: 5}); len(p.Heads) != 1 || !sameEntries(p.Heads[0].Due, []duework.Entry{a, b}) {
		s.errorf("Ready = %s, want amy with %s", showPage(p), showAll([]duework.Entry{a, b}))
	}
	es, err := s.x.Entries(bg, "amy", "", 10)
	if err != nil || len(es) != 2 || !sameEntry(es[0].Entry, a) || !sameEntry(es[1].Entry, b) {
		s.errorf("Entries(amy) = %s, %v; want %s", showStates(es), err, showAll([]duework.Entry{a, b}))
	}
	cs := s.claim(at(0), at(10), key("amy", "a"), key("amy", "b"))
	if !sameEntries(claimEntries(cs), []duework.Entry{a, b}) {
		s.fatalf("Claim = %s, want claims of %s", showClaims(cs), showAll([]duework.Entry{a, b}))
	}
	na, nb := a, b
	na.ErrorStreak, nb.ErrorStreak = 5, duework.MaxMissStreak
	if err := s.complete(cs[0], na); err != nil {
		s.fatalf("Complete: %v", err)
	}
	errs, err := s.x.CompleteMany(bg, []duework.Done{{Tenant: tenant(s.t, "amy"), Claim: cs[1], Next: nb}})
	s.wantOutcomes("CompleteMany", errs, err, []error{nil})
	s.wantEntry("amy", "a", na)
	s.wantEntry("amy", "b", nb)
}
