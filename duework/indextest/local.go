package indextest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/localstart"
)

// The rules of local starts: claims made under a localstart.Set (a Runner's, whose items
// never leave its process). An index may take part — Claim puts its claims in the Set,
// and they are then started by the Set's holder alone — or ignore the Set, and each rule
// holds either way. Which one the index under test does, the Set says after a Claim.

// localSet is a Set whose clock reads *now, with the context that carries it.
type localSet struct {
	now *time.Time
	set *localstart.Set
	ctx context.Context
}

func newLocalSet(now time.Time) *localSet {
	l := &localSet{now: &now}
	l.set = localstart.New(func() time.Time { return *l.now })
	l.ctx = localstart.With(bg, l.set)
	return l
}

// claim claims keys under l, failing the rule unless it gets each of them, and reports
// whether the index took part: it put all of them in l's Set, or none.
func (s *suite) claimLocal(l *localSet, now, until time.Time, keys ...duework.Key) ([]duework.Claim, bool) {
	s.t.Helper()
	before := l.set.Len()
	cs, err := s.x.Claim(l.ctx, keys, now, until)
	if err != nil || len(cs) != len(keys) {
		s.fatalf("Claim of %v under a Set: %s, %v; want a claim of each", keys, showClaims(cs), err)
	}
	switch added := l.set.Len() - before; added {
	case 0:
		return cs, false
	case len(cs):
		return cs, true
	default:
		s.fatalf("Claim of %d keys under a Set put %d of them in it: all or none", len(cs), added)
		return nil, false
	}
}

// startIn is start under ctx.
func (s *suite) startIn(ctx context.Context, cs ...duework.Claim) []error {
	s.t.Helper()
	return s.callIn(ctx, "StartClaims", s.x.StartClaims, cs)
}

// unclaimIn is unclaim under ctx.
func (s *suite) unclaimIn(ctx context.Context, cs ...duework.Claim) []error {
	s.t.Helper()
	return s.callIn(ctx, "Unclaim", s.x.Unclaim, cs)
}

// callIn calls f (the index's method name) under ctx with each claim under its own
// user's Context and returns the outcomes, failing the rule unless the call as a whole
// succeeds with one outcome per claim.
func (s *suite) callIn(ctx context.Context, name string, f func(context.Context, []duework.Unclaim) ([]error, error), cs []duework.Claim) []error {
	s.t.Helper()
	errs, err := f(ctx, unclaims(s, cs))
	if err != nil || len(errs) != len(cs) {
		s.fatalf("%s of %d claims: %d outcomes, %v", name, len(cs), len(errs), err)
	}
	return errs
}

func unclaims(s *suite, cs []duework.Claim) []duework.Unclaim {
	items := make([]duework.Unclaim, len(cs))
	for i, c := range cs {
		items[i] = duework.Unclaim{Tenant: tenant(s.t, c.Entry.UserID), Claim: c}
	}
	return items
}

func localStarts(s *suite) {
	s.schedule(entry("amy", "a", 0), entry("amy", "b", 0), entry("amy", "c", 0), entry("amy", "d", 0), entry("bo", "x", 0), entry("bo", "y", 0))
	l := newLocalSet(at(0))
	cs, part := s.claimLocal(l, at(0), at(60), key("amy", "a"), key("amy", "b"), key("amy", "c"), key("amy", "d"), key("bo", "x"), key("bo", "y"))
	a, b, c, d, x, y := cs[0], cs[1], cs[2], cs[3], cs[4], cs[5]
	started, lost := duework.ErrClaimStarted, duework.ErrClaimLost
	// Another process starts a before the holder: the Set's claim is started already for
	// it where the index takes part, and the holder then starts it; elsewhere the other
	// process starts it and the holder finds it started. One start either way.
	other, holder := []error{started}, []error{nil}
	if !part {
		other, holder = holder, other
	}
	s.wantOutcomesOf("StartClaims of a without the Set", s.startIn(bg, a), other)
	s.wantOutcomesOf("StartClaims of a under the Set", s.startIn(l.ctx, a), holder)
	// The holder starts b once, in one call or two; after that every call finds it started.
	s.wantOutcomesOf("StartClaims of b twice in one call under the Set", s.startIn(l.ctx, b, b), []error{nil, started})
	s.wantOutcomesOf("StartClaims of b again under the Set", s.startIn(l.ctx, b), []error{started})
	s.wantOutcomesOf("StartClaims of b without the Set", s.startIn(bg, b), []error{started})
	// The holder hands back c, never started, and not b, started; the entry of c is
	// visible again at once.
	s.wantOutcomesOf("Unclaim of c and b under the Set", s.unclaimIn(l.ctx, c, b), []error{nil, started})
	s.wantOutcomesOf("StartClaims of c after its hand-back", s.startIn(l.ctx, c), []error{lost})
	s.wantDue(at(1), key("amy", "c"))
	// Another process cannot hand back x where the index takes part: x may be running.
	// Elsewhere it can, as any unstarted claim.
	want := []error{started}
	if !part {
		want = []error{nil}
	}
	s.wantOutcomesOf("Unclaim of x without the Set", s.unclaimIn(bg, x), want)
	// Completion takes a claim of the Set as any other.
	if err := s.x.Complete(l.ctx, tenant(s.t, "bo"), y, entry("bo", "y", 100)); err != nil {
		s.errorf("Complete of y, a claim of the Set: %v", err)
	}
	s.wantOutcomesOf("StartClaims of y after its completion", s.startIn(l.ctx, y), []error{lost})
	// Where the index takes part, a claim of the Set counts as started from its Claim for
	// everyone but the holder: the host's Schedule ends it as it ends a started claim, and
	// the holder's start still takes it (its completion then finds it lost).
	s.schedule(entry("amy", "d", 5))
	want = []error{lost}
	if part {
		want = []error{nil}
	}
	s.wantOutcomesOf("StartClaims of d under the Set after the host's Schedule", s.startIn(l.ctx, d), want)
}

