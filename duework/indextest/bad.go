package indextest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

func badInput(s *suite) {
	seed := entry("amy", "a", 0)
	s.schedule(seed)
	c := s.claimOne(key("amy", "a"), at(0), at(10))
	amy := tenant(s.t, "amy")
	var zero tenancy.Context
	with := func(f func(e *duework.Entry)) duework.Entry {
		e := seed
		f(&e)
		return e
	}
	cases := []struct {
		what  string
		want  error
		field string // named in the message, case-insensitively
		call  func() error
	}{
		{"Schedule with an empty WorkKey", duework.ErrInvalid, "WorkKey", func() error {
			return s.x.Schedule(bg, amy, with(func(e *duework.Entry) { e.WorkKey = "" }))
		}},
		{"Schedule with a zero DueAt", duework.ErrInvalid, "DueAt", func() error {
			return s.x.Schedule(bg, amy, with(func(e *duework.Entry) { e.DueAt = time.Time{} }))
		}},
		{"Schedule of an Entry whose UserID is not the Context's", duework.ErrInvalid, "UserID", func() error {
			return s.x.Schedule(bg, amy, with(func(e *duework.Entry) { e.UserID = "bo" }))
		}},
		{"Schedule with the zero Context", tenancy.ErrNoTenant, "", func() error {
			return s.x.Schedule(bg, zero, with(func(e *duework.Entry) { e.DueAt = at(99) }))
		}},
		{"Unschedule with an empty WorkKey", duework.ErrInvalid, "WorkKey", func() error {
			return s.x.Unschedule(bg, amy, "")
		}},
		{"Unschedule with the zero Context", tenancy.ErrNoTenant, "", func() error {
			return s.x.Unschedule(bg, zero, "a")
		}},
		{"Get with an empty WorkKey", duework.ErrInvalid, "WorkKey", func() error {
			_, err := s.x.Get(bg, amy, "")
			return err
		}},
		{"Get with the zero Context", tenancy.ErrNoTenant, "", func() error {
			_, err := s.x.Get(bg, zero, "a")
			return err
		}},
		{"DueBefore with limit 0", duework.ErrInvalid, "limit", func() error {
			_, err := s.x.DueBefore(bg, at(100), 0)
			return err
		}},
		{"DueBefore with limit -1", duework.ErrInvalid, "limit", func() error {
			_, err := s.x.DueBefore(bg, at(100), -1)
			return err
		}},
		{"Ready with PerUser 0", duework.ErrInvalid, "PerUser", func() error {
			_, err := s.x.Ready(bg, duework.ReadyQuery{Now: at(100), Users: 1, PerUser: 0})
			return err
		}},
		{"Ready with PerUser -3", duework.ErrInvalid, "PerUser", func() error {
			_, err := s.x.Ready(bg, duework.ReadyQuery{Now: at(100), Users: 1, PerUser: -3})
			return err
		}},
		{"Claim with until equal to now", duework.ErrInvalid, "until", func() error {
			_, err := s.x.Claim(bg, []duework.Key{key("amy", "a")}, at(100), at(100))
			return err
		}},
		{"Claim with until before now", duework.ErrInvalid, "until", func() error {
			_, err := s.x.Claim(bg, []duework.Key{key("amy", "a")}, at(100), at(50))
			return err
		}},
		{"Complete with the zero Context", tenancy.ErrNoTenant, "", func() error {
			return s.x.Complete(bg, zero, c, entry("amy", "a", 50))
		}},
		{"Complete with a next whose DueAt is zero", duework.ErrInvalid, "DueAt", func() error {
			return s.x.Complete(bg, amy, c, with(func(e *duework.Entry) { e.DueAt = time.Time{} }))
		}},
		{"Complete with a next whose WorkKey is empty", duework.ErrInvalid, "WorkKey", func() error {
			return s.x.Complete(bg, amy, c, with(func(e *duework.Entry) { e.WorkKey = "" }))
		}},
		{"Complete with a next whose WorkKey is not the claim's", duework.ErrInvalid, "WorkKey", func() error {
			return s.x.Complete(bg, amy, c, with(func(e *duework.Entry) { e.WorkKey = "other"; e.DueAt = at(50) }))
		}},
		{"Complete with a next whose UserID is not the Context's", duework.ErrInvalid, "UserID", func() error {
			return s.x.Complete(bg, amy, c, with(func(e *duework.Entry) { e.UserID = "bo"; e.DueAt = at(50) }))
		}},
	}
	for _, tc := range cases {
		err := tc.call()
		switch {
		case !errors.Is(err, tc.want):
			s.errorf("%s: %v, want %v", tc.what, err, tc.want)
		case !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(tc.field)):
			s.errorf("%s: the error %q does not name the field %s", tc.what, err, tc.field)
		}
	}
	// Nothing changed: the entry is as scheduled, nothing else exists, the claim still
	// holds and is still the entry's current one.
	s.wantEntry("amy", "a", seed)
	s.wantAbsent("amy", "other")
	s.wantAbsent("bo", "a")
	s.wantDue(at(5))
	s.wantDue(at(10), key("amy", "a"))
	if err := s.complete(c, entry("amy", "a", 50)); err != nil {
		s.errorf("Complete after the bad calls: %v, want nil", err)
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
