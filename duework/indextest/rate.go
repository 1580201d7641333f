package indextest

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/rotaworks/rota/duework"
)

// The rules of the rate limit.

func rateLimit(s *suite) {
	var ks []string
	for i := range 10 {
		ks = append(ks, fmt.Sprintf("k%d", i))
		s.schedule(entry("amy", ks[i], -100))
	}
	s.limit("amy", "", duework.Limits{Every: 10 * time.Second, Burst: 3})
	claim := func(now time.Time, want []string, works ...string) {
		s.t.Helper()
		if got := claimedKeys(s.claim(now, at(1000), keysOfUser("amy", works...)...)); !slices.Equal(got, want) {
			s.errorf("Claim of amy's %q at t0%+v claimed %q, want %q", works, now.Sub(t0), got, want)
		}
	}
	// A full allowance of 3 at t0; the mark is then t0+30s, and the next item is allowed
	// at t0+30s − 2·10s.
	claim(at(0), ks[:3], ks[:5]...)
	s.wantReady("", at(10).Add(-time.Microsecond))
	s.wantTurn("", at(10), "amy", at(10), at(0))
	s.wantHead("", at(10), 5, "amy", ks[3:4], true, 3)
	claim(at(10), ks[3:4], ks[3:5]...) // mark t0+40s
	// At t0+25s the allowance is 3 − ceil(15s/10s) = 1; a stale claimer at t0+5s gets none.
	claim(at(25), ks[4:5], ks[4:7]...) // mark t0+50s
	claim(at(5), nil, ks[5])
	s.wantHead("", at(100), 5, "amy", ks[5:8], true, 5)
	claim(at(100), ks[5:8], ks[5:]...)
	// Burst 0 means 1.
	s.schedule(entry("bo", "a", -100), entry("bo", "b", -100))
	s.limit("bo", "", duework.Limits{Every: 5 * time.Second})
	if got := s.claim(at(0), at(1000), key("bo", "a"), key("bo", "b")); len(got) != 1 {
		s.errorf("Claim of two of bo's keys at t0 with Every 5s, Burst 0, got %s, want one", showClaims(got))
	}
	if _, ok := s.head("", at(5).Add(-time.Microsecond), "bo"); ok {
		s.errorf("bo, served at t0 with Every 5s and Burst 0, is ready before t0+5s")
	}
	s.claimOne(key("bo", "b"), at(5), at(1000))
}

// rateWindow drives random claims, completions and hand-backs at random nows, stale ones
// among them, checks every Claim against the allowance the contract gives, and then that no
// user was claimed more than b + floor(T/Every) items in any window of length T.
func rateWindow(s *suite) {
	tr := newTracker()
	limits := map[string]duework.Limits{
		"amy": {Every: 3 * time.Second, Burst: 2},
		"bo":  {Every: 5 * time.Second},
		"cy":  {Every: time.Second, Burst: 4},
		"dy":  {Every: 7 * time.Second, Burst: 1, MaxInFlight: 2},
		"ed":  {Every: 1500 * time.Millisecond, Burst: 3, Weight: 3},
	}
	for _, user := range slices.Sorted(maps.Keys(limits)) {
		tr.add(s, user, 8, -100, limits[user])
	}
	r := rand.New(rand.NewPCG(3, 4))
	nows := map[string][]time.Time{}
	for range 400 {
		cs := tr.stepClaims(s, r)
		for _, c := range cs {
			nows[c.Entry.UserID] = append(nows[c.Entry.UserID], c.now)
		}
	}
	for user, ts := range nows {
		l := limits[user]
		slices.SortFunc(ts, time.Time.Compare)
		for i := range ts {
			for j := i; j < len(ts); j++ {
				if n, bound := j-i+1, max(l.Burst, 1)+int(ts[j].Sub(ts[i])/l.Every); n > bound {
					s.fatalf("%s (Every %v, Burst %d) was claimed %d items in [t0%+v, t0%+v], more than %d",
						user, l.Every, l.Burst, n, ts[i].Sub(t0), ts[j].Sub(t0), bound)
				}
			}
		}
	}
}

// claimAt is one claim and the now it was made at.
type claimAt struct {
	duework.Claim
	now time.Time
}

// stepClaims is step, returning the claims a Claim made with its now.
func (tr *tracker) stepClaims(s *suite, r *rand.Rand) []claimAt {
	before := map[duework.Key]duework.Claim{}
	for k, c := range tr.claim {
		before[k] = c
	}
	now := micros(r.IntN(60), r.IntN(2))
	tr.stepAt(s, r, now)
	var out []claimAt
	for k, c := range tr.claim {
		if b, ok := before[k]; !ok || b.Token != c.Token {
			out = append(out, claimAt{c, now})
		}
	}
	return out
}

// rateWorkConserving follows a user the way a dispatcher that always serves it would:
// whenever it is ready, it claims every entry Ready returns for it, and otherwise waits
// until its Turn.
func rateWorkConserving(s *suite) {
	for _, c := range []struct {
		user    string
		l       duework.Limits
		windows []int // window lengths, seconds
	}{
		{"amy", duework.Limits{Every: 7 * time.Second, Burst: 3}, []int{0, 6, 7, 69, 70}},
		{"bo", duework.Limits{Every: 4 * time.Second}, []int{0, 3, 4, 20, 21}},
	} {
		for i := range 40 {
			s.schedule(entry(c.user, fmt.Sprintf("k%02d", i), -1000))
		}
		s.limit(c.user, c.user, c.l)
		claimed := s.serveAlways(c.user, at(0), at(71))
		b := max(c.l.Burst, 1)
		for _, w := range c.windows {
			n := 0
			for _, t := range claimed {
				if !t.After(at(w)) {
					n++
				}
			}
			if want := b + w*int(time.Second)/int(c.l.Every); n != want {
				s.errorf("%s (Every %v, Burst %d), served whenever ready from t0, got %d items in [t0, t0+%ds], want b + floor(T/Every) = %d",
					c.user, c.l.Every, c.l.Burst, n, w, want)
			}
		}
	}
}

// serveAlways claims user's Due whenever it is ready, from start to end, and returns the
// now of each item claimed.
func (s *suite) serveAlways(user string, start, end time.Time) []time.Time {
	s.t.Helper()
	var out []time.Time
	for now := start; !now.After(end); {
		if turn := s.user(user, now).Turn; turn.After(now) {
			now = turn
			continue
		}
		hs := s.ready(duework.ReadyQuery{Group: user, Now: now, Users: 1, PerUser: 100}).Heads
		if len(hs) != 1 || len(hs[0].Due) == 0 {
			s.fatalf("Ready at t0%+v of %s, whose Turn has come, = %s", now.Sub(t0), user, showHeads(hs))
		}
		cs := s.claim(now, now.Add(time.Hour), keysOf(hs[0].Due)...)
		if len(cs) != len(hs[0].Due) {
			s.fatalf("Claim at t0%+v of the %d entries Ready allowed %s claimed %d", now.Sub(t0), len(hs[0].Due), user, len(cs))
		}
		for range cs {
			out = append(out, now)
		}
	}
	return out
}
