package indextest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/rotaworks/rota/duework"
)

// The rules of concurrent callers.

// parallelReaders runs readers that call Ready with a Hold at the same Now until they find
// no one, and checks that no user went to two of them, and that a read after them finds
// exactly the users none of them read (an Index may pass over a user that a concurrent
// call is writing).
func parallelReaders(s *suite) {
	const (
		users   = 40
		readers = 4
		batch   = 3
	)
	var all []string
	for u := range users {
		id := fmt.Sprintf("u%02d", u)
		s.schedule(entry(id, "a", -u%7), entry(id, "b", 0))
		all = append(all, id)
	}
	got := make([][]string, readers)
	var wg sync.WaitGroup
	for r := range readers {
		wg.Go(func() {
			// A reader stops at an empty page, or after reading as many pages as it could
			// if it had all the users to itself.
			for range users/batch + 2 {
				p, err := s.x.Ready(bg, duework.ReadyQuery{Now: at(0), Users: batch, PerUser: 2, Hold: time.Minute})
				if err != nil {
					s.errorf("Ready in reader %d: %v", r, err)
					return
				}
				if len(p.Heads) == 0 {
					return
				}
				got[r] = append(got[r], userIDs(p.Heads)...)
			}
		})
	}
	wg.Wait()
	reader := map[string]int{}
	for r, ids := range got {
		for _, id := range ids {
			if first, seen := reader[id]; seen {
				s.errorf("%s went to reader %d and to reader %d under a hold", id, first, r)
				continue
			}
			reader[id] = r
		}
	}
	rest := userIDs(s.readAll("", at(0)))
	read := slices.Clone(rest)
	for id := range reader {
		read = append(read, id)
	}
	slices.Sort(read)
	if !slices.Equal(read, all) {
		s.errorf("the readers read %d users and a read after them %q; want each of the %d ready once", len(reader), rest, users)
	}
}

// parallelClaimers runs workers that claim overlapping sets of keys at the same now, in
// small batches, and checks that each entry went to one of them once per claim window.
func parallelClaimers(s *suite) {
	const (
		users   = 4
		perUser = 12
		workers = 8
		batch   = 5
	)
	var all []duework.Key
	for u := range users {
		for k := range perUser {
			e := entry(fmt.Sprintf("u%d", u), fmt.Sprintf("k%02d", k), -k)
			s.schedule(e)
			all = append(all, e.Key())
		}
	}
	tokens := map[duework.Key]map[uint64]bool{}
	for window := range 3 {
		now := at(window * 100)
		until := now.Add(50 * time.Second)
		got := make([][]duework.Claim, workers)
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				// Each worker asks for three quarters of the keys, starting at its own
				// offset, so that every key is wanted by several workers.
				want := slices.Concat(all[w*6%len(all):], all[:w*6%len(all)])[:len(all)*3/4]
				for len(want) > 0 {
					n := min(batch, len(want))
					cs, err := s.x.Claim(bg, want[:n], now, until)
					if err != nil {
						s.errorf("Claim in worker %d: %v", w, err)
						return
					}
					got[w] = append(got[w], cs...)
					want = want[n:]
				}
			})
		}
		wg.Wait()
		count := map[duework.Key]int{}
		for _, cs := range got {
			for _, c := range cs {
				k := c.Entry.Key()
				count[k]++
				if tokens[k] == nil {
					tokens[k] = map[uint64]bool{}
				}
				if tokens[k][c.Token] {
					s.errorf("window %d: %v got token %d, which an earlier claim of it had", window, k, c.Token)
				}
				tokens[k][c.Token] = true
			}
		}
		for _, k := range all {
			switch n := count[k]; {
			case n > 1:
				s.errorf("window %d: %v was claimed %d times at once", window, k, n)
			case n == 0:
				s.errorf("window %d: %v, due and wanted by several workers, was claimed by none", window, k)
			}
		}
		if len(count) != len(all) {
			s.errorf("window %d: claims name %d entries, want the %d scheduled", window, len(count), len(all))
		}
	}
}