func localStartsEnded(s *suite) {
	s.schedule(entry("amy", "a", 0), entry("amy", "b", 0), entry("amy", "c", 0))
	l := newLocalSet(at(0))
	cs, _ := s.claimLocal(l, at(0), at(10), key("amy", "a"), key("amy", "b"))
	a, b := cs[0], cs[1]
	// Past their Until by the Set's clock: a, still current, is started by the holder;
	// b, claimed again by another process meanwhile, is lost to it.
	*l.now = at(30)
	b2 := s.claimOne(key("amy", "b"), at(20), at(40))
	s.wantOutcomesOf("StartClaims of a current and a replaced claim of the Set after their Until", s.startIn(l.ctx, a, b),
		[]error{nil, duework.ErrClaimLost})
	s.wantOutcomesOf("StartClaims of the claim that replaced b", s.startIn(bg, b2), []error{nil})
	s.wantOutcomesOf("StartClaims of a again", s.startIn(l.ctx, a), []error{duework.ErrClaimStarted})
	// A Set that dies with its process leaves its claims to end by time: the next claim
	// of the entry, made elsewhere, starts as any other.
	gone := newLocalSet(at(0))
	s.claimLocal(gone, at(0), at(10), key("amy", "c"))
	c2 := s.claimOne(key("amy", "c"), at(10), at(20))
	s.wantOutcomesOf("StartClaims of the claim after a lost Set's", s.startIn(bg, c2), []error{nil})
}

func parallelLocalStarters(s *suite) {
	const callers = 8
	s.schedule(entry("amy", "a", 0), entry("amy", "b", 0))
	l := newLocalSet(at(0))
	cs, _ := s.claimLocal(l, at(0), at(60), key("amy", "a"), key("amy", "b"))
	// a: starters only, half under the Set. b: starters and hand-backs, half of each
	// under the Set: it is started or handed back, once, never both.
	for _, c := range cs {
		outcomes := make([]error, callers)
		unclaimed := make([]bool, callers)
		var wg sync.WaitGroup
		for i := range callers {
			ctx, call, handBack := bg, s.x.StartClaims, c == cs[1] && i >= callers/2
			if i%2 == 0 {
				ctx = l.ctx
			}
			if handBack {
				call = s.x.Unclaim
			}
			wg.Go(func() {
				errs, err := call(ctx, unclaims(s, []duework.Claim{c}))
				if err != nil || len(errs) != 1 {
					outcomes[i] = errors.Join(errors.New("the call failed"), err)
					return
				}
				outcomes[i], unclaimed[i] = errs[0], handBack && errs[0] == nil
			})
		}
		wg.Wait()
		if c == cs[0] {
			s.wantStartedOnce("one claim of a Set, half of its starters under the Set", outcomes)
			continue
		}
		// One call wins: a start, after which every other call finds b started, or a
		// hand-back, after which every other finds it lost.
		wins, handedBack := 0, slices.Contains(unclaimed, true)
		for _, err := range outcomes {
			switch {
			case err == nil:
				wins++
			case !errors.Is(err, duework.ErrClaimStarted) && !(handedBack && errors.Is(err, duework.ErrClaimLost)):
				s.errorf("a claim of a Set started and handed back at once (handed back: %v): an outcome is %v", handedBack, err)
			}
		}
		if wins != 1 {
			s.errorf("a claim of a Set started and handed back at once: %d calls succeeded, want exactly one", wins)
		}
		s.wantDue(at(1), keysWhen(handedBack, key("amy", "b"))...)
	}
}

// keysWhen is keys when ok, else none.
func keysWhen(ok bool, keys ...duework.Key) []duework.Key {
	if ok {
		return keys
	}
	return nil
}
