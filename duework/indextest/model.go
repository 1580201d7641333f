package indextest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/reuse"
	"github.com/rotaworks/rota/tenancy"
)

const modelRule = "the Index agrees with the reference Model over any sequence of calls"

// stateMachine runs at least minSequences generated sequences of calls, each on a
// fresh index from newIndex, comparing every result with a fresh Model.
func stateMachine(t *testing.T, newIndex func(t *testing.T) duework.Index) {
	var runs atomic.Int64
	for batch := 0; runs.Load() < minSequences; batch++ {
		before := runs.Load()
		ok := t.Run(fmt.Sprintf("batch%d", batch), func(bt *testing.T) {
			rapid.Check(bt, func(rt *rapid.T) {
				runs.Add(1)
				x := newIndex(bt)
				if x == nil {
					rt.Fatalf("newIndex returned nil")
				}
				newSequence(rt, x).run()
			})
		})
		if !ok {
			return
		}
		if runs.Load() == before {
			t.Fatalf("rapid ran no sequences (is -rapid.checks 0?); the rule needs %d", minSequences)
		}
	}
}

var (
	genUser  = rapid.SampledFrom([]string{"amy", "bo", "cy", "di"})
	genWork  = rapid.SampledFrom([]string{"a", "b", "c"})
	genGroup = rapid.SampledFrom([]string{"", "", "pro", "free"})
	genKey   = rapid.Custom(func(t *rapid.T) duework.Key {
		return duework.Key{UserID: genUser.Draw(t, "user"), WorkKey: genWork.Draw(t, "work")}
	})
	// Instants are whole seconds in a small window, so that ties are common, plus now and
	// then a microsecond.
	genAt = rapid.Custom(func(t *rapid.T) time.Time {
		return at(rapid.IntRange(-10, 30).Draw(t, "s")).Add(time.Duration(rapid.SampledFrom([]int{0, 0, 0, 1}).Draw(t, "µs")) * time.Microsecond)
	})
	// Limits are zero most of the time, as in a lane of unlimited users; else small, so
	// that the caps and the rate bite within the sequence's window of instants.
	genLimits = rapid.Custom(func(t *rapid.T) duework.Limits {
		if rapid.IntRange(0, 9).Draw(t, "limited") < 6 {
			return duework.Limits{}
		}
		l := genSomeLimits.Draw(t, "some")
		switch rapid.IntRange(0, 9).Draw(t, "bad") { // now and then a field out of range
		case 0:
			l.Weight = rapid.SampledFrom([]int{-1, duework.MaxWeight + 1}).Draw(t, "badWeight")
		case 1:
			l.Every = -time.Second
		}
		return l
	})
	genSomeLimits = rapid.Custom(func(t *rapid.T) duework.Limits {
		return duework.Limits{
			Weight:      rapid.SampledFrom([]int{0, 0, 1, 2, 3, 5}).Draw(t, "weight"),
			MaxInFlight: rapid.SampledFrom([]int{0, 0, 1, 2, 3}).Draw(t, "maxInFlight"),
			Every:       rapid.SampledFrom([]time.Duration{0, 0, time.Microsecond, time.Second, 3 * time.Second, 7 * time.Second, 90 * time.Second}).Draw(t, "every"),
			Burst:       rapid.IntRange(0, 3).Draw(t, "burst"),
		}
	})
	genEntry = rapid.Custom(func(t *rapid.T) duework.Entry {
		k := genKey.Draw(t, "key")
		e := duework.Entry{
			UserID: k.UserID, WorkKey: k.WorkKey,
			Tier:       rapid.SampledFrom([]string{"hot", "cold", ""}).Draw(t, "tier"),
			DueAt:      genAt.Draw(t, "due"),
			MissStreak: rapid.IntRange(0, 3).Draw(t, "streak"),
		}
		if rapid.IntRange(0, 3).Draw(t, "failing") == 0 {
			e.ErrorStreak = rapid.IntRange(1, 3).Draw(t, "errors")
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

// hold is what a Ready with a Hold held: the users it read and until when.
type hold struct {
	users []string
	until time.Time
}

// sequence is one generated run: the index under test, the model and what both handed out.
type sequence struct {
	t      *rapid.T
	x      duework.Index
	m      *Model
	claims []claimPair
	holds  []hold // every Ready with a hold that read someone, for Release
	tokens map[duework.Key]map[uint64]bool
	// heads and due are what Ready appends to when x is a *duework.Memory, and appended
	// holds a copy of each page appended to them since they were last emptied, which must
	// not change.
	heads    []duework.Head
	due      []duework.Entry
	appended []appendedPage
	// lastClaims is what the last AppendClaim returned, which the next appends to.
	lastClaims []duework.Claim
	// cover, when not nil, counts the cases of the contract the run met (see note).
	cover map[string]bool
}

func newSequence(t *rapid.T, x duework.Index) *sequence {
	return &sequence{t: t, x: x, m: NewModel(), tokens: map[duework.Key]map[uint64]bool{}}
}

// note records that the run met case when cover is on.
func (s *sequence) note(c string, met bool) {
	if s.cover != nil && met {
		s.cover[c] = true
	}
}

func (s *sequence) fail(format string, args ...any) {
	s.t.Helper()
	s.t.Fatalf("rule %q broken: %s", modelRule, fmt.Sprintf(format, args...))
}

// sameErr checks that the index under test failed exactly when the model did, with the
// model's sentinel.
func (s *sequence) sameErr(call string, got, want error) {
	s.t.Helper()
	for _, sentinel := range []error{duework.ErrClaimLost, duework.ErrClaimStarted, duework.ErrInvalid, duework.ErrNotFound, tenancy.ErrNoTenant} {
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

// run drives x and the Model with the same calls, about 30 on average, and compares every
// answer.
func (s *sequence) run() {
	// A few entries first, so that most sequences have users to read, hold and route.
	for range rapid.IntRange(2, 8).Draw(s.t, "first") {
		s.schedule()
	}
	// Half the sequences give every user limits first, so that the limits meet claims and
	// reads early; the other half have zero limits but where Route sets them.
	if rapid.Bool().Draw(s.t, "limitFirst") {
		var routes []duework.Route
		for _, id := range []string{"amy", "bo", "cy", "di"} {
			routes = append(routes, duework.Route{UserID: id, Limits: genSomeLimits.Draw(s.t, "firstLimits")})
		}
		s.sameErr(fmt.Sprintf("Route(%v)", routes), s.x.Route(bg, routes), s.m.Route(bg, routes))
	}
	op := func(f func()) func(*rapid.T) { return func(*rapid.T) { f() } }
	// Some actions share a slot (see each), so that the others are drawn often enough.
	s.t.Repeat(map[string]func(*rapid.T){
		"Schedule":          op(s.schedule),
		"Unschedule":        op(s.unschedule),
		"DueBefore":         op(s.dueBefore),
		"Ready":             op(s.ready),
		"Route":             op(s.route),
		"Release":           op(s.release),
		"Claim":             op(s.claim),
		"Complete":          op(s.complete),
		"CompleteMany":      op(s.completeMany),
		"UnscheduleClaimed": op(s.unscheduleClaimed),
		"StartClaims":       op(s.startClaims),
		"Pause":             op(s.pause),
		"Unclaim":           op(s.unclaim),
		"User":              op(s.user),
		"Entries":           op(s.entries),
	})
}

// schedule schedules an entry, or now and then those of a few that are missing.
func (s *sequence) schedule() {
	if rapid.IntRange(0, 3).Draw(s.t, "missing") == 0 {
		s.scheduleMissing()
		return
	}
	e := genEntry.Draw(s.t, "entry")
	tc := tenant(s.t, e.UserID)
	s.sameErr(fmt.Sprintf("Schedule(%s)", show(e)), s.x.Schedule(bg, tc, e), s.m.Schedule(bg, tc, e))
}

func (s *sequence) scheduleMissing() {
	ms := s.x
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

// ready reads a group, or now and then which groups hold a ready user.
func (s *sequence) ready() {
	if rapid.IntRange(0, 3).Draw(s.t, "groups") == 0 {
		s.groups()
		return
	}
	q := duework.ReadyQuery{
		Group:   s.group(),
		Now:     genAt.Draw(s.t, "now"),
		Users:   rapid.IntRange(1, 4).Draw(s.t, "users"),
		PerUser: rapid.SampledFrom([]int{1, 2, 3, 3}).Draw(s.t, "perUser"),
	}
	if rapid.IntRange(0, 3).Draw(s.t, "hold") > 0 {
		q.Hold = time.Duration(rapid.IntRange(1, 10).Draw(s.t, "holdFor")) * time.Second
	}
	if s.cover != nil {
		s.note("Ready passes over a held user", s.m.heldIn(q.Group, q.Now) > 0)
	}
	got, gerr := s.read(q)
	want, werr := s.m.Ready(bg, q)
	s.sameErr("Ready", gerr, werr)
	if !samePage(got, want) {
		s.fail("Ready(%s) =\n%s\nwant\n%s", showQuery(q), showPage(got), showPage(want))
	}
	if q.Hold > 0 && len(want.Heads) > 0 {
		s.holds = append(s.holds, hold{users: userIDs(want.Heads), until: q.Now.Add(q.Hold)})
	}
	s.note("Ready holds", q.Hold > 0 && len(want.Heads) > 0)
	s.note("Ready reads a routed group", q.Group != "" && len(want.Heads) > 0)
	s.note("Ready cuts at Users and sets Next", !want.Next.IsZero())
	s.note("Ready cuts at PerUser", slices.ContainsFunc(want.Heads, func(h duework.Head) bool { return h.More }))
	s.note("Ready cuts Due by a user's limits", slices.ContainsFunc(want.Heads, func(h duework.Head) bool {
		return h.More && len(h.Due) < q.PerUser*h.Limits.EffectiveWeight()
	}))
	s.note("Ready reads a served user", slices.ContainsFunc(want.Heads, func(h duework.Head) bool { return !h.LastServed.IsZero() }))
	s.note("Ready reads a user whose pause has ended", slices.ContainsFunc(want.Heads, func(h duework.Head) bool {
		u := s.m.users[h.UserID]
		return u.pauseCounts() && !u.paused.After(q.Now)
	}))
}

// read is x's Ready of q, or, when x is a *duework.Memory and the draw says so, the
// appending read the dispatcher makes of it (internal/reuse) into s.heads and s.due,
// after which every page appended to them before must be as it was. Now and then they are
// emptied first, as the dispatcher does between cycles.
func (s *sequence) read(q duework.ReadyQuery) (duework.ReadyPage, error) {
	m, ok := s.x.(*duework.Memory)
	if !ok || !rapid.Bool().Draw(s.t, "append") {
		return s.x.Ready(bg, q)
	}
	if rapid.IntRange(0, 4).Draw(s.t, "emptyBuffer") == 0 {
		clear(s.heads)
		clear(s.due)
		s.heads, s.due, s.appended = s.heads[:0], s.due[:0], nil
	}
	appendReady := reuse.AppendReady.(func(*duework.Memory, context.Context, *[]duework.Head, *[]duework.Entry, duework.ReadyQuery) (duework.ReadyPage, error))
	p, err := appendReady(m, bg, &s.heads, &s.due, q)
	for i, kept := range s.appended {
		if !samePage(kept.page, kept.copy) {
			s.fail("the appending Ready(%s) changed page %d appended before it to the buffer:\n%s\nwas\n%s", showQuery(q), i, showPage(kept.page), showPage(kept.copy))
		}
	}
	if err == nil {
		s.appended = append(s.appended, appendedPage{page: p, copy: clonePage(p)})
	}
	return p, err
}

// claimed is x's Claim of keys, or, when x is a *duework.Memory and the draw says so, the
// appending claim the dispatcher makes of it (internal/reuse), appending to the claims of
// earlier calls, which must be left as they were; it returns the claims this call
// appended.
func (s *sequence) claimed(keys []duework.Key, now, until time.Time) ([]duework.Claim, error) {
	m, ok := s.x.(*duework.Memory)
	if !ok || !rapid.Bool().Draw(s.t, "append") {
		return s.x.Claim(bg, keys, now, until)
	}
	dst := s.lastClaims[:rapid.IntRange(0, len(s.lastClaims)).Draw(s.t, "keep")]
	kept := slices.Clone(dst)
	appendClaim := reuse.AppendClaim.(func(*duework.Memory, context.Context, []duework.Claim, []duework.Key, time.Time, time.Time) ([]duework.Claim, error))
	out, err := appendClaim(m, bg, dst, keys, now, until)
	if len(out) < len(kept) || !slices.Equal(out[:len(kept)], kept) || !slices.Equal(dst, kept) {
		s.fail("the appending Claim(%v, t0%+v) changed the %d claims it appended to", keys, now.Sub(t0), len(kept))
	}
	s.lastClaims = out
	return out[len(kept):], err
}

// appendedPage is a page the appending Ready returned and a copy of it made then.
type appendedPage struct{ page, copy duework.ReadyPage }

// clonePage copies p's heads and their Due.
func clonePage(p duework.ReadyPage) duework.ReadyPage {
	p.Heads = slices.Clone(p.Heads)
	for i := range p.Heads {
		p.Heads[i].Due = slices.Clone(p.Heads[i].Due)
	}
	return p
}

// group draws a group, most often one a stored user with entries is in.
func (s *sequence) group() string {
	var in []string
	for k := range s.m.rows {
		in = append(in, s.m.users[k.UserID].group)
	}
	if len(in) == 0 || rapid.IntRange(0, 3).Draw(s.t, "anyGroup") == 0 {
		return genGroup.Draw(s.t, "group")
	}
	slices.Sort(in)
	return rapid.SampledFrom(in).Draw(s.t, "groupInUse")
}

func (s *sequence) route() {
	routes := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) duework.Route {
		return duework.Route{UserID: genUser.Draw(t, "user"), Group: genGroup.Draw(t, "group"), Limits: genLimits.Draw(t, "limits")}
	}), 0, 3).Draw(s.t, "routes")
	if len(s.holds) > 0 && rapid.Bool().Draw(s.t, "routeHeld") {
		// A dispatcher routing users it read and holds.
		h := rapid.SampledFrom(s.holds).Draw(s.t, "held")
		for _, id := range h.users {
			routes = append(routes, duework.Route{UserID: id, Group: genGroup.Draw(s.t, "heldTo"), Limits: genLimits.Draw(s.t, "heldLimits")})
		}
	}
	s.note("Route refuses bad limits", slices.ContainsFunc(routes, func(r duework.Route) bool { return r.Limits.Validate() != nil }))
	s.note("Route moves a held user", slices.ContainsFunc(routes, func(r duework.Route) bool {
		u := s.m.users[r.UserID]
		return u != nil && u.group != r.Group && !u.heldUntil.IsZero()
	}))
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
	if len(s.holds) > 0 && rapid.IntRange(0, 3).Draw(s.t, "ownHold") > 0 {
		// A reader handing back what it read, and maybe others.
		h := rapid.SampledFrom(s.holds).Draw(s.t, "held")
		users, heldUntil = append(slices.Clone(h.users), users...), h.until
		if rapid.IntRange(0, 3).Draw(s.t, "others") > 0 {
			// Naming users another read holds too, perhaps since: most often a read whose
			// hold, ending at another instant, still holds one of them.
			others := slices.DeleteFunc(slices.Clone(s.holds), func(o hold) bool {
				return o.until.Equal(h.until) || !slices.ContainsFunc(o.users, func(id string) bool { return s.m.users[id].heldUntil.Equal(o.until) })
			})
			if len(others) == 0 || rapid.IntRange(0, 3).Draw(s.t, "anyOther") == 0 {
				others = s.holds
			}
			users = append(users, rapid.SampledFrom(others).Draw(s.t, "other").users...)
		}
	}
	s.note("Release ends a hold", slices.ContainsFunc(users, func(id string) bool {
		u := s.m.users[id]
		return u != nil && !u.heldUntil.IsZero() && u.heldUntil.Equal(heldUntil)
	}))
	s.note("Release passes over another reader's hold", slices.ContainsFunc(users, func(id string) bool {
		u := s.m.users[id]
		return u != nil && !u.heldUntil.IsZero() && !u.heldUntil.Equal(heldUntil)
	}))
	s.sameErr(fmt.Sprintf("Release(%v, t0%+v)", users, heldUntil.Sub(t0)),
		s.x.Release(bg, users, heldUntil), s.m.Release(bg, users, heldUntil))
}

func (s *sequence) claim() {
	keys := rapid.SliceOfN(genKey, 0, 5).Draw(s.t, "keys")
	if rapid.Bool().Draw(s.t, "wholeUser") {
		// Every key of one user, as a dispatcher asks for a user's Due, before the others.
		user := genUser.Draw(s.t, "claimUser")
		keys = append([]duework.Key{key(user, "a"), key(user, "b"), key(user, "c")}, keys...)
	}
	now := genAt.Draw(s.t, "now")
	until := now.Add(time.Duration(rapid.IntRange(1, 15).Draw(s.t, "for")) * time.Second)
	s.note("Claim ends a hold", slices.ContainsFunc(keys, func(k duework.Key) bool {
		r, u := s.m.rows[k], s.m.users[k.UserID]
		return r != nil && r.visible(now) && u.heldUntil.After(now)
	}))
	visible := map[duework.Key]bool{}
	for _, k := range keys {
		if r := s.m.rows[k]; r != nil && r.visible(now) {
			visible[k] = true
		}
	}
	got, gerr := s.claimed(keys, now, until)
	want, werr := s.m.Claim(bg, keys, now, until)
	s.sameErr("Claim", gerr, werr)
	s.note("Claim is cut by a user's limits", len(want) < len(visible))
	s.note("Claim passes over a paused user", slices.ContainsFunc(keys, func(k duework.Key) bool {
		u := s.m.users[k.UserID]
		return visible[k] && u.pausedAt(now)
	}))
	s.note("Claim moves a weighted user's pass short of now", slices.ContainsFunc(want, func(c duework.Claim) bool {
		u := s.m.users[c.Entry.UserID]
		return u.limits.EffectiveWeight() > 1 && u.pass.Before(now)
	}))
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
		s.t.Skip("no claims")
	}
	c := rapid.SampledFrom(s.claims).Draw(s.t, "claim")
	next := s.next(c.x)
	tc := tenant(s.t, c.x.Entry.UserID)
	s.sameErr(fmt.Sprintf("Complete(%v #%d)", c.x.Entry.Key(), c.x.Token),
		s.x.Complete(bg, tc, c.x, next), s.m.Complete(bg, tc, c.m, next))
}

func (s *sequence) completeMany() {
	if len(s.claims) == 0 {
		s.t.Skip("no claims")
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
	s.note("CompleteMany writes some items and refuses others",
		slices.ContainsFunc(want, func(err error) bool { return err == nil }) && slices.ContainsFunc(want, func(err error) bool { return err != nil }))
	s.sameErr("CompleteMany", gerr, werr)
	if len(got) != len(want) {
		s.fail("CompleteMany of %d items returned %d outcomes, want %d", len(xs), len(got), len(want))
	}
	for i := range got {
		s.sameErr(fmt.Sprintf("CompleteMany item %d (%v #%d)", i, xs[i].Claim.Entry.Key(), xs[i].Claim.Token), got[i], want[i])
	}
}

// unscheduleClaimed removes a claim's entry while the claim is current, or, three times in
// four, starts a few claims: StartClaims is the call that tells whether a claim is current.
func (s *sequence) unscheduleClaimed() {
	if len(s.claims) == 0 {
		s.t.Skip("no claims")
	}
	if rapid.IntRange(0, 3).Draw(s.t, "start") > 0 {
		s.startClaims()
		return
	}
	c := rapid.SampledFrom(s.claims).Draw(s.t, "claim")
	tc := tenant(s.t, c.x.Entry.UserID)
	s.sameErr(fmt.Sprintf("UnscheduleClaimed(%v #%d)", c.x.Entry.Key(), c.x.Token),
		s.x.UnscheduleClaimed(bg, tc, c.x), s.m.UnscheduleClaimed(bg, tc, c.m))
}

// items draws one to four of the claims handed out, as the index under test's and the
// model's items of a batch; now and then one has the zero Context.
func (s *sequence) items() (xs, ms []duework.Unclaim) {
	picks := rapid.SliceOfN(rapid.SampledFrom(s.claims), 1, 4).Draw(s.t, "claims")
	for i, c := range picks {
		tc := tenant(s.t, c.x.Entry.UserID)
		if rapid.IntRange(0, 9).Draw(s.t, fmt.Sprintf("noTenant%d", i)) == 0 {
			tc = tenancy.Context{}
		}
		xs = append(xs, duework.Unclaim{Tenant: tc, Claim: c.x})
		ms = append(ms, duework.Unclaim{Tenant: tc, Claim: c.m})
	}
	return xs, ms
}

// sameOutcomes compares a batch's outcomes, item by item.
func (s *sequence) sameOutcomes(call string, xs []duework.Unclaim, got []error, gerr error, want []error, werr error) {
	s.t.Helper()
	s.sameErr(call, gerr, werr)
	if len(got) != len(want) {
		s.fail("%s of %d items returned %d outcomes, want %d", call, len(xs), len(got), len(want))
	}
	for i := range got {
		s.sameErr(fmt.Sprintf("%s item %d (%v #%d)", call, i, xs[i].Claim.Entry.Key(), xs[i].Claim.Token), got[i], want[i])
	}
}

func (s *sequence) unclaim() {
	if len(s.claims) == 0 {
		s.t.Skip("no claims")
	}
	xs, ms := s.items()
	if rapid.IntRange(0, 3).Draw(s.t, "startFirst") == 0 {
		// A worker that started its items and then hands them back.
		got, gerr := s.x.StartClaims(bg, xs)
		want, werr := s.m.StartClaims(bg, ms)
		s.sameOutcomes("StartClaims", xs, got, gerr, want, werr)
	}
	got, gerr := s.x.Unclaim(bg, xs)
	want, werr := s.m.Unclaim(bg, ms)
	s.note("Unclaim hands back a current claim", slices.ContainsFunc(want, func(err error) bool { return err == nil }))
	s.note("Unclaim refuses a started claim", slices.ContainsFunc(want, func(err error) bool { return errors.Is(err, duework.ErrClaimStarted) }))
	s.sameOutcomes("Unclaim", xs, got, gerr, want, werr)
}

func (s *sequence) startClaims() {
	if len(s.claims) == 0 {
		s.t.Skip("no claims")
	}
	xs, ms := s.items()
	if rapid.IntRange(0, 3).Draw(s.t, "otherUntil") == 0 {
		// An item whose Until is not the claim's: never current.
		i := rapid.IntRange(0, len(xs)-1).Draw(s.t, "which")
		s.note("StartClaims refuses a current claim's item for its Until", xs[i].Tenant.Check() == nil && s.m.current(ms[i].Claim) != nil)
		xs[i].Claim.Until = xs[i].Claim.Until.Add(time.Microsecond)
		ms[i].Claim.Until = xs[i].Claim.Until
	}
	got, gerr := s.x.StartClaims(bg, xs)
	want, werr := s.m.StartClaims(bg, ms)
	s.note("StartClaims starts a claim", slices.ContainsFunc(want, func(err error) bool { return err == nil }))
	s.note("StartClaims refuses a started claim", slices.ContainsFunc(want, func(err error) bool { return errors.Is(err, duework.ErrClaimStarted) }))
	s.sameOutcomes("StartClaims", xs, got, gerr, want, werr)
}

// pausedUsers are the users the pause calls draw: the sequence's, and one never scheduled.
var pausedUsers = rapid.SampledFrom([]string{"amy", "bo", "cy", "di", "zed"})

// pause pauses a user, or now and then resumes one.
func (s *sequence) pause() {
	if rapid.IntRange(0, 2).Draw(s.t, "resume") == 0 {
		s.resume()
		return
	}
	id := pausedUsers.Draw(s.t, "user")
	until := at(rapid.IntRange(-10, 20).Draw(s.t, "until"))
	reason := rapid.SampledFrom([]string{"upstream-429", "operator", "operator", ""}).Draw(s.t, "reason")
	tc := tenant(s.t, id)
	if u := s.m.users[id]; u != nil {
		s.note("Pause of a user with entries", s.m.hasEntries(id))
		s.note("Pause keeps a later pause", u.pauseCounts() && until.Before(u.paused))
	}
	s.sameErr(fmt.Sprintf("Pause(%s, t0%+v, %q)", id, until.Sub(t0), reason), s.x.Pause(bg, tc, until, reason), s.m.Pause(bg, tc, until, reason))
}

func (s *sequence) resume() {
	id := pausedUsers.Draw(s.t, "user")
	if u := s.m.users[id]; u != nil {
		s.note("Resume ends a pause that counts", u.pauseCounts())
	}
	tc := tenant(s.t, id)
	s.sameErr(fmt.Sprintf("Resume(%s)", id), s.x.Resume(bg, tc), s.m.Resume(bg, tc))
}

func (s *sequence) paused() {
	now := genAt.Draw(s.t, "now")
	after := rapid.SampledFrom([]string{"", "", "amy", "b", "cy", "zz"}).Draw(s.t, "after")
	limit := rapid.IntRange(1, 3).Draw(s.t, "limit")
	got, gerr := s.x.Paused(bg, now, after, limit)
	want, werr := s.m.Paused(bg, now, after, limit)
	s.sameErr(fmt.Sprintf("Paused(t0%+v, %q, %d)", now.Sub(t0), after, limit), gerr, werr)
	s.note("Paused lists a user", len(want) > 0)
	if !samePauses(got, want) {
		s.fail("Paused(t0%+v, %q, %d) = %s, want %s", now.Sub(t0), after, limit, showPauses(got), showPauses(want))
	}
}

// user reads a user, or now and then the paused users.
func (s *sequence) user() {
	if rapid.IntRange(0, 2).Draw(s.t, "paused") == 0 {
		s.paused()
		return
	}
	id := rapid.SampledFrom([]string{"amy", "bo", "cy", "di", "zed"}).Draw(s.t, "user")
	now := genAt.Draw(s.t, "now")
	if len(s.claims) > 0 && rapid.Bool().Draw(s.t, "claimed") {
		// A user with a claim, read while it may still be in flight.
		c := rapid.SampledFrom(s.claims).Draw(s.t, "claim")
		id, now = c.x.Entry.UserID, c.x.Until.Add(-time.Duration(rapid.IntRange(0, 15).Draw(s.t, "before"))*time.Second)
	}
	got, gerr := s.x.User(bg, id, now)
	want, werr := s.m.User(bg, id, now)
	s.sameErr(fmt.Sprintf("User(%q, t0%+v)", id, now.Sub(t0)), gerr, werr)
	s.note("User reads a limited user with claims in flight", want.InFlight > 0 && want.Limits != duework.Limits{})
	s.note("User reads a paused user", !want.PausedUntil.IsZero())
	if !sameUser(got, want) {
		s.fail("User(%q, t0%+v) = %s, want %s", id, now.Sub(t0), showUser(got), showUser(want))
	}
}

// entries reads a user's entries, or now and then gets one.
func (s *sequence) entries() {
	if rapid.IntRange(0, 3).Draw(s.t, "get") == 0 {
		s.get()
		return
	}
	id := rapid.SampledFrom([]string{"amy", "bo", "cy", "di", "zed"}).Draw(s.t, "user")
	after := rapid.SampledFrom([]string{"", "", "a", "aa", "b", "c"}).Draw(s.t, "after")
	limit := rapid.IntRange(1, 4).Draw(s.t, "limit")
	got, gerr := s.x.Entries(bg, id, after, limit)
	want, werr := s.m.Entries(bg, id, after, limit)
	s.sameErr(fmt.Sprintf("Entries(%q, %q, %d)", id, after, limit), gerr, werr)
	s.note("Entries reads a claimed entry", slices.ContainsFunc(want, func(e duework.EntryState) bool { return !e.ClaimedUntil.IsZero() }))
	if !sameStates(got, want) {
		s.fail("Entries(%q, %q, %d) =\n%s\nwant\n%s", id, after, limit, showStates(got), showStates(want))
	}
}
