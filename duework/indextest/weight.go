package indextest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/rotaworks/rota/duework"
)

// The rules of weights, and of the limits Route stores.

// wantTurnOf fails unless User(user, now) has Turn turn.
func (s *suite) wantTurnOf(user string, now, turn time.Time, why string) {
	s.t.Helper()
	if st := s.user(user, now); !st.Turn.Equal(turn) {
		s.errorf("%s: %s's Turn is t0%+v, want t0%+v", why, user, st.Turn.Sub(t0), turn.Sub(t0))
	}
}

// many schedules user's entries k0…k(n-1), all due at t0 + due seconds.
func (s *suite) many(user string, n, due int) []string {
	s.t.Helper()
	ks := make([]string, n)
	for i := range ks {
		ks[i] = fmt.Sprintf("k%d", i)
		s.schedule(entry(user, ks[i], due))
	}
	return ks
}

func weightStride(s *suite) {
	ks := s.many("amy", 10, -10)
	s.limit("amy", "", duework.Limits{Weight: 3})
	n := func(now time.Time, works ...string) {
		s.t.Helper()
		if cs := s.claim(now, at(1000), keysOfUser("amy", works...)...); len(cs) != len(works) {
			s.fatalf("Claim of amy's %q at t0%+v got %s", works, now.Sub(t0), showClaims(cs))
		}
	}
	// Turn t0-10s, served 1 of weight 3 at t0: L = 10s, s = floor(10,000,000µs/3).
	n(at(0), ks[0])
	s.wantTurnOf("amy", at(0), micros(-10, 3_333_333), "weight 3, one item, 10s after its Turn")
	// Turn t0-6.666667s, served 2 at t0+5s: L = 11,666,667µs, s = floor(L·2/3) = 7,777,778µs.
	n(at(5), ks[1], ks[2])
	s.wantTurnOf("amy", at(5), micros(1, 111_111), "weight 3, two items, 11.666667s after its Turn")
	// k ≥ w: the pass is now.
	n(at(6), ks[3], ks[4], ks[5])
	s.wantTurnOf("amy", at(6), at(6), "weight 3, three items")
	// A Claim whose now is before the Turn (a stale claimer) leaves the pass.
	n(at(2), ks[6])
	s.wantTurnOf("amy", at(6), at(6), "weight 3, one item at a now before its Turn")
	if st := s.user("amy", at(6)); !st.LastServed.Equal(at(6)) {
		s.errorf("amy's LastServed after a stale claim = %v, want t0+6s", st.LastServed)
	}
	// Weight 1 goes to the back at once; a step of less than a microsecond rounds to none.
	s.many("bo", 2, -10)
	s.claimOne(key("bo", "k0"), at(0), at(1000))
	s.wantTurnOf("bo", at(0), at(0), "weight 1")
	s.schedule(duework.Entry{UserID: "cy", WorkKey: "a", DueAt: micros(0, -1)}, duework.Entry{UserID: "cy", WorkKey: "b", DueAt: micros(0, -1)})
	s.limit("cy", "", duework.Limits{Weight: duework.MaxWeight})
	s.claimOne(key("cy", "a"), at(0), at(1000))
	s.wantTurnOf("cy", at(0), micros(0, -1), "weight 1000, served 1µs after its Turn")
}

// weightStrideFloor: a weighted user whose Turn fell far behind (an outage, a backlog that
// came due long ago) starts each stride no earlier than now − 3w·(now − LastServed), so
// that after its first serve it does not take serve after serve while it catches up.
func weightStrideFloor(s *suite) {
	ks := s.many("dan", 6, -1000)
	s.limit("dan", "", duework.Limits{Weight: 4})
	// Never served: no floor. Turn t0-1000s, served one at t0-100s: pass t0-775s.
	s.claimOne(key("dan", ks[0]), at(-100), at(1000))
	s.wantTurnOf("dan", at(0), at(-775), "weight 4, first serve, 900s after its Turn")
	// Served again at t0-90s: the floor is t0-90s − 12·10s = t0-210s, above t0-775s, so
	// the stride starts there: pass t0-210s + 120s/4 = t0-180s.
	s.claimOne(key("dan", ks[1]), at(-90), at(1000))
	s.wantTurnOf("dan", at(0), at(-180), "weight 4, second serve 10s after the first")
	// Served at t0-80s: the floor t0-80s − 120s = t0-200s is below its Turn: pass
	// t0-180s + 100s/4 = t0-155s.
	s.claimOne(key("dan", ks[2]), at(-80), at(1000))
	s.wantTurnOf("dan", at(0), at(-155), "weight 4, floor below its Turn")
	// Served at t0-79s: the floor t0-79s − 12s = t0-91s is above its Turn: pass
	// t0-91s + 12s/4 = t0-88s.
	s.claimOne(key("dan", ks[3]), at(-79), at(1000))
	s.wantTurnOf("dan", at(0), at(-88), "weight 4, served 1s after the last")
}

