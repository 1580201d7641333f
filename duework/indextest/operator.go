package indextest

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/rotaworks/rota/duework"
)

// The rules of the operator's reads, User and Entries.

func userNotFound(s *suite) {
	s.schedule(entry("amy", "a", 0))
	s.route(duework.Route{UserID: "ghost", Group: "pro"})
	s.claim(at(0), at(10), key("nobody", "a"))
	for _, id := range []string{"ghost", "nobody", "Amy", "am"} {
		if st, err := s.x.User(bg, id, at(0)); !errors.Is(err, duework.ErrNotFound) {
			s.errorf("User(%q) of a user the index does not store = %+v, %v; want duework.ErrNotFound", id, st, err)
		}
	}
	s.user("amy", at(0))
}

// wantUser fails unless User(id, now) is want, times compared with Equal.
func (s *suite) wantUser(id string, now time.Time, want duework.UserState) {
	s.t.Helper()
	if got := s.user(id, now); !sameUser(got, want) {
		s.errorf("User(%q, t0%+v) = %s, want %s", id, now.Sub(t0), showUser(got), showUser(want))
	}
}

// sameUser compares user states field by field, times with Equal.
func sameUser(a, b duework.UserState) bool {
	return a.Group == b.Group && a.Limits == b.Limits && a.LastServed.Equal(b.LastServed) && a.Turn.Equal(b.Turn) &&
		a.HeldUntil.Equal(b.HeldUntil) && a.InFlight == b.InFlight && a.PausedUntil.Equal(b.PausedUntil) && a.PauseReason == b.PauseReason
}

func showUser(st duework.UserState) string {
	off := func(t time.Time) string {
		if t.IsZero() {
			return "zero"
		}
		return fmt.Sprintf("t0%+v", t.Sub(t0))
	}
	return fmt.Sprintf("{group %q limits %+v served %s turn %s held until %s in flight %d paused until %s reason %q}",
		st.Group, st.Limits, off(st.LastServed), off(st.Turn), off(st.HeldUntil), st.InFlight, off(st.PausedUntil), st.PauseReason)
}

func userState(s *suite) {
	s.schedule(entry("amy", "a", -5), entry("amy", "b", -3))
	s.wantUser("amy", at(0), duework.UserState{Turn: at(-5)})
	limits := duework.Limits{Weight: 3, MaxInFlight: 2, Every: time.Minute, Burst: 4}
	s.limit("amy", "pro", limits)
	s.wantUser("amy", at(0), duework.UserState{Group: "pro", Limits: limits, Turn: at(-5)})
	s.limit("amy", "pro", duework.Limits{})
	// A hold is reported while it is after the read's now.
	s.hold("pro", at(0), 1, 10*time.Second, "amy")
	s.wantUser("amy", at(9), duework.UserState{Group: "pro", Turn: at(-5), HeldUntil: at(10)})
	s.wantUser("amy", at(10), duework.UserState{Group: "pro", Turn: at(-5)})
	// A claim ends the hold, sets LastServed and the Turn, and is in flight until its Until.
	c := s.claimOne(key("amy", "a"), at(1), at(20))
	served := duework.UserState{Group: "pro", LastServed: at(1), Turn: at(1), InFlight: 1}
	s.wantUser("amy", at(1), served)
	s.wantUser("amy", at(20).Add(-time.Microsecond), served)
	served.InFlight = 0
	s.wantUser("amy", at(20), served)
	if err := s.complete(c, entry("amy", "a", 30)); err != nil {
		s.fatalf("Complete: %v", err)
	}
	// Without entries its Turn is zero; the rest stays.
	s.unschedule("amy", "a")
	s.unschedule("amy", "b")
	s.wantUser("amy", at(40), duework.UserState{Group: "pro", LastServed: at(1)})
}

// entryStates reads all of user's entries through Entries, limit at a time, and fails the
// rule unless each page is the next limit of them after the last key of the one before.
func (s *suite) entryStates(user string, limit int) []duework.EntryState {
	s.t.Helper()
	var all []duework.EntryState
	after := ""
	for range 100 {
		page, err := s.x.Entries(bg, user, after, limit)
		if err != nil {
			s.fatalf("Entries(%q, %q, %d): %v", user, after, limit, err)
		}
		if len(page) > limit {
			s.errorf("Entries(%q, %q, %d) returned %d entries", user, after, limit, len(page))
		}
		all = append(all, page...)
		if len(page) < limit {
			return all
		}
		after = page[len(page)-1].Entry.WorkKey
	}
	s.fatalf("Entries(%q) never returned a short page", user)
	return nil
}

