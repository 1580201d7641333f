package indextest

import (
	"slices"
	"time"

	"github.com/rotaworks/rota/duework"
)

// The rules of turns: the order of a group's queue and what Ready reads from it.

// wantTurn fails unless user is ready in group at now with the given Turn and LastServed.
func (s *suite) wantTurn(group string, now time.Time, user string, turn time.Time, served time.Time) {
	s.t.Helper()
	h, ok := s.head(group, now, user)
	switch {
	case !ok:
		s.errorf("Ready(group %q, t0%+v) does not read %s; want it with Turn t0%+v", group, now.Sub(t0), user, turn.Sub(t0))
	case !h.Turn.Equal(turn) || !h.LastServed.Equal(served):
		s.errorf("at t0%+v %s has Turn %v and LastServed %v, want %v and %v", now.Sub(t0), user, h.Turn, h.LastServed, turn, served)
	}
}

func turnOrder(s *suite) {
	// Ties on Turn break by UserID bytewise: "B" < "a" < "b" < "é" (whatever a collation
	// says). mo's earliest entry, not its first scheduled, sets its ReadyAt.
	s.schedule(
		entry("b", "x", -5), entry("é", "x", -5), entry("a", "x", -5), entry("B", "x", -5),
		entry("mo", "late", 3), entry("mo", "early", -7),
		entry("zed", "x", -9), entry("amy", "x", 0), entry("kim", "x", 10),
	)
	s.wantReady("", at(0), "zed", "mo", "B", "a", "b", "é", "amy")
	s.wantReady("", at(-6), "zed", "mo")
	s.wantReady("", at(-10))
	for user, turn := range map[string]int{"zed": -9, "mo": -7, "B": -5, "é": -5, "amy": 0} {
		s.wantTurn("", at(0), user, at(turn), time.Time{})
	}
	s.wantReady("", at(10), "zed", "mo", "B", "a", "b", "é", "amy", "kim")
}

func turnIsMax(s *suite) {
	s.schedule(entry("amy", "a", -10), entry("amy", "b", -10), entry("bo", "x", -5))
	// Served at t0 with b still visible since t0-10s: Turn is LastServed.
	s.claimOne(key("amy", "a"), at(0), at(1))
	s.wantReady("", at(0), "bo", "amy")
	s.wantTurn("", at(0), "amy", at(0), at(0))
	s.wantTurn("", at(0), "bo", at(-5), time.Time{})
	// Without b, ReadyAt is the end of a's claim, after LastServed: Turn is ReadyAt.
	s.schedule(entry("amy", "c", 5))
	s.unschedule("amy", "b")
	s.wantReady("", at(0), "bo")
	s.wantTurn("", at(1), "amy", at(1), at(0))
	s.wantReady("", at(3), "bo", "amy")
}

func readyAtWithClaims(s *suite) {
	s.schedule(entry("amy", "a", -10), entry("amy", "b", -8), entry("bo", "x", -5))
	s.claim(at(-6), at(20), key("amy", "a"))
	s.claim(at(-6), at(10), key("amy", "b"))
	// amy's ReadyAt is the first claim's end, t0+10s, after her LastServed t0-6s.
	s.wantReady("", at(0), "bo")
	s.wantReady("", at(10).Add(-time.Microsecond), "bo")
	s.wantTurn("", at(10), "amy", at(10), at(-6))
	s.wantReady("", at(10), "bo", "amy")
	p := s.ready(duework.ReadyQuery{Now: at(20), Users: 5, PerUser: 5})
	if len(p.Heads) != 2 || p.Heads[1].UserID != "amy" || len(p.Heads[1].Due) != 2 || p.Heads[1].Due[0].WorkKey != "a" {
		s.errorf("Ready at t0+20s, both claims ended = %s, want bo, then amy with a and b", showHeads(p.Heads))
	}
	// An entry due later than a claim's end counts from its DueAt.
	s.schedule(entry("cy", "x", 30), entry("cy", "y", -1))
	s.claimOne(key("cy", "y"), at(0), at(2))
	s.wantTurn("", at(2), "cy", at(2), at(0))
	c := s.claimOne(key("cy", "y"), at(2), at(3))
	if err := s.complete(c, entry("cy", "y", 40)); err != nil {
		s.fatalf("Complete: %v", err)
	}
	s.wantReady("", at(29), "bo", "amy")
	s.wantTurn("", at(30), "cy", at(30), at(2))
}

func servedGoesBack(s *suite) {
	for i, u := range []string{"u1", "u2", "u3", "u4"} {
		s.schedule(entry(u, "a", i-10), entry(u, "b", i-10))
	}
	s.schedule(duework.Entry{UserID: "u5", WorkKey: "a", DueAt: at(0).Add(500 * time.Millisecond)})
	s.wantReady("", at(0), "u1", "u2", "u3", "u4")
	s.claimOne(key("u1", "a"), at(0), at(100))
	s.wantReady("", at(0), "u2", "u3", "u4", "u1")
	s.claimOne(key("u3", "a"), at(1), at(100))
	s.wantReady("", at(1), "u2", "u4", "u1", "u5", "u3")
	// Served again, u2 goes behind all who were ahead.
	s.claim(at(2), at(100), key("u2", "a"), key("u2", "b"), key("u4", "zz"))
	s.wantReady("", at(200), "u4", "u1", "u5", "u3", "u2")
}

