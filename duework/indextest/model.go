package indextest

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

const modelRule = "the Index agrees with the reference Model over any sequence of calls"

// stateMachine runs at least MinSequences generated sequences of at most 40 calls, each on a
// fresh index from newIndex, comparing every result with a fresh Model.
func stateMachine(t *testing.T, newIndex func(t *testing.T) duework.Index) {
	var runs atomic.Int64
	for batch := 0; runs.Load() < MinSequences; batch++ {
		before := runs.Load()
		ok := t.Run(fmt.Sprintf("batch%d", batch), func(bt *testing.T) {
			rapid.Check(bt, func(rt *rapid.T) {
				runs.Add(1)
				x := newIndex(bt)
				if x == nil {
					rt.Fatalf("newIndex returned nil")
				}
				runSequence(rt, x)
			})
		})
		if !ok {
			return
		}
		if runs.Load() == before {
			t.Fatalf("rapid ran no sequences (is -rapid.checks 0?); the rule needs %d", MinSequences)
		}
	}
}

var (
	genUser  = rapid.SampledFrom([]string{"amy", "bo", "cy", "di"})
	genWork  = rapid.SampledFrom([]string{"a", "b", "c"})
	genGroup = rapid.SampledFrom([]string{"", "pro", "free"})
	genKey   = rapid.Custom(func(t *rapid.T) duework.Key {
		return duework.Key{UserID: genUser.Draw(t, "user"), WorkKey: genWork.Draw(t, "work")}
	})
	// Instants are whole seconds in a small window, so that ties are common, plus now and
	// then a microsecond.
	genAt = rapid.Custom(func(t *rapid.T) time.Time {
		return at(rapid.IntRange(-10, 30).Draw(t, "s")).Add(time.Duration(rapid.SampledFrom([]int{0, 0, 0, 1}).Draw(t, "µs")) * time.Microsecond)
	})
	genEntry = rapid.Custom(func(t *rapid.T) duework.Entry {
		k := genKey.Draw(t, "key")
		e := duework.Entry{
			UserID: k.UserID, WorkKey: k.WorkKey,
			Tier:       rapid.SampledFrom([]string{"hot", "cold", ""}).Draw(t, "tier"),
			DueAt:      genAt.Draw(t, "due"),
			MissStreak: rapid.IntRange(0, 3).Draw(t, "streak"),
		}
		if rapid.Bool().Draw(t, "ran") {
			e.LastRunAt = genAt.Draw(t, "last")
		}
		return e
	})
)

// claimPair is one claim as the index under test and the model each handed it out: their
// tokens differ, so the sequence completes each side with its own.
type claimPair struct{ x, m duework.Claim }

// sequence is one generated run: the index under test, the model and what both handed out.
type sequence struct {
	t      *rapid.T
	x      duework.Index
	m      *Model
	claims []claimPair
	holds  []time.Time // the Now+Hold of every Ready with a hold, for Release
	tokens map[duework.Key]map[uint64]bool
}

func (s *sequence) fail(format string, args ...any) {
	s.t.Helper()
	s.t.Fatalf("rule %q broken: %s", modelRule, fmt.Sprintf(format, args...))
}

// sameErr checks that the index under test failed exactly when the model did, with the
// model's sentinel.
func (s *sequence) sameErr(call string, got, want error) {
	s.t.Helper()
	for _, sentinel := range []error{duework.ErrClaimLost, duework.ErrInvalid, duework.ErrNotFound, tenancy.ErrNoTenant} {
		if errors.Is(want, sentinel) && !errors.Is(got, sentinel) {
			s.fail("%s: %v, want an error wrapping %v", call, got, sentinel)
		}
	}
	if want == nil && got != nil {
		s.fail("%s: %v, want nil", call, got)
	}
	if want != nil && got == nil {
		s.fail("%s: nil, want %v", call, want)
	}
}

// runSequence drives x and a Model with the same calls and compares every answer.
func runSequence(t *rapid.T, x duework.Index) {
	s := &sequence{t: t, x: x, m: NewModel(), tokens: map[duework.Key]map[uint64]bool{}}
	ops := map[string]func(){
		"Schedule":        s.schedule,
		"ScheduleMissing": s.scheduleMissing,
		"Unschedule":      s.unschedule,
		"Get":             s.get,
		"DueBefore":       s.dueBefore,
		"Ready":           s.ready,
		"Route":           s.route,
		"Groups":          s.groups,
		"Release":         s.release,
		"Claim":           s.claim,
		"Complete":        s.complete,
		"CompleteMany":    s.completeMany,
		"ClaimGuard":      s.claimGuard,
	}
	names := make([]string, 0, len(ops))
	for name := range ops {
		names = append(names, name)
	}
	slices.Sort(names)
	genOp := rapid.SampledFrom(names)
	for range rapid.IntRange(1, 40).Draw(t, "calls") {
		ops[genOp.Draw(t, "call")]()
	}
}

