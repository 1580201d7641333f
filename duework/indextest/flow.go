package indextest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/rotaworks/rota/duework"
)

// The rules of the in-flight cap and of what Head reports of a user's limits.

// tracker follows, from the calls a rule makes, what the contract says of its entries: each
// one's DueAt and current claim, and its users' limits and rate marks, so that a rule can
// work out which keys a Claim must claim. It is the rule's own arithmetic, written from the
// contract's words, not the Model's.
type tracker struct {
	due    map[duework.Key]time.Time
	claim  map[duework.Key]duework.Claim // the current claim; absent when none
	limits map[string]duework.Limits
	mark   map[string]time.Time
	keys   []duework.Key
}

func newTracker() *tracker {
	return &tracker{due: map[duework.Key]time.Time{}, claim: map[duework.Key]duework.Claim{},
		limits: map[string]duework.Limits{}, mark: map[string]time.Time{}}
}

// add schedules user's entries k0…k(n-1), due at t0 + due seconds, and routes user to ""
// with l.
func (tr *tracker) add(s *suite, user string, n, due int, l duework.Limits) {
	for i := range n {
		e := entry(user, fmt.Sprintf("k%d", i), due)
		s.schedule(e)
		tr.due[e.Key()], tr.keys = e.DueAt, append(tr.keys, e.Key())
	}
	s.limit(user, "", l)
	tr.limits[user] = l
}

func (tr *tracker) visible(k duework.Key, now time.Time) bool {
	c, claimed := tr.claim[k]
	return !tr.due[k].After(now) && (!claimed || !c.Until.After(now))
}

// inFlight counts user's current claims whose Until is after now.
func (tr *tracker) inFlight(user string, now time.Time) int {
	n := 0
	for k, c := range tr.claim {
		if k.UserID == user && c.Until.After(now) {
			n++
		}
	}
	return n
}

// room is how many of user's entries its limits let a Claim at now take: its free slots
// and its rate allowance.
func (tr *tracker) room(user string, now time.Time) int {
	l, room := tr.limits[user], 1<<30
	if l.MaxInFlight > 0 {
		room = max(0, l.MaxInFlight-tr.inFlight(user, now))
	}
	if l.Every > 0 {
		b, a := max(l.Burst, 1), max(l.Burst, 1)
		if d := tr.mark[user].Sub(now); d > 0 {
			a = max(0, b-int((d+l.Every-1)/l.Every))
		}
		room = min(room, a)
	}
	return room
}

// want returns the keys a Claim of keys at now must claim, in order.
func (tr *tracker) want(keys []duework.Key, now time.Time) []duework.Key {
	room, taken := map[string]int{}, map[duework.Key]bool{}
	var out []duework.Key
	for _, k := range keys {
		if _, ok := tr.due[k]; !ok || taken[k] || !tr.visible(k, now) {
			continue
		}
		if _, ok := room[k.UserID]; !ok {
			room[k.UserID] = tr.room(k.UserID, now)
		}
		if room[k.UserID] > 0 {
			room[k.UserID]--
			taken[k] = true
			out = append(out, k)
		}
	}
	return out
}

// claimAt makes the Claim, fails the rule unless it claimed exactly what the contract says,
// and follows it.
func (tr *tracker) claimAt(s *suite, keys []duework.Key, now, until time.Time) []duework.Claim {
	s.t.Helper()
	want := tr.want(keys, now)
	cs := s.claim(now, until, keys...)
	if got := keysOf(claimEntries(cs)); !slices.Equal(got, want) {
		s.fatalf("Claim(%v) at t0%+v claimed %v, want %v", keys, now.Sub(t0), got, want)
	}
	served := map[string]int{}
	for _, c := range cs {
		tr.claim[c.Entry.Key()] = c
		served[c.Entry.UserID]++
	}
	for user, k := range served {
		if e := tr.limits[user].Every; e > 0 {
			tr.mark[user] = laterOf(tr.mark[user], now).Add(time.Duration(k) * e)
		}
		if m, n := tr.limits[user].MaxInFlight, tr.inFlight(user, now); m > 0 && n > m {
			s.fatalf("Claim(%v) at t0%+v left %s with %d in flight, above MaxInFlight %d", keys, now.Sub(t0), user, n, m)
		}
	}
	return cs
}

// current returns the current claims, in key order.
func (tr *tracker) current() []duework.Claim {
	var out []duework.Claim
	for _, k := range tr.keys {
		if c, ok := tr.claim[k]; ok {
			out = append(out, c)
		}
	}
	return out
}

