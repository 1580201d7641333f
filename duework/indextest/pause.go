package indextest

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rotaworks/rota/duework"
)

// The rules of pauses.

func samePauses(a, b []duework.UserPause) bool {
	return slices.EqualFunc(a, b, func(x, y duework.UserPause) bool {
		return x.UserID == y.UserID && x.Reason == y.Reason && x.Until.Equal(y.Until)
	})
}

func showPauses(ps []duework.UserPause) string {
	out := "["
	for i, p := range ps {
		if i > 0 {
			out += " "
		}
		out += fmt.Sprintf("%s(until t0%+v %q)", p.UserID, p.Until.Sub(t0), p.Reason)
	}
	return out + "]"
}

// pause pauses user until until for reason, failing the rule on an error.
func (s *suite) pause(user string, until time.Time, reason string) {
	s.t.Helper()
	if err := s.x.Pause(bg, tenant(s.t, user), until, reason); err != nil {
		s.fatalf("Pause(%s, t0%+v, %q): %v", user, until.Sub(t0), reason, err)
	}
}

// resume resumes user, failing the rule on an error.
func (s *suite) resume(user string) {
	s.t.Helper()
	if err := s.x.Resume(bg, tenant(s.t, user)); err != nil {
		s.fatalf("Resume(%s): %v", user, err)
	}
}

// wantPaused fails unless Paused(now, after, limit) is want.
func (s *suite) wantPaused(now time.Time, after string, limit int, want ...duework.UserPause) {
	s.t.Helper()
	got, err := s.x.Paused(bg, now, after, limit)
	if err != nil {
		s.fatalf("Paused(t0%+v, %q, %d): %v", now.Sub(t0), after, limit, err)
	}
	if !samePauses(got, want) {
		s.errorf("Paused(t0%+v, %q, %d) = %s, want %s", now.Sub(t0), after, limit, showPauses(got), showPauses(want))
	}
}

func pauseHolds(s *suite) {
	s.schedule(entry("amy", "a", -10), entry("amy", "b", -5), entry("bo", "x", -8), entry("cy", "y", -3), entry("cy", "z", -3))
	s.route(duework.Route{UserID: "amy", Group: "pro"})
	cz := s.claimOne(key("cy", "z"), at(-3), at(100))
	s.pause("amy", at(10), "upstream-429")
	s.pause("cy", at(50), "operator")
	// Paused, amy and cy are not ready, not read, and pro is not listed for amy alone.
	s.wantReady("pro", at(0))
	s.wantReady("", at(0), "bo")
	s.wantGroups(at(0), "")
	s.wantUser("amy", at(0), duework.UserState{Group: "pro", Turn: at(10), PausedUntil: at(10), PauseReason: "upstream-429"})
	// Claim skips a paused user's keys, whoever asks, at any now before the pause ends.
	for _, now := range []time.Time{at(0), at(10).Add(-time.Microsecond)} {
		if cs := s.claim(now, at(200), key("amy", "a"), key("bo", "x"), key("amy", "b"), key("cy", "y")); len(cs) != 1 || cs[0].Entry.Key() != key("bo", "x") {
			s.errorf("Claim at t0%+v of amy's, cy's and bo's keys, amy paused until t0+10s and cy until t0+50s, got %s; want bo's x alone", now.Sub(t0), showClaims(cs))
		}
		s.schedule(entry("bo", "x", -8))
	}
	// cy's claim made before the pause runs on: it is in flight and completes.
	if st := s.user("cy", at(0)); st.InFlight != 1 {
		s.errorf("cy's in-flight count, her claim made before the pause = %d, want 1", st.InFlight)
	}
	if err := s.complete(cz, entry("cy", "z", 200)); err != nil {
		s.errorf("Complete of a claim made before the pause: %v, want nil", err)
	}
	// At its end amy joins the back of her queue at PausedUntil, though her entries were
	// due long before, and is claimed as anyone.
	s.wantReady("pro", at(10).Add(-time.Microsecond))
	s.wantGroups(at(10), "", "pro")
	s.wantTurn("pro", at(10), "amy", at(10), time.Time{})
	s.wantUser("amy", at(10), duework.UserState{Group: "pro", Turn: at(10)})
	s.claimOne(key("amy", "a"), at(10), at(20))
	s.wantTurn("", at(50), "cy", at(50), at(-3))
}

func pauseLaterOf(s *suite) {
	s.schedule(entry("amy", "a", 0))
	paused := func(until int, reason string) {
		s.t.Helper()
		s.wantUser("amy", at(0), duework.UserState{Turn: at(until), PausedUntil: at(until), PauseReason: reason})
	}
	s.pause("amy", at(20), "long")
	s.pause("amy", at(10), "short")
	paused(20, "long")
	s.pause("amy", at(20), "again")
	paused(20, "again")
	s.pause("amy", at(30), "longer")
	paused(30, "longer")
	s.wantReady("", at(30).Add(-time.Microsecond))
	s.wantReady("", at(30), "amy")
	s.wantPaused(at(0), "", 10, duework.UserPause{UserID: "amy", Reason: "longer", Until: at(30)})
}

