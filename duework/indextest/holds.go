package indextest

import (
	"slices"
	"time"

	"github.com/rotaworks/rota/duework"
)

// The rules of holds and groups.

// hold reads the first users users of group at now, holding them for hold, and fails
// unless they are want.
func (s *suite) hold(group string, now time.Time, users int, hold time.Duration, want ...string) {
	s.t.Helper()
	q := duework.ReadyQuery{Group: group, Now: now, Users: users, PerUser: 1, Hold: hold}
	if got := userIDs(s.ready(q).Heads); !slices.Equal(got, want) {
		s.fatalf("Ready(%s) read %q, want %q", showQuery(q), got, want)
	}
}

func holdHides(s *suite) {
	s.queue(3)
	s.hold("", at(0), 2, 10*time.Second, "u1", "u2")
	s.wantReady("", at(0), "u3")
	s.wantReady("", at(10).Add(-time.Microsecond), "u3")
	s.wantReady("", at(10), "u1", "u2", "u3")
	// A hold lasts until its reader's Now+Hold, whatever the now of a later read: one
	// taken at t0+20s hides the users from a read at t0.
	s.hold("", at(20), 3, 5*time.Second, "u1", "u2", "u3")
	s.wantReady("", at(0))
	s.wantReady("", at(25), "u1", "u2", "u3")
}

func holdZero(s *suite) {
	s.queue(2)
	s.hold("", at(0), 2, 0, "u1", "u2")
	s.hold("", at(0), 2, 0, "u1", "u2")
	s.hold("", at(0), 1, 10*time.Second, "u1")
	s.hold("", at(0), 2, 0, "u2")
	s.hold("", at(0), 2, 0, "u2")
}

func claimEndsHold(s *suite) {
	s.schedule(entry("u1", "a", -3), entry("u1", "c", -2), entry("u2", "a", -2), entry("u2", "b", 50), entry("u3", "a", -1))
	s.hold("", at(0), 3, 10*time.Second, "u1", "u2", "u3")
	s.claimOne(key("u1", "a"), at(0), at(5))
	// A Claim that claims nothing of u2's and u3's leaves their holds.
	if cs := s.claim(at(0), at(5), key("u2", "b"), key("u3", "nope")); len(cs) != 0 {
		s.fatalf("Claim of a not-due and an absent key got %s", showClaims(cs))
	}
	s.wantReady("", at(0), "u1")
	s.wantTurn("", at(0), "u1", at(0), at(0))
	s.wantReady("", at(10), "u2", "u3", "u1")
}

func releaseEndsHold(s *suite) {
	s.queue(3)
	s.hold("", at(0), 2, 10*time.Second, "u1", "u2")
	s.release(at(10).Add(time.Microsecond), "u1")
	s.release(at(9), "u1")
	s.wantReady("", at(0), "u3")
	s.release(at(10), "u1", "u3", "nobody")
	s.wantReady("", at(0), "u1", "u3")
	s.wantTurn("", at(0), "u1", at(-3), time.Time{})
	// A lapsed hold that another reader took is not the first reader's to end.
	s.hold("", at(10), 3, 10*time.Second, "u1", "u2", "u3")
	s.release(at(10), "u1", "u2", "u3")
	s.wantReady("", at(15))
	s.release(at(20), "u2")
	s.wantReady("", at(15), "u2")
}

func route(s *suite) {
	s.schedule(entry("amy", "x", -3), entry("bo", "x", -2), entry("cy", "x", -1))
	s.route(duework.Route{UserID: "amy", Group: "pro"}, duework.Route{UserID: "bo", Group: "pro"},
		duework.Route{UserID: "nobody", Group: "pro"})
	s.wantReady("pro", at(0), "amy", "bo")
	s.wantReady("", at(0), "cy")
	s.wantReady("free", at(0))
	s.wantTurn("pro", at(0), "amy", at(-3), time.Time{})
	// A moved user keeps its hold and its Turn.
	s.hold("pro", at(0), 1, 10*time.Second, "amy")
	s.route(duework.Route{UserID: "amy", Group: "free"})
	s.wantReady("free", at(5))
	s.wantReady("free", at(10), "amy")
	s.wantTurn("free", at(10), "amy", at(-3), time.Time{})
	// A user routed before it was stored was ignored: its first Schedule puts it in "".
	s.schedule(entry("nobody", "x", -5))
	s.wantReady("", at(0), "nobody", "cy")
	s.wantReady("pro", at(0), "bo")
	// Routing to the group a user is in, back to "", and routing no one all work.
	s.route(duework.Route{UserID: "bo", Group: "pro"})
	s.route(duework.Route{UserID: "bo", Group: ""})
	s.route()
	s.wantReady("", at(0), "nobody", "bo", "cy")
	s.wantReady("pro", at(0))
}

// wantGroups fails unless Groups(now) is want.
func (s *suite) wantGroups(now time.Time, want ...string) {
	s.t.Helper()
	got, err := s.x.Groups(bg, now)
	if err != nil {
		s.fatalf("Groups(t0%+v): %v", now.Sub(t0), err)
	}
	if !slices.Equal(got, want) && len(got)+len(want) > 0 {
		s.errorf("Groups(t0%+v) = %q, want %q", now.Sub(t0), got, want)
	}
}

func groups(s *suite) {
	s.wantGroups(at(0))
	s.schedule(entry("amy", "x", -1), entry("bo", "x", -1), entry("cy", "x", 10),
		entry("dy", "x", -1), entry("ey", "x", -1), entry("fy", "x", -1))
	s.route(duework.Route{UserID: "bo", Group: "pro"}, duework.Route{UserID: "cy", Group: "free"},
		duework.Route{UserID: "dy", Group: "zeta"}, duework.Route{UserID: "ey", Group: "Alpha"},
		duework.Route{UserID: "fy", Group: "gone"})
	s.route(duework.Route{UserID: "fy", Group: "zeta"})
	s.wantGroups(at(0), "", "Alpha", "pro", "zeta")
	s.wantGroups(at(10), "", "Alpha", "free", "pro", "zeta")
	// Held users are ready: their group is listed.
	s.hold("pro", at(0), 1, time.Minute, "bo")
	s.wantGroups(at(0), "", "Alpha", "pro", "zeta")
	// A group whose only user's work is claimed is listed again when the claim ends.
	s.claimOne(key("ey", "x"), at(0), at(5))
	s.wantGroups(at(0), "", "pro", "zeta")
	s.wantGroups(at(5), "", "Alpha", "pro", "zeta")
	// A user without entries makes no group ready.
	s.unschedule("amy", "x")
	s.wantGroups(at(5), "Alpha", "pro", "zeta")
}

func userOutlivesEntries(s *suite) {
	s.schedule(entry("amy", "a", -5))
	s.route(duework.Route{UserID: "amy", Group: "pro"})
	s.claimOne(key("amy", "a"), at(0), at(10))
	s.schedule(entry("amy", "b", -1))
	s.hold("pro", at(0), 1, 100*time.Second, "amy")
	s.unschedule("amy", "a")
	s.unschedule("amy", "b")
	s.wantReady("pro", at(200))
	s.schedule(entry("amy", "c", -3))
	s.wantReady("pro", at(50)) // still held
	s.wantReady("", at(50))    // not back in the unrouted group
	s.wantTurn("pro", at(100), "amy", at(0), at(0))
	// Routed while it has no entries, it is in its new group when it has some again.
	s.unschedule("amy", "c")
	s.route(duework.Route{UserID: "amy", Group: "free"})
	s.schedule(entry("amy", "d", -3))
	s.wantReady("free", at(100), "amy")
}