// step makes one random call: mostly a Claim of a few random keys at a random now (as
// often before the last one as after: a stale claimer), else a Complete or an Unclaim of
// a random current claim. It checks every Claim against the contract.
func (tr *tracker) step(s *suite, r *rand.Rand, nows int) {
	tr.stepAt(s, r, micros(r.IntN(nows), r.IntN(3)))
}

// stepAt is step with the Claim's now given; a completion's next DueAt is at most 10s
// before or 50s after it.
func (tr *tracker) stepAt(s *suite, r *rand.Rand, now time.Time) {
	cur := tr.current()
	switch n := r.IntN(10); {
	case n < 7 || len(cur) == 0:
		keys := make([]duework.Key, 1+r.IntN(6))
		for i := range keys {
			keys[i] = tr.keys[r.IntN(len(tr.keys))]
		}
		tr.claimAt(s, keys, now, now.Add(time.Duration(1+r.IntN(30))*time.Second))
	case n < 9:
		c := cur[r.IntN(len(cur))]
		next := entry(c.Entry.UserID, c.Entry.WorkKey, 0)
		next.DueAt = now.Add(time.Duration(r.IntN(60)-10) * time.Second)
		if err := s.complete(c, next); err != nil {
			s.fatalf("Complete of a current claim: %v", err)
		}
		delete(tr.claim, c.Entry.Key())
		tr.due[c.Entry.Key()] = next.DueAt
	default:
		c := cur[r.IntN(len(cur))]
		if errs := s.unclaim(c); errs[0] != nil {
			s.fatalf("Unclaim of a current claim: %v", errs[0])
		}
		delete(tr.claim, c.Entry.Key())
	}
}

func maxInFlight(s *suite) {
	tr := newTracker()
	caps := map[string]int{"amy": 2, "bo": 1, "cy": 3, "dy": 0}
	for _, user := range []string{"amy", "bo", "cy", "dy"} {
		tr.add(s, user, 6, -50, duework.Limits{MaxInFlight: caps[user]})
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		tr.step(s, r, 120)
		// At another now the count may be above the cap: claims made at later nows do not
		// count those that end before them.
		now := micros(r.IntN(130), 0)
		for user := range caps {
			if st, want := s.user(user, now), tr.inFlight(user, now); st.InFlight != want {
				s.fatalf("User(%s, t0%+v).InFlight = %d; the claims made say %d", user, now.Sub(t0), st.InFlight, want)
			}
		}
	}
	// A stale claimer, whose now is before a claim already made, is held to the cap too:
	// the claim's Until is after its now as well.
	s.schedule(entry("ed", "a", -5), entry("ed", "b", -5))
	s.limit("ed", "", duework.Limits{MaxInFlight: 1})
	s.claimOne(key("ed", "a"), at(100), at(200))
	if cs := s.claim(at(50), at(60), key("ed", "b")); len(cs) != 0 {
		s.errorf("a Claim at t0+50s of ed's second entry, with her one slot taken at t0+100s until t0+200s, got %s", showClaims(cs))
	}
}

func cappedNotReady(s *suite) {
	s.schedule(entry("amy", "a", -10), entry("amy", "b", -10), entry("amy", "c", -10), entry("amy", "d", -10))
	s.limit("amy", "", duework.Limits{MaxInFlight: 2})
	s.claimOne(key("amy", "a"), at(0), at(30))
	s.claimOne(key("amy", "b"), at(0), at(20))
	// Two in flight: amy is ready at the second-latest Until, t0+20s, when b's claim ends.
	s.wantReady("", at(0))
	s.wantReady("", at(20).Add(-time.Microsecond))
	s.wantGroups(at(20).Add(-time.Microsecond))
	s.wantTurn("", at(20), "amy", at(20), at(0))
	s.wantHead("", at(20), 5, "amy", []string{"b"}, true, 1)
	s.wantHead("", at(30), 5, "amy", []string{"a", "b"}, true, 0)
	// Lowered to one with two in flight, she is ready at the latest Until.
	s.limit("amy", "", duework.Limits{MaxInFlight: 1})
	s.wantReady("", at(30).Add(-time.Microsecond))
	s.wantGroups(at(30).Add(-time.Microsecond))
	s.wantGroups(at(30), "")
	s.wantHead("", at(30), 5, "amy", []string{"a"}, true, 0)
	// Without a cap she is ready with the rest at once.
	s.limit("amy", "", duework.Limits{})
	s.wantHead("", at(0), 5, "amy", []string{"c", "d"}, false, 2)
}