func weightScalesPerUser(s *suite) {
	s.many("amy", 10, -10)
	s.many("bo", 10, -10)
	s.limit("amy", "", duework.Limits{Weight: 3})
	q := duework.ReadyQuery{Now: at(0), Users: 5, PerUser: 2}
	for _, c := range []struct {
		perUser int
		amy, bo int
		amyMore bool
	}{{1, 3, 1, true}, {2, 6, 2, true}, {4, 10, 4, false}} {
		q.PerUser = c.perUser
		p := s.ready(q)
		if len(p.Heads) != 2 || len(p.Heads[0].Due) != c.amy || p.Heads[0].More != c.amyMore || len(p.Heads[1].Due) != c.bo || !p.Heads[1].More {
			s.errorf("Ready(PerUser %d) with amy of weight 3 = %s, want amy with %d (More %v) and bo with %d (More true)",
				c.perUser, showHeads(p.Heads), c.amy, c.amyMore, c.bo)
		}
	}
}

// weightOne drives two groups the same way: users z1…z3 with zero Limits and o1…o3 with
// Weight 1 and a Burst but no Every, which is no limit; every read must be the same.
func weightOne(s *suite) {
	for n, u := range []string{"1", "2", "3"} {
		for i := range 3 {
			s.schedule(entry("z"+u, fmt.Sprintf("k%d", i), -i-2*n), entry("o"+u, fmt.Sprintf("k%d", i), -i-2*n))
		}
		s.route(duework.Route{UserID: "z" + u, Group: "zero"}, duework.Route{UserID: "o" + u, Group: "one", Limits: duework.Limits{Weight: 1, Burst: 5}})
	}
	r := rand.New(rand.NewPCG(5, 6))
	for step := range 40 {
		now := at(step)
		var pages [2]duework.ReadyPage
		var claims [2][]duework.Claim
		for i, g := range []string{"zero", "one"} {
			pages[i] = s.ready(duework.ReadyQuery{Group: g, Now: now, Users: 2, PerUser: 2})
			var keys []duework.Key
			for _, h := range pages[i].Heads {
				keys = append(keys, keysOf(h.Due)...)
			}
			claims[i] = s.claim(now, now.Add(time.Duration(1+step%5)*time.Second), keys...)
		}
		for i := range pages[1].Heads {
			h := &pages[1].Heads[i]
			h.UserID, h.Limits = "z"+strings.TrimPrefix(h.UserID, "o"), duework.Limits{}
			for j := range h.Due {
				h.Due[j].UserID = h.UserID
			}
		}
		if !samePage(pages[0], pages[1]) || len(claims[0]) != len(claims[1]) {
			s.fatalf("at t0%+v the zero-limit group read\n%s\nand the weight-1 group\n%s", now.Sub(t0), showPage(pages[0]), showPage(pages[1]))
		}
		if len(claims[0]) > 0 && r.IntN(2) == 0 { // complete the same item in both
			j, due := r.IntN(len(claims[0])), step+r.IntN(6)-2
			for _, c := range []duework.Claim{claims[0][j], claims[1][j]} {
				if err := s.complete(c, entry(c.Entry.UserID, c.Entry.WorkKey, due)); err != nil {
					s.fatalf("Complete: %v", err)
				}
			}
		}
	}
}

func routeKeepsPlace(s *suite) {
	ks := s.many("amy", 5, -10)
	s.limit("amy", "", duework.Limits{Weight: 3})
	s.claimOne(key("amy", ks[0]), at(0), at(100))
	pass := micros(-10, 3_333_333)
	s.hold("", at(0), 1, 10*time.Second, "amy")
	kept := func(why string, group string, turn time.Time, served time.Time, held time.Time) {
		s.t.Helper()
		st := s.user("amy", at(0))
		if st.Group != group || !st.Turn.Equal(turn) || !st.LastServed.Equal(served) || !st.HeldUntil.Equal(held) {
			s.errorf("%s: amy = %s, want group %q, Turn t0%+v, LastServed t0%+v, held until t0%+v", why, showUser(st), group, turn.Sub(t0), served.Sub(t0), held.Sub(t0))
		}
	}
	kept("weight 3 served one at t0", "", pass, at(0), at(10))
	s.limit("amy", "", duework.Limits{})
	kept("routed to weight 1, keeping her pass", "", pass, at(0), at(10))
	s.limit("amy", "pro", duework.Limits{MaxInFlight: 1})
	kept("capped at 1 with a claim in flight until t0+100s", "pro", at(100), at(0), at(10))
	s.limit("amy", "pro", duework.Limits{})
	kept("the cap lifted", "pro", pass, at(0), at(10))
	// The rate mark is kept too: served under a rate at t0+1s, then routed without it and
	// back.
	s.limit("amy", "pro", duework.Limits{Every: 10 * time.Second})
	s.claimOne(key("amy", ks[1]), at(1), at(100))
	kept("served at t0+1s with Every 10s", "pro", at(11), at(1), time.Time{})
	s.limit("amy", "pro", duework.Limits{})
	kept("the rate lifted", "pro", at(1), at(1), time.Time{})
	s.limit("amy", "pro", duework.Limits{Every: 10 * time.Second})
	kept("the rate set again", "pro", at(11), at(1), time.Time{})
}