func entriesPaging(s *suite) {
	works := []string{"b", "a", "B", "é", "a-1", "z", "A"}
	for i, w := range works {
		e := entry("amy", w, i-10)
		e.MissStreak, e.LastRunAt = i, at(-100+i)
		s.schedule(e)
	}
	s.schedule(entry("bo", "a", 0), entry("bo", "c", 0))
	s.claimOne(key("amy", "a"), at(0), at(10))
	s.claimOne(key("amy", "z"), at(0), at(5).Add(time.Microsecond))
	cb := s.claimOne(key("amy", "b"), at(0), at(7))
	if err := s.complete(cb, entry("amy", "b", 50)); err != nil {
		s.fatalf("Complete: %v", err)
	}
	sorted := slices.Sorted(slices.Values(works)) // bytewise: "A", "B", "a", "a-1", "b", "z", "é"
	want := make([]duework.EntryState, len(sorted))
	for i, w := range sorted {
		e, err := s.get("amy", w)
		if err != nil {
			s.fatalf("Get(amy, %s): %v", w, err)
		}
		want[i] = duework.EntryState{Entry: e}
		switch w {
		case "a":
			want[i].ClaimedUntil = at(10)
		case "z":
			want[i].ClaimedUntil = at(5).Add(time.Microsecond) // ended or not, the claim is current
		}
	}
	for limit := 1; limit <= len(works)+1; limit++ {
		if got := s.entryStates("amy", limit); !sameStates(got, want) {
			s.errorf("amy's entries, paged %d at a time =\n%s\nwant\n%s", limit, showStates(got), showStates(want))
		}
	}
	page, err := s.x.Entries(bg, "amy", "a", 2)
	if err != nil || !sameStates(page, want[3:5]) {
		s.errorf("Entries(amy, after \"a\", 2) = %s, %v; want %s", showStates(page), err, showStates(want[3:5]))
	}
	if page, err := s.x.Entries(bg, "amy", "é", 5); err != nil || len(page) != 0 {
		s.errorf("Entries(amy) after the last key = %s, %v; want none", showStates(page), err)
	}
}

func sameStates(a, b []duework.EntryState) bool {
	return slices.EqualFunc(a, b, func(x, y duework.EntryState) bool {
		return sameEntry(x.Entry, y.Entry) && x.ClaimedUntil.Equal(y.ClaimedUntil)
	})
}

func showStates(es []duework.EntryState) string {
	out := "["
	for i, e := range es {
		if i > 0 {
			out += " "
		}
		out += show(e.Entry)
		if !e.ClaimedUntil.IsZero() {
			out += fmt.Sprintf("(claimed until t0%+v)", e.ClaimedUntil.Sub(t0))
		}
	}
	return out + "]"
}

func entriesUnknownUser(s *suite) {
	s.schedule(entry("amy", "a", 0))
	s.route(duework.Route{UserID: "ghost", Group: "pro"})
	for _, id := range []string{"nobody", "ghost", "Amy"} {
		if es, err := s.x.Entries(bg, id, "", 10); err != nil || len(es) != 0 {
			s.errorf("Entries(%q) of a user the index does not store = %s, %v; want none, nil", id, showStates(es), err)
		}
	}
	s.unschedule("amy", "a")
	if es, err := s.x.Entries(bg, "amy", "", 10); err != nil || len(es) != 0 {
		s.errorf("Entries(amy) after her last entry was removed = %s, %v; want none, nil", showStates(es), err)
	}
}

// oddIDs are tenant IDs and work keys that a URL, a shell, HTML or SQL would need to
// escape, and that look alike.
var oddIDs = []string{"a/b", "a%2Fb", "%", "%25", "<script>alert(1)</script>", "a b", "o'brien", `"q"`, "日本語", "é", "e\u0301", "a\\b", "_", "a_b"}

func operatorEscaping(s *suite) {
	for i, id := range oddIDs {
		e := entry(id, oddIDs[(i+1)%len(oddIDs)], i)
		s.schedule(e)
		s.route(duework.Route{UserID: id, Group: fmt.Sprintf("g%d", i)})
	}
	for i, id := range oddIDs {
		if st := s.user(id, at(100)); st.Group != fmt.Sprintf("g%d", i) || !st.Turn.Equal(at(i)) {
			s.errorf("User(%q) = %s, want group g%d and Turn t0+%ds: another tenant's", id, showUser(st), i, i)
		}
		es, err := s.x.Entries(bg, id, "", 10)
		work := oddIDs[(i+1)%len(oddIDs)]
		if err != nil || len(es) != 1 || es[0].Entry.UserID != id || es[0].Entry.WorkKey != work {
			s.errorf("Entries(%q) = %s, %v; want its one entry %q", id, showStates(es), err, work)
		}
	}
	// Work keys that need escaping page in bytewise order.
	for _, w := range oddIDs {
		s.schedule(entry("amy", w, 0))
	}
	want := slices.Sorted(slices.Values(oddIDs))
	var got []string
	for _, e := range s.entryStates("amy", 3) {
		got = append(got, e.Entry.WorkKey)
	}
	if !slices.Equal(got, want) {
		s.errorf("amy's work keys paged 3 at a time = %q, want %q", got, want)
	}
}