func (s *sequence) schedule() {
	e := genEntry.Draw(s.t, "entry")
	tc := tenant(s.t, e.UserID)
	s.sameErr(fmt.Sprintf("Schedule(%s)", show(e)), s.x.Schedule(bg, tc, e), s.m.Schedule(bg, tc, e))
}

func (s *sequence) scheduleMissing() {
	ms, ok := s.x.(duework.MissingScheduler)
	if !ok {
		return
	}
	user := genUser.Draw(s.t, "user")
	es := rapid.SliceOfN(genEntry, 0, 4).Draw(s.t, "entries")
	for i := range es {
		es[i].UserID = user
	}
	tc := tenant(s.t, user)
	got, gerr := ms.ScheduleMissing(bg, tc, es)
	want, werr := s.m.ScheduleMissing(bg, tc, es)
	s.sameErr(fmt.Sprintf("ScheduleMissing(%s)", showAll(es)), gerr, werr)
	if got != want {
		s.fail("ScheduleMissing(%s) added %d, want %d", showAll(es), got, want)
	}
}

func (s *sequence) unschedule() {
	k := genKey.Draw(s.t, "key")
	tc := tenant(s.t, k.UserID)
	s.sameErr(fmt.Sprintf("Unschedule(%v)", k), s.x.Unschedule(bg, tc, k.WorkKey), s.m.Unschedule(bg, tc, k.WorkKey))
}

func (s *sequence) get() {
	k := genKey.Draw(s.t, "key")
	tc := tenant(s.t, k.UserID)
	got, gerr := s.x.Get(bg, tc, k.WorkKey)
	want, werr := s.m.Get(bg, tc, k.WorkKey)
	s.sameErr(fmt.Sprintf("Get(%v)", k), gerr, werr)
	if werr == nil && !sameEntry(got, want) {
		s.fail("Get(%v) = %s, want %s", k, show(got), show(want))
	}
}

func (s *sequence) dueBefore() {
	now, limit := genAt.Draw(s.t, "now"), rapid.IntRange(1, 8).Draw(s.t, "limit")
	got, gerr := s.x.DueBefore(bg, now, limit)
	want, werr := s.m.DueBefore(bg, now, limit)
	s.sameErr("DueBefore", gerr, werr)
	if !sameEntries(got, want) {
		s.fail("DueBefore(t0%+v, %d) =\n%s\nwant\n%s", now.Sub(t0), limit, showAll(got), showAll(want))
	}
}

func (s *sequence) ready() {
	q := duework.ReadyQuery{
		Group:   genGroup.Draw(s.t, "group"),
		Now:     genAt.Draw(s.t, "now"),
		Users:   rapid.IntRange(1, 4).Draw(s.t, "users"),
		PerUser: rapid.IntRange(1, 3).Draw(s.t, "perUser"),
	}
	if rapid.Bool().Draw(s.t, "hold") {
		q.Hold = time.Duration(rapid.IntRange(1, 10).Draw(s.t, "holdFor")) * time.Second
		s.holds = append(s.holds, q.Now.Add(q.Hold))
	}
	got, gerr := s.x.Ready(bg, q)
	want, werr := s.m.Ready(bg, q)
	s.sameErr("Ready", gerr, werr)
	if !samePage(got, want) {
		s.fail("Ready(%s) =\n%s\nwant\n%s", showQuery(q), showPage(got), showPage(want))
	}
}

func (s *sequence) route() {
	routes := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) duework.Route {
		return duework.Route{UserID: genUser.Draw(t, "user"), Group: genGroup.Draw(t, "group")}
	}), 0, 3).Draw(s.t, "routes")
	s.sameErr(fmt.Sprintf("Route(%v)", routes), s.x.Route(bg, routes), s.m.Route(bg, routes))
}

func (s *sequence) groups() {
	now := genAt.Draw(s.t, "now")
	got, gerr := s.x.Groups(bg, now)
	want, werr := s.m.Groups(bg, now)
	s.sameErr("Groups", gerr, werr)
	if !slices.Equal(got, want) {
		s.fail("Groups(t0%+v) = %q, want %q", now.Sub(t0), got, want)
	}
}