// parallelLimits runs dispatchers (Ready with a Hold, Claim of what it returned, Release of
// the rest), claimers that claim every key without reading, and a stale claimer whose now
// is five seconds behind, all at once, and checks that they left each user with exactly
// what its limits allow: MaxInFlight in flight, or the rate's allowance, whichever is
// less. Then, two hours on, when the first claims have ended, again.
func parallelLimits(s *suite) {
	limits := map[string]duework.Limits{}
	var all []duework.Key
	for u := range 12 {
		id := fmt.Sprintf("u%02d", u)
		switch u % 3 {
		case 0:
			limits[id] = duework.Limits{MaxInFlight: 2}
		case 1:
			limits[id] = duework.Limits{Every: time.Hour, Burst: 3}
		default:
			limits[id] = duework.Limits{MaxInFlight: 3, Every: time.Hour, Burst: 2, Weight: 2}
		}
		for k := range 10 {
			e := entry(id, fmt.Sprintf("k%d", k), -10)
			s.schedule(e)
			all = append(all, e.Key())
		}
		s.limit(id, "", limits[id])
	}
	// Window 1 at t0: every user gets min(MaxInFlight, Burst). Window 2 at t0+2h: the
	// claims of window 1 have ended; a user under the rate has allowance b − ceil((mark −
	// now)/Every) with mark t0 + k·1h, so 3 − ceil(1h/1h) = 2 and 2 − ceil(0) = 2.
	want := [2]map[int]int{{0: 2, 1: 3, 2: 2}, {0: 2, 1: 2, 2: 2}}
	for w, now := range []time.Time{at(0), at(7200)} {
		got := s.contend(all, now)
		for u := range 12 {
			id := fmt.Sprintf("u%02d", u)
			if n := got[id]; n != want[w][u%3] {
				s.errorf("window %d: dispatchers and claimers at once claimed %d of %s's entries (limits %+v), want exactly %d",
					w+1, n, id, limits[id], want[w][u%3])
			}
			if st := s.user(id, now); st.InFlight != want[w][u%3] {
				s.errorf("window %d: %s's in-flight count is %d, want %d", w+1, id, st.InFlight, want[w][u%3])
			}
		}
	}
}

// contend runs four dispatchers, two claimers and a stale claimer over keys at now, until
// none of them finds more to claim, and returns how many entries of each user they claimed.
func (s *suite) contend(keys []duework.Key, now time.Time) map[string]int {
	return s.contendWith(keys, now, nil, s.x.Claim)
}

// claimFunc is Index.Claim, or a check around it.
type claimFunc func(ctx context.Context, keys []duework.Key, now, until time.Time) ([]duework.Claim, error)

// contendWith is contend with every Claim made through claim, and also runs more, when not
// nil, at the same time.
func (s *suite) contendWith(keys []duework.Key, now time.Time, more func(), claim claimFunc) map[string]int {
	var mu sync.Mutex
	got := map[string]int{}
	count := func(cs []duework.Claim) {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range cs {
			got[c.Entry.UserID]++
		}
	}
	var wg sync.WaitGroup
	if more != nil {
		wg.Go(more)
	}
	for d := range 4 {
		wg.Go(func() {
			for range 20 {
				p, err := s.x.Ready(bg, duework.ReadyQuery{Now: now, Users: 3, PerUser: 2, Hold: time.Minute})
				if err != nil || len(p.Heads) == 0 {
					return
				}
				var read []string
				var ks []duework.Key
				for _, h := range p.Heads {
					read, ks = append(read, h.UserID), append(ks, keysOf(h.Due)...)
				}
				cs, err := claim(bg, ks, now, now.Add(time.Minute))
				if err != nil {
					s.errorf("Claim in dispatcher %d: %v", d, err)
					return
				}
				count(cs)
				if err := s.x.Release(bg, read, now.Add(time.Minute)); err != nil {
					s.errorf("Release in dispatcher %d: %v", d, err)
					return
				}
			}
		})
	}
	for c := range 3 {
		wg.Go(func() {
			at, until := now, now.Add(time.Minute)
			if c == 2 {
				at, until = now.Add(-5*time.Second), now.Add(30*time.Second) // stale
			}
			for i := range keys {
				j := (i*7 + c*13) % len(keys) // each claimer in its own order
				cs, err := claim(bg, keys[j:j+1], at, until)
				if err != nil {
					s.errorf("Claim in claimer %d: %v", c, err)
					return
				}
				count(cs)
			}
		})
	}
	wg.Wait()
	return got
}
