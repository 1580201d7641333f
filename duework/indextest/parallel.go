package indextest

import (
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