func badLimits(s *suite) {
	s.schedule(entry("amy", "a", 0), entry("bo", "x", 0))
	inv := duework.ErrInvalid
	route := func(l duework.Limits) func() error {
		return func() error {
			return s.x.Route(bg, []duework.Route{{UserID: "bo", Group: "pro", Limits: duework.Limits{MaxInFlight: 1}}, {UserID: "amy", Group: "pro", Limits: l}})
		}
	}
	s.refused([]badCase{
		{"Route with Weight -1", inv, "Weight", route(duework.Limits{Weight: -1})},
		{"Route with Weight MaxWeight+1", inv, "Weight", route(duework.Limits{Weight: duework.MaxWeight + 1})},
		{"Route with MaxInFlight -1", inv, "MaxInFlight", route(duework.Limits{MaxInFlight: -1})},
		{"Route with MaxInFlight MaxLimit+1", inv, "MaxInFlight", route(duework.Limits{MaxInFlight: duework.MaxLimit + 1})},
		{"Route with Every -1ns", inv, "Every", route(duework.Limits{Every: -1})},
		{"Route with Burst -1", inv, "Burst", route(duework.Limits{Burst: -1})},
		{"Route with Burst MaxLimit+1", inv, "Burst", route(duework.Limits{Burst: duework.MaxLimit + 1})},
		{"Route with Weight MinInt", inv, "Weight", route(duework.Limits{Weight: math.MinInt})},
	})
	for _, id := range []string{"amy", "bo"} {
		s.wantUser(id, at(0), duework.UserState{Turn: at(0)})
	}
}

// maxEvery is the largest Every in whole microseconds, the suite's precision.
var maxEvery = time.Duration(math.MaxInt64).Truncate(time.Microsecond)

func limitBounds(s *suite) {
	most := duework.Limits{Weight: duework.MaxWeight, MaxInFlight: duework.MaxLimit, Every: maxEvery, Burst: duework.MaxLimit}
	s.many("amy", 3, -10)
	s.limit("amy", "", most)
	// The burst is MaxLimit, so a mark 584 years on still allows the third item at once;
	// weight 1000 moved the pass 2/1000 of 10s.
	if cs := s.claim(at(0), at(1000), keysOfUser("amy", "k0", "k1")...); len(cs) != 2 {
		s.fatalf("Claim of two with the largest limits got %s", showClaims(cs))
	}
	s.wantTurnOf("amy", at(0), micros(-10, 20_000), "weight 1000, two items, 10s after its Turn")
	s.wantHead("", at(0), duework.MaxLimit, "amy", []string{"k2"}, false, 2)
	// With Burst 1 the next item waits the whole Every.
	s.many("bo", 2, -10)
	s.limit("bo", "", duework.Limits{Every: maxEvery})
	s.claimOne(key("bo", "k0"), at(0), at(1000))
	s.wantTurnOf("bo", at(0), at(0).Add(maxEvery), "Every of the largest Duration")
	if cs := s.claim(at(0).Add(maxEvery-time.Microsecond), at(0).Add(maxEvery), key("bo", "k1")); len(cs) != 0 {
		s.errorf("Claim of bo's next item a microsecond before the largest Every passed got %s", showClaims(cs))
	}
	// Near the end of 9999 the mark saturates: no error, and bo is not ready before then.
	s.schedule(duework.Entry{UserID: "bo", WorkKey: "k1", DueAt: latest.Add(-time.Hour)})
	s.claimOne(key("bo", "k1"), latest.Add(-time.Hour), latest)
	if st := s.user("bo", latest); st.Turn.Before(latest) {
		s.errorf("bo, served an hour before the end of 9999 with the largest Every, has Turn %v, before the end of 9999", st.Turn)
	}
	// The largest stride: weight 1000, Turn at the start of year 1, served at the end of 9999.
	s.schedule(duework.Entry{UserID: "cy", WorkKey: "a", DueAt: earliest}, duework.Entry{UserID: "cy", WorkKey: "b", DueAt: earliest})
	s.limit("cy", "", duework.Limits{Weight: duework.MaxWeight})
	now := latest.Add(-time.Microsecond)
	s.claimOne(key("cy", "a"), now, latest)
	l := (now.Unix()-earliest.Unix())*1_000_000 + int64(now.Nanosecond()-earliest.Nanosecond())/1000
	s.wantTurnOf("cy", latest, earliest.Add(time.Duration(l/duework.MaxWeight)*time.Microsecond), "weight 1000, served 10,000 years after its Turn")
}