func completeFreesSlot(s *suite) {
	s.schedule(entry("amy", "a", -5), entry("amy", "b", -5))
	s.limit("amy", "", duework.Limits{MaxInFlight: 1})
	c := s.claimOne(key("amy", "a"), at(0), at(100))
	s.wantReady("", at(0))
	if err := s.complete(c, entry("amy", "a", 50)); err != nil {
		s.fatalf("Complete: %v", err)
	}
	s.wantHead("", at(0), 5, "amy", []string{"b"}, false, 0)
	s.claimOne(key("amy", "b"), at(0), at(100))
}

func claimEndFreesSlot(s *suite) {
	s.schedule(entry("amy", "a", -5), entry("amy", "b", -5))
	s.limit("amy", "", duework.Limits{MaxInFlight: 1})
	c := s.claimOne(key("amy", "a"), at(0), at(10))
	s.wantReady("", at(10).Add(-time.Microsecond))
	if st := s.user("amy", at(10).Add(-time.Microsecond)); st.InFlight != 1 {
		s.errorf("amy's in-flight count just before her claim's Until = %d, want 1", st.InFlight)
	}
	if st := s.user("amy", at(10)); st.InFlight != 0 {
		s.errorf("amy's in-flight count at her claim's Until = %d, want 0", st.InFlight)
	}
	s.wantHead("", at(10), 5, "amy", []string{"a"}, true, 0)
	s.claimOne(key("amy", "b"), at(10), at(20))
	// The ended claim is still the entry's current one.
	if err := s.complete(c, entry("amy", "a", 50)); err != nil {
		s.errorf("Complete of the ended claim, not replaced: %v, want nil", err)
	}
}

func claimLimitsKeyOrder(s *suite) {
	s.schedule(entry("amy", "a", -5), entry("amy", "b", -5), entry("amy", "c", -5), entry("amy", "d", -5),
		entry("amy", "later", 50), entry("bo", "x", -5))
	s.limit("amy", "", duework.Limits{MaxInFlight: 2})
	keys := []duework.Key{key("amy", "later"), key("amy", "c"), key("amy", "c"), key("bo", "x"), key("amy", "a"), key("amy", "b"), key("amy", "d")}
	cs := s.claim(at(0), at(100), keys...)
	if got, want := keysOf(claimEntries(cs)), []duework.Key{key("amy", "c"), key("bo", "x"), key("amy", "a")}; !slices.Equal(got, want) {
		s.errorf("Claim(%v) with amy capped at 2 claimed %v, want %v: her first two claimable keys, and bo's", keys, got, want)
	}
	// A Claim that takes nothing of a capped user leaves her LastServed as it was.
	if cs := s.claim(at(1), at(100), key("amy", "b")); len(cs) != 0 {
		s.errorf("Claim of b with amy's slots full got %s", showClaims(cs))
	}
	if st := s.user("amy", at(1)); !st.LastServed.Equal(at(0)) || st.InFlight != 2 {
		s.errorf("after a Claim that took nothing of hers, amy = %s, want LastServed t0 and 2 in flight", showUser(st))
	}
}

func headLimits(s *suite) {
	limits := duework.Limits{Weight: 2, MaxInFlight: 3, Every: time.Second, Burst: 5}
	s.schedule(entry("amy", "a", -5), entry("amy", "b", -5), entry("amy", "c", -5), entry("amy", "d", -5), entry("bo", "x", -5))
	s.limit("amy", "", limits)
	s.claimOne(key("amy", "a"), at(0), at(10))
	s.claimOne(key("amy", "b"), at(0), at(20))
	for _, c := range []struct {
		now      time.Time
		due      []string
		inFlight int
	}{{at(5), []string{"c"}, 2}, {at(15), []string{"a", "c"}, 1}, {at(20), []string{"a", "b", "c"}, 0}} {
		p := s.ready(duework.ReadyQuery{Now: c.now, Users: 5, PerUser: 3})
		for _, h := range p.Heads {
			want := duework.Limits{}
			if h.UserID == "amy" {
				want = limits
				s.wantHead("", c.now, 3, "amy", c.due, true, c.inFlight)
			}
			if h.Limits != want {
				s.errorf("at t0%+v %s's Head has Limits %+v, want %+v", c.now.Sub(t0), h.UserID, h.Limits, want)
			}
		}
		if len(p.Heads) != 2 {
			s.errorf("Ready at t0%+v = %s, want amy and bo", c.now.Sub(t0), showHeads(p.Heads))
		}
	}
}