func pauseStoresUser(s *suite) {
	if _, err := s.x.User(bg, "newbie", at(0)); !errors.Is(err, duework.ErrNotFound) {
		s.fatalf("User of a user never seen: %v, want duework.ErrNotFound", err)
	}
	s.pause("newbie", at(10), "operator")
	s.wantUser("newbie", at(0), duework.UserState{PausedUntil: at(10), PauseReason: "operator"})
	s.wantPaused(at(0), "", 10, duework.UserPause{UserID: "newbie", Reason: "operator", Until: at(10)})
	// Entries scheduled after the pause wait for it too.
	s.schedule(entry("newbie", "a", -5), entry("bo", "x", 0))
	s.wantReady("", at(5), "bo")
	s.wantTurn("", at(10), "newbie", at(10), time.Time{})
	// Routed after the pause, it keeps it.
	s.route(duework.Route{UserID: "newbie", Group: "pro", Limits: duework.Limits{Weight: 2}})
	s.wantUser("newbie", at(0), duework.UserState{Group: "pro", Limits: duework.Limits{Weight: 2}, Turn: at(10), PausedUntil: at(10), PauseReason: "operator"})
}

func resume(s *suite) {
	s.schedule(entry("amy", "a", -5), entry("bo", "x", -3))
	s.pause("amy", at(100), "operator")
	s.wantReady("", at(0), "bo")
	s.resume("amy")
	s.wantTurn("", at(0), "amy", at(-5), time.Time{})
	s.wantUser("amy", at(0), duework.UserState{Turn: at(-5)})
	s.wantPaused(at(0), "", 10)
	s.claimOne(key("amy", "a"), at(0), at(10))
	// Resume of a user that is not paused, or not stored, writes nothing.
	s.hold("", at(0), 1, 10*time.Second, "bo")
	before := s.user("bo", at(0))
	s.resume("bo")
	s.resume("ghost")
	s.wantUser("bo", at(0), before)
	if _, err := s.x.User(bg, "ghost", at(0)); !errors.Is(err, duework.ErrNotFound) {
		s.errorf("User of a user only resumed: %v, want duework.ErrNotFound", err)
	}
	s.resume("amy")
	s.wantUser("amy", at(0), duework.UserState{LastServed: at(0), Turn: at(10), InFlight: 1})
}

func pauseCountsUntilServed(s *suite) {
	// A pause whose until is not after the user's LastServed changes nothing a read sees.
	s.schedule(entry("amy", "a", -10), entry("amy", "b", -10))
	s.claimOne(key("amy", "a"), at(5), at(50))
	before := s.user("amy", at(0))
	s.pause("amy", at(3), "late")
	s.pause("amy", at(5), "late")
	s.wantUser("amy", at(0), before)
	s.wantPaused(at(0), "", 10)
	// A pause that has ended by now is not reported, and the user joins its queue at its
	// end; once the user is served at or after that end, the pause no longer counts, at any
	// now.
	s.schedule(entry("bo", "x", -10), entry("bo", "y", -10))
	s.pause("bo", at(10), "upstream-429")
	s.wantUser("bo", at(5), duework.UserState{Turn: at(10), PausedUntil: at(10), PauseReason: "upstream-429"})
	s.wantUser("bo", at(10), duework.UserState{Turn: at(10)})
	s.wantPaused(at(10), "", 10)
	s.claimOne(key("bo", "x"), at(12), at(30))
	s.wantUser("bo", at(5), duework.UserState{LastServed: at(12), Turn: at(12), InFlight: 1})
	s.wantPaused(at(5), "", 10)
}

func pausedPaging(s *suite) {
	ids := []string{"cy", "amy", "bo", "é", "Z", "a/b", "o'brien"}
	var want []duework.UserPause
	for i, id := range ids {
		p := duework.UserPause{UserID: id, Reason: fmt.Sprintf("r%d", i), Until: at(10 + i)}
		s.pause(id, p.Until, p.Reason)
		want = append(want, p)
	}
	// Ended at now, or at now exactly, are not listed.
	s.pause("ed", at(-5), "ended")
	s.pause("jo", at(0), "ended")
	slices.SortFunc(want, func(a, b duework.UserPause) int { return strings.Compare(a.UserID, b.UserID) })
	for limit := 1; limit <= len(want)+1; limit++ {
		var got []duework.UserPause
		after := ""
		for range 100 {
			page, err := s.x.Paused(bg, at(0), after, limit)
			if err != nil {
				s.fatalf("Paused(t0, %q, %d): %v", after, limit, err)
			}
			if len(page) > limit {
				s.errorf("Paused(t0, %q, %d) returned %d", after, limit, len(page))
			}
			got = append(got, page...)
			if len(page) < limit {
				break
			}
			after = page[len(page)-1].UserID
		}
		if !samePauses(got, want) {
			s.errorf("the paused users, paged %d at a time = %s, want %s", limit, showPauses(got), showPauses(want))
		}
	}
	s.wantPaused(at(0), "bo", 2, want[4:6]...)
	s.wantPaused(at(0), "é", 5)
	// At a later now only the pauses that end after it.
	s.wantPaused(at(13), "", 10, slices.DeleteFunc(slices.Clone(want), func(p duework.UserPause) bool { return !p.Until.After(at(13)) })...)
}