func (s *sequence) release() {
	users := rapid.SliceOfN(genUser, 0, 3).Draw(s.t, "users")
	heldUntil := genAt.Draw(s.t, "heldUntil")
	if len(s.holds) > 0 && rapid.Bool().Draw(s.t, "ownHold") {
		heldUntil = rapid.SampledFrom(s.holds).Draw(s.t, "held")
	}
	s.sameErr(fmt.Sprintf("Release(%v, t0%+v)", users, heldUntil.Sub(t0)),
		s.x.Release(bg, users, heldUntil), s.m.Release(bg, users, heldUntil))
}

func (s *sequence) claim() {
	keys := rapid.SliceOfN(genKey, 0, 5).Draw(s.t, "keys")
	now := genAt.Draw(s.t, "now")
	until := now.Add(time.Duration(rapid.IntRange(1, 15).Draw(s.t, "for")) * time.Second)
	got, gerr := s.x.Claim(bg, keys, now, until)
	want, werr := s.m.Claim(bg, keys, now, until)
	s.sameErr("Claim", gerr, werr)
	if len(got) != len(want) {
		s.fail("Claim(%v, t0%+v) claimed\n%s\nwant\n%s", keys, now.Sub(t0), showClaims(got), showClaims(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		k := g.Entry.Key()
		if !sameEntry(g.Entry, w.Entry) || !g.Until.Equal(w.Until) {
			s.fail("Claim(%v, t0%+v) claimed\n%s\nwant\n%s", keys, now.Sub(t0), showClaims(got), showClaims(want))
		}
		if s.tokens[k][g.Token] {
			s.fail("claim of %v has token %d, which an earlier claim of it had", k, g.Token)
		}
		if s.tokens[k] == nil {
			s.tokens[k] = map[uint64]bool{}
		}
		s.tokens[k][g.Token] = true
		s.claims = append(s.claims, claimPair{x: g, m: w})
	}
}

// next draws the entry a completion writes for c.
func (s *sequence) next(c duework.Claim) duework.Entry {
	next := genEntry.Draw(s.t, "next")
	next.UserID, next.WorkKey = c.Entry.UserID, c.Entry.WorkKey
	return next
}

func (s *sequence) complete() {
	if len(s.claims) == 0 {
		return
	}
	c := rapid.SampledFrom(s.claims).Draw(s.t, "claim")
	next := s.next(c.x)
	tc := tenant(s.t, c.x.Entry.UserID)
	s.sameErr(fmt.Sprintf("Complete(%v #%d)", c.x.Entry.Key(), c.x.Token),
		s.x.Complete(bg, tc, c.x, next), s.m.Complete(bg, tc, c.m, next))
}

func (s *sequence) completeMany() {
	if len(s.claims) == 0 {
		return
	}
	picks := rapid.SliceOfN(rapid.SampledFrom(s.claims), 1, 4).Draw(s.t, "claims")
	var xs, ms []duework.Done
	for i, c := range picks {
		tc := tenant(s.t, c.x.Entry.UserID)
		next := s.next(c.x)
		if rapid.IntRange(0, 9).Draw(s.t, fmt.Sprintf("bad%d", i)) == 0 {
			next.WorkKey = "" // one invalid item among good ones
		}
		xs = append(xs, duework.Done{Tenant: tc, Claim: c.x, Next: next})
		ms = append(ms, duework.Done{Tenant: tc, Claim: c.m, Next: next})
	}
	got, gerr := s.x.CompleteMany(bg, xs)
	want, werr := s.m.CompleteMany(bg, ms)
	s.sameErr("CompleteMany", gerr, werr)
	if len(got) != len(want) {
		s.fail("CompleteMany of %d items returned %d outcomes, want %d", len(xs), len(got), len(want))
	}
	for i := range got {
		s.sameErr(fmt.Sprintf("CompleteMany item %d (%v #%d)", i, xs[i].Claim.Entry.Key(), xs[i].Claim.Token), got[i], want[i])
	}
}

func (s *sequence) claimGuard() {
	g, ok := s.x.(duework.ClaimGuard)
	if !ok || len(s.claims) == 0 {
		return
	}
	c := rapid.SampledFrom(s.claims).Draw(s.t, "claim")
	tc := tenant(s.t, c.x.Entry.UserID)
	call := fmt.Sprintf("(%v #%d)", c.x.Entry.Key(), c.x.Token)
	if rapid.Bool().Draw(s.t, "unschedule") {
		s.sameErr("UnscheduleClaimed"+call, g.UnscheduleClaimed(bg, tc, c.x), s.m.UnscheduleClaimed(bg, tc, c.m))
		return
	}
	s.sameErr("CheckClaim"+call, g.CheckClaim(bg, tc, c.x), s.m.CheckClaim(bg, tc, c.m))
}