func lastServed(s *suite) {
	s.schedule(entry("amy", "a", 0), entry("amy", "b", 0), entry("amy", "c", 0), entry("bo", "x", 0), entry("bo", "later", 100))
	served := func(user string) time.Time {
		s.t.Helper()
		h, ok := s.head("", at(200), user)
		if !ok {
			s.fatalf("Ready at t0+200s does not read %s", user)
		}
		return h.LastServed
	}
	if ls := served("amy"); !ls.IsZero() {
		s.errorf("LastServed of a never-claimed user = %v, want zero", ls)
	}
	s.claimOne(key("amy", "a"), at(1), at(2))
	if ls := served("amy"); !ls.Equal(at(1)) {
		s.errorf("LastServed after a Claim at t0+1s = %v, want t0+1s", ls)
	}
	// A Claim that asks for bo's not-due entry claims nothing of his: no stamp.
	s.claim(at(3), at(4), key("bo", "later"), key("amy", "b"))
	if ls := served("bo"); !ls.IsZero() {
		s.errorf("a Claim that skipped bo's only key set his LastServed to %v", ls)
	}
	if ls := served("amy"); !ls.Equal(at(3)) {
		s.errorf("LastServed after a second Claim at t0+3s = %v, want t0+3s", ls)
	}
	// A Claim at an earlier now leaves it as it was.
	s.claimOne(key("amy", "c"), at(0), at(1))
	if ls := served("amy"); !ls.Equal(at(3)) {
		s.errorf("LastServed after a Claim at t0, earlier than the last = %v, want t0+3s", ls)
	}
}

// queue schedules users u1…un, ui with one entry due at t0-(n-i+1)s, so that they stand in
// that order at t0.
func (s *suite) queue(n int) []string {
	s.t.Helper()
	ids := make([]string, n)
	for i := range n {
		ids[i] = "u" + string(rune('1'+i))
		s.schedule(entry(ids[i], "a", i-n), entry(ids[i], "b", 50))
	}
	return ids
}

func readyUsers(s *suite) {
	ids := []string{"zed", "amy", "kim", "bo", "cy"}
	for i, id := range ids {
		s.schedule(entry(id, "a", i-5), entry(id, "b", i-3))
	}
	for users := 1; users <= 6; users++ {
		p := s.ready(duework.ReadyQuery{Now: at(0), Users: users, PerUser: 1})
		want := ids[:min(users, len(ids))]
		if got := userIDs(p.Heads); !slices.Equal(got, want) {
			s.errorf("Ready(Users %d) read %q, want %q", users, got, want)
		}
	}
}

func readyPerUser(s *suite) {
	s.schedule(
		entry("amy", "c", -3), entry("amy", "a", -3), entry("amy", "b", -9), entry("amy", "later", 50),
		entry("bo", "x", 0),
	)
	amy := []duework.Entry{entry("amy", "b", -9), entry("amy", "a", -3), entry("amy", "c", -3)}
	for _, perUser := range []int{1, 2, 3, 4, 100} {
		p := s.ready(duework.ReadyQuery{Now: at(0), Users: 5, PerUser: perUser})
		want := []duework.Head{
			{UserID: "amy", Turn: at(-9), Due: amy[:min(perUser, 3)], More: perUser < 3},
			{UserID: "bo", Turn: at(0), Due: []duework.Entry{entry("bo", "x", 0)}},
		}
		if !sameHeads(p.Heads, want) {
			s.errorf("Ready(PerUser %d) =\n%s\nwant\n%s", perUser, showHeads(p.Heads), showHeads(want))
		}
	}
	// A claimed entry is neither in Due nor counted for More.
	s.claimOne(key("amy", "a"), at(0), at(100))
	p := s.ready(duework.ReadyQuery{Now: at(0), Users: 1, PerUser: 2})
	want := []duework.Head{{UserID: "amy", LastServed: at(0), Turn: at(0), Due: []duework.Entry{amy[0], amy[2]}, InFlight: 1}}
	if !sameHeads(p.Heads, want) {
		s.errorf("Ready(PerUser 2) with a claimed =\n%s\nwant\n%s", showHeads(p.Heads), showHeads(want))
	}
}

func readyNext(s *suite) {
	ids := s.queue(4) // turns t0-4s … t0-1s
	s.schedule(entry("u9", "a", 5))
	next := func(q duework.ReadyQuery, want time.Time) {
		s.t.Helper()
		if p := s.ready(q); !p.Next.Equal(want) {
			s.errorf("Ready(%s) read %q with Next %v, want %v", showQuery(q), userIDs(p.Heads), p.Next, want)
		}
	}
	q := duework.ReadyQuery{Now: at(0), Users: 2, PerUser: 1}
	next(q, at(-2))
	q.Users = 4
	next(q, time.Time{}) // u9 is not ready
	q.Now = at(5)
	next(q, at(5))
	// Held users are neither read nor Next.
	q = duework.ReadyQuery{Now: at(0), Users: 1, PerUser: 1, Hold: 10 * time.Second}
	next(q, at(-3)) // holds u1
	next(q, at(-2)) // holds u2
	q.Hold = 0
	next(q, at(-1)) // reads u3
	q.Users = 2
	next(q, time.Time{})
	s.wantReady("", at(0), ids[2], ids[3])
}