func dueBeforeIgnoresPauses(s *suite) {
	s.schedule(entry("amy", "a", -5), entry("bo", "x", -3))
	s.pause("amy", at(100), "operator")
	s.wantDue(at(0), key("amy", "a"), key("bo", "x"))
}

// parallelPauses runs dispatchers (Ready with a Hold, Claim of what it read, Release of the
// rest) and claimers of every key, all at once, while a pauser pauses some users one after
// another, and checks that no Claim that began after a user's Pause returned claimed any of
// its entries — whoever claimed — and that the users paused before them got nothing.
func parallelPauses(s *suite) {
	const users = 12
	var all []duework.Key
	for u := range users {
		for k := range 4 {
			e := entry(fmt.Sprintf("u%02d", u), fmt.Sprintf("k%d", k), -10)
			s.schedule(e)
			all = append(all, e.Key())
		}
	}
	pc := &pausedClaims{s: s, got: map[string]int{}}
	for u := range 4 { // paused before the dispatchers start
		id := fmt.Sprintf("u%02d", u)
		s.pause(id, at(100), "upstream-429")
		pc.paused.Store(id, true)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for u := 4; u < 8; u++ {
			id := fmt.Sprintf("u%02d", u)
			if err := s.x.Pause(bg, tenant(s.t, id), at(100), "operator"); err != nil {
				s.errorf("Pause(%s): %v", id, err)
			}
			pc.paused.Store(id, true)
		}
	})
	for d := range 4 {
		wg.Go(func() { pc.dispatch(fmt.Sprintf("dispatcher %d", d)) })
	}
	for c := range 2 {
		wg.Go(func() {
			for i := range all {
				pc.claim(fmt.Sprintf("claimer %d", c), all[(i*5+c*7)%len(all):][:1])
			}
		})
	}
	wg.Wait()
	for u := range users {
		id := fmt.Sprintf("u%02d", u)
		switch n := pc.got[id]; {
		case u < 4 && n != 0:
			s.errorf("%s, paused before the dispatchers began, had %d entries claimed", id, n)
		case u >= 8 && n != 4:
			s.errorf("%s, never paused, had %d of its 4 entries claimed, want all", id, n)
		}
	}
	// When the pauses end, and the claims made at t0 with them, every paused user's
	// entries are claimed.
	for _, k := range all {
		if u, _ := strconv.Atoi(k.UserID[1:]); u < 8 {
			s.claimOne(k, at(100), at(160))
		}
	}
}

// pausedClaims is what parallelPauses's callers share: the users whose Pause has returned,
// and how many entries of each user were claimed.
type pausedClaims struct {
	s      *suite
	paused sync.Map // user ID → true once its Pause has returned
	mu     sync.Mutex
	got    map[string]int
}

// claim claims keys at t0 for who, and fails the rule for any claim of a user whose Pause
// had returned before the call began.
func (pc *pausedClaims) claim(who string, keys []duework.Key) {
	before := map[string]bool{}
	pc.paused.Range(func(k, _ any) bool { before[k.(string)] = true; return true })
	cs, err := pc.s.x.Claim(bg, keys, at(0), at(60))
	if err != nil {
		pc.s.errorf("Claim in %s: %v", who, err)
		return
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	for _, c := range cs {
		pc.got[c.Entry.UserID]++
		if before[c.Entry.UserID] {
			pc.s.errorf("%s claimed %v, whose user's Pause had returned before the Claim began", who, c.Entry.Key())
		}
	}
}

// dispatch is one dispatcher: Ready with a hold, Claim of what it read, Release of the
// users read, until a read finds no one.
func (pc *pausedClaims) dispatch(who string) {
	for range 20 {
		p, err := pc.s.x.Ready(bg, duework.ReadyQuery{Now: at(0), Users: 2, PerUser: 2, Hold: time.Minute})
		if err != nil || len(p.Heads) == 0 {
			return
		}
		var read []string
		var ks []duework.Key
		for _, h := range p.Heads {
			read, ks = append(read, h.UserID), append(ks, keysOf(h.Due)...)
		}
		pc.claim(who, ks)
		if err := pc.s.x.Release(bg, read, at(0).Add(time.Minute)); err != nil {
			pc.s.errorf("Release in %s: %v", who, err)
			return
		}
	}
}
